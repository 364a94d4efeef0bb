#!/usr/bin/env bash
# What timing every CUDA driver call costs, two ways, and what the calls of
# an OpenACC runtime are per compute construct: bench/driver_cost.c
# preloaded in the modes none, activity (CUPTI driver-API activity records)
# and callbacks (CUPTI driver-API callbacks timed at enter and exit), timed
# against the bare program, interleaved (bare none activity callbacks ...),
# REPS rounds; medians of the per-round ratios to bare, then each mode's
# breakdown by driver routine from one more run.
#
# Usage: bench/driver_cost.sh --samples DIR [--reps N] [--programs "prog args,..."]
#   DIR  samples built with `make -C samples OFFLOAD=yes`
# Run on the GPU machine (it builds the probe there with gcc and CUPTI).
set -euo pipefail
reps=5 samples= programs="launch_storm 50000,small_kernels 24 1500"
while [ $# -gt 0 ]; do
  case "$1" in
    --samples) samples=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --programs) programs=$2; shift 2 ;;
    *) echo "driver_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -d "$samples" ] || { echo "driver_cost.sh: samples directory '$samples' not found" >&2; exit 2; }
case $reps in *[!0-9]*|''|0) echo "driver_cost.sh: --reps must be a positive number" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -shared -fPIC "$root/bench/driver_cost.c" -I"$cuda/include" \
  -L"$cuda/targets/x86_64-linux/lib" -lcupti -ldl -o "$work/libdriver_cost.so"
export SAMPLE_SKIP_REFERENCE=1
modes=(bare none activity callbacks)
now() { date +%s%N; }
run_one() { # mode program args...
  local m=$1; shift
  local env=()
  [ "$m" = bare ] || env=(LD_PRELOAD="$work/libdriver_cost.so" DRIVER_COST="$m" DRIVER_COST_OUT=/dev/null)
  local t0 t1
  t0=$(now)
  env "${env[@]}" "$samples/$1" "${@:2}" > "$work/out" 2>&1 || { echo "driver_cost.sh: $m $* failed:" >&2; tail -5 "$work/out" >&2; exit 1; }
  t1=$(now)
  echo $(( (t1 - t0) / 1000 ))
}
. "$root/bench/stats.sh"
IFS=, read -r -a progs <<< "$programs"
printf "%-28s %-10s %10s %8s %15s\n" program mode "median(s)" ratio "ratio min-max"
for p in "${progs[@]}"; do
  read -r -a argv <<< "$p"
  for m in "${modes[@]}"; do run_one "$m" "${argv[@]}" > /dev/null; done
  declare -A times=()
  for ((r = 0; r < reps; r++)); do
    for m in "${modes[@]}"; do times[$m]+="$(run_one "$m" "${argv[@]}") "; done
  done
  for m in "${modes[@]}"; do
    ratio_row "%-28s %-10s %10.3f %8.3f %7.3f-%-7.3f\n" "$p" "$m" "${times[$m]}" "${times[bare]}"
  done
  unset times
done
for p in "${progs[@]}"; do
  read -r -a argv <<< "$p"
  for m in activity callbacks; do
    echo
    echo "== $p: $m"
    LD_PRELOAD="$work/libdriver_cost.so" DRIVER_COST=$m DRIVER_COST_OUT="$work/table" "$samples/${argv[0]}" "${argv[@]:1}" > /dev/null 2>&1
    cat "$work/table"; rm -f "$work/table"
  done
done

#!/usr/bin/env bash
# Claimed against measured: for each case, a program with a defect and the
# same program with the defect fixed. `accprof analyze` of a recording of
# the first claims a saving (the findings' total, each transfer counted
# once); the bare runs of both measure it. Rounds interleave bare bad, bare
# fixed and a recording of the bad one, so each round's machine state is
# shared; the claim is the median over the recordings, the measured saving
# the difference of the bare medians. A bare run is timed by the program's
# own timer when it prints one (`time: X s`, as the samples do: it leaves
# out the process start, whose spread is larger than some savings), else
# by its wall time; the table says which (--timer wall forces the latter).
#
# Usage: bench/savings.sh --accprof BIN --samples DIR [--rounds N] [--out DIR]
#                         [--source-map FROM=TO] [--timer own|wall]
#                         [--cases "bad prog args|fixed prog args[|run options];..."]
#   BIN   the accprof binary; DIR: samples built with `make -C samples OFFLOAD=yes`
#   N     rounds (default 7); --out keeps the traces and raw timings there
#   --source-map  passed to `accprof analyze` (where the binaries' sources are now)
#   run options   for `accprof run` of the bad program in that case (e.g. --check coherence,
#                 which C3's claim needs)
# The default cases: a helper's copy() one call below the time loop, a constant
# table copied in every step, an update device every step (data_shapes), Fortran
# round trips (laplace), a copy() two calls below the loop (deep_copy) and an
# `update self` every step that the host reads every 10th (unread_download).
# Prints per case: claimed, measured, claimed/measured, and each side's spread.
set -euo pipefail
acc= samples= rounds=7 out= map= timer=own
cases="data_shapes helper 1048576 1000 8|data_shapes clean 1048576 1000 8;data_shapes table 1048576 1000 8|data_shapes clean 1048576 1000 8;data_shapes update 1048576 1000 8|data_shapes clean 1048576 1000 8;laplace_bad_f90 512 100|laplace_good_f90 512 100;deep_copy 524288 100 8 bad|deep_copy 524288 100 8 fixed;unread_download 1024 1024 100 10 bad|unread_download 1024 1024 100 10 fixed|--check coherence"
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --source-map) map=$2; shift 2 ;;
    --timer) timer=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "savings.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$acc" ] || { echo "savings.sh: accprof binary '$acc' not found" >&2; exit 2; }
[ -d "$samples" ] || { echo "savings.sh: samples directory '$samples' not found" >&2; exit 2; }
case $rounds in *[!0-9]*|''|0) echo "savings.sh: --rounds must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
case $timer in own|wall) ;; *) echo "savings.sh: --timer must be own or wall, not '$timer'" >&2; exit 2 ;; esac
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out" || { echo "savings.sh: cannot create '$out'" >&2; exit 2; }
export SAMPLE_SKIP_REFERENCE=1

. "$(dirname "$0")/stats.sh"
claim_us() {
  "$acc" analyze --json ${map:+--source-map "$map"} "$1" 2> /dev/null |
    python3 -c 'import json, sys; print(round((json.load(sys.stdin).get("total_saving_ns") or 0) / 1000))'
}

# A bare run's time in us: the program's own `time: X s` line (with
# --timer own and when it prints one), else the wall time; `own` or `wall`
# after it says which.
bare_us() {
  local t0 t1 o
  t0=$(date +%s%N)
  o=$("$@" 2> /dev/null) || true
  t1=$(date +%s%N)
  local own
  own=$(printf '%s\n' "$o" | own_time_us)
  if [ "$timer" = own ] && [ -n "$own" ]; then echo "$own own"; else echo "$(( (t1 - t0) / 1000 )) wall"; fi
}

printf '%-44s %11s %11s %7s  %s\n' "case (bad against fixed)" "claimed" "measured" "ratio" "spread: bad, fixed (bare, min-max; timer)"
IFS=';' read -r -a list <<< "$cases"
i=0
for c in "${list[@]}"; do
  i=$((i + 1))
  IFS='|' read -r bad_s fixed_s opts_s <<< "$c"
  read -r -a bad <<< "$bad_s"; read -r -a fixed <<< "$fixed_s"; read -r -a opts <<< "${opts_s:-}"
  for e in "${bad[0]}" "${fixed[0]}"; do
    [ -x "$samples/$e" ] || { echo "savings.sh: sample '$samples/$e' not found" >&2; exit 2; }
  done
  bad[0]=$samples/${bad[0]}; fixed[0]=$samples/${fixed[0]}
  "${bad[@]}" > /dev/null 2>&1 || true; "${fixed[@]}" > /dev/null 2>&1 || true # warm the code cache
  : > "$out/case$i.raw"
  for r in $(seq "$rounds"); do
    echo "bad $(bare_us "${bad[@]}")" >> "$out/case$i.raw"
    echo "fixed $(bare_us "${fixed[@]}")" >> "$out/case$i.raw"
    "$acc" run --force ${opts[@]+"${opts[@]}"} --output "$out/case$i-$r.trace" -- "${bad[@]}" > /dev/null 2>&1 || true
    echo "claim $(claim_us "$out/case$i-$r.trace")" >> "$out/case$i.raw"
  done
  m() { awk -v k="$1" '$1 == k {print $2}' "$out/case$i.raw" | median; }
  range() { awk -v k="$1" '$1 == k {v = $2 / 1000; if (n++ == 0 || v < lo) lo = v; if (v > hi) hi = v} END {printf "%.0f-%.0f ms", lo, hi}' "$out/case$i.raw"; }
  how=$(awk '$1 == "bad" || $1 == "fixed" {print $3}' "$out/case$i.raw" | sort -u | paste -sd+)
  awk -v c="$bad_s" -v cl="$(m claim)" -v b="$(m bad)" -v f="$(m fixed)" -v sb="$(range bad)" -v sf="$(range fixed)" -v how="$how" 'BEGIN {
    me = (b - f) / 1000; cl /= 1000
    printf "%-44s %8.1f ms %8.1f ms %7.2f  %s, %s (%s)\n", c, cl, me, (me > 0 ? cl / me : 0), sb, sf, how }'
done

#!/usr/bin/env bash
# Collector overhead: wall time of each program bare, under the reference
# collector, and under accprof (hashing off / sampled / full), interleaved
# (bare ref acc... bare ref acc...), REPS rounds. Prints, per program and
# variant, the median wall time and the median of per-round ratios to bare
# (with min-max), so machine noise shared by one round cancels out.
#
# Usage: bench/overhead.sh --accprof LIB [--ref LIB] --samples DIR [--reps N] [--storm COUNT]
#                           [--variants "bare ref accprof-sampled ..."] [--programs "prog args,..."]
#                           [--base VARIANT] [--big-stack] [--accprof2 LIB] [--raw FILE] [--quick]
#   variants: bare, ref, accprof-off|sampled|full (hash mode), accprof-nocupti
#             (acc_prof only, sampled hashing), accprof-nodriver (sampled
#             hashing, no CUDA driver spans), accprof-coherence (sampled
#             hashing and the coherence check), accprof2-MODE
#   LIB     libaccprof.so / librefcollector.so (--ref: needed by variant ref only)
#   --base  the variant the ratios are taken to, round by round (default
#           bare; one of --variants): e.g. accprof-sampled to price the
#           coherence check against accprof without it
#   --big-stack  raise the stack limit first (NPB SP and BT need it, as in
#           bench/npb.sh)
#   --expect TEXT  every run's output must hold TEXT (e.g. " SUCCESSFUL"
#           for NPB, not matching UNSUCCESSFUL), else the script stops: a variant that changes the
#           program's result is not timed
#   --accprof2  a second build of libaccprof.so, timed as variants accprof2-MODE (A/B of two builds)
#   --raw   also write every timed run as "program<TAB>variant<TAB>round<TAB>seconds" to FILE
#   DIR     samples built with `make -C samples` (with nvptx offload for GPU figures)
#   COUNT   launch_storm count (2 tiny kernels each; default 50000 = 100k kernels)
#   --programs  comma-separated programs with arguments, instead of the default four
#   --quick small sizes, for a check that the script works (not for figures)
# The coherence check's cost on NPB SP and BT class W (binaries from
# `bench/npb.sh --npb NPB --class W --build B --only build`), 7 rounds:
#   bench/overhead.sh --accprof LIB --samples B/bin --programs "sp.W.x,bt.W.x" \
#     --variants "bare accprof-sampled accprof-coherence" --base accprof-sampled \
#     --big-stack --expect " SUCCESSFUL" --reps 7
set -euo pipefail
reps=7 quick=0 acc= acc2= ref= samples= storm=50000 only= raw= base=bare big_stack=0 expect=
variants=(bare ref accprof-off accprof-sampled accprof-full)
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --accprof2) acc2=$2; shift 2 ;;
    --raw) raw=$2; shift 2 ;;
    --ref) ref=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --storm) storm=$2; shift 2 ;;
    --variants) read -r -a variants <<< "$2"; shift 2 ;;
    --programs) only=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --base) base=$2; shift 2 ;;
    --big-stack) big_stack=1; shift ;;
    --expect) expect=$2; shift 2 ;;
    *) echo "overhead.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case " ${variants[*]} " in *" ref "*) [ -n "$ref" ] || { echo "overhead.sh: variant ref needs --ref LIB" >&2; exit 2; } ;; esac
for f in "$acc" ${ref:+"$ref"} ${acc2:+"$acc2"}; do [ -f "$f" ] || { echo "overhead.sh: library '$f' not found" >&2; exit 2; }; done
case " ${variants[*]} " in *" $base "*) ;; *) echo "overhead.sh: --base '$base' is not one of the variants (${variants[*]})" >&2; exit 2 ;; esac
case $reps in *[!0-9]*|''|0) echo "overhead.sh: --reps '$reps' is not a positive number" >&2; exit 2 ;; esac
if [ $big_stack = 1 ]; then ulimit -s unlimited 2> /dev/null || ulimit -s "$(ulimit -H -s)"; fi
for v in "${variants[@]}"; do
  case $v in accprof2-*) [ -n "$acc2" ] || { echo "overhead.sh: variant $v needs --accprof2 LIB" >&2; exit 2; } ;; esac
done
if [ -n "$raw" ]; then : > "$raw" || { echo "overhead.sh: cannot write '$raw'" >&2; exit 2; }; fi
[ -d "$samples" ] || { echo "overhead.sh: samples directory '$samples' not found" >&2; exit 2; }

if [ $quick = 1 ]; then
  programs=("launch_storm 2000" "jacobi_f90 256 20" "heat2d_data 256 256 20 10" "heat2d_naive 256 256 20" "small_kernels 8 50")
else
  programs=("launch_storm $storm" "jacobi_f90 2048 200" "heat2d_data 4000 4000 200 50" "heat2d_naive 2048 2048 50" "small_kernels 24 1500")
fi
if [ -n "$only" ]; then IFS=, read -r -a programs <<< "$only"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export SAMPLE_SKIP_REFERENCE=1

now() { date +%s%N; }
run_one() { # variant program args...
  local v=$1; shift
  local env=()
  case $v in
    bare) ;;
    ref) env=(LD_PRELOAD="$ref") ;;
    accprof-nocupti) env=(LD_PRELOAD="$acc" ACCPROF_CUPTI=0 ACCPROF_QUIET=1
                          ACCPROF_OUTPUT="$work/t-%p.trace") ;;
    accprof-nodriver) env=(LD_PRELOAD="$acc" ACCPROF_DRIVER=0 ACCPROF_QUIET=1
                           ACCPROF_OUTPUT="$work/t-%p.trace") ;;
    accprof-coherence) env=(LD_PRELOAD="$acc" ACCPROF_CHECK=coherence ACCPROF_QUIET=1
                            ACCPROF_OUTPUT="$work/t-%p.trace") ;;
    accprof-*) env=(LD_PRELOAD="$acc" ACCPROF_HASH="${v#accprof-}" ACCPROF_QUIET=1
                    ACCPROF_OUTPUT="$work/t-%p.trace") ;;
    accprof2-*) env=(LD_PRELOAD="$acc2" ACCPROF_HASH="${v#accprof2-}" ACCPROF_QUIET=1
                     ACCPROF_OUTPUT="$work/t-%p.trace") ;;
  esac
  local t0 t1
  t0=$(now)
  env "${env[@]}" "$samples/$1" "${@:2}" > "$work/out" 2>&1 || { echo "overhead.sh: $v $* failed:" >&2; tail -5 "$work/out" >&2; exit 1; }
  t1=$(now)
  if [ -n "$expect" ] && ! grep -qF -- "$expect" "$work/out"; then
    echo "overhead.sh: $v $*: the output lacks '$expect':" >&2; tail -5 "$work/out" >&2; exit 1
  fi
  rm -f "$work"/t-*.trace
  echo $(( (t1 - t0) / 1000 ))
}

. "$(dirname "$0")/stats.sh"

printf "%-32s %-18s %12s %10s %17s\n" program variant "median(s)" "ratio/$base" "ratio min-max"
for p in "${programs[@]}"; do
  read -r -a argv <<< "$p"
  # One warm-up of each variant (JIT caches, page cache), not counted.
  for v in "${variants[@]}"; do run_one "$v" "${argv[@]}" > /dev/null; done
  declare -A times=()
  for ((r = 0; r < reps; r++)); do
    for v in "${variants[@]}"; do
      t=$(run_one "$v" "${argv[@]}")
      times[$v]+="$t "
      if [ -n "$raw" ]; then printf "%s\t%s\t%d\t%s\n" "$p" "$v" "$r" "$(awk -v t="$t" 'BEGIN{print t/1e6}')" >> "$raw"; fi
    done
  done
  for v in "${variants[@]}"; do
    ratio_row "%-32s %-18s %12.3f %10.3f %8.3f-%-8.3f\n" "$p" "$v" "${times[$v]}" "${times[$base]}"
  done
  unset times
done

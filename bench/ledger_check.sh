#!/usr/bin/env bash
# An independent check of the wall-time ledger's "inside OpenACC constructs"
# total: each program runs at two sizes that differ only in how many
# constructs the host loop reaches (K steps and 0 steps; everything else,
# start-up, allocation of the host arrays, the data regions around the
# loop, is the same). The difference of the BARE runs' wall times (no
# collector loaded; medians of interleaved rounds) is what the constructs
# cost. The ledger of a recording at each size says how much of the wall
# time was inside constructs; its difference between the sizes should come
# out the same, up to the collector's own overhead.
#
# Usage: bench/ledger_check.sh --accprof BIN --samples DIR [--lib LIB] [--rounds N] [--out DIR]
#                              [--cases "prog argsK|argsZERO;..."]
#   BIN   the accprof binary (for `accprof export`)
#   LIB   the collector (default: libaccprof.so beside BIN)
#   DIR   samples built with `make -C samples OFFLOAD=yes` (GPU figures)
#   N     interleaved bare rounds (default 9)
#   --out keep the traces and the raw timings there (default: a temporary directory)
# Each round runs K bare, 0 bare, then records K and 0 (the collector
# preloaded as `accprof run` does, timed by this script too), so the
# machine's state is shared. Prints one row per case: the difference of the
# bare medians; the difference of the recorded runs' wall-time medians
# (this script's clock); the difference of the medians of the ledgers' time
# inside constructs; ledger against recorded (how well the ledger accounts
# for the recorded runs) and recorded against bare (the collector's own
# overhead inside constructs).
set -euo pipefail
acc= lib= samples= rounds=9 out=
cases="launch_storm 20000 64|0 64;small_kernels 8 300|8 0;data_shapes helper 1048576 200 8|helper 1048576 0 8;data_shapes clean 1048576 2000 8|clean 1048576 0 8"
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "ledger_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$acc" ] || { echo "ledger_check.sh: accprof binary '$acc' not found" >&2; exit 2; }
lib=${lib:-$(dirname "$acc")/libaccprof.so}
[ -f "$lib" ] || { echo "ledger_check.sh: collector library '$lib' not found" >&2; exit 2; }
[ -d "$samples" ] || { echo "ledger_check.sh: samples directory '$samples' not found" >&2; exit 2; }
case $rounds in *[!0-9]*|''|0) echo "ledger_check.sh: --rounds must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out" || { echo "ledger_check.sh: cannot create '$out'" >&2; exit 2; }
export SAMPLE_SKIP_REFERENCE=1

. "$(dirname "$0")/stats.sh"
# A run under the collector, preloaded as `accprof run` preloads it.
recorded_us() { local t=$1; shift; wall_us env LD_PRELOAD="$lib" ACCPROF_OUTPUT="$t" ACCPROF_QUIET=1 ACCPROF_TIME=0 "$@"; }
# The ledger's time inside constructs (all threads), in microseconds.
inside_us() { "$acc" export --format csv --what ledger --output /dev/stdout "$1" | awk -F, '$3 == "constructs" {s += $5} END {printf "%.0f\n", s}'; }

printf '%-36s %12s %12s %12s %8s %8s\n' "case (K steps against 0)" "bare" "recorded" "ledger" "led/rec" "rec/bare"
IFS=';' read -r -a list <<< "$cases"
i=0
for c in "${list[@]}"; do
  i=$((i + 1))
  prog=${c%% *} rest=${c#* }
  argk=${rest%%|*} arg0=${rest#*|}
  read -r -a ak <<< "$argk"; read -r -a a0 <<< "$arg0"
  exe=$samples/$prog
  [ -x "$exe" ] || { echo "ledger_check.sh: sample '$exe' not found" >&2; exit 2; }
  "$exe" "${a0[@]}" > /dev/null 2>&1 || true # warm the driver's code cache
  : > "$out/case$i.raw"
  # Bare and recorded runs interleaved, so that each round's machine state
  # is shared by all four.
  for r in $(seq "$rounds"); do
    echo "k $(wall_us "$exe" "${ak[@]}")" >> "$out/case$i.raw"
    echo "0 $(wall_us "$exe" "${a0[@]}")" >> "$out/case$i.raw"
    rm -f "$out/case$i-k-$r.trace" "$out/case$i-0-$r.trace"
    echo "rk $(recorded_us "$out/case$i-k-$r.trace" "$exe" "${ak[@]}")" >> "$out/case$i.raw"
    echo "r0 $(recorded_us "$out/case$i-0-$r.trace" "$exe" "${a0[@]}")" >> "$out/case$i.raw"
    echo "lk $(inside_us "$out/case$i-k-$r.trace")" >> "$out/case$i.raw"
    echo "l0 $(inside_us "$out/case$i-0-$r.trace")" >> "$out/case$i.raw"
  done
  m() { awk -v k="$1" '$1 == k {print $2}' "$out/case$i.raw" | median; }
  awk -v c="$prog $argk" -v bk="$(m k)" -v b0="$(m 0)" -v rk="$(m rk)" -v r0="$(m r0)" -v lk="$(m lk)" -v l0="$(m l0)" 'BEGIN {
    bd = (bk - b0) / 1000; rd = (rk - r0) / 1000; ld = (lk - l0) / 1000
    printf "%-36s %9.1f ms %9.1f ms %9.1f ms %8.2f %8.2f\n", c, bd, rd, ld, (rd > 0 ? ld / rd : 0), (bd > 0 ? rd / bd : 0) }'
done

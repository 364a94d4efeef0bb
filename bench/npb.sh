#!/usr/bin/env bash
# NPB SP and BT (the University of Houston OpenACC port of NPB 3.3, C)
# built with GCC and recorded: copies SP/ and BT/ out of a checkout of the
# port (its sources are never part of this repository and the checkout is
# never written to), writes a make.def for gcc -fopenacc, builds sp and bt
# for one class, then per program: the wall time of REPS bare runs (median),
# the program's own "Time in seconds" and its verification, one run recorded
# with `accprof run`, `accprof analyze` of that trace and its wall-time
# ledger as CSV. Prints a table and the head of each analysis, and how many
# compute constructs (parallel, kernels) each program's sources have.
#
# Usage: bench/npb.sh --npb DIR [--class S|W|A|B|C] [--build DIR] [--offload yes|no]
#                     [--out DIR] [--accprof PATH] [--reps N] [--only build] [--check]
#   --npb      the port: the directory holding SP/ and BT/
#              (github.com/uhhpctools/openacc-npb)
#   --class    problem class (default W; S takes well under a second a run)
#   --build    where the copies are built (default a temporary directory,
#              removed at exit unless --only build); binaries land in DIR/bin
#   --offload  yes: -foffload=nvptx-none (default), no: -foffload=disable
#              (host code only; yes also runs on the host without a GPU)
#   --out      results (needed unless --only build): PROG.CLASS.bare.txt,
#              .record.txt, .trace, .analyze.txt, .ledger.csv, times.txt
#   --accprof  the accprof binary (default target/release/accprof)
#   --only build  build, print the construct counts, run nothing
#   --check    also record one run with `--check coherence` (PROG.CLASS.check.*)
#              and print both runs' check state and wall-time ledgers, so
#              the check's time shows as accprof's and the other rows as
#              without it
# On the GPU machine: bench/npb.sh --npb NPB --class W --out npb-out
# The port needs no source edits for GCC 12: openacc.h and acc_init/
# acc_shutdown come with -fopenacc; SP and BT need a large stack (the script
# raises its limit). CFLAGS also carry -g, for the analysis' source lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
npb= class=W build= offload=yes out= acc="$root/target/release/accprof" reps=3 only= check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --npb) npb=$2; shift 2 ;;
    --class) class=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --offload) offload=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --accprof) acc=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "npb.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$npb" ] && [ -d "$npb/SP" ] && [ -d "$npb/BT" ] \
  || { echo "npb.sh: --npb '$npb' is not a checkout of the port (no SP/ and BT/ in it)" >&2; exit 2; }
case $class in S|W|A|B|C|D|E) ;; *) echo "npb.sh: --class '$class' is not one of S W A B C D E" >&2; exit 2 ;; esac
case $offload in
  yes) offflags="-foffload=nvptx-none -foffload-options=-lm" ;;
  no) offflags="-foffload=disable" ;;
  *) echo "npb.sh: --offload '$offload' is not yes or no" >&2; exit 2 ;;
esac
case $reps in *[!0-9]*|''|0) echo "npb.sh: --reps '$reps' is not a positive number" >&2; exit 2 ;; esac
case $only in ''|build) ;; *) echo "npb.sh: --only '$only' is not 'build'" >&2; exit 2 ;; esac
if [ -z "$only" ]; then
  [ -n "$out" ] || { echo "npb.sh: --out DIR is needed to run (or pass --only build)" >&2; exit 2; }
  [ -x "$acc" ] || { echo "npb.sh: accprof binary '$acc' not found" >&2; exit 2; }
  mkdir -p "$out" || { echo "npb.sh: cannot create '$out'" >&2; exit 2; }
  out=$(cd "$out" && pwd)
fi
cc=gcc-12
command -v "$cc" > /dev/null || cc=gcc
npb=$(cd "$npb" && pwd)
if [ -z "$build" ]; then
  build=$(mktemp -d)
  [ -n "$only" ] || trap 'rm -rf "$build"' EXIT
else
  build=$(realpath -m "$build")
  case "$build/" in "$npb"/*) echo "npb.sh: --build '$build' is inside --npb '$npb' (the checkout is never written to)" >&2; exit 2 ;; esac
  case $build in *[[:space:]]*) echo "npb.sh: --build '$build' has a space in it (make cannot take it)" >&2; exit 2 ;; esac
  mkdir -p "$build" || { echo "npb.sh: cannot create '$build'" >&2; exit 2; }
fi

# shellcheck source=bench/npb_port.sh
. "$root/bench/npb_port.sh"
progs=(sp bt)
mkdir -p "$build/bin"
flags="-fopenacc -O2 -g -no-pie $offflags"
for p in "${progs[@]}"; do
  P=${p^^}
  rm -rf "${build:?}/$P"
  cp -R "$npb/$P" "$build/$P"
  npb_make_def "$build/$P" "$cc" "$flags" "$build/bin"
  echo "== building $p class $class ($cc $flags)"
  # Serial: the port's Makefiles run setparams (npbparams.h) as a sibling
  # prerequisite of the objects that include it.
  if ! make -C "$build/$P/$P" CLASS="$class" > "$build/$p.build.log" 2>&1; then
    echo "npb.sh: building $p failed (log $build/$p.build.log):" >&2
    tail -20 "$build/$p.build.log" >&2
    exit 1
  fi
  [ -x "$build/bin/$p.$class.x" ] || { echo "npb.sh: $build/bin/$p.$class.x was not built" >&2; exit 1; }
done
echo
echo "compute constructs (#pragma acc parallel / kernels) in the sources:"
for p in "${progs[@]}"; do
  P=${p^^}
  par=$(cat "$build/$P/$P"/*.c | grep -cE '^[[:space:]]*#[[:space:]]*pragma[[:space:]]+acc[[:space:]]+parallel\b' || true)
  ker=$(cat "$build/$P/$P"/*.c | grep -cE '^[[:space:]]*#[[:space:]]*pragma[[:space:]]+acc[[:space:]]+kernels\b' || true)
  printf "  %-3s %4d parallel %4d kernels %4d in all\n" "$p" "$par" "$ker" $((par + ker))
done
[ -z "$only" ] || { echo "binaries: $build/bin"; exit 0; }

# SP and BT keep their arrays on the stack.
ulimit -s unlimited 2> /dev/null || ulimit -s "$(ulimit -H -s)"
. "$root/bench/stats.sh"
now() { date +%s%N; }
verified() { grep -qE 'Verification +=  *SUCCESSFUL' "$1" && echo SUCCESSFUL || echo FAILED; }
own_time() { awk -F= '/Time in seconds/ {gsub(/ /, "", $2); print $2; exit}' "$1"; }
: > "$out/times.txt"
rows=()
for p in "${progs[@]}"; do
  P=${p^^} x="$build/bin/$p.$class.x" base="$out/$p.$class"
  walls= owns= verdict=SUCCESSFUL
  for ((r = 0; r < reps; r++)); do
    t0=$(now)
    "$x" > "$base.bare.txt" 2>&1 || { echo "npb.sh: $p failed:" >&2; tail -5 "$base.bare.txt" >&2; exit 1; }
    t1=$(now)
    walls+="$(( (t1 - t0) / 1000 )) "
    owns+="$(own_time "$base.bare.txt") "
    [ "$(verified "$base.bare.txt")" = SUCCESSFUL ] || verdict=FAILED
    printf "%s\tbare\t%d\t%s\n" "$p.$class" "$r" "$(awk -v t=$(( (t1 - t0) / 1000 )) 'BEGIN{print t/1e6}')" >> "$out/times.txt"
  done
  t0=$(now)
  "$acc" run --force --output "$base.trace" -- "$x" > "$base.record.txt" 2>&1 \
    || { echo "npb.sh: accprof run $p failed:" >&2; tail -5 "$base.record.txt" >&2; exit 1; }
  t1=$(now)
  rec=$(awk -v t=$(( (t1 - t0) / 1000 )) 'BEGIN{print t/1e6}')
  printf "%s\trecorded\t0\t%s\n" "$p.$class" "$rec" >> "$out/times.txt"
  "$acc" analyze --symbols "$build/bin" --source-dir "$build/$P/$P" "$base.trace" > "$base.analyze.txt" 2>&1
  "$acc" export --format csv --what ledger --symbols "$build/bin" "$base.trace" -o "$base.ledger.csv"
  if [ $check = 1 ]; then
    "$acc" run --check coherence --force --output "$base.check.trace" -- "$x" > "$base.check.record.txt" 2>&1 \
      || { echo "npb.sh: accprof run --check coherence $p failed:" >&2; tail -5 "$base.check.record.txt" >&2; exit 1; }
    [ "$(verified "$base.check.record.txt")" = SUCCESSFUL ] || echo "npb.sh: $p under the check: verification FAILED" >&2
    "$acc" analyze --symbols "$build/bin" --source-dir "$build/$P/$P" "$base.check.trace" > "$base.check.analyze.txt" 2>&1
    "$acc" export --format csv --what ledger --symbols "$build/bin" "$base.check.trace" -o "$base.check.ledger.csv"
  fi
  rows+=("$(printf "%-8s %12.3f %12s %12.3f %12s %12s" "$p.$class" \
    "$(printf "%s\n" $walls | median | awk '{print $1/1e6}')" \
    "$(printf "%s\n" $owns | median)" "$rec" "$verdict" "$(verified "$base.record.txt")")")
done
echo
printf "%-8s %12s %12s %12s %12s %12s\n" program "bare wall(s)" "own time(s)" "recorded(s)" verification "recorded ver"
printf "%s\n" "${rows[@]}"
echo "(bare: median of $reps runs; own time: the program's 'Time in seconds', median; recorded: one run under accprof run)"
for p in "${progs[@]}"; do
  echo
  echo "== $out/$p.$class.analyze.txt"
  head -16 "$out/$p.$class.analyze.txt"
  if [ $check = 1 ]; then
    for t in "" .check; do
      echo
      echo "== $out/$p.$class$t.analyze.txt: the check's state and the ledger"
      sed -n '/coherence check:/p; /^Where the wall time went/,/^$/p' "$out/$p.$class$t.analyze.txt"
    done
  fi
done

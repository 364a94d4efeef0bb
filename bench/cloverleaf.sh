#!/usr/bin/env bash
# The coherence check on UK-MAC CloverLeaf_OpenACC (Fortran; its fields are
# allocatable arrays of a derived type in a module, kept on the device by
# `!$ACC DATA` in hydro and moved by `!$ACC UPDATE`): built with GCC's
# OpenACC (mpif90 over gfortran 12, nvptx offload), run bare and under
# `accprof run --check coherence` on one input deck; compares the field
# summaries of clover.out (every line but the timings), counts the C1, C2
# and C3 findings of `accprof analyze --json` and prints the check's exit
# note (the host ranges it watched). CloverLeaf's sources are never part of
# this repository: the script copies them from a checkout into BUILD.
#
# Usage: bench/cloverleaf.sh --cloverleaf DIR --out OUT [--accprof BIN]
#                            [--build BUILD] [--only build|run]
#                            [--input FILE] [--offload yes|no] [--timeout S]
#   DIR        a CloverLeaf_OpenACC checkout (github.com/UK-MAC/CloverLeaf_OpenACC)
#   --build    where the copy is built (default OUT/build)
#   --only build   build into BUILD and stop (on a machine with GCC's nvptx
#              offload compiler); --only run: run what an earlier --only
#              build left in BUILD (the GPU machine, which has no compiler;
#              with Open MPI from bench/bundle-mpi.sh)
#   --input    the input deck (default: DIR/clover.in, 960x960 cells, 87
#              steps, whose end the program checks against its expected
#              solution: "This test is considered PASSED")
#   --offload  yes (default): -foffload=nvptx-none; no: host code only
# Writes OUT/{bare,checked}/ (clover.in, clover.out, stdout and stderr in
# run.log, the exit code in rc), OUT/checked/clover.trace, .json and
# analyze.txt; prints one line; exit status 1 when the outputs differ or a
# C1/C2 was found, 2 on bad arguments.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clover= out= acc="$root/target/release/accprof" build= only= input= offload=yes timeout_s=900
while [ $# -gt 0 ]; do
  case "$1" in
    --cloverleaf) clover=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --accprof) acc=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --offload) offload=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    *) echo "cloverleaf.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $only in ''|build|run) ;; *) echo "cloverleaf.sh: --only '$only' is not build or run" >&2; exit 2 ;; esac
[ -n "$out" ] || { echo "cloverleaf.sh: --out is needed" >&2; exit 2; }
mkdir -p "$out" || { echo "cloverleaf.sh: cannot create '$out'" >&2; exit 2; }
out=$(cd "$out" && pwd)
build=${build:-$out/build}
case $offload in
  yes) foffload=-foffload=nvptx-none ;;
  no) foffload=-foffload=disable ;;
  *) echo "cloverleaf.sh: --offload '$offload' is not yes or no" >&2; exit 2 ;;
esac

if [ "$only" != run ]; then
  [ -n "$clover" ] && [ -f "$clover/clover_leaf.f90" ] \
    || { echo "cloverleaf.sh: --cloverleaf '$clover' is not a CloverLeaf_OpenACC checkout (no clover_leaf.f90)" >&2; exit 2; }
  for t in mpif90 mpicc; do
    command -v $t > /dev/null || { echo "cloverleaf.sh: $t not found (Open MPI)" >&2; exit 2; }
  done
  rm -rf "$build"
  cp -R "$clover" "$build"
  rm -rf "$build/.git"
  [ -n "$input" ] || input=$clover/clover.in
  [ -f "$input" ] || { echo "cloverleaf.sh: input deck '$input' not found" >&2; exit 2; }
  cp "$input" "$build/input.in"
  # CloverLeaf's own Makefile, with GCC's OpenACC instead of its OpenMP
  # flags, -g for the source lines, -fallow-argument-mismatch for its MPI
  # calls, -no-pie for GCC 12's offload table.
  echo "== build ($foffload) in $build"
  if ! make -C "$build" -j2 COMPILER=GNU MPI_COMPILER=mpif90 C_MPI_COMPILER=mpicc \
      OMP_GNU="-fopenacc $foffload" \
      FLAGS_GNU="-O2 -g -cpp -ffree-line-length-none -fallow-argument-mismatch -no-pie" \
      CFLAGS_GNU="-O2 -g -no-pie" > "$build/build.log" 2>&1; then
    tail -20 "$build/build.log" >&2
    echo "cloverleaf.sh: the build failed (log: $build/build.log)" >&2
    exit 1
  fi
  [ "$only" != build ] || { echo "built into $build"; exit 0; }
fi
exe=$build/clover_leaf
[ -x "$exe" ] || { echo "cloverleaf.sh: $exe was not built (run with --only build first)" >&2; exit 2; }
[ -x "$acc" ] || { echo "cloverleaf.sh: accprof binary '$acc' not found" >&2; exit 2; }
acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")
# shellcheck source=bench/stats.sh
. "$root/bench/stats.sh"

run() { # name command...
  local name=$1; shift
  local dir=$out/$name
  rm -rf "$dir"; mkdir -p "$dir"
  cp "$build/input.in" "$dir/clover.in"
  ( cd "$dir" && timeout -k 5 "$timeout_s" "$@" < /dev/null > run.log 2>&1; echo $? > rc )
}
run bare "$exe"
run checked "$acc" run --check coherence --no-summary --force --output clover.trace -- "$exe"
# The field summaries and the check against the expected solution, not the
# wall clocks and per-cell times.
stable() { grep -vE 'Wall clock|time per cell|overhead|Date|Time|[Tt]otal time|Clover is finishing|opened' "$1" 2>/dev/null; }
same=no
[ -s "$out/bare/clover.out" ] && diff -q <(stable "$out/bare/clover.out") <(stable "$out/checked/clover.out") > /dev/null && same=yes
passed() { grep -qE 'This test is considered PASSED' "$1" 2>/dev/null && echo PASSED || echo NOT-PASSED; }
c1='?' c2='?' c3='?'
t=$out/checked/clover.trace
if [ -f "$t" ] && "$acc" analyze --json --symbols "$build" --source-dir "$build" "$t" > "$out/checked/clover.json" 2> "$out/checked/analyze.err"; then
  c1=$(findings_count "$out/checked/clover.json" C1)
  c2=$(findings_count "$out/checked/clover.json" C2)
  c3=$(findings_count "$out/checked/clover.json" C3)
  "$acc" analyze --symbols "$build" --source-dir "$build" "$t" > "$out/checked/analyze.txt" 2>&1
fi
note=$(grep -h 'coherence check' "$out/checked/run.log" | head -1 | cut -c1-600)
watched=$(printf '%s' "$note" | grep -oE 'watched [0-9]+ host ranges \([^)]*\)|watched nothing|does not apply' || echo '-')
flag=
[ "$(cat "$out/bare/rc")" = "$(cat "$out/checked/rc")" ] && [ "$same" = yes ] || flag=" CHANGED"
[ "$c1" = 0 ] && [ "$c2" = 0 ] || flag="$flag FALSE-POSITIVE?"
echo "cloverleaf: $(passed "$out/bare/clover.out")/$(passed "$out/checked/clover.out") rc $(cat "$out/bare/rc")/$(cat "$out/checked/rc") output $same C1 $c1 C2 $c2 C3 $c3; $watched$flag"
echo "  note: $note"
[ -z "$flag" ]

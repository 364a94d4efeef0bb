#!/usr/bin/env bash
# The patches accprof proposes for the NPB fixture traces, built here for
# the GPU and checked on a GPU machine that has no offload compiler, with
# `accprof analyze --verify --prebuild` here and `--prebuilt` there; NPB's
# own timing lines ("Time in seconds", "Mop/s") are not compared, so the
# verdict is its output, "Verification = SUCCESSFUL" included.
#
#   FT class W  cli/tests/fixtures/h200-npb/ft_warm.trace
#   SP class W  cli/tests/fixtures/h200-coherence2/sp_W.trace
#
#   prepare  (the build machine) copies FT/ and SP/ out of the NPB checkout
#            (the University of Houston OpenACC port of NPB 3.3, C; never
#            written to) into OUT/src, then per trace builds the original
#            and the patched program into OUT/pre/NAME with the port's own
#            Makefile (class W, gcc -fopenacc -foffload=nvptx-none, as
#            bench/npb.sh builds it).
#   run      (the GPU machine, this repository beside OUT) verifies each
#            with the programs in OUT/pre/NAME, its report in
#            OUT/ran/NAME.log, and prints a line per trace: `same output`,
#            `DIFFERENT` or `FAILED`; exits 1 unless every one is the same.
#   build    (what `prepare` gives --build) SRC DIR OUT: the program in
#            SRC (a copy of FT/ or SP/) with the files of DIR (a version's
#            copies, original or patched) in place of its own, built to OUT.
#
#            The patched program runs once more bare, for NPB's verdict.
#
# Usage: bench/npb_patches.sh prepare --accprof BIN --npb NPB OUT
#        bench/npb_patches.sh run --accprof BIN OUT
#   BIN  the accprof binary (libaccprof.so beside it, or --lib LIB)
# Here:   bench/npb_patches.sh prepare --accprof target/release/accprof --npb NPB /tmp/np
#         tar -C /tmp -czf np.tgz np
# There:  tar -xzf np.tgz && bench/npb_patches.sh run --accprof .gpu/accprof np
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
self="$repo/bench/npb_patches.sh"

# NAME  TRACE  BINARIES  PROGRAM  where its sources were when it was recorded
cases=(
  "ft_W cli/tests/fixtures/h200-npb/ft_warm.trace cli/tests/fixtures/h200-npb/bin FT /work/ext/npb-build/FT/FT"
  "sp_W cli/tests/fixtures/h200-coherence2/sp_W.trace cli/tests/fixtures/h200-coherence2/bin SP /work/ext/npbcoh/sp/SP"
)
ignore=(--ignore-lines "Time in seconds" --ignore-lines "Mop/s")

cmd=${1:-}
[ $# -gt 0 ] && shift
if [ "$cmd" = build ]; then
  [ $# -eq 3 ] || { echo "npb_patches.sh: build SRC DIR OUT" >&2; exit 2; }
  src=$1 dir=$2 bin=$3
  P=$(basename "$src")
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -R "$src" "$work/$P"
  cp "$dir"/* "$work/$P/$P/"
  cc=gcc-12
  command -v "$cc" > /dev/null || cc=gcc
  flags="-fopenacc -O2 -g -no-pie -foffload=nvptx-none -foffload-options=-lm"
  # shellcheck source=bench/npb_port.sh
  . "$repo/bench/npb_port.sh"
  npb_make_def "$work/$P" "$cc" "$flags" "$work/bin"
  mkdir -p "$work/bin"
  make -C "$work/$P/$P" CLASS=W > "$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; exit 1; }
  cp "$work/bin/"*.W.x "$bin"
  exit 0
fi

acc= lib= npb= out=
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --npb) npb=$2; shift 2 ;;
    -*) echo "npb_patches.sh: unknown argument $1" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "npb_patches.sh: one OUT only ($out, $1)" >&2; exit 2; }
       out=$1; shift ;;
  esac
done
case "$cmd" in
  prepare|run) ;;
  *) echo "npb_patches.sh: the first argument is prepare or run, not '$cmd'" >&2; exit 2 ;;
esac
[ -n "$out" ] || { echo "npb_patches.sh: OUT is missing" >&2; exit 2; }
[ -x "$acc" ] || { echo "npb_patches.sh: accprof binary '$acc' not found (--accprof BIN)" >&2; exit 2; }
acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")
lib_args=()
if [ -n "$lib" ]; then
  [ -f "$lib" ] || { echo "npb_patches.sh: collector library '$lib' not found" >&2; exit 2; }
  lib_args=(--lib "$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")")
fi
cd "$repo"

if [ "$cmd" = prepare ]; then
  [ -n "$npb" ] && [ -d "$npb/FT" ] && [ -d "$npb/SP" ] \
    || { echo "npb_patches.sh: --npb '$npb' is not a checkout of the port (no FT/ and SP/ in it)" >&2; exit 2; }
  mkdir -p "$out/src" "$out/pre" || { echo "npb_patches.sh: cannot create '$out'" >&2; exit 2; }
  out=$(cd "$out" && pwd)
  failed=0
  for c in "${cases[@]}"; do
    read -r name trace bin P recorded <<< "$c"
    [ -d "$out/src/$P" ] || cp -R "$npb/$P" "$out/src/$P"
    rm -rf "${out:?}/pre/$name"
    if env -u ACCPROF_SYMBOL_PATH ACCPROF_SYMBOLS_ONLY=1 "$acc" analyze --symbols "$bin" \
        --source-map "$recorded=$out/src/$P/$P" --verify --prebuild "$out/pre/$name" \
        --build "bash $self build $out/src/$P {dir} {out}" "$trace" > "$out/pre/$name.log" 2>&1; then
      echo "built   $trace: $(grep -m1 '^prebuilt' "$out/pre/$name.log")"
    else
      echo "FAILED  $trace: see $out/pre/$name.log"; failed=1
    fi
  done
  echo "run there: bench/npb_patches.sh run --accprof BIN $out"
  exit $failed
fi

[ -d "$out/pre" ] || { echo "npb_patches.sh: '$out' was not made by prepare (no pre/ in it)" >&2; exit 2; }
out=$(cd "$out" && pwd)
mkdir -p "$out/ran"
# SP and BT need a large stack.
ulimit -s unlimited 2> /dev/null || ulimit -s "$(ulimit -H -s)"
bad=0
for c in "${cases[@]}"; do
  read -r name trace bin P recorded <<< "$c"
  log="$out/ran/$name.log"
  env -u ACCPROF_SYMBOL_PATH ACCPROF_SYMBOLS_ONLY=1 "$acc" analyze --symbols "$bin" \
    --source-map "$recorded=$out/src/$P/$P" --verify --prebuilt "$out/pre/$name" \
    --run '{out}' "${ignore[@]}" "${lib_args[@]}" --keep "$out/ran/$name" "$trace" > "$log" 2>&1 && rc=0 || rc=$?
  verdict=$(grep -m1 '^  output:' "$log" || true)
  patched=$(grep -m1 '^verify:' "$log" | sed 's/.* patched with //' || true)
  case "$rc:$verdict" in
    "0:  output: identical"*)
      # The patched program once more, bare: what NPB says of its result.
      said=$("$out/pre/$name/after.bin" 2>&1 | grep -m1 -o 'Verification *= *[A-Z]*' || echo "no verification line")
      echo "same output  $trace ($patched): the patched program's $said" ;;
    1:*) echo "DIFFERENT    $trace ($patched): see $log"; bad=1 ;;
    *) echo "FAILED       $trace (exit code $rc): $(grep -m1 '^accprof' "$log" || tail -1 "$log"); see $log"; bad=1 ;;
  esac
done
exit $bad

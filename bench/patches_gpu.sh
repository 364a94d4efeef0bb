#!/usr/bin/env bash
# Every patch accprof proposes for a sample from a GPU fixture trace
# (cli/tests/fixtures/*/*.trace), built here for the GPU and checked on a
# GPU machine that has no offload compiler: the same traces and programs as
# cli/tests/patches_verify.rs's every_patch_of_the_gpu_fixtures_keeps_the_
# programs_output, whose selection is this script's `list`.
#
#   list     the selection, one trace a line, tab-separated, paths relative
#            to the repository: `sample TRACE PROGRAM ARGS` (its patch
#            changes only files of samples/; PROGRAM the Makefile's target,
#            ARGS its quick arguments from `make -s -C samples args`),
#            `none TRACE` (no patch), `other TRACE FILES` (the patch changes
#            files outside samples/: NPB, TeaLeaf), `noargs TRACE PROGRAM`
#            (a sample without quick arguments: a failure).
#   prepare  (the build machine) copies samples/ to OUT/samples, writes the
#            list to OUT/list.tsv and, for each sample line, runs `accprof
#            analyze --verify --prebuild OUT/pre/NAME` with the samples'
#            Makefile and OFFLOAD=yes; OUT/run.tsv lists what was built
#            (NAME TRACE PROGRAM ARGS), OUT/pre/NAME.log what accprof said.
#   run      (the GPU machine, this repository beside OUT) runs `accprof
#            analyze --verify --prebuilt OUT/pre/NAME --run '{out} ARGS'`
#            for each line of OUT/run.tsv, keeping its traces in
#            OUT/ran/NAME and its report in OUT/ran/NAME.log, and prints one
#            line per trace: `same output` (exit code 0, output identical),
#            `a wrong result made right` (the original printed `reference:
#            MISMATCH` and exited 1, the patched program exited 0) or
#            `FAILED`, then a summary; exits 1 on any failure.
#
# The MPI samples run as one process (MPI_Init without mpirun): Open MPI's
# runtime must be on the GPU machine (carried along: OPAL_PREFIX and its
# libraries), else their runs fail before MPI_Init completes.
#
# A trace's sources are read from OUT/samples and its binaries from the
# fixture's bin/ only (ACCPROF_SYMBOLS_ONLY=1), as the test does.
#
# Usage: bench/patches_gpu.sh list    --accprof BIN --samples DIR
#        bench/patches_gpu.sh prepare --accprof BIN OUT
#        bench/patches_gpu.sh run     --accprof BIN OUT
#   BIN  the accprof binary (libaccprof.so beside it, or --lib LIB)
#   DIR  a copy of samples/ (the patches' files are matched under it)
# Here:   bench/patches_gpu.sh prepare --accprof target/release/accprof /tmp/pg
#         tar -C /tmp -czf pg.tgz pg
# There:  tar -xzf pg.tgz && bench/patches_gpu.sh run --accprof .gpu/accprof pg
set -euo pipefail
cmd=${1:-}
[ $# -gt 0 ] && shift
acc= lib= samples= out=
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --lib) lib=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    -*) echo "patches_gpu.sh: unknown argument $1" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "patches_gpu.sh: one OUT only ($out, $1)" >&2; exit 2; }
       out=$1; shift ;;
  esac
done
case "$cmd" in
  list|prepare|run) ;;
  *) echo "patches_gpu.sh: the first argument is list, prepare or run, not '$cmd'" >&2; exit 2 ;;
esac
[ -x "$acc" ] || { echo "patches_gpu.sh: accprof binary '$acc' not found (--accprof BIN)" >&2; exit 2; }
acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")
lib_args=()
if [ -n "$lib" ]; then
  [ -f "$lib" ] || { echo "patches_gpu.sh: collector library '$lib' not found" >&2; exit 2; }
  lib_args=(--lib "$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")")
fi
repo=$(cd "$(dirname "$0")/.." && pwd)

# analyze BIN_DIR ARGS...: `accprof analyze` reading binaries from the
# fixture's BIN_DIR only.
analyze() {
  local bin=$1; shift
  env -u ACCPROF_SYMBOL_PATH ACCPROF_SYMBOLS_ONLY=1 "$acc" analyze --symbols "$bin" "$@"
}

# program_of FILE: the Makefile's program of a patched file: x.c and x.cpp
# are x, x.f90 is x_f90, and a second file x_step.c is x's.
program_of() {
  local base=${1##*/} stem ext
  stem=${base%.*}; ext=${base##*.}
  stem=${stem%_step}
  if [ "$ext" = f90 ]; then echo "${stem}_f90"; else echo "$stem"; fi
}

# list COPY: the selection (see above) on stdout.
list() {
  local copy=$1 quick trace rel diff files first program args f inside
  quick=$(make -s -C "$repo/samples" args | grep -v '^samples:')
  for trace in "$repo"/cli/tests/fixtures/*/*.trace; do
    rel=${trace#"$repo"/}
    diff=$(analyze "$(dirname "$trace")/bin" --source-dir "$copy" --patch "$trace" 2>/dev/null || true)
    # `+++ b/PATH` names PATH without its leading `/`.
    files=$(printf '%s\n' "$diff" | sed -n 's|^+++ b/\(.*\)$|/\1|p' | sed 's/[[:space:]]*$//')
    if [ -z "$files" ]; then printf 'none\t%s\n' "$rel"; continue; fi
    inside=yes
    while IFS= read -r f; do
      case "$f" in "$copy"/*) ;; *) inside=no ;; esac
    done <<< "$files"
    if [ $inside = no ]; then
      printf 'other\t%s\t%s\n' "$rel" "$(printf '%s' "$files" | tr '\n' ' ')"
      continue
    fi
    first=$(printf '%s\n' "$files" | head -1)
    program=$(program_of "$first")
    args=$(printf '%s\n' "$quick" | awk -v p="$program" '$1 == p {$1 = ""; sub(/^ /, ""); print; found = 1; exit} END {exit !found}') \
      || { printf 'noargs\t%s\t%s\n' "$rel" "$program"; continue; }
    printf 'sample\t%s\t%s\t%s\n' "$rel" "$program" "$args"
  done
}

if [ "$cmd" = list ]; then
  [ -d "$samples" ] || { echo "patches_gpu.sh: list needs --samples DIR, a copy of samples/" >&2; exit 2; }
  list "$(cd "$samples" && pwd)"
  exit 0
fi
[ -n "$out" ] || { echo "patches_gpu.sh: $cmd needs OUT" >&2; exit 2; }

# name_of TRACE: h200/laplace_bad_c.trace -> h200-laplace_bad_c.trace
name_of() { local t=${1#cli/tests/fixtures/}; echo "${t//\//-}"; }

if [ "$cmd" = prepare ]; then
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  rm -rf "$out/samples" "$out/pre" "$out/ran"
  mkdir -p "$out/samples" "$out/pre"
  find "$repo/samples" -maxdepth 1 -type f -exec cp {} "$out/samples/" \;
  list "$out/samples" > "$out/list.tsv"
  : > "$out/run.tsv"
  failed=0 built=0
  while IFS=$'\t' read -r kind trace program args; do
    case "$kind" in
      sample) ;;
      noargs) echo "FAILED  $trace: $program has no quick arguments in \`make args\`"; failed=$((failed + 1)); continue ;;
      *) continue ;;
    esac
    name=$(name_of "$trace")
    # Each version is built by the samples' Makefile in a folder of its
    # own: samples/ with the files the patch changes (original or
    # patched, from {dir}) over it; {dir} keeps only those.
    build="t=\$(mktemp -d) && cp $out/samples/* \$t/ && cp -r {dir}/. \$t/ && make -s -C \$t BUILD=build OFFLOAD=yes build/$program >/dev/null && cp \$t/build/$program {out} && rm -rf \$t"
    if analyze "$repo/$(dirname "$trace")/bin" --source-dir "$out/samples" "${lib_args[@]}" \
         --verify --prebuild "$out/pre/$name" --build "$build" "$repo/$trace" \
         > "$out/pre/$name.log" 2>&1; then
      printf '%s\t%s\t%s\t%s\n' "$name" "$trace" "$program" "$args" >> "$out/run.tsv"
      echo "built   $trace as $program"
      built=$((built + 1))
    else
      echo "FAILED  $trace as $program: $(tail -1 "$out/pre/$name.log")"
      failed=$((failed + 1))
    fi
  done < "$out/list.tsv"
  echo "prepared $built traces in $out ($(du -sh "$out" | cut -f1)); no patch: $(grep -c '^none' "$out/list.tsv" || true), not samples: $(grep -c '^other' "$out/list.tsv" || true), failed: $failed"
  echo "run there: bench/patches_gpu.sh run --accprof BIN $out"
  [ $failed -eq 0 ] || exit 1
  exit 0
fi

# run
[ -f "$out/run.tsv" ] || { echo "patches_gpu.sh: $out/run.tsv not found: not made by \`patches_gpu.sh prepare\`" >&2; exit 2; }
out=$(cd "$out" && pwd)
rm -rf "$out/ran"
mkdir -p "$out/ran"
same=0 fixed=0 failed=0
while IFS=$'\t' read -r name trace program args; do
  log=$out/ran/$name.log
  rc=0
  # shellcheck disable=SC2086 # ARGS are words
  analyze "$repo/$(dirname "$trace")/bin" --source-dir "$out/samples" "${lib_args[@]}" \
    --verify --prebuilt "$out/pre/$name" --run "{out} $args" --keep "$out/ran/$name" \
    "$repo/$trace" > "$log" 2>&1 || rc=$?
  patched=$(sed -n 's/.* patched with \(.*\)$/\1/p' "$log" | head -1)
  if [ $rc -eq 0 ] && [ -n "$patched" ] && grep -q 'output: identical' "$log"; then
    echo "same output                $trace as $program ($patched)"
    same=$((same + 1))
  elif [ $rc -eq 1 ] && [ -n "$patched" ] && grep -q 'exit codes 1 and 0' "$log" \
       && grep -qx 'reference: MISMATCH' "$out/ran/$name/before.out"; then
    echo "a wrong result made right  $trace as $program ($patched)"
    fixed=$((fixed + 1))
  else
    echo "FAILED                     $trace as $program (exit code $rc): $(grep -v '^$' "$log" | tail -1); see $log"
    failed=$((failed + 1))
  fi
done < "$out/run.tsv"
echo "$((same + fixed + failed)) patches: $same same output, $fixed a wrong result made right, $failed failed; no patch: $(grep -c '^none' "$out/list.tsv" || true), not samples: $(grep -c '^other' "$out/list.tsv" || true)"
[ $failed -eq 0 ]

#!/usr/bin/env bash
# The coherence check on NPB (the University of Houston OpenACC port of NPB
# 3.3, C): copies SP, BT, FT, LU (LU-HP) and MG out of a checkout of the
# port (its sources are never part of this repository and the checkout is
# never written to), builds them with GCC for one class as bench/npb.sh
# does, and runs each bare and under `accprof run --check coherence`:
# compares their output (but the lines that carry times and dates) and
# verification, counts the C1, C2 and C3 findings of `accprof analyze
# --json` and prints the check's exit note (the host ranges it watched).
# Then SP once more with its `#pragma acc update host(u)` before verify()
# removed (a sed on the copy): a stale read of u is wanted there (C1 naming
# u), and its verification fails on a GPU.
#
# Usage: bench/npb_coherence.sh --npb DIR [--class S|W|A] [--accprof PATH]
#                               [--out DIR] [--offload yes|no] [--build DIR]
#   --npb      the port: the directory holding SP/, BT/, FT/, LU/ and MG/
#              (github.com/uhhpctools/openacc-npb)
#   --class    problem class (default W)
#   --accprof  the accprof binary (default target/release/accprof;
#              libaccprof.so beside it)
#   --out      results (default npb-coherence): PROG.bare.txt, .bare.err, .checked.txt,
#              .checked.err, .trace, .json, .analyze.txt, results.tsv
#   --offload  yes: -foffload=nvptx-none (default), no: host code only
#   --build    where the copies are built (default a temporary directory)
#   --only build   build into --build and stop (on a machine with GCC's
#              nvptx offload compiler); --only run: run what an earlier
#              --only build left in --build (on the GPU machine, which has
#              no compiler)
# Prints one line per program: verification bare/checked, same output,
# C1 C2 C3, the note's watched ranges; flags CHANGED (output or exit status
# differ), FALSE-POSITIVE? (a C1/C2 on an unmodified program), MISSED (no C1
# naming u on SP without its update). Exit status 1 when any line is
# flagged, 2 on bad arguments.
# On the GPU machine: bench/npb_coherence.sh --npb NPB --class W --out $OUT/npbcoh
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
npb= class=W acc="$root/target/release/accprof" out=npb-coherence offload=yes build= only=
while [ $# -gt 0 ]; do
  case "$1" in
    --npb) npb=$2; shift 2 ;;
    --class) class=$2; shift 2 ;;
    --accprof) acc=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --offload) offload=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "npb_coherence.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $only in ''|build|run) ;; *) echo "npb_coherence.sh: --only '$only' is not build or run" >&2; exit 2 ;; esac
[ -z "$only" ] || [ -n "$build" ] || { echo "npb_coherence.sh: --only $only needs --build DIR" >&2; exit 2; }
[ "$only" = run ] && npb=$build
for d in SP BT FT LU MG; do
  [ "$only" = run ] && break
  [ -n "$npb" ] && [ -d "$npb/$d" ] \
    || { echo "npb_coherence.sh: --npb '$npb' is not a checkout of the port (no $d/ in it)" >&2; exit 2; }
done
case $class in S|W|A|B|C) ;; *) echo "npb_coherence.sh: --class '$class' is not one of S W A B C" >&2; exit 2 ;; esac
case $offload in
  yes) offflags="-foffload=nvptx-none -foffload-options=-lm" ;;
  no) offflags="-foffload=disable" ;;
  *) echo "npb_coherence.sh: --offload '$offload' is not yes or no" >&2; exit 2 ;;
esac
[ "$only" = build ] || [ -x "$acc" ] || { echo "npb_coherence.sh: accprof binary '$acc' not found" >&2; exit 2; }
[ "$only" = build ] || acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")
mkdir -p "$out" || { echo "npb_coherence.sh: cannot create '$out'" >&2; exit 2; }
out=$(cd "$out" && pwd)
npb=$(cd "$npb" && pwd)
if [ -z "$build" ]; then
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
else
  build=$(realpath -m "$build")
  [ "$only" = run ] || case "$build/" in "$npb"/*) echo "npb_coherence.sh: --build '$build' is inside --npb '$npb'" >&2; exit 2 ;; esac
  mkdir -p "$build" || { echo "npb_coherence.sh: cannot create '$build'" >&2; exit 2; }
fi
cc=gcc-12
command -v "$cc" > /dev/null || cc=gcc
flags="-fopenacc -O2 -g -no-pie $offflags"

# shellcheck source=bench/npb_port.sh
. "$root/bench/npb_port.sh"

# build NAME DIR SUBDIR [SED]: copies DIR of the port to $build/NAME, applies
# SED to SUBDIR's sources, builds into $build/NAME/bin.
build_one() {
  local name=$1 dir=$2 sub=$3 sed=${4:-}
  rm -rf "${build:?}/$name"
  cp -R "$npb/$dir" "$build/$name"
  mkdir -p "$build/$name/bin"
  npb_make_def "$build/$name" "$cc" "$flags" "$build/$name/bin"
  if [ -n "$sed" ]; then
    sed -i "$sed" "$build/$name/$sub"/*.c
  fi
  echo "== building $name class $class"
  if ! make -C "$build/$name/$sub" CLASS="$class" > "$build/$name.build.log" 2>&1; then
    echo "npb_coherence.sh: building $name failed (log $build/$name.build.log):" >&2
    tail -20 "$build/$name.build.log" >&2
    return 1
  fi
}

# name  port dir  subdir  binary
# (LU and MG fail bare with GCC 12 on an H200: libgomp refuses to launch
# loops whose num_workers x vector_length clauses need more registers than
# a block has.)
progs="sp SP SP/SP sp
bt BT BT/BT bt
ft FT FT/FT ft
lu LU LU/LU-HP lu
mg MG MG/MG mg
sp_noupdate SP SP/SP sp"
while read -r name dir sub bin; do
  sed=
  [ "$name" = sp_noupdate ] && sed='/^[[:space:]]*#pragma acc update host(u)[[:space:]]*$/d'
  [ "$only" = run ] || build_one "$name" "$dir" "${sub#*/}" "$sed" || exit 1
  x="$build/$name/bin/$bin.$class.x"
  [ -x "$x" ] || { echo "npb_coherence.sh: $x was not built" >&2; exit 1; }
  if [ "$name" = sp_noupdate ] && grep -q '#pragma acc update host(u)' "$build/$name/${sub#*/}/sp.c"; then
    echo "npb_coherence.sh: the sed left sp.c's update host(u) in place" >&2; exit 1
  fi
done <<< "$progs"
[ "$only" != build ] || { echo "built into $build"; exit 0; }

# shellcheck source=bench/stats.sh
. "$root/bench/stats.sh"
# SP and BT keep their arrays on the stack.
ulimit -s unlimited 2> /dev/null || ulimit -s "$(ulimit -H -s)"
verified() { grep -qE 'Verification +=  *SUCCESSFUL' "$1" && echo SUCCESSFUL || echo FAILED; }
# The lines of an NPB report that do not change from run to run.
stable() { grep -viE 'seconds|mop/s|compile date|mops|timer|time step' "$1"; }
printf 'program\tbare\tchecked\tbare_rc\tchecked_rc\tsame_output\tC1\tC2\tC3\twatched\tnote\n' > "$out/results.tsv"
bad=0
while read -r name dir sub bin; do
  x="$build/$name/bin/$bin.$class.x" base="$out/$name.$class"
  brc=0 crc=0
  (cd "$build" && timeout -k 5 600 "$x" < /dev/null > "$base.bare.txt" 2> "$base.bare.err") || brc=$?
  (cd "$build" && timeout -k 5 900 "$acc" run --check coherence --no-summary --force \
     --output "$base.trace" -- "$x" < /dev/null > "$base.checked.txt" 2> "$base.checked.err") || crc=$?
  same=no
  diff -q <(stable "$base.bare.txt") <(stable "$base.checked.txt") > /dev/null && same=yes
  c1='?' c2='?' c3='?'
  if "$acc" analyze --json --symbols "$build/$name/bin" --source-dir "$build/$name/${sub#*/}" \
       "$base.trace" > "$base.json" 2> "$base.analyze.err"; then
    c1=$(findings_count "$base.json" C1) c2=$(findings_count "$base.json" C2) c3=$(findings_count "$base.json" C3)
    "$acc" analyze --symbols "$build/$name/bin" --source-dir "$build/$name/${sub#*/}" \
      "$base.trace" > "$base.analyze.txt" 2>&1
  fi
  note=$(grep -h 'coherence check' "$base.checked.err" | head -1 | cut -c1-600)
  watched=$(printf '%s' "$note" | grep -oE 'watched [0-9]+ host ranges \([^)]*\)|watched nothing|does not apply' || echo '-')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name.$class" "$(verified "$base.bare.txt")" \
    "$(verified "$base.checked.txt")" "$brc" "$crc" "$same" "$c1" "$c2" "$c3" "$watched" "$note" >> "$out/results.tsv"
  flag=
  if [ "$name" = sp_noupdate ]; then
    # Wanted: C1 naming u (the GPU run's verification fails; the host's passes).
    if ! findings_titles "$base.json" C1 | grep -qE 'stale host read of u( |$)'; then flag=" MISSED"; fi
  else
    [ "$brc" = "$crc" ] && [ "$same" = yes ] || flag=" CHANGED"
    [ "$c1" = 0 ] && [ "$c2" = 0 ] || flag="$flag FALSE-POSITIVE?"
  fi
  [ -z "$flag" ] || bad=1
  echo "$name.$class: verification $(verified "$base.bare.txt")/$(verified "$base.checked.txt") rc $brc/$crc output $same C1 $c1 C2 $c2 C3 $c3; $watched$flag"
  [ "$name" != sp_noupdate ] || findings_titles "$base.json" C1 | sed 's/^/  C1: /'
done <<< "$progs"
echo "(results: $out/results.tsv; the exit notes in full: $out/*.checked.err)"
exit $bad

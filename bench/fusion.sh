#!/usr/bin/env bash
# Claimed against measured for R1's structural advice on a GPU:
#   triple  samples/fuse_triple.c against itself fused by R1's own patch
#   jacobi  the Jacobi copy-back (samples/jacobi_copy.c) against the same
#           program built with -DSWAP (the pointers swapped, no copy-back)
#   sp, bt  with --npb: NPB SP and BT (the University of Houston OpenACC
#           port; copied out of the checkout, never into this repository)
#           against the same with R1's provable fusions applied (R1's patch
#           alone)
# Where the patches come from: the build records each original on the build
# machine, where the offload build falls back to the host (no GPU there).
# Without driver timings R1 still judges the sources and gives its patch
# for the constructs one host loop repeats. One thing only a GPU recording
# gives: the kernels' registers, with which R1 leaves out a fusion whose
# kernel may not launch (NPB BT's compute_rhs in blocks of 16 x 32
# threads). For NPB, record the original on the GPU (`accprof run --
# B/NAME/orig/bin/NAME.W.x`) and build again with --gpu-trace NAME=TRACE:
# the patch then comes from that recording. It is the R1 finding's own
# patch (`accprof analyze --json`, proposal.patch), not the other
# findings'.
# Rounds interleave bare original, bare fixed and a recording of the
# original; the claim is the median over the recordings of R1's saving,
# the measured saving the difference of the bare medians.
# Times: the program's own timer where it prints one (NPB's "Time in
# seconds", which leaves out start-up and verification), else the
# process's wall time (the samples print none: their times carry the CUDA
# start-up, ~100 ms, on both sides alike). The table says which.
#
# Usage: bench/fusion.sh --accprof BIN [--rounds N] [--out DIR] [--cc CMD]
#                        [--npb DIR] [--class S|W|A|B|C]
#                        [--only build|run --build DIR] [--gpu-trace NAME=TRACE]
#   BIN     the accprof binary (libaccprof.so beside it); N rounds
#           (default 7); --out keeps traces, outputs and raw timings there;
#           --cc the compiler command (default: gcc -g -O2 -fopenacc
#           -foffload=nvptx-none -foffload-options=-lm); --npb the port's
#           checkout (the directory holding SP/ and BT/) adds the sp and bt
#           cases, built for --class (default W)
#   --only build  build the originals and the fixed programs into --build
#           and stop (on a machine with GCC's nvptx offload compiler)
#   --only run    run what an earlier --only build left in --build (on the
#           GPU machine, which has no compiler)
#   --gpu-trace NAME=TRACE  (sp or bt, repeatable) R1's patch for NAME from
#           TRACE, a GPU recording of the original that an earlier build
#           into the same --build made (that original is kept)
# Prints per case: claimed, measured, claimed/measured, the timer used and
# each side's spread; checks that each fixed program prints what the
# original prints (NPB: but its times) and that SP and BT verify on both
# sides (exit status 1 otherwise, 2 on bad arguments).
# Here:    bench/fusion.sh --only build --build B --accprof target/release/accprof --npb NPB
# On GPU:  bench/fusion.sh --only run --build B --accprof target/release/accprof --out $OUT/fusion
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
acc= rounds=7 out= cc="gcc -g -O2 -fopenacc -foffload=nvptx-none -foffload-options=-lm"
npb= class=W only= build=
declare -A gpu_trace=()
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cc) cc=$2; shift 2 ;;
    --npb) npb=$2; shift 2 ;;
    --class) class=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --gpu-trace)
      case $2 in
        sp=?*|bt=?*) [ -f "${2#*=}" ] || { echo "fusion.sh: --gpu-trace: '${2#*=}' not found" >&2; exit 2; }
                     gpu_trace[${2%%=*}]=$(cd "$(dirname "${2#*=}")" && pwd)/$(basename "${2#*=}") ;;
        *) echo "fusion.sh: --gpu-trace takes sp=TRACE or bt=TRACE, not '$2'" >&2; exit 2 ;;
      esac
      shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "fusion.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $only in ''|build|run) ;; *) echo "fusion.sh: --only '$only' is not build or run" >&2; exit 2 ;; esac
[ -z "$only" ] || [ -n "$build" ] || { echo "fusion.sh: --only $only needs --build DIR" >&2; exit 2; }
[ -x "$acc" ] || { echo "fusion.sh: accprof binary '$acc' not found" >&2; exit 2; }
acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")
case $rounds in *[!0-9]*|''|0) echo "fusion.sh: --rounds must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
case $class in S|W|A|B|C) ;; *) echo "fusion.sh: --class '$class' is not one of S W A B C" >&2; exit 2 ;; esac
if [ -n "$npb" ] && [ "$only" != run ]; then
  for d in SP BT; do
    [ -d "$npb/$d/$d" ] || { echo "fusion.sh: --npb '$npb' is not a checkout of the port (no $d/$d/ in it)" >&2; exit 2; }
  done
  npb=$(cd "$npb" && pwd)
fi
tmp=()
trap 'rm -rf "${tmp[@]}"' EXIT
if [ -z "$build" ]; then
  build=$(mktemp -d); tmp+=("$build")
else
  mkdir -p "$build" || { echo "fusion.sh: cannot create '$build'" >&2; exit 2; }
  build=$(cd "$build" && pwd)
  [ -z "$npb" ] || case "$build/" in "$npb"/*) echo "fusion.sh: --build '$build' is inside --npb '$npb'" >&2; exit 2 ;; esac
fi
if [ "$only" = run ] && [ ! -f "$build/cases" ]; then
  echo "fusion.sh: '$build' holds no build (run --only build --build '$build' first)" >&2; exit 2
fi
samples=$root/samples
. "$root/bench/stats.sh"
# shellcheck source=bench/npb_port.sh
. "$root/bench/npb_port.sh"

# The R1 finding's own patch in `accprof analyze --json` on standard input.
r1_patch() {
  python3 -c 'import json, sys
f = [x for x in json.load(sys.stdin).get("findings", []) if x.get("rule") == "R1"]
p = [x["proposal"].get("patch") or "" for x in f]
sys.stdout.write("".join(p))'
}

# build_npb NAME DIR: original NAME (sp, bt) and NAME with R1's patch,
# class $class, in $build/NAME; DIR is the port's directory (SP, BT).
build_npb() {
  local name=$1 dir=$2 d=$build/$1 v keep=
  # With a GPU recording of the original, the original it recorded stays
  # (its lines are read from that very binary); only the fused is made.
  [ -n "${gpu_trace[$name]:-}" ] && [ -x "$d/orig/bin/$name.$class.x" ] && keep=1
  if [ -n "$keep" ]; then rm -rf "$d/fused"; else rm -rf "$d"; fi
  mkdir -p "$d"
  for v in orig fused; do
    [ -z "$keep" ] || [ $v = fused ] || continue
    cp -R "$npb/$dir" "$d/$v"
    mkdir -p "$d/$v/bin"
    npb_make_def "$d/$v" "${cc%% *}" "${cc#* } -no-pie" "$d/$v/bin"
  done
  echo "== building $dir class $class"
  [ -n "$keep" ] || make -C "$d/orig/$dir" CLASS="$class" > "$d/orig.build.log" 2>&1 \
    || { echo "fusion.sh: building $dir failed (log $d/orig.build.log)" >&2; tail -20 "$d/orig.build.log" >&2; exit 1; }
  # R1's patch: from the GPU recording given, else from a recording here
  # (host fallback).
  local from=${gpu_trace[$name]:-}
  if [ -z "$from" ]; then
    from=$d/host.trace
    (ulimit -s unlimited 2> /dev/null || true
     cd "$d" && "$acc" run --force --no-summary --output "$from" -- "$d/orig/bin/$name.$class.x" > "$d/host.txt" 2>&1) \
      || { echo "fusion.sh: recording $dir on the host failed (output $d/host.txt)" >&2; exit 1; }
  fi
  (cd "$d" && "$acc" analyze --json --symbols "$d/orig/bin" --source-dir "$d/orig/$dir" "$from" 2> /dev/null | r1_patch > "$d/r1.diff")
  [ -s "$d/r1.diff" ] || { echo "fusion.sh: R1 gave no patch for $dir (see: $acc analyze $from)" >&2; exit 1; }
  # Paths in the diff are a/orig/DIR/FILE (relative to $d).
  (cd "$d/fused" && patch -s -p2 < "$d/r1.diff") || { echo "fusion.sh: R1's patch does not apply to $dir" >&2; exit 1; }
  make -C "$d/fused/$dir" CLASS="$class" > "$d/fused.build.log" 2>&1 \
    || { echo "fusion.sh: building fused $dir failed (log $d/fused.build.log)" >&2; tail -20 "$d/fused.build.log" >&2; exit 1; }
  echo "   R1's patch: $(grep -c '^@@' "$d/r1.diff") hunks, $(grep -c '^-[^-]' "$d/r1.diff") lines out, $(grep -c '^+[^+]' "$d/r1.diff") in ($d/r1.diff)"
}

if [ "$only" != run ]; then
  # The triple: original, and fused with R1's patch from a recording.
  mkdir -p "$build/triple" "$build/fused" "$build/jacobi"
  cp "$samples/fuse_triple.c" "$build/triple/"
  $cc "$build/triple/fuse_triple.c" -o "$build/triple/prog"
  "$acc" run --force --no-summary --output "$build/triple/first.trace" -- "$build/triple/prog" 4096 2000 > /dev/null 2>&1
  cp "$samples/fuse_triple.c" "$build/fused/"
  (cd "$build/triple" && "$acc" analyze --json --source-dir "$build/triple" "$build/triple/first.trace" 2> /dev/null | r1_patch > "$build/fused/fuse.diff")
  [ -s "$build/fused/fuse.diff" ] || { echo "fusion.sh: R1 gave no patch for fuse_triple.c" >&2; exit 1; }
  patch -s "$build/fused/fuse_triple.c" < "$build/fused/fuse.diff"
  $cc "$build/fused/fuse_triple.c" -o "$build/fused/prog"
  # The Jacobi copy-back, and the swap.
  cp "$samples/jacobi_copy.c" "$build/jacobi/"
  $cc "$build/jacobi/jacobi_copy.c" -o "$build/jacobi/prog"
  $cc -DSWAP "$build/jacobi/jacobi_copy.c" -o "$build/jacobi/swap"
  # name|timer|source dir|original command|fixed command
  {
    echo "triple|wall|triple|triple/prog 4096 2000|fused/prog 4096 2000"
    echo "jacobi|wall|jacobi|jacobi/prog 1024 1000|jacobi/swap 1024 1000"
  } > "$build/cases"
  if [ -n "$npb" ]; then
    build_npb sp SP
    echo "sp.$class|npb|sp/orig/SP|sp/orig/bin/sp.$class.x|sp/fused/bin/sp.$class.x" >> "$build/cases"
    build_npb bt BT
    echo "bt.$class|npb|bt/orig/BT|bt/orig/bin/bt.$class.x|bt/fused/bin/bt.$class.x" >> "$build/cases"
  fi
  if [ "$only" = build ]; then echo "built into $build"; exit 0; fi
fi

if [ -z "$out" ]; then out=$(mktemp -d); tmp+=("$out"); fi
mkdir -p "$out" || { echo "fusion.sh: cannot create '$out'" >&2; exit 2; }
out=$(cd "$out" && pwd)
# SP and BT keep their arrays on the stack.
ulimit -s unlimited 2> /dev/null || ulimit -s "$(ulimit -H -s)"

# R1's saving in a trace, in us.
r1_us() {
  "$acc" analyze --json --source-dir "$2" "$1" 2> /dev/null |
    python3 -c 'import json, sys
f = [x for x in json.load(sys.stdin).get("findings", []) if x.get("rule") == "R1"]
print(round(sum(x.get("saving_ns") or 0 for x in f) / 1000))'
}
# run_us TIMER OUTFILE CMD...: runs CMD (in $build), its output in OUTFILE;
# prints its time in us by TIMER (npb: "Time in seconds"; wall).
run_us() {
  local timer=$1 o=$2 t0 t1; shift 2
  t0=$(date +%s%N)
  (cd "$build" && "$@") > "$o" 2>&1 || true
  t1=$(date +%s%N)
  if [ "$timer" = npb ]; then
    local t
    t=$(own_time_us < "$o")
    echo "${t:-NaN}"
  else
    echo $(( (t1 - t0) / 1000 ))
  fi
}
# The lines of a program's output that do not change from run to run.
stable() { grep -viE 'seconds|mop/s|compile date|mops|timer|time step' "$1" || true; }
verified() { grep -qE 'Verification +=  *SUCCESSFUL' "$1"; }

printf '%-14s %11s %11s %7s  %-6s %s\n' "case" "claimed" "measured" "ratio" "timer" "spread: original, fixed (bare, min-max)"
bad=0
while IFS='|' read -r name timer srcdir orig fixed; do
  read -r -a o <<< "$orig"; read -r -a f <<< "$fixed"
  o[0]=$build/${o[0]} f[0]=$build/${f[0]}
  [ -x "${o[0]}" ] && [ -x "${f[0]}" ] || { echo "fusion.sh: $name: ${o[0]} or ${f[0]} was not built" >&2; exit 1; }
  : > "$out/$name.raw"
  for r in $(seq "$rounds"); do
    echo "bad $(run_us "$timer" "$out/$name.bad.$r.txt" "${o[@]}")" >> "$out/$name.raw"
    echo "fixed $(run_us "$timer" "$out/$name.fixed.$r.txt" "${f[@]}")" >> "$out/$name.raw"
    (cd "$build" && "$acc" run --force --no-summary --output "$out/$name-$r.trace" -- "${o[@]}") > "$out/$name.rec.$r.txt" 2>&1 || true
    echo "claim $(r1_us "$out/$name-$r.trace" "$build/$srcdir")" >> "$out/$name.raw"
    if ! diff -q <(stable "$out/$name.bad.$r.txt") <(stable "$out/$name.fixed.$r.txt") > /dev/null; then
      echo "fusion.sh: $name round $r: the fixed program does not print what the original prints ($out/$name.bad.$r.txt, $out/$name.fixed.$r.txt)" >&2; bad=1
    fi
    if [ "$timer" = npb ]; then
      for s in bad fixed; do
        verified "$out/$name.$s.$r.txt" || { echo "fusion.sh: $name round $r: $s does not print Verification = SUCCESSFUL ($out/$name.$s.$r.txt)" >&2; bad=1; }
      done
    fi
  done
  m() { awk -v k="$1" '$1 == k && $2 != "NaN" {print $2}' "$out/$name.raw" | median; }
  range() { awk -v k="$1" '$1 == k && $2 != "NaN" {v = $2 / 1000; if (n++ == 0 || v < lo) lo = v; if (v > hi) hi = v} END {printf "%.0f-%.0f ms", lo, hi}' "$out/$name.raw"; }
  awk -v c="$name" -v t="$timer" -v cl="$(m claim)" -v b="$(m bad)" -v f="$(m fixed)" -v sb="$(range bad)" -v sf="$(range fixed)" 'BEGIN {
    me = (b - f) / 1000; cl /= 1000
    printf "%-14s %8.1f ms %8.1f ms %7.2f  %-6s %s, %s\n", c, cl, me, (me > 0 ? cl / me : 0), t, sb, sf }'
  [ "$timer" != npb ] || echo "  $name: verification $(verified "$out/$name.bad.1.txt" && echo SUCCESSFUL || echo FAILED) original, $(verified "$out/$name.fixed.1.txt" && echo SUCCESSFUL || echo FAILED) fused"
done < "$build/cases"
echo "(traces, outputs and raw times: $out)"
exit $bad

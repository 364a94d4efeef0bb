#!/usr/bin/env bash
# Claimed against measured for R1's structural advice on a GPU: the one-line
# triple (samples/fuse_triple.c) against itself fused by R1's own patch
# (`accprof analyze --patch`), and the Jacobi copy-back
# (samples/jacobi_copy.c) against the same program built with -DSWAP (the
# pointers swapped, no copy-back construct). Rounds interleave bare
# original, bare fixed and a recording of the original; the claim is the
# median over the recordings of R1's saving, the measured saving the
# difference of the bare medians.
#
# Usage: bench/fusion.sh --accprof BIN [--rounds N] [--out DIR] [--cc "gcc -O2 ..."]
#   BIN   the accprof binary; N rounds (default 7); --out keeps sources,
#         binaries, traces and raw timings there; --cc the compiler command
#         (default: gcc -g -O2 -fopenacc -foffload=nvptx-none -foffload-options=-lm)
# Prints per case: claimed, measured, claimed/measured, each side's spread,
# and checks that each fixed program prints what the original prints.
set -euo pipefail
acc= rounds=7 out= cc="gcc -g -O2 -fopenacc -foffload=nvptx-none -foffload-options=-lm"
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --cc) cc=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "fusion.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$acc" ] || { echo "fusion.sh: accprof binary '$acc' not found" >&2; exit 2; }
case $rounds in *[!0-9]*|''|0) echo "fusion.sh: --rounds must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out" || { echo "fusion.sh: cannot create '$out'" >&2; exit 2; }
out=$(cd "$out" && pwd)
samples=$(cd "$(dirname "$0")/../samples" && pwd)
. "$(dirname "$0")/stats.sh"

# R1's saving in a trace, in us.
r1_us() {
  "$acc" analyze --json "$1" 2> /dev/null |
    python3 -c 'import json, sys
f = [x for x in json.load(sys.stdin).get("findings", []) if x.get("rule") == "R1"]
print(round(sum(x.get("saving_ns") or 0 for x in f) / 1000))'
}

# The triple: original, and fused with R1's patch from a recording.
mkdir -p "$out/triple" "$out/fused"
cp "$samples/fuse_triple.c" "$out/triple/"
$cc "$out/triple/fuse_triple.c" -o "$out/triple/prog"
"$acc" run --force --output "$out/triple/first.trace" -- "$out/triple/prog" 4096 2000 > /dev/null
cp "$samples/fuse_triple.c" "$out/fused/"
"$acc" analyze --patch "$out/triple/first.trace" > "$out/fused/fuse.diff"
patch -s "$out/fused/fuse_triple.c" < "$out/fused/fuse.diff"
$cc "$out/fused/fuse_triple.c" -o "$out/fused/prog"
# The Jacobi copy-back, and the swap.
mkdir -p "$out/jacobi"
cp "$samples/jacobi_copy.c" "$out/jacobi/"
$cc "$out/jacobi/jacobi_copy.c" -o "$out/jacobi/prog"
$cc -DSWAP "$out/jacobi/jacobi_copy.c" -o "$out/jacobi/swap"

cases="$out/triple/prog 4096 2000|$out/fused/prog 4096 2000;$out/jacobi/prog 1024 1000|$out/jacobi/swap 1024 1000"
printf '%-28s %11s %11s %7s  %s\n' "case" "claimed" "measured" "ratio" "spread: original, fixed (bare, min-max)"
IFS=';' read -r -a list <<< "$cases"
i=0
for c in "${list[@]}"; do
  i=$((i + 1))
  read -r -a bad <<< "${c%%|*}"; read -r -a fixed <<< "${c#*|}"
  if [ "$("${bad[@]}")" != "$("${fixed[@]}")" ]; then
    echo "fusion.sh: ${fixed[*]} does not print what ${bad[*]} prints" >&2; exit 1
  fi
  : > "$out/case$i.raw"
  for r in $(seq "$rounds"); do
    echo "bad $(wall_us "${bad[@]}")" >> "$out/case$i.raw"
    echo "fixed $(wall_us "${fixed[@]}")" >> "$out/case$i.raw"
    "$acc" run --force --output "$out/case$i-$r.trace" -- "${bad[@]}" > /dev/null 2>&1 || true
    echo "claim $(r1_us "$out/case$i-$r.trace")" >> "$out/case$i.raw"
  done
  m() { awk -v k="$1" '$1 == k {print $2}' "$out/case$i.raw" | median; }
  range() { awk -v k="$1" '$1 == k {v = $2 / 1000; if (n++ == 0 || v < lo) lo = v; if (v > hi) hi = v} END {printf "%.0f-%.0f ms", lo, hi}' "$out/case$i.raw"; }
  name=$(basename "$(dirname "${bad[0]}")")
  awk -v c="$name" -v cl="$(m claim)" -v b="$(m bad)" -v f="$(m fixed)" -v sb="$(range bad)" -v sf="$(range fixed)" 'BEGIN {
    me = (b - f) / 1000; cl /= 1000
    printf "%-28s %8.1f ms %8.1f ms %7.2f  %s, %s\n", c, cl, me, (me > 0 ? cl / me : 0), sb, sf }'
done

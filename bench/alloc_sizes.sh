#!/usr/bin/env bash
# Whether a smaller device block is a cheaper one: bench/alloc_sizes.c
# times the CUDA driver's allocation and free calls by size (23 B to
# 8 MiB) and one compute construct's calls as GCC's libgomp makes them,
# bare and under `accprof run` (the collector's CUPTI callbacks on every
# call), ROUNDS rounds each, interleaved. Run it on the GPU machine: it
# builds the probe with plain gcc (it loads libcuda itself).
#
# Usage: bench/alloc_sizes.sh [--accprof BIN] [--rounds N] [--pairs P]
set -euo pipefail
acc= rounds=2 pairs=2000
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "alloc_sizes.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $rounds in *[!0-9]*|''|0) echo "alloc_sizes.sh: --rounds must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
[ -z "$acc" ] || [ -x "$acc" ] || { echo "alloc_sizes.sh: accprof binary '$acc' not found" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -o "$work/alloc_sizes" "$(dirname "$0")/alloc_sizes.c" -ldl
for r in $(seq "$rounds"); do
  echo "== round $r: bare"
  "$work/alloc_sizes" "$pairs"
  if [ -n "$acc" ]; then
    echo "== round $r: under accprof run"
    "$acc" run --force --output "$work/r$r.trace" -- "$work/alloc_sizes" "$pairs" 2>/dev/null
  fi
done

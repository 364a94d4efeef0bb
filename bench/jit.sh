#!/usr/bin/env bash
# Start-up with and without the CUDA driver's JIT cache: for each program,
# one recording with CUDA_CACHE_DISABLE=1 (the driver compiles the PTX that
# GCC's nvptx back end emits, as on a new machine or after a rebuild) and
# one with the cache warm (the program run once before). Prints per run the
# start-up, the code loading, whether `accprof analyze` says the run
# compiled its code (paid_jit) and whether it reports R2; then `accprof
# diff` of the two, which must say that one compiled and the other did not.
#
# Usage: bench/jit.sh --accprof BIN [--out DIR] [--programs "prog args;..."]
#   BIN   the accprof binary; --out keeps the traces there
#   programs  default: the samples small_kernels and laplace_bad_f90 (built
#             with `make -C samples OFFLOAD=yes` in samples/build)
# Expected on a GPU: cold runs paid_jit true with R2, code loading tens of ms
# or more; warm runs paid_jit false, no R2, code loading a few ms.
set -euo pipefail
acc= out= programs="samples/build/small_kernels 16 100;samples/build/laplace_bad_f90 256 20"
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --programs) programs=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "jit.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$acc" ] || { echo "jit.sh: accprof binary '$acc' not found" >&2; exit 2; }
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out" || { echo "jit.sh: cannot create '$out'" >&2; exit 2; }
export SAMPLE_SKIP_REFERENCE=1

facts() {
  "$acc" analyze --json "$1" 2> /dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
rows = d["ledger"]["rows"]
r2 = [f for f in d["findings"] if f["rule"] == "R2"]
load = next((f["value"] for f in (r2[0]["evidence"]["fields"] if r2 else []) if f["name"] == "code_loading_time"), None)
print("startup %7.1f ms  paid_jit %-5s  R2 %-3s  code loading %s  wall %7.1f ms" % (
    d["startup_ns"] / 1e6, d["paid_jit"], "yes" if r2 else "no",
    "%.1f ms" % (load / 1e6) if load is not None else "(below R2 threshold or warm)",
    d["wall_ns"] / 1e6))'
}

IFS=';' read -r -a list <<< "$programs"
i=0
for p in "${list[@]}"; do
  i=$((i + 1))
  read -r -a prog <<< "$p"
  [ -x "${prog[0]}" ] || { echo "jit.sh: program '${prog[0]}' not found" >&2; exit 2; }
  CUDA_CACHE_DISABLE=1 "$acc" run --force --no-summary --output "$out/cold$i.trace" -- "${prog[@]}" > /dev/null 2>&1 || true
  "${prog[@]}" > /dev/null 2>&1 || true
  "$acc" run --force --no-summary --output "$out/warm$i.trace" -- "${prog[@]}" > /dev/null 2>&1 || true
  echo "$p"
  echo "  cold (CUDA_CACHE_DISABLE=1): $(facts "$out/cold$i.trace")"
  echo "  warm:                        $(facts "$out/warm$i.trace")"
  "$acc" diff "$out/cold$i.trace" "$out/warm$i.trace" 2>&1 | grep -E "compiled its device code|without CUDA start-up|wall time" | sed 's/^/  diff: /'
done

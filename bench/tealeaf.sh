#!/usr/bin/env bash
# UK-MAC TeaLeaf_OpenACC built with GCC's OpenACC (gfortran, nvptx offload)
# and run on Benchmarks/tea_bm_2.in three ways: bare, under `accprof run`
# (CUPTI on) and under `accprof run --no-cupti`; then `accprof report` and
# `accprof analyze` of each trace. On an H200 with GCC 12 the program dies of
# SIGSEGV inside the CUDA driver at its first kernel launch (bare too): what
# to look for is that both traces keep the constructs up to the crash and
# end with the signal, the construct and (CUPTI on) the driver call it died
# in ("ending: the program died of signal 11 (SIGSEGV) ... in the CUDA driver
# call cuLaunchKernel, during the compute region ... at
# generate_chunk_kernel.f90:105").
#
# TeaLeaf's sources are never copied into this repository: the script copies
# them from a checkout into OUT/build.
#
# Usage: bench/tealeaf.sh --tealeaf DIR --out OUT [--accprof BIN]
#                         [--offload auto|yes|no] [--input FILE] [--timeout S]
#   DIR      a TeaLeaf_OpenACC checkout (its src/ and Benchmarks/)
#   BIN      the accprof binary (default: accprof on PATH)
#   --offload yes builds for NVIDIA GPUs (-foffload=nvptx-none), no for the
#            host only, auto (default) yes when a tiny program builds so
#   --input  the input deck (default: DIR/Benchmarks/tea_bm_2.in)
# Tools: mpif90 (Open MPI over gfortran 12: set OMPI_FC=gfortran-12 if the
# default gfortran is not 12), mpicc.
# Writes OUT/build (the build), OUT/{bare,cupti,no_cupti}/ (tea.in, stdout
# and stderr in run.log, the exit code in rc, the trace, report.txt,
# analyze.txt) and prints a line per run.
set -uo pipefail
tea= out= acc=accprof offload=auto input= timeout_s=600
while [ $# -gt 0 ]; do
  case "$1" in
    --tealeaf) tea=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --accprof) acc=$2; shift 2 ;;
    --offload) offload=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    *) echo "tealeaf.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$tea" ] && [ -f "$tea/src/Makefile" ] || { echo "tealeaf.sh: --tealeaf DIR must be a TeaLeaf_OpenACC checkout (DIR/src/Makefile)" >&2; exit 2; }
[ -n "$out" ] || { echo "tealeaf.sh: --out is needed" >&2; exit 2; }
input=${input:-$tea/Benchmarks/tea_bm_2.in}
[ -f "$input" ] || { echo "tealeaf.sh: input deck '$input' not found" >&2; exit 2; }
command -v "$acc" >/dev/null || [ -x "$acc" ] || { echo "tealeaf.sh: accprof binary '$acc' not found" >&2; exit 2; }
for t in mpif90 mpicc; do
  command -v $t >/dev/null || { echo "tealeaf.sh: $t not found (Open MPI)" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
input=$(cd "$(dirname "$input")" && pwd)/$(basename "$input")
case "$acc" in */*) acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc") ;; esac

case $offload in
  yes) foffload=-foffload=nvptx-none ;;
  no) foffload=-foffload=disable ;;
  auto)
    probe=$(mktemp -d)
    printf 'program p\n!$acc parallel\n!$acc end parallel\nend program p\n' > "$probe/p.f90"
    if mpif90 -fopenacc -foffload=nvptx-none "$probe/p.f90" -o "$probe/p" >/dev/null 2>&1; then
      foffload=-foffload=nvptx-none
    else
      foffload=-foffload=disable
    fi
    rm -rf "$probe" ;;
  *) echo "tealeaf.sh: --offload must be auto, yes or no" >&2; exit 2 ;;
esac

# The build: TeaLeaf's own Makefile, with GCC's OpenACC instead of its
# OpenMP flags, -g for the source lines, -fallow-argument-mismatch for its
# MPI calls (gfortran 10 on refuses them otherwise), -no-pie for GCC 12's
# offload table.
rm -rf "$out/build"
cp -r "$tea/src" "$out/build"
echo "== build ($foffload) in $out/build"
if ! make -C "$out/build" -j2 COMPILER=GNU MPI_COMPILER=mpif90 C_MPI_COMPILER=mpicc \
    OMP_GNU="-fopenacc $foffload" \
    FLAGS_GNU="-O2 -g -cpp -ffree-line-length-none -fallow-argument-mismatch" CFLAGS_GNU="-O2 -g" \
    LDFLAGS="-no-pie" > "$out/build.log" 2>&1; then
  tail -20 "$out/build.log" >&2
  echo "tealeaf.sh: the build failed (log: $out/build.log)" >&2
  exit 1
fi
exe=$out/build/tea_leaf

run() { # name command...
  local name=$1; shift
  local dir=$out/$name
  rm -rf "$dir"; mkdir -p "$dir"
  cp "$input" "$dir/tea.in"
  ( cd "$dir" && timeout -k 5 "$timeout_s" "$@" < /dev/null > run.log 2>&1; echo $? > rc )
  local rc; rc=$(cat "$dir/rc")
  local trace=$dir/tea.trace
  if [ -f "$trace" ]; then
    "$acc" report "$trace" > "$dir/report.txt" 2>&1
    "$acc" analyze "$trace" > "$dir/analyze.txt" 2>&1
    local ending; ending=$(grep -m1 'ending:' "$dir/analyze.txt" | sed 's/^ *//')
    printf '%-9s rc %-4s trace %8s bytes  %s\n' "$name" "$rc" "$(stat -c %s "$trace")" "${ending:-(no ending line)}"
  else
    printf '%-9s rc %-4s no trace\n' "$name" "$rc"
  fi
}
run bare "$exe"
run cupti "$acc" run --force --output tea.trace -- "$exe"
run no_cupti "$acc" run --no-cupti --force --output tea.trace -- "$exe"

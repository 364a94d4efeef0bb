#!/usr/bin/env bash
# Installs what building and testing accprof needs beyond Rust stable:
# GCC's OpenACC offload compiler for NVIDIA GPUs, g++, gfortran, Open MPI and
# tmux, which the timeline's smoke test drives (Debian/Ubuntu packages).
# Does nothing when they are already there.
set -euo pipefail
need=()
dpkg -s gcc-12-offload-nvptx >/dev/null 2>&1 || need+=(gcc-12-offload-nvptx)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v gfortran >/dev/null 2>&1 || need+=(gfortran)
command -v mpicc >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
command -v make >/dev/null 2>&1 || need+=(make)
# The test that loads the exported CSV files uses the first python3 with pandas.
python3 -c 'import pandas' >/dev/null 2>&1 || /usr/bin/python3 -c 'import pandas' >/dev/null 2>&1 || need+=(python3-pandas)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "setup: installing ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null

#!/usr/bin/env bash
# Puts this machine's Open MPI (Debian's 4.1 packages) into DIR so that MPI
# samples built here run on a machine without it (the GPU machine): the
# libraries the programs link, orterun (as mpirun) and orted, Open MPI's and
# PMIx's plugins and help files, and DIR/mpi-env.sh, to source there after
# .gpu/env.sh: it sets OPAL_PREFIX (Open MPI finds its plugins, help files
# and orted under it), the plugin path of PMIx, shared memory transports
# only (pml ob1, btl self,vader) and root runs with oversubscription.
#
# Usage: bench/bundle-mpi.sh DIR        (DIR: the .gpu bundle, usually)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bench/bundle-mpi.sh DIR" >&2; exit 2; }
dir=$1
arch=/usr/lib/x86_64-linux-gnu
[ -x /usr/bin/orterun ] && [ -d "$arch/openmpi/lib" ] || {
  echo "bundle-mpi.sh: no Open MPI here (scripts/setup.sh installs it)" >&2; exit 2; }
mkdir -p "$dir/lib" "$dir/ompi/bin" "$dir/ompi/share" "$dir/ompi/lib/x86_64-linux-gnu/openmpi" "$dir/pmix2/lib"
# OPAL_PREFIX replaces the /usr of every configured directory.
cp -a "$arch/openmpi/lib" "$dir/ompi/lib/x86_64-linux-gnu/openmpi/"
rm -rf "$dir/ompi/lib/x86_64-linux-gnu/openmpi/lib/pkgconfig"
cp -a /usr/share/openmpi "$dir/ompi/share/"
cp /usr/bin/orterun "$dir/ompi/bin/mpirun"
cp /usr/bin/orted "$dir/ompi/bin/orted"
cp -a "$arch/pmix2/lib/pmix" "$dir/pmix2/lib/"
# The libraries they load, but the C library's own (the other machine's
# are newer).
deps() {
  ldd "$@" 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so'
}
objs=(/usr/bin/orterun /usr/bin/orted "$arch"/openmpi/lib/lib*.so "$arch"/openmpi/lib/openmpi3/*.so "$arch"/pmix2/lib/pmix/*.so)
for f in $(deps "${objs[@]}") "$arch"/libmpi.so.40 "$arch"/libmpi_mpifh.so.40 "$arch"/libmpi_usempif08.so.40 "$arch"/libmpi_usempi_ignore_tkr.so.40; do
  [ -e "$f" ] && cp -L "$f" "$dir/lib/$(basename "$f")"
done
cat > "$dir/mpi-env.sh" <<'ENV'
# sourced after env.sh on the machine the bundle went to
_mpi="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export OPAL_PREFIX="$_mpi/ompi"
export PATH="$_mpi/ompi/bin:$PATH"
export LD_LIBRARY_PATH="$_mpi/lib:$_mpi/ompi/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH"
export PMIX_MCA_mca_base_component_path="$_mpi/pmix2/lib/pmix"
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ENV
du -sh "$dir/ompi" "$dir/lib" "$dir/pmix2"

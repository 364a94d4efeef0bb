#!/usr/bin/env bash
# The coherence check on the samples: each program bare, then under
# `accprof run --check coherence`, each under `timeout`; compares exit codes
# and stdout (but its `time:` lines) and counts the findings of rules C1, C2
# and C3 in `accprof analyze --json` of the checked run's trace. A program
# listed with an expectation (C1, C2, C3) is a defect on purpose: its
# finding is wanted; any other C1/C2 finding is a false positive unless shown
# by hand to be a real defect of the program. Prints one line per program
# and writes OUT/results.tsv (name, args, bare rc, checked rc, same stdout,
# C1, C2, C3, expected, the collector's exit note of the check) with the
# logs and traces in OUT/runs/.
#
# Usage: bench/coherence.sh --accprof BIN --samples DIR --out OUT
#                           [--list FILE] [--timeout S] [--mpi yes|no]
#   BIN   the accprof binary (libaccprof.so beside it)
#   DIR   samples built with `make -C samples OFFLOAD=yes`
#   FILE  programs, one per line: NAME EXPECT ARGS... (EXPECT: -, C1, C2 or
#         C3; NAME np=K runs under `mpirun -np K`); default: the list below
#   --mpi no leaves out the MPI programs (no mpirun)
# On the GPU machine: bench/coherence.sh --accprof .gpu/accprof --samples .gpu/samples --out $OUT/coh
set -euo pipefail
acc= samples= out= list= timeout_s=300 mpi=yes
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --list) list=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mpi) mpi=$2; shift 2 ;;
    *) echo "coherence.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$acc" ] || { echo "coherence.sh: accprof binary '$acc' not found" >&2; exit 2; }
[ -d "$samples" ] || { echo "coherence.sh: samples directory '$samples' not found" >&2; exit 2; }
[ -n "$out" ] || { echo "coherence.sh: --out is needed" >&2; exit 2; }
acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")
samples=$(cd "$samples" && pwd)
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
default_list() {
  cat <<'L'
heat2d_naive - 512 512 20
heat2d_data - 1024 1024 100 10
heat2d_collapse - 512 512 20
laplace_bad - 256 20
laplace_good - 512 100
laplace_bad_f90 - 256 20
laplace_good_f90 - 512 100
jacobi_f90 - 512 50
launch_storm - 5000 256
launch_shapes - 4096 20
async - 1048576 8 4 3
threads - 4 262144 50
threads - 2 65536 20
small_kernels - 24 200
caller_loop - 512 512 20
caller_files - 512 512 20
queue_files - 4096 200
caller_loop_f90 - 512 512 20
partial_region - 512 512 20
cond_update - 512 512 40 10
data_shapes - helper 1048576 10 4
data_shapes - table 1048576 10 4
data_shapes - update 1048576 10 4
data_shapes - clean 1048576 10 4
coherence_norm C1 256 256 20 5
coherence_norm_f90 C1 256 256 20 5 bad
coherence_norm_f90 - 256 256 20 5 fixed
coherence_vector C1 256 256 20 5 bad
coherence_vector - 256 256 20 5 fixed
coherence_globals C1 262144 20 bad
coherence_globals - 262144 20 fixed
coherence_enter C2 262144 20 5 bad
coherence_enter - 262144 20 5 fixed
coherence_declare C3 262144 20 5 bad
coherence_declare - 262144 20 5 fixed
coherence_api C1 262144 20 map bad
coherence_api - 262144 20 map fixed
coherence_api C1 262144 20 create bad
coherence_api - 262144 20 create fixed
coherence_api C1 262144 20 copyin bad
coherence_api - 262144 20 copyin fixed
coherence_module_f90 C1 262144 20 bad
coherence_module_f90 - 262144 20 fixed
coherence_vector_enter C1 262144 20 bad
coherence_vector_enter - 262144 20 fixed
lost_write C2 256 256 20 5 bad
lost_write - 256 256 20 5 fixed
unread_download C3 256 256 100 10 bad
unread_download - 256 256 100 10 fixed
shared_page C1 8000 20 bad
shared_page - 8000 20 fixed
own_handler - 256 256 20 5
coherence_threads C1 65536 20 5 1
coherence_threads - 65536 20 5 0
mpi_halo np=2 - 256 256 20
mpi_halo np=4 - 256 256 20
mpi_halo_whole np=2 - 256 256 20
mpi_halo_stale np=2 C1 512 512 20 bad
mpi_halo_stale np=2 - 512 512 20 fixed
mpi_slab_f90 np=2 - 32 32 16 5
L
}
if [ -n "$list" ]; then cat "$list"; else default_list; fi > "$out/list.txt"

count() { # json rule
  python3 -c 'import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception: print("?"); sys.exit()
fs=d.get("findings", d) if isinstance(d, dict) else d
print(sum(1 for f in fs if f.get("rule")==sys.argv[2]))' "$1" "$2"
}

printf 'name\targs\tbare_rc\tchecked_rc\tsame_stdout\tC1\tC2\tC3\texpected\tnote\n' > "$out/results.tsv"
n=0
while read -r name rest; do
  [ -n "$name" ] || continue
  np=
  case $rest in np=*) np=${rest%% *}; np=${np#np=}; rest=${rest#* } ;; esac
  expect=${rest%% *}; args=${rest#* }
  [ -x "$samples/$name" ] || { echo "-- $name: not built, skipped"; continue; }
  if [ -n "$np" ] && [ "$mpi" = no ]; then continue; fi
  n=$((n + 1))
  tag=$(printf '%02d_%s' "$n" "$name")
  log=$out/runs/$tag
  dir=$(mktemp -d) brc=0 crc=0
  launch=()
  [ -n "$np" ] && launch=(mpirun -np "$np")
  # shellcheck disable=SC2086
  (cd "$dir" && timeout -k 5 "$timeout_s" "${launch[@]}" "$samples/$name" $args < /dev/null > "$log.bare.out" 2> "$log.bare.err") || brc=$?
  trace="$log.r%r.trace"; [ -n "$np" ] || trace="$log.trace"
  # shellcheck disable=SC2086
  (cd "$dir" && timeout -k 5 "$timeout_s" "${launch[@]}" "$acc" run --check coherence --no-summary --force --output "$trace" -- "$samples/$name" $args < /dev/null > "$log.checked.out" 2> "$log.checked.err") || crc=$?
  rm -rf "$dir"
  same=no
  if diff -q <(grep -v '^time:' "$log.bare.out" | sort) <(grep -v '^time:' "$log.checked.out" | sort) > /dev/null; then same=yes; fi
  c1=0 c2=0 c3=0
  for t in "$log".trace "$log".r*.trace; do
    [ -f "$t" ] || continue
    if "$acc" analyze --json "$t" > "$t.json" 2> "$t.analyze.err"; then
      c1=$((c1 + $(count "$t.json" C1))) c2=$((c2 + $(count "$t.json" C2))) c3=$((c3 + $(count "$t.json" C3)))
    else
      c1="$c1?"
    fi
  done
  note=$(grep -h 'coherence check' "$log.checked.err" | head -4 | tr '\n' ' ' | cut -c1-600)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "${np:+np=$np }$args" "$brc" "$crc" "$same" "$c1" "$c2" "$c3" "$expect" "$note" >> "$out/results.tsv"
  flag=
  if [ "$brc" != "$crc" ] || [ $same = no ]; then flag=" CHANGED"; fi
  case $expect in
    -) if [ "$c1" != 0 ] || [ "$c2" != 0 ]; then flag="$flag FALSE-POSITIVE?"; fi ;;
    C1) [ "$c1" != 0 ] || flag="$flag MISSED" ;;
    C2) [ "$c2" != 0 ] || flag="$flag MISSED" ;;
    C3) [ "$c3" != 0 ] || flag="$flag MISSED" ;;
  esac
  echo "$name ${np:+np=$np }$args: rc $brc/$crc stdout $same C1 $c1 C2 $c2 C3 $c3 (want $expect)$flag"
done < "$out/list.txt"

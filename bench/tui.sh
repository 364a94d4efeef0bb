#!/usr/bin/env bash
# The timeline's speed: first frame and redraw times of `accprof tui` on
# launch-storm traces of 1 M and 10 M acc_prof events (or the EVENTS given),
# drawn on ratatui's TestBackend at 120x40 by tui/examples/tui_bench.rs.
#
# Usage: bench/tui.sh [EVENTS...] [--redraws N] [--runs N] [--cache DIR]
#   EVENTS      acc_prof events per trace (16 per construct; default 1000000
#               10000000; 200000000 works too, in about 3.3 GB)
#   --redraws N windows drawn per trace, from the whole run down to ~2 us
#               (default 500); median and p99 are printed
#   --runs N    open each trace N times (default 1): every run's figures,
#               then the median and the largest time to the first frame
#   --cache D   where the generated traces are kept and looked for (default
#               ${TMPDIR:-/tmp}/accprof-bench, shared with bench/load.sh)
#
# Builds the release collector and the example with cargo; the traces are
# made by bench/eventstorm.c (GCC-libgomp-shaped acc_prof events, a kernel
# launch and copies in each construct) under the collector, as in load.sh.
set -euo pipefail
sizes=() redraws=500 runs=1 cache="${TMPDIR:-/tmp}/accprof-bench"
while [ $# -gt 0 ]; do
  case "$1" in
    --redraws) redraws=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    [0-9]*) sizes+=("$1"); shift ;;
    *) echo "tui.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $runs in *[!0-9]*|''|0) echo "tui.sh: --runs must be a positive number, not '$runs'" >&2; exit 2 ;; esac
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 10000000)
root=$(cd "$(dirname "$0")/.." && pwd)
(cd "$root" && cargo build --release -q -p accprof-collector && cargo build --release -q -p accprof-tui --example tui_bench)
lib=$root/target/release/libaccprof.so
bench=$root/target/release/examples/tui_bench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"
cc -O2 -shared -fPIC -DSTORM_RUNTIME "$root/bench/eventstorm.c" -o "$work/libaccstorm.so"
cc -O2 "$root/bench/eventstorm.c" -o "$work/eventstorm" -L"$work" -laccstorm -Wl,-rpath,"$work"
for events in "${sizes[@]}"; do
  case $events in *[!0-9]*|'') echo "tui.sh: EVENTS must be a number, not '$events'" >&2; exit 2 ;; esac
  constructs=$(( (events + 15) / 16 ))
  events=$(( constructs * 16 ))
  trace=$cache/storm-$events.trace
  if [ ! -s "$trace" ]; then
    echo "generating $events events ($constructs constructs) under the collector ..."
    ACCPROF_QUIET=1 ACCPROF_OUTPUT="$work/storm.trace" LD_PRELOAD="$lib" "$work/eventstorm" "$constructs"
    mv "$work/storm.trace" "$trace.part" && mv "$trace.part" "$trace"
  fi
  echo "== $trace ($(du -h "$trace" | cut -f1))"
  : > "$work/first"
  for _ in $(seq "$runs"); do
    "$bench" --redraws "$redraws" "$trace" | tee "$work/out"
    awk '/^first frame  / { print $3 }' "$work/out" >> "$work/first"
  done
  if [ "$runs" -gt 1 ]; then
    sort -g "$work/first" | awk '{ v[NR] = $1 } END {
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "first frame over %d runs: median %.3f s, largest %.3f s\n", NR, m, v[NR] }'
  fi
done

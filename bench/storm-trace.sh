#!/usr/bin/env bash
# Prints the path of a launch-storm trace of EVENTS acc_prof events, made
# by bench/eventstorm.c under the release collector, or reused from CACHE
# when one of that size is there. Messages go to stderr.
#
# Usage: bench/storm-trace.sh EVENTS CACHE
# Needs target/release/libaccprof.so and gcc with acc_prof.h.
set -euo pipefail
events=$1 cache=$2
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$root/target/release/libaccprof.so
mkdir -p "$cache"
trace=$cache/storm-$events.trace
if [ -s "$trace" ]; then
  echo "trace: $trace (cached, $(du -h "$trace" | cut -f1))" >&2
  echo "$trace"
  exit 0
fi
[ -f "$lib" ] || { echo "$lib not found: run 'cargo build --release' first" >&2; exit 2; }
constructs=$(( events / 16 ))
# About 13 bytes per event; ask for 15 to leave room.
need=$(( events * 15 / 1024 ))
avail=$(df -Pk "$cache" | awk 'NR == 2 { print $4 }')
if [ "$avail" -lt "$need" ]; then
  echo "$cache has $((avail / 1024)) MiB free, the trace needs about $((need / 1024)) MiB" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "generating $events events ($constructs constructs) under the collector ..." >&2
cc -O2 -shared -fPIC -DSTORM_RUNTIME "$root/bench/eventstorm.c" -o "$work/libaccstorm.so"
cc -O2 "$root/bench/eventstorm.c" -o "$work/eventstorm" -L"$work" -laccstorm -Wl,-rpath,"$work"
ACCPROF_QUIET=1 ACCPROF_OUTPUT="$work/storm.trace" LD_PRELOAD="$lib" "$work/eventstorm" "$constructs" >&2
# Renamed only once complete, so an interrupted run leaves nothing to reuse.
mv "$work/storm.trace" "$trace.part"
mv "$trace.part" "$trace"
echo "trace: $trace ($(du -h "$trace" | cut -f1))" >&2
echo "$trace"

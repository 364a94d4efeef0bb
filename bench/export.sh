#!/usr/bin/env bash
# Export speed and memory: `accprof export` of a launch-storm trace of
# EVENTS acc_prof events (default 20 million; bench/load.sh uses 200
# million) to CSV (the constructs and kernels tables) and to Perfetto's
# protobuf timeline, with wall time, peak RSS and peak RSS per event.
# Rows are streamed out of the model, so peak RSS should stay within the
# model's own bound (<= 20 bytes per event) plus a constant.
#
# Usage: bench/export.sh [EVENTS] [--cache DIR] [--keep]
#   EVENTS     acc_prof events in the trace (16 per construct; default 20000000)
#   --cache D  where the generated trace is kept and looked for (default
#              ${TMPDIR:-/tmp}/accprof-bench, shared with bench/load.sh)
#   --keep     keep the exported files (in the cache folder) instead of
#              deleting them
#
# Needs `cargo build --release` first (target/release/accprof and
# libaccprof.so), gcc with acc_prof.h, and GNU time at /usr/bin/time (%e
# wall seconds, %M peak RSS).
set -euo pipefail
events=20000000 cache="${TMPDIR:-/tmp}/accprof-bench" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    [0-9]*) events=$1; shift ;;
    *) echo "export.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $events in *[!0-9]*|'') echo "export.sh: EVENTS must be a number, not '$events'" >&2; exit 2 ;; esac
events=$(( (events + 15) / 16 * 16 ))

root=$(cd "$(dirname "$0")/.." && pwd)
accprof=$root/target/release/accprof
[ -f "$accprof" ] || { echo "export.sh: $accprof not found: run 'cargo build --release' first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "export.sh: GNU time (/usr/bin/time) is needed for peak RSS: apt-get install time" >&2; exit 2; }

trace=$("$root/bench/storm-trace.sh" "$events" "$cache")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work
[ "$keep" = 1 ] && out=$cache

echo "$events events; wall and peak RSS from /usr/bin/time (%e, %M)"
# run LABEL OUTPUT ARGS...: one timed export
run() {
  local label=$1 file=$2; shift 2
  if ! /usr/bin/time -o "$work/t" -f "%e %M" "$accprof" export "$trace" "$@" -o "$file" 2> "$work/err"; then
    echo "export.sh: 'accprof export $trace $* -o $file' failed:" >&2; cat "$work/err" >&2; exit 1
  fi
  local size
  size=$(stat -c %s "$file")
  tail -n 1 "$work/t" | awk -v l="$label" -v e="$events" -v s="$size" '{
    printf "%-26s %8.2f s %8.0f MB peak RSS %6.1f B/event   output %8.0f MB (%.1f B/event)\n",
      l, $1, $2 / 1024, $2 * 1024 / e, s / 1e6, s / e }'
  [ "$keep" = 1 ] || rm -f "$file"
}
run "csv --what summary" "$out/storm.summary.csv" --format csv --what summary
run "csv --what constructs" "$out/storm.constructs.csv" --format csv --what constructs
run "csv --what kernels" "$out/storm.kernels.csv" --format csv --what kernels
run "perfetto" "$out/storm.pftrace" --format perfetto

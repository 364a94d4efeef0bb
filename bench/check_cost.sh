#!/usr/bin/env bash
# What the coherence check costs on real programs: each program bare,
# under `accprof run` and under `accprof run --check coherence`,
# interleaved (bare, accprof, checked, bare, ...), ROUNDS rounds; prints
# per program the median wall time of each and the median (min-max) of
# the per-round ratios checked/accprof and accprof/bare, and whether
# every checked run printed what the bare run printed (lines with times
# and dates left out) with the same exit status.
#
# Usage: bench/check_cost.sh --accprof BIN [--rounds N] [--out DIR] -- "prog args" ["prog args" ...]
#   BIN   the accprof binary (libaccprof.so beside it); N rounds (default 7)
#   --out keeps each run's output and the last checked run's exit note
# On the GPU machine: bench/check_cost.sh --accprof A -- "npb/sp.W.x" "npb/bt.W.x"
set -euo pipefail
acc= rounds=7 out=
while [ $# -gt 0 ]; do
  case "$1" in
    --accprof) acc=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "check_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$acc" ] || { echo "check_cost.sh: accprof binary '$acc' not found" >&2; exit 2; }
case $rounds in *[!0-9]*|''|0) echo "check_cost.sh: --rounds must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
[ $# -gt 0 ] || { echo "check_cost.sh: no program given (after --)" >&2; exit 2; }
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out" || { echo "check_cost.sh: cannot create '$out'" >&2; exit 2; }
. "$(dirname "$0")/stats.sh"
# Output without the lines that differ from run to run.
steady() { grep -v -i -E 'time|date|mop/s|seconds|accprof' "$1" || true; }
# Runs "$@", output to $1.out; echoes the wall time in us and the status.
timed() {
  local o=$1; shift
  local t0 t1 rc=0
  t0=$(date +%s%N)
  "$@" > "$o.out" 2> "$o.err" < /dev/null || rc=$?
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000 )) $rc"
}
printf '%-28s %9s %9s %9s  %-22s %-22s %s\n' program bare accprof checked "checked/accprof" "accprof/bare" "output"
i=0
for cmd in "$@"; do
  i=$((i + 1))
  read -r -a p <<< "$cmd"
  [ -x "${p[0]}" ] || { echo "check_cost.sh: program '${p[0]}' not found" >&2; exit 2; }
  bare=() prof=() chk=() same=yes
  for r in $(seq "$rounds"); do
    read -r tb rb <<< "$(timed "$out/p$i-r$r.bare" "${p[@]}")"
    read -r ta _ <<< "$(timed "$out/p$i-r$r.accprof" "$acc" run --force --no-summary --output "$out/p$i.trace" -- "${p[@]}")"
    read -r tc rc <<< "$(timed "$out/p$i-r$r.checked" "$acc" run --check coherence --force --no-summary --output "$out/p$i.checked.trace" -- "${p[@]}")"
    bare+=("$tb") prof+=("$ta") chk+=("$tc")
    if [ "$rb" != "$rc" ] || ! diff -q <(steady "$out/p$i-r$r.bare.out") <(steady "$out/p$i-r$r.checked.out") > /dev/null; then
      same=no
    fi
  done
  grep -h "coherence check" "$out/p$i-r$rounds.checked.err" > "$out/p$i.note" || true
  cr=$(ratio_row '%.4s %.4s %s %s %s %s' x x "${chk[*]}" "${prof[*]}" | awk '{printf "%.2f (%.2f-%.2f)", $4, $5, $6}')
  ar=$(ratio_row '%.4s %.4s %s %s %s %s' x x "${prof[*]}" "${bare[*]}" | awk '{printf "%.2f (%.2f-%.2f)", $4, $5, $6}')
  med() { printf '%s\n' "$@" | median | awk '{printf "%.2f s", $1 / 1e6}'; }
  printf '%-28s %9s %9s %9s  %-22s %-22s %s\n' "$(basename "${p[0]}")" "$(med "${bare[@]}")" "$(med "${prof[@]}")" "$(med "${chk[@]}")" "$cr" "$ar" "$same"
  sed 's/^/    /' "$out/p$i.note"
done

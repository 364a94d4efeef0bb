# Sourced by the timing scripts of bench/: medians, and a row of a
# variant's times against the bare program's, round by round.

# The wall time of a command in microseconds, its output and failure
# ignored.
wall_us() { local t0 t1; t0=$(date +%s%N); "$@" > /dev/null 2>&1 || true; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )); }

# The time a program's output on standard input says it took, in us: the
# samples' `time: X s` or NPB's `Time in seconds = X`; nothing when it
# says none.
own_time_us() {
  awk '$1 == "time:" && $3 == "s" {printf "%.0f\n", $2 * 1e6; exit}
       /Time in seconds/ {printf "%.0f\n", $NF * 1e6; exit}'
}

# The median of the numbers on standard input, one a line.
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.6f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# ratio_row FORMAT PROGRAM VARIANT "TIMES" "BASE TIMES": prints, with
# FORMAT, the program, the variant, the median time in seconds (times in
# microseconds) and the median, min and max of the per-round ratios to base.
ratio_row() {
  local fmt=$1 p=$2 v=$3 t b r ratios
  read -r -a t <<< "$4"
  read -r -a b <<< "$5"
  ratios=$(for ((r = 0; r < ${#t[@]}; r++)); do awk -v a="${t[$r]}" -v b="${b[$r]}" 'BEGIN{printf "%.4f\n", a/b}'; done)
  # shellcheck disable=SC2059
  printf "$fmt" "$p" "$v" "$(printf "%s\n" "${t[@]}" | median | awk '{print $1/1e6}')" \
    "$(printf "%s\n" "$ratios" | median)" "$(printf "%s\n" "$ratios" | sort -g | head -1)" \
    "$(printf "%s\n" "$ratios" | sort -g | tail -1)"
}

# findings_count JSON RULE: how many findings of RULE (C1, C2, ...) the
# output of `accprof analyze --json` holds; "?" when it is not readable.
findings_count() {
  python3 -c 'import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception: print("?"); sys.exit()
fs=d.get("findings", d) if isinstance(d, dict) else d
print(sum(1 for f in fs if f.get("rule")==sys.argv[2]))' "$1" "$2"
}

# findings_titles JSON RULE: the titles of those findings, one a line.
findings_titles() {
  python3 -c 'import json,sys
try: d=json.load(open(sys.argv[1]))
except Exception: sys.exit()
fs=d.get("findings", d) if isinstance(d, dict) else d
for f in fs:
  if f.get("rule")==sys.argv[2]: print(f.get("title",""))' "$1" "$2"
}

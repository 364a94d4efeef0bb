#!/usr/bin/env bash
# The OpenACC Validation & Verification suite (github.com/OpenACCUserGroup/
# OpenACCV-V) under accprof's coherence check: every test is a small program
# that exits 0 when the runtime did what the specification says, so a test
# that passes bare and then fails, prints something else or hangs under the
# check is the check's fault, and a C1/C2 finding in a passing test is a
# false positive unless the test itself reads stale data. The suite's files
# are never part of this repository: pass its path.
#
# Usage: bench/vv.sh build --vv DIR --out BUILD [--offload yes|no] [--lang c,f90]
#                          [--jobs N] [--seed N]
#        bench/vv.sh run --build BUILD --accprof BIN --out OUT [--timeout S] [--jobs N]
#                        [--lang c,f90]
#
# build: compiles each test of DIR/Tests/*.c (and with f90 DIR/Tests/*.F90)
#   alone, all its sub-tests in (as the suite's infrastructure.py compiles
#   it first), with gcc-12 (C, -lm) or gfortran-12 (-cpp; lines of any
#   length, as some tests have lines past 132 columns): -fopenacc -O2 -g
#   -DSEED=N plus, for --offload yes (default), -foffload=nvptx-none
#   -foffload-options=-lm -no-pie, for no -foffload=disable (host code
#   only), as samples/Makefile does. A test's exit code is its result (0
#   passes; otherwise one bit per failed sub-test). Binaries are stripped
#   (BUILD travels to the GPU machine; findings then name addresses, not
#   lines: rebuild a test by hand for its lines) into BUILD/c/ and BUILD/f90/;
#   BUILD/built.txt and BUILD/failed.txt list the tests by source name
#   (acc_copyin.c, acc_copyin.F90); BUILD/logs/ keeps the head of each
#   failed build's compiler output; BUILD/config.txt the command lines.
#   --seed fixes the tests' random data (default 1), so that the bare and
#   the checked run of a test compute the same thing. --jobs compilers at
#   once (default 2).
# run: per built test, in a scratch directory: the test bare, then
#   `BIN run --check coherence --no-summary --output OUT/traces/NAME.trace
#   -- TEST` (`accprof report` of a kept trace gives the summary),
#   each under `timeout S` (default 60), with exit code, stdout and stderr
#   in OUT/logs/NAME.{bare,checked}.{out,err} (no file where empty);
#   accprof's own lines go to stderr, so only exit codes and stdout are
#   compared. Then `BIN analyze --json` of the trace counts the findings
#   of rules C1 and C2. The trace and the analysis (OUT/traces/NAME.json)
#   are kept only where there is a finding or the exit code or stdout
#   differ (the trace also where the
#   analysis failed). OUT/results.tsv: name, bare rc, checked rc, same
#   stdout (yes/no), C1, C2, note (timeouts, differences, C1 findings
#   whose reads were never compared with the device's bytes, a missing
#   trace or analysis); OUT/summary.txt (also printed):
#   tests run, passing bare, of those the same exit code and stdout under
#   the check, the tests with C1/C2 findings and the timeouts; tests that
#   fail bare are listed apart and do not count. --jobs tests at once
#   (default 1; on one GPU several at once are fine for correctness);
#   --lang runs only the tests of those languages (default all built).
#   Needs jq or python3 to read the analysis.
# Environment: VV_CHECK_ARGS, the arguments of `accprof run` that ask for
#   the check (default "--check coherence"). Set it empty (VV_CHECK_ARGS=)
#   to record without the check, for an accprof without --check: the
#   plumbing runs the same and finds nothing. VV_CC and VV_FC replace
#   gcc-12 and gfortran-12.
# Here: bench/vv.sh build --vv VV --out vv-build --lang c,f90
# then on the GPU machine:
#   bench/vv.sh run --build vv-build --accprof target/release/accprof --out vv-out --jobs 8 --timeout 30
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
die() { echo "vv.sh: $*" >&2; exit 2; }
usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$self"; }
posint() { case $2 in *[!0-9]*|''|0) die "$1 must be a positive number, not '$2'" ;; esac; }
now() { date +%s%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e9}'; }

# One test's build (a worker of build mode; its settings come in VV_B_*).
build_one() {
  local src=$1 name lang stem tmp rc=0
  name=$(basename "$src")
  stem=${name%.*}
  case $name in
    *.c) lang=c ;;
    *.F90) lang=f90 ;;
    *) return 0 ;;
  esac
  tmp=$(mktemp -d "$VV_B_OUT/tmp/$name.XXXXXX")
  if [ $lang = c ]; then
    # shellcheck disable=SC2086
    (cd "$tmp" && timeout 600 "$VV_B_CC" $VV_B_FLAGS -I"$VV_B_TESTS" "$src" -o "$tmp/$stem" -lm) > "$tmp/log" 2>&1 || rc=$?
  else
    # shellcheck disable=SC2086
    (cd "$tmp" && timeout 600 "$VV_B_FC" -cpp -ffree-line-length-none $VV_B_FLAGS -I"$VV_B_TESTS" -J"$tmp" "$src" -o "$tmp/$stem") > "$tmp/log" 2>&1 || rc=$?
  fi
  if [ $rc -eq 0 ] && [ -x "$tmp/$stem" ] && strip "$tmp/$stem" 2> "$tmp/strip.log"; then
    mv "$tmp/$stem" "$VV_B_OUT/$lang/$stem"
  else
    # The errors first (warnings often come before them), then the head.
    {
      if [ $rc -eq 124 ]; then echo "(the compiler ran past 600 s)"; fi
      grep -m 20 -iE 'error|undefined reference' "$tmp/log" || true
      echo "--"
      head -c 3000 "$tmp/log"
      cat "$tmp/strip.log" 2> /dev/null || true
    } > "$VV_B_OUT/logs/$name.log"
  fi
  rm -rf "$tmp"
}

# One test's two runs and analysis (a worker of run mode; settings in VV_R_*).
run_one() {
  local name=$1 lang stem exe work log brc=0 crc=0 same c1=- c2=- note=() json f t0 t1
  local -a check
  read -r -a check <<< "$VV_R_CHECK"
  stem=${name%.*}
  case $name in *.c) lang=c ;; *) lang=f90 ;; esac
  exe=$VV_R_BUILD/$lang/$stem
  log=$VV_R_OUT/logs/$name
  work=$(mktemp -d "$VV_R_OUT/tmp/$name.XXXXXX")
  t0=$(now)
  # (The braces keep the shell's "Killed" line about a timed-out run quiet.)
  { (cd "$work" && exec timeout -k 5 "$VV_R_TIMEOUT" "$exe") > "$log.bare.out" 2> "$log.bare.err"; } 2> /dev/null || brc=$?
  t1=$(now)
  if timed_out $brc "$t0" "$t1"; then note+=("bare timeout"); fi
  rm -f "$VV_R_OUT/traces/$name.trace"
  t0=$(now)
  { (cd "$work" && exec timeout -k 5 "$VV_R_TIMEOUT" "$VV_R_ACC" run "${check[@]}" --no-summary --force \
    --output "$VV_R_OUT/traces/$name.trace" -- "$exe") > "$log.checked.out" 2> "$log.checked.err"; } 2> /dev/null || crc=$?
  t1=$(now)
  if timed_out $crc "$t0" "$t1"; then note+=("checked timeout"); fi
  rm -rf "$work"
  if [ $brc -ne $crc ]; then note+=("exit code differs"); fi
  if cmp -s "$log.bare.out" "$log.checked.out"; then same=yes; else same=no; note+=("stdout differs"); fi
  json=$VV_R_OUT/traces/$name.json
  if [ ! -s "$VV_R_OUT/traces/$name.trace" ]; then
    note+=("no trace")
  elif ! "$VV_R_ACC" analyze --json "$VV_R_OUT/traces/$name.trace" > "$json" 2> "$log.analyze.err"; then
    note+=("analyze failed: $(head -1 "$log.analyze.err")")
    rm -f "$json"
  else
    c1=$(rule_count "$json" C1)
    c2=$(rule_count "$json" C2)
    # A read whose bytes could not be compared with the device's is only likely stale.
    f=$(rule_count "$json" C1 likely)
    if [ "$f" -gt 0 ]; then note+=("$f of the C1 unconfirmed"); fi
    # Traces are kept only where the check found something, changed how
    # the test ended or what it printed (or the analysis failed).
    if [ $((c1 + c2)) -eq 0 ] && [ $brc -eq $crc ] && [ $same = yes ]; then
      rm -f "$VV_R_OUT/traces/$name.trace" "$json"
    fi
  fi
  # An empty output leaves no file.
  for f in "$log".{bare,checked}.{out,err} "$log.analyze.err"; do
    [ -s "$f" ] || rm -f "$f"
  done
  local text= n
  for n in "${note[@]}"; do text+=${text:+; }${n//$'\t'/ }; done
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" $brc $crc $same "$c1" "$c2" "$text" \
    > "$VV_R_OUT/rows/$name.tsv"
}

# Whether a run that ended with status $1 was stopped by timeout: 124, or
# 137 after the KILL that follows a TERM it did not heed, once the time was up.
timed_out() {
  case $1 in 124|137) [ $(( ($3 - $2) / 1000000000 )) -ge "$VV_R_TIMEOUT" ] ;; *) return 1 ;; esac
}

# The number of findings of one rule (of one confidence, if $3 is given)
# in `accprof analyze --json` output.
rule_count() {
  if command -v jq > /dev/null; then
    jq --arg r "$2" --arg c "${3:-}" '[.findings[] | select(.rule == $r and ($c == "" or .confidence == $c))] | length' "$1"
  else
    python3 -c 'import json, sys
r, c = sys.argv[2], sys.argv[3]
print(sum(f["rule"] == r and c in ("", f["confidence"]) for f in json.load(open(sys.argv[1]))["findings"]))' "$1" "$2" "${3:-}"
  fi
}

case ${1:-} in
  __build1) shift; build_one "$1"; exit 0 ;;
  __run1) shift; run_one "$1"; exit 0 ;;
  build|run) mode=$1; shift ;;
  -h|--help) usage; exit 0 ;;
  '') die "a mode is needed: build or run (see --help)" ;;
  *) die "unknown mode '$1' (build or run; see --help)" ;;
esac

vv= out= offload=yes langs= jobs= seed=1 build= acc= timeout_s=60
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value"
  case "$mode:$1" in
    build:--vv) vv=$2 ;;
    build:--offload) offload=$2 ;;
    *:--lang) langs=$2 ;;
    build:--seed) seed=$2 ;;
    run:--build) build=$2 ;;
    run:--accprof) acc=$2 ;;
    run:--timeout) timeout_s=$2 ;;
    *:--out) out=$2 ;;
    *:--jobs) jobs=$2 ;;
    *) die "unknown argument $1 for $mode" ;;
  esac
  shift 2
done
[ -n "$out" ] || die "--out is needed"
# --lang: c for build, everything built for run.
if [ "$mode" = build ]; then langs=${langs:-c}; else langs=${langs:-c,f90}; fi
want_c=no want_f=no
IFS=',' read -r -a ll <<< "$langs"
for l in "${ll[@]}"; do
  case $l in
    c) want_c=yes ;;
    f90) want_f=yes ;;
    *) die "--lang '$langs': '$l' is not c or f90" ;;
  esac
done
[ $want_c = yes ] || [ $want_f = yes ] || die "--lang '$langs' names no language"

if [ "$mode" = build ]; then
  jobs=${jobs:-2}
  posint --jobs "$jobs"
  case $seed in *[!0-9]*|'') die "--seed must be a number, not '$seed'" ;; esac
  [ -n "$vv" ] || die "--vv DIR is needed (the suite: the directory holding Tests/)"
  [ -f "$vv/Tests/acc_testsuite.h" ] || die "--vv '$vv' is not the suite (no Tests/acc_testsuite.h in it)"
  case $offload in
    yes) flags="-fopenacc -foffload=nvptx-none -foffload-options=-lm -no-pie" ;;
    no) flags="-fopenacc -foffload=disable" ;;
    *) die "--offload '$offload' is not yes or no" ;;
  esac
  flags="$flags -O2 -g -DSEED=$seed"
  cc=${VV_CC:-gcc-12} fc=${VV_FC:-gfortran-12}
  [ $want_c = no ] || command -v "$cc" > /dev/null || die "C compiler '$cc' not found (VV_CC)"
  [ $want_f = no ] || command -v "$fc" > /dev/null || die "Fortran compiler '$fc' not found (VV_FC)"
  command -v strip > /dev/null || die "strip (binutils) not found"
  tests=$(cd "$vv/Tests" && pwd)
  case "$(realpath -m "$out")/" in "$(cd "$vv" && pwd -P)"/*) die "--out '$out' is inside --vv '$vv' (the suite is never written to)" ;; esac
  mkdir -p "$out" 2> /dev/null || die "cannot create --out '$out'"
  out=$(cd "$out" && pwd)
  rm -rf "${out:?}/c" "$out/f90" "$out/logs" "$out/tmp" "$out/built.txt" "$out/failed.txt" "$out/config.txt"
  mkdir -p "$out/c" "$out/f90" "$out/logs" "$out/tmp"
  srcs=()
  [ $want_c = no ] || srcs+=("$tests"/*.c)
  [ $want_f = no ] || srcs+=("$tests"/*.F90)
  {
    echo "suite: $tests"
    [ $want_c = no ] || echo "c: $cc $flags -I$tests TEST.c -o TEST -lm"
    [ $want_f = no ] || echo "f90: $fc -cpp -ffree-line-length-none $flags -I$tests TEST.F90 -o TEST"
    echo "offload: $offload"
  } > "$out/config.txt"
  echo "== building ${#srcs[@]} tests ($langs, offload $offload) with $jobs jobs into $out"
  t0=$(now)
  export VV_B_OUT=$out VV_B_TESTS=$tests VV_B_CC=$cc VV_B_FC=$fc VV_B_FLAGS=$flags
  printf '%s\0' "${srcs[@]}" | xargs -0 -n 1 -P "$jobs" bash "$self" __build1 || true
  t1=$(now)
  rm -rf "$out/tmp"
  : > "$out/built.txt"
  : > "$out/failed.txt"
  for s in "${srcs[@]}"; do
    n=$(basename "$s") stem=${n%.*}
    case $n in *.c) l=c ;; *) l=f90 ;; esac
    if [ -x "$out/$l/$stem" ]; then echo "$n" >> "$out/built.txt"; else echo "$n" >> "$out/failed.txt"; fi
  done
  nb=$(wc -l < "$out/built.txt") nf=$(wc -l < "$out/failed.txt")
  echo "built $nb of ${#srcs[@]} in $(secs "$t0" "$t1") s; $nf failed to build (list: $out/failed.txt, logs: $out/logs/)"
  echo "size of $out: $(du -sh "$out" | cut -f1)"
  exit 0
fi

# run
jobs=${jobs:-1}
posint --jobs "$jobs"
posint --timeout "$timeout_s"
[ -n "$build" ] || die "--build BUILD is needed (made by bench/vv.sh build)"
[ -f "$build/built.txt" ] || die "--build '$build' is not a build of bench/vv.sh (no built.txt in it)"
[ -n "$acc" ] || die "--accprof BIN is needed"
[ -x "$acc" ] && [ -f "$acc" ] || die "accprof binary '$acc' not found"
command -v jq > /dev/null || command -v python3 > /dev/null || die "jq or python3 is needed to read the analysis"
check_args=${VV_CHECK_ARGS---check coherence}
case " $check_args " in
  *" --check "*)
    "$acc" run --help 2> /dev/null | grep -q -- '--check' \
      || die "accprof '$acc' has no 'run --check' (set VV_CHECK_ARGS= to run without the check)" ;;
esac
build=$(cd "$build" && pwd)
acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")
mkdir -p "$out" 2> /dev/null || die "cannot create --out '$out'"
out=$(cd "$out" && pwd)
rm -rf "$out/traces" "$out/logs" "$out/rows" "$out/tmp" "$out/results.tsv" "$out/summary.txt"
mkdir -p "$out/traces" "$out/logs" "$out/rows" "$out/tmp"
names=()
while IFS= read -r n; do
  case $n in
    *.c) [ $want_c = no ] || names+=("$n") ;;
    *.F90) [ $want_f = no ] || names+=("$n") ;;
  esac
done < "$build/built.txt"
[ ${#names[@]} -gt 0 ] || die "--build '$build' holds no built test of --lang '$langs'"
echo "== running ${#names[@]} tests bare and under 'accprof run${check_args:+ $check_args}' (timeout $timeout_s s, $jobs at once)"
t0=$(now)
export VV_R_BUILD=$build VV_R_OUT=$out VV_R_ACC=$acc VV_R_TIMEOUT=$timeout_s VV_R_CHECK=$check_args
# A worker that fails leaves no row; that shows in the results.
printf '%s\n' "${names[@]}" | xargs -d '\n' -n 1 -P "$jobs" bash "$self" __run1 || true
t1=$(now)
rm -rf "$out/tmp"
printf 'name\tbare_rc\tchecked_rc\tsame_stdout\tC1\tC2\tnote\n' > "$out/results.tsv"
for n in "${names[@]}"; do
  if [ -f "$out/rows/$n.tsv" ]; then
    cat "$out/rows/$n.tsv" >> "$out/results.tsv"
  else
    printf '%s\t-\t-\t-\t-\t-\t%s\n' "$n" "the script failed on it" >> "$out/results.tsv"
  fi
done
rm -rf "$out/rows"
awk -F'\t' -v secs="$(secs "$t0" "$t1")" -v out="$out" -v check="$check_args" '
  NR == 1 { next }
  { run++
    found = ($5 != "-" && $5 + $6 > 0)
    if ($2 == 0) {
      pass++
      if ($3 == 0 && $4 == "yes") same++; else differ = differ " " $1 " (" $3 (($4 == "yes") ? "" : ", stdout") ")"
      if (found) { nf++; fnames = fnames " " $1 " (C1 " $5 ", C2 " $6 ")" }
    } else {
      bad++; bnames = bnames " " $1 " (" $2 ")"
      if (found) { bf++; bfnames = bfnames " " $1 " (C1 " $5 ", C2 " $6 ")" }
    }
    if ($7 ~ /bare timeout/) { bt++; btn = btn " " $1 }
    if ($7 ~ /checked timeout/) { ct++; ctn = ctn " " $1 }
    if ($5 == "-") { na++; nan = nan " " $1 " (" $7 ")" }
  }
  END {
    printf "tests run: %d in %s s (%s)\n", run, secs, (check == "" ? "recorded without a check" : "checked with " check)
    printf "passing bare: %d\n", pass
    printf "  same exit code and stdout under the check: %d of %d\n", same, pass
    if (pass - same) printf "  differing (checked rc):%s\n", differ
    printf "  with C1/C2 findings: %d%s\n", nf, (nf ? ":" fnames : "")
    printf "failing bare (not counted): %d%s\n", bad, (bad ? ":" bnames : "")
    if (bf) printf "  of those with C1/C2 findings: %d:%s\n", bf, bfnames
    printf "timeouts: bare %d%s, checked %d%s\n", bt, btn, ct, ctn
    if (na) printf "no trace or no analysis (C1, C2 unknown): %d:%s\n", na, nan
    printf "results: %s/results.tsv; traces with findings: %s/traces\n", out, out
  }' "$out/results.tsv" | tee "$out/summary.txt"

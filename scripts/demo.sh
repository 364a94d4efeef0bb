#!/usr/bin/env bash
# Profiles a built-in sample (laplace, a first port: two `kernels` regions per
# iteration, implicit copies), prints its summary, then its findings and the
# patch that fixes them. On a machine without a GPU (or without CUPTI) the
# sample runs on the host and there is nothing to move, so the findings shown
# are those of the same sample recorded on an NVIDIA H200, which ships with
# the tests; the script says which it shows.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked
make -s -C samples
accprof=target/release/accprof
# laplace_bad keeps its grids in static 1026 x 1026 arrays of doubles (8.0 MiB
# each, sized for the largest n), and each `kernels` region copies A and Anew
# whole in and out: at n = 256, 20 iterations move 2 regions x 4 copies x 20
# x 8.0 MiB = 1.25 GiB (643 MiB per region), though each step touches 0.5 MiB.
"$accprof" run --force --output laplace_bad.trace -- samples/build/laplace_bad 256 20 0
echo
if "$accprof" analyze --json laplace_bad.trace | grep -q '"cupti": *true'; then
  "$accprof" analyze laplace_bad.trace
  "$accprof" analyze --patch laplace_bad.trace
  shown="laplace_bad.trace"
  compare="$accprof run --output laplace_good.trace -- samples/build/laplace_good 256 20 0
    $accprof diff laplace_bad.trace laplace_good.trace"
else
  fixture=cli/tests/fixtures/h200/laplace_bad_c.trace
  echo "This run recorded no device activity (no GPU or no CUPTI here: OpenACC ran on the host),"
  echo "so there is nothing to find in it. What accprof finds in the same sample run on an"
  echo "NVIDIA H200 ($fixture):"
  echo
  "$accprof" analyze --symbols cli/tests/fixtures/h200/bin --source-dir samples "$fixture"
  "$accprof" analyze --patch --symbols cli/tests/fixtures/h200/bin --source-dir samples "$fixture"
  shown="--symbols cli/tests/fixtures/h200/bin --source-dir samples $fixture"
  compare="$accprof diff --symbols cli/tests/fixtures/h200/bin --source-dir samples $fixture cli/tests/fixtures/h200/laplace_good_c.trace"
fi
cat <<EOF

Next:
  The same recording on a timeline (keys: ? for help, f for the findings, q to quit):
    $accprof tui $shown
  The fixed version of this sample (samples/laplace_good.c) against this one:
    $compare
  Your own program: build it with -fopenacc (and -g for source lines), then
    $accprof run -- ./your_app its args
    $accprof analyze accprof-<pid>.trace   (the name run prints at exit)
EOF

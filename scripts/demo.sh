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
"$accprof" run --force --output laplace_bad.trace -- samples/build/laplace_bad 256 20 0
echo
if "$accprof" analyze --json laplace_bad.trace | grep -q '"cupti": *true'; then
  "$accprof" analyze laplace_bad.trace
  "$accprof" analyze --patch laplace_bad.trace
else
  fixture=cli/tests/fixtures/h200/laplace_bad_c.trace
  echo "This run recorded no device activity (no GPU or no CUPTI here: OpenACC ran on the host),"
  echo "so there is nothing to find in it. What accprof finds in the same sample run on an"
  echo "NVIDIA H200 ($fixture):"
  echo
  "$accprof" analyze --symbols cli/tests/fixtures/h200/bin --source-dir samples "$fixture"
  "$accprof" analyze --patch --symbols cli/tests/fixtures/h200/bin --source-dir samples "$fixture"
fi

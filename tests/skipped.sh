#!/usr/bin/env bash
# The test cases that skipped in a build's last CTest run, and why: CTest
# counts a test program that skipped some of its cases (GTEST_SKIP, pytest's
# skip) as passed, so tests/run.sh prints this after CTest's summary, and
# nobody mistakes a skip for a pass.
#
#   bash tests/skipped.sh BUILD_DIR
#
# Reads BUILD_DIR/Testing/Temporary/LastTest.log (every test's output). Prints
# one line per skipped case, "<ctest test>: <case>: <reason>", then the count:
# "skipped: N test cases". Exit 0 whatever the count; 2 without the log.
set -euo pipefail

log=${1:?usage: bash tests/skipped.sh BUILD_DIR}/Testing/Temporary/LastTest.log
if [ ! -f "$log" ]; then
  echo "skipped.sh: no $log (run ctest in that build first)" >&2
  exit 2
fi

awk '
  # A CTest test begins: "3/123 Test: name".
  /^[0-9]+\/[0-9]+ Test: / { test = $3; collecting = 0; next }
  # GoogleTest: "[ RUN      ] Suite.Case", "<file>:<line>: Skipped", the
  # message lines, "[  SKIPPED ] Suite.Case (0 ms)".
  /^\[ RUN      \] / { reason = ""; collecting = 0; next }
  /: Skipped$/ { collecting = 1; reason = ""; next }
  /^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)$/ {
    printf "%s: %s: %s\n", test, $4, (reason == "" ? "(no reason given)" : reason)
    count++
    collecting = 0
    next
  }
  /^\[       OK \] |^\[  FAILED  \] / { collecting = 0; next }
  collecting { reason = (reason == "" ? $0 : reason " " $0); next }
  # pytest -rs: "SKIPPED [N] file:line: reason" (N cases with that reason).
  /^SKIPPED \[[0-9]+\] / {
    n = substr($2, 2, length($2) - 2) + 0
    printf "%s: %s\n", test, substr($0, length($1 " " $2 " ") + 1)
    count += n
    next
  }
  END { printf "skipped: %d test cases\n", count + 0 }
' "$log"

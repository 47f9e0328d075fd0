#!/usr/bin/env bash
# The rule for a test whose input (a shared dataset, a built binary) is
# absent: it skips on a developer's machine and fails under CI=true, with a
# message naming what is missing and where it looked
# (common/testing/missing_input.h, python/tests/conftest.py).
#
#   bash tests/missing_input_test.sh TEXT COMMAND...
#
# COMMAND is a test run whose input has been pointed somewhere empty (for
# example LDPGRAPH_DATASETS=/nonexistent). It is run twice: with CI unset it
# must exit 0 and print TEXT (the skip's message); with CI=true it must exit
# non-zero and print TEXT and the CI line. Exit 0 when both hold.
set -uo pipefail

if [ $# -lt 2 ]; then
  echo "usage: bash tests/missing_input_test.sh TEXT COMMAND..." >&2
  exit 2
fi
text=$1
shift

status=0
out=$(env -u CI "$@" 2>&1)
code=$?
if [ "$code" -ne 0 ] || ! grep -qF -- "$text" <<<"$out"; then
  echo "FAIL: without CI the test must skip (exit 0) saying: $text" >&2
  echo "exit $code, output:" >&2
  echo "$out" >&2
  status=1
else
  echo "ok: without CI it skips, saying: $text"
fi

out=$(env CI=true "$@" 2>&1)
code=$?
if [ "$code" -eq 0 ] || ! grep -qF -- "$text" <<<"$out" ||
   ! grep -qF -- "CI is set: a missing test input is a failure" <<<"$out"; then
  echo "FAIL: with CI=true the test must fail (exit non-zero) saying: $text" >&2
  echo "exit $code, output:" >&2
  echo "$out" >&2
  status=1
else
  echo "ok: with CI=true it fails (exit $code), saying: $text"
fi
exit $status

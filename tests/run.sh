#!/usr/bin/env bash
# The README's test command. Builds ldpgraph with its tests and runs every
# test with CTest, the slow statistical privacy tests included.
#
#   bash tests/run.sh              optimised build in build/, all tests
#   bash tests/run.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer
#                                  build in build-asan/, all tests but the
#                                  slow statistical ones and the bench smoke
#   bash tests/run.sh --fast       optimised build, skip the slow tests
#
# Tests that need the shared datasets (cora, citeseer, pubmed) find them in
# $LDPGRAPH_DATASETS if set, else in ../shared/datasets beside the checkout
# (the CMake cache entry LDPGRAPH_DATASETS_DIR). The deployment, restart and
# agent-shard tests run on a generated dataset of cora's shape when cora is
# absent, so they never skip for want of it. A test
# with no stand-in skips, saying what is missing and where it looked, and
# under CI (CI=true or CI=1) fails instead (common/testing/missing_input.h;
# the Python suite without the built binaries, python/tests/conftest.py).
# The checks of the datasets' own contents, and poisoning_defence_test (its
# bounds are cora's), skip without them, in CI too.
# CTest missing_input_ci, python_missing_binaries_ci and
# agent_dataset_stand_in check these rules. Where the datasets were looked
# for is printed first; every test case that skipped, and why, is printed
# after CTest's summary (tests/skipped.sh), ending "skipped: N test cases":
# CTest itself counts a program that skipped some of its cases as passed.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
jobs=$(nproc 2>/dev/null || echo 2)
case "$mode" in
  all|--fast)
    build=build
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    exclude=()
    [ "$mode" = "--fast" ] && exclude=(-LE slow)
    ;;
  --sanitize)
    build=build-asan
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DLDPGRAPH_SANITIZE=ON -DLDPGRAPH_BUILD_BENCHMARKS=OFF >/dev/null
    exclude=(-LE "slow|bench")
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  *)
    echo "usage: bash tests/run.sh [--fast|--sanitize]" >&2
    exit 2
    ;;
esac

datasets=${LDPGRAPH_DATASETS:-$(sed -n 's/^LDPGRAPH_DATASETS_DIR:PATH=//p' \
  "$build/CMakeCache.txt")}
if [ -f "$datasets/cora/meta.json" ]; then
  echo "run.sh: datasets from $datasets"
else
  echo "run.sh: no datasets at $datasets (set LDPGRAPH_DATASETS, or clone" \
    "beside ../shared): the tests that need them skip, or fail under CI"
fi

cmake --build "$build" -j "$jobs"
status=0
(cd "$build" && ctest --output-on-failure -j "$jobs" "${exclude[@]}") ||
  status=$?
bash tests/skipped.sh "$build"
exit "$status"

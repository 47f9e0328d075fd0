#!/usr/bin/env bash
# How to get the vector units into a portable binary, measured: the MLP's
# two large products (tests/bench/gemm_variants.cc) built three ways, one
# thread each, median of 7 x 10 repetitions:
#   eigen, baseline x86-64   what a portable build of Eigen alone runs (SSE2)
#   eigen, -march=x86-64-v3  Eigen's AVX2/FMA kernels: fast, but the binary
#                            no longer starts on a CPU without AVX2
#   eigen + OpenBLAS         portable: OpenBLAS picks its kernels at run time
#                            (what ldpgraph ships; the kernel family is named)
# Needs g++, libeigen3-dev and libopenblas-dev (deploy/install-deps.sh).
# Usage: tests/bench/gemm_variants.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
src="$root/tests/bench/gemm_variants.cc"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-O3 -DNDEBUG -std=c++20 -I/usr/include/eigen3)
g++ "${flags[@]}" "$src" -o "$work/sse2"
g++ "${flags[@]}" -march=x86-64-v3 "$src" -o "$work/v3"
g++ "${flags[@]}" -DEIGEN_USE_BLAS "$src" -o "$work/blas" \
  $(pkg-config --libs openblas)
core="$(OPENBLAS_VERBOSE=2 "$work/blas" probe 1 2>&1 | sed -n 's/^Core: //p' | head -1)"
echo "# C = X W and X^T C, X 9858 x 500, W 500 x 64, float, 1 thread"
printf '%-28s %9s %8s\n' variant s/pair GFLOP/s
"$work/sse2" "eigen, baseline x86-64"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  "$work/v3" "eigen, -march=x86-64-v3"
else
  echo "eigen, -march=x86-64-v3      (skipped: this CPU has no AVX2/FMA)"
fi
"$work/blas" "eigen + OpenBLAS ${core:-}"

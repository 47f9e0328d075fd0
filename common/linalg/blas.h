// OpenBLAS, the BLAS behind Eigen's dense products in every ldpgraph binary
// (EIGEN_USE_BLAS; see the top-level CMakeLists.txt).
//
// Why: the binaries are built for baseline x86-64, so Eigen's own kernels
// use SSE2 only. Debian's OpenBLAS is built for many CPUs at once and picks
// its kernels at run time (AVX2 and FMA on most machines of the last ten
// years), which makes a float matrix product about 2.4 times faster than
// Eigen's SSE2 one on the same core (docs/benchmarks.md, "Learning at
// scale"; tests/bench/gemm_variants.sh).
//
// Threads: ldpgraph splits work across threads itself, into parts whose
// boundaries do not depend on the thread count (common/parallel.h), so that
// results do not either. OpenBLAS's own thread pool is therefore kept at
// one thread: it would otherwise split each product again inside every
// worker and oversubscribe the cores.
#pragma once

#include <string>

namespace ldpgraph {

// Sets OpenBLAS to run each call on the calling thread. Idempotent and
// thread-safe; every entry point that does dense linear algebra calls it
// (the training models' constructors do), so no program has to.
void UseSingleThreadedBlas();

// The kernel family OpenBLAS chose for this CPU, e.g. "Zen" or "Haswell"
// (its own name; for benchmark reports).
std::string BlasCoreName();

}  // namespace ldpgraph

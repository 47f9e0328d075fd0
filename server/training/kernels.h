// The inner loops of link prediction over node embeddings, compiled twice:
// for x86-64-v3 (AVX2 and FMA) and for the baseline x86-64 the binary
// targets, with the version picked once at load time by the CPU it runs on
// (GCC's function multi-versioning). On other architectures there is one
// version. Each loop is elementwise or a fixed-order sum, so a given CPU
// gives the same result whatever the thread count.
#pragma once

#include <cstddef>

namespace ldpgraph::training::kernels {

// out[k] = (a[k] * b[k] - mean[k]) * scale[k] for k < d; with mean and scale
// null, out[k] = a[k] * b[k].
void HadamardRow(const float* a, const float* b, const float* mean,
                 const float* scale, float* out, size_t d);

// sum[k] += a[k] * b[k] and squares[k] += (a[k] * b[k])^2 for k < d, the
// product rounded to float as HadamardRow forms it, the sums in double.
void AccumulateHadamard(const float* a, const float* b, double* sum,
                        double* squares, size_t d);

// sum over k < d of w[k] * a[k] * b[k], in float, summed in 8 interleaved
// lanes (k mod 8) that are then added in lane order: the same order on every
// CPU.
float TripleDot(const float* a, const float* b, const float* w, size_t d);

// acc[k] += g * a[k] * b[k] for k < d.
void AccumulateScaledProduct(const float* a, const float* b, float g,
                             float* acc, size_t d);

}  // namespace ldpgraph::training::kernels

#include "server/training/kernels.h"

#if defined(__x86_64__) && !defined(__AVX2__) && !defined(LDPGRAPH_NO_MULTIVERSION)
#define LDPGRAPH_CLONES \
  __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LDPGRAPH_CLONES
#endif

namespace ldpgraph::training::kernels {

LDPGRAPH_CLONES
void HadamardRow(const float* __restrict a, const float* __restrict b,
                 const float* __restrict mean, const float* __restrict scale,
                 float* __restrict out, size_t d) {
  if (mean == nullptr) {
    for (size_t k = 0; k < d; ++k) out[k] = a[k] * b[k];
    return;
  }
  for (size_t k = 0; k < d; ++k) out[k] = (a[k] * b[k] - mean[k]) * scale[k];
}

LDPGRAPH_CLONES
void AccumulateHadamard(const float* __restrict a, const float* __restrict b,
                        double* __restrict sum, double* __restrict squares,
                        size_t d) {
  for (size_t k = 0; k < d; ++k) {
    const double h = static_cast<double>(a[k] * b[k]);
    sum[k] += h;
    squares[k] += h * h;
  }
}

LDPGRAPH_CLONES
float TripleDot(const float* __restrict a, const float* __restrict b,
                const float* __restrict w, size_t d) {
  constexpr size_t kLanes = 8;
  float lane[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t k = 0;
  for (; k + kLanes <= d; k += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      lane[j] += w[k + j] * (a[k + j] * b[k + j]);
    }
  }
  for (size_t j = 0; k < d; ++k, ++j) lane[j] += w[k] * (a[k] * b[k]);
  float s = 0;
  for (size_t j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

LDPGRAPH_CLONES
void AccumulateScaledProduct(const float* __restrict a,
                             const float* __restrict b, float g,
                             float* __restrict acc, size_t d) {
  for (size_t k = 0; k < d; ++k) acc[k] += g * (a[k] * b[k]);
}

}  // namespace ldpgraph::training::kernels

// The Hadamard features of node pairs: HadamardFeatures (link_task.h) and
// PairFeatures' standardisation and rows (internal/link_pair_features.h).
#include "server/training/internal/link_pair_features.h"

#include <algorithm>
#include <cmath>

#include "common/parallel.h"
#include "server/training/kernels.h"
#include "server/training/link_task.h"

namespace ldpgraph::training {

Mat<float> HadamardFeatures(const Mat<float>& z, const std::vector<Edge>& a,
                            const std::vector<Edge>& b) {
  Mat<float> out(static_cast<Eigen::Index>(a.size() + b.size()), z.cols());
  Eigen::Index i = 0;
  for (const auto* list : {&a, &b}) {
    for (const Edge& e : *list) {
      kernels::HadamardRow(z.row(e.u).data(), z.row(e.v).data(), nullptr,
                           nullptr, out.row(i++).data(), z.cols());
    }
  }
  return out;
}

namespace internal {

void PairFeatures::Fit(const PairList& list) {
  const size_t d = z_.cols(), n = list.size();
  constexpr size_t kParts = 64;
  const size_t parts = std::min(kParts, n);
  std::vector<std::vector<double>> sum(parts), squares(parts);
  ParallelFor(parts, threads_, [&](int, size_t p) {
    sum[p].assign(d, 0.0);
    squares[p].assign(d, 0.0);
    for (size_t i = p * n / parts; i < (p + 1) * n / parts; ++i) {
      const Edge& e = list[i];
      kernels::AccumulateHadamard(z_.row(e.u).data(), z_.row(e.v).data(),
                                  sum[p].data(), squares[p].data(), d);
    }
  });
  mean_.resize(d);
  scale_.resize(d);
  for (size_t k = 0; k < d; ++k) {
    double s = 0, q = 0;
    for (size_t p = 0; p < parts; ++p) {
      s += sum[p][k];
      q += squares[p][k];
    }
    const double m = s / n, second = q / n;
    const double var = second - m * m;
    // A constant column: E[h^2] - E[h]^2 cancels to rounding noise, not 0.
    const bool constant = !(var > 1e-9 * second);
    mean_[k] = static_cast<float>(m);
    scale_[k] = constant ? 0.0f : static_cast<float>(1.0 / std::sqrt(var));
  }
}

void PairFeatures::Fill(const PairList& list, const uint32_t* index,
                        size_t first, size_t count, Mat<float>* out) const {
  const size_t d = z_.cols();
  out->resize(static_cast<Eigen::Index>(count), z_.cols());
  const float* mean = mean_.empty() ? nullptr : mean_.data();
  const float* scale = mean_.empty() ? nullptr : scale_.data();
  constexpr size_t kRowsPerTask = 64;
  ParallelFor((count + kRowsPerTask - 1) / kRowsPerTask, threads_,
              [&](int, size_t t) {
                const size_t end = std::min(count, (t + 1) * kRowsPerTask);
                for (size_t r = t * kRowsPerTask; r < end; ++r) {
                  const Edge& e = list[index ? index[r] : first + r];
                  kernels::HadamardRow(z_.row(e.u).data(),
                                       z_.row(e.v).data(), mean, scale,
                                       out->row(r).data(), d);
                }
              });
}

}  // namespace internal
}  // namespace ldpgraph::training

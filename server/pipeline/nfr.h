// UPGNET's node feature regularisation (NFR; He, Li, Tang and Su, "Going
// Deeper into Locally Differentially Private Graph Neural Networks", ICML
// 2025): the curator shrinks every estimate towards zero by a fraction of
// the mechanism's output bound before aggregating,
//   x <- sign(x) max(|x| - B tau, 0),
// B the largest |estimate| the mechanism can produce
// (FeatureMechanism::EstimateBound), tau in [0, 1). A bounded mechanism's
// estimates sit at or near +-B on the few reported dimensions and at a
// constant elsewhere (Multi-bit: (alpha + beta)/2): the shrink sets the
// constant to zero and keeps the reported dimensions' sign, so the
// aggregation averages signal instead of the constant's offset.
// Post-processing of the reports: no privacy cost.
#pragma once

#include <cmath>

#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "common/linalg/matrix.h"
#include "server/pipeline/config.h"

namespace ldpgraph::pipeline {

// sign(x) max(|x| - threshold, 0), threshold >= 0.
inline float NfrShrink(float x, double threshold) {
  const double a = std::abs(static_cast<double>(x)) - threshold;
  if (!(a > 0)) return 0.0f;
  return static_cast<float>(x < 0 ? -a : a);
}

// B tau for a run of c on d: B the EstimateBound of the mechanism the run's
// agents perturb with (BuildFeatureMechanism). INVALID_ARGUMENT for a
// mechanism without a finite bound (laplace, hds, square-wave, none),
// naming it.
absl::StatusOr<double> NfrThreshold(const PipelineConfig& c, const Dataset& d,
                                    double tau);

// NfrShrink on every entry of rows held against *fill (every absent entry
// is *fill; the fill is shrunk with them). fill may be null (absent entries
// are 0, which stay 0). Stored entries that become 0 stay stored.
void ApplyNfr(double threshold, SparseRows* x, float* fill);

}  // namespace ldpgraph::pipeline

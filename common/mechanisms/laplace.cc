#include "common/mechanisms/laplace.h"

#include <cmath>

#include "common/mechanisms/internal/discrete_sampling.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::StatusOr<std::unique_ptr<LaplaceMechanism>> LaplaceMechanism::Create(
    MechanismSpec spec) {
  if (spec.kind != MechanismKind::kLaplace) {
    return absl::InvalidArgumentError("LaplaceMechanism needs kind laplace");
  }
  ASSIGN_OR_RETURN(spec, ValidateSpec(spec, spec.dimension));
  return std::unique_ptr<LaplaceMechanism>(new LaplaceMechanism(spec));
}

LaplaceMechanism::LaplaceMechanism(MechanismSpec spec)
    : FeatureMechanism(spec) {
  const double delta = spec.beta - spec.alpha;
  lambda_ = delta * *spec.sampled / spec.epsilon;
  granularity_ = internal::PowerOfTwoAtLeast(lambda_ * 0x1.0p-30);
  // Grid points inside [alpha, beta]; the range must hold at least one.
  grid_low_ = std::ceil(spec.alpha / granularity_);
  grid_high_ = std::floor(spec.beta / granularity_);
  if (grid_high_ < grid_low_) grid_high_ = grid_low_;
}

double LaplaceMechanism::EstimateVariance(double x) const {
  return scale() * (2 * lambda_ * lambda_ + x * x) - x * x;
}

SparseReport LaplaceMechanism::PerturbValid(absl::Span<const double> x,
                                              RandomSource& rng) const {
  SparseReport r;
  r.dimension = static_cast<uint32_t>(dimension());
  if (sampled() == dimension()) {
    r.dense = true;
  } else {
    r.indices = rng.SampleWithoutReplacement(r.dimension,
                                             static_cast<uint32_t>(sampled()));
  }
  const size_t n = r.size();
  r.values.reserve(n);
  const double geo = granularity_ / lambda_;
  for (size_t i = 0; i < n; ++i) {
    const double snapped = std::clamp(std::nearbyint(Clip(x[r.index(i)]) / granularity_),
                                      grid_low_, grid_high_);
    const double noise =
        static_cast<double>(internal::SampleTwoSidedGeometric(geo, rng));
    r.values.push_back((snapped + noise) * granularity_);
  }
  return r;
}

void LaplaceMechanism::EstimateValid(const SparseReport& r,
                                     absl::Span<double> out) const {
  const double s = scale();
  for (size_t i = 0; i < r.size(); ++i) out[r.index(i)] = s * r.values[i];
}

}  // namespace ldpgraph

#include "common/mechanisms/onebit.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::StatusOr<std::unique_ptr<OneBitMechanism>> OneBitMechanism::Create(
    MechanismSpec spec) {
  if (spec.kind != MechanismKind::kOneBit) {
    return absl::InvalidArgumentError("OneBitMechanism needs kind onebit");
  }
  if (spec.sampled.has_value() && *spec.sampled != spec.dimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "onebit reports every dimension: sampled must be d = ", spec.dimension,
        " or unset, got ", *spec.sampled));
  }
  ASSIGN_OR_RETURN(spec, ValidateSpec(spec, spec.dimension));
  return std::unique_ptr<OneBitMechanism>(new OneBitMechanism(spec));
}

OneBitMechanism::OneBitMechanism(MechanismSpec spec)
    : FeatureMechanism(spec),
      eps_dim_(spec.epsilon / spec.dimension),
      e_(std::exp(eps_dim_)) {
  const double delta = spec.beta - spec.alpha;
  // (e+1)/(e-1) = coth(eps/2); 1/(e-1) = 1/expm1(eps).
  const double coth = 1.0 / std::tanh(eps_dim_ / 2);
  const double inv = 1.0 / std::expm1(eps_dim_);
  // y* = ((e+1) y - 1)/(e-1) Delta + alpha: y = 1 gives (e/(e-1)) Delta + alpha
  // = (coth + 1)/2 Delta + alpha; y = 0 gives -Delta/(e-1) + alpha.
  one_ = 0.5 * (coth + 1.0) * delta + spec.alpha;
  zero_ = -inv * delta + spec.alpha;
}

double OneBitMechanism::ProbabilityOne(double x) const {
  return BitProbability((x - spec().alpha) / (spec().beta - spec().alpha), e_);
}

SparseReport OneBitMechanism::PerturbValid(absl::Span<const double> x,
                                             RandomSource& rng) const {
  SparseReport r;
  r.dimension = static_cast<uint32_t>(dimension());
  r.dense = true;
  r.bits.resize(x.size());
  for (size_t j = 0; j < x.size(); ++j) r.bits[j] = rng.Bernoulli(ProbabilityOne(Clip(x[j])));
  return r;
}

void OneBitMechanism::EstimateValid(const SparseReport& r,
                                    absl::Span<double> out) const {
  for (size_t j = 0; j < r.bits.size(); ++j) out[j] = r.bits[j] ? one_ : zero_;
}

// Every dimension is one of the two estimates.
double OneBitMechanism::EstimateBound() const {
  return std::max(std::abs(one_), std::abs(zero_));
}

double OneBitMechanism::EstimateVariance(double x) const {
  const double delta = spec().beta - spec().alpha;
  const double em1 = std::expm1(eps_dim_);
  return delta * delta * std::exp(eps_dim_) / (em1 * em1) +
         (x - spec().alpha) * (spec().beta - x);
}

}  // namespace ldpgraph

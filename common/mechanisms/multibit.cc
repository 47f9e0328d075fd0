#include "common/mechanisms/multibit.h"

#include <algorithm>
#include <cmath>

#include "common/status_macros.h"

namespace ldpgraph {

int MultiBitMechanism::DefaultM(double epsilon, int d) {
  const double m = std::floor(epsilon / 2.18);
  return static_cast<int>(std::max(1.0, std::min(static_cast<double>(d), m)));
}

absl::StatusOr<std::unique_ptr<MultiBitMechanism>> MultiBitMechanism::Create(
    MechanismSpec spec) {
  if (spec.kind != MechanismKind::kMultiBit) {
    return absl::InvalidArgumentError("MultiBitMechanism needs kind multibit");
  }
  const int default_m = spec.dimension >= 1 && std::isfinite(spec.epsilon)
                            ? DefaultM(spec.epsilon, spec.dimension)
                            : 1;
  ASSIGN_OR_RETURN(spec, ValidateSpec(spec, default_m));
  return std::unique_ptr<MultiBitMechanism>(new MultiBitMechanism(spec));
}

MultiBitMechanism::MultiBitMechanism(MechanismSpec spec)
    : FeatureMechanism(spec) {
  const double eps_m = spec.epsilon / *spec.sampled;
  e_ = std::exp(eps_m);
  // (e+1)/(e-1) = coth(eps_m / 2), accurate for small eps_m.
  const double coth = 1.0 / std::tanh(eps_m / 2);
  scale_ = spec.dimension * (spec.beta - spec.alpha) / (2.0 * *spec.sampled) *
           coth;
}

double MultiBitMechanism::ProbabilityOne(double x) const {
  return BitProbability((x - spec().alpha) / (spec().beta - spec().alpha), e_);
}

SparseReport MultiBitMechanism::PerturbValid(absl::Span<const double> x,
                                               RandomSource& rng) const {
  SparseReport r;
  r.dimension = static_cast<uint32_t>(dimension());
  r.indices = rng.SampleWithoutReplacement(r.dimension,
                                           static_cast<uint32_t>(sampled()));
  r.bits.reserve(r.indices.size());
  for (uint32_t j : r.indices) r.bits.push_back(rng.Bernoulli(ProbabilityOne(Clip(x[j]))));
  return r;
}

void MultiBitMechanism::EstimateValid(const SparseReport& r,
                                      absl::Span<double> out) const {
  const double mid = 0.5 * (spec().alpha + spec().beta);
  std::fill(out.begin(), out.end(), mid);
  for (size_t i = 0; i < r.indices.size(); ++i) {
    out[r.indices[i]] += r.bits[i] ? scale_ : -scale_;
  }
}

double MultiBitMechanism::EstimateMean(double x) const { return x; }

// (alpha + beta)/2 on an unreported dimension, that +- A on a reported one.
double MultiBitMechanism::EstimateBound() const {
  const double mid = 0.5 * (spec().alpha + spec().beta);
  return std::abs(mid) + scale_;
}

double MultiBitMechanism::EstimateVariance(double x) const {
  const double mid = 0.5 * (spec().alpha + spec().beta);
  const double frac = static_cast<double>(sampled()) / dimension();
  return scale_ * scale_ * frac - (x - mid) * (x - mid);
}

}  // namespace ldpgraph

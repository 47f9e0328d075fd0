#include "common/mechanisms/hds.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::StatusOr<std::unique_ptr<HdsMechanism>> HdsMechanism::Create(
    MechanismSpec spec) {
  if (spec.kind != MechanismKind::kHds) {
    return absl::InvalidArgumentError("HdsMechanism needs kind hds");
  }
  ASSIGN_OR_RETURN(spec, ValidateSpec(spec, /*default_sampled=*/1));
  return std::unique_ptr<HdsMechanism>(new HdsMechanism(spec));
}

absl::StatusOr<std::unique_ptr<SquareWaveMechanism>>
SquareWaveMechanism::Create(MechanismSpec spec) {
  if (spec.kind != MechanismKind::kSquareWave) {
    return absl::InvalidArgumentError(
        "SquareWaveMechanism needs kind square-wave");
  }
  if (spec.dimension != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "square-wave perturbs one value: d must be 1, got ", spec.dimension,
        " (use hds for vectors)"));
  }
  ASSIGN_OR_RETURN(spec, ValidateSpec(spec, /*default_sampled=*/1));
  return std::unique_ptr<SquareWaveMechanism>(new SquareWaveMechanism(spec));
}

double HdsMechanism::c() const {
  return static_cast<double>(sampled()) / dimension() * wave_.scale();
}

double HdsMechanism::EstimateMean(double x) const {
  return c() * ToCanonical(x);
}

double HdsMechanism::EstimateVariance(double x) const {
  // A sampled dimension (probability k/d) has the square wave's moments; an
  // unsampled one is 0. Var = (k/d) E[w^2] - C^2 t^2.
  const double t = ToCanonical(x);
  const double frac = static_cast<double>(sampled()) / dimension();
  const double second = wave_.Variance(t) + wave_.Mean(t) * wave_.Mean(t);
  return frac * second - c() * c() * t * t;
}

SparseReport HdsMechanism::PerturbValid(absl::Span<const double> x,
                                          RandomSource& rng) const {
  SparseReport r;
  r.dimension = static_cast<uint32_t>(dimension());
  r.indices = rng.SampleWithoutReplacement(r.dimension,
                                           static_cast<uint32_t>(sampled()));
  r.values.reserve(r.indices.size());
  for (uint32_t j : r.indices) {
    r.values.push_back(wave_.Sample(ToCanonical(Clip(x[j])), rng));
  }
  return r;
}

absl::Status HdsMechanism::ValidateValues(const SparseReport& r) const {
  const double limit = 1.0 + wave_.b();
  for (size_t i = 0; i < r.values.size(); ++i) {
    if (std::abs(r.values[i]) > limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value ", r.values[i], " at position ", i,
          " is outside the square wave's output range [-", limit, ", ", limit,
          "]"));
    }
  }
  return absl::OkStatus();
}

void HdsMechanism::EstimateValid(const SparseReport& r,
                                 absl::Span<double> out) const {
  for (size_t i = 0; i < r.indices.size(); ++i) out[r.indices[i]] = r.values[i];
}

}  // namespace ldpgraph

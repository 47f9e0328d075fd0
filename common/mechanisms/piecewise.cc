#include "common/mechanisms/piecewise.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {
double HalfExpM1(double eps) { return std::expm1(eps / 2); }
// C = (e^{eps/2}+1)/(e^{eps/2}-1) = coth(eps/4).
double PiecewiseC(double eps) { return 1.0 / std::tanh(eps / 4); }
}  // namespace

Piecewise::Piecewise(double epsilon)
    : epsilon_(epsilon),
      half_exp_m1_(HalfExpM1(epsilon)),
      c_(PiecewiseC(epsilon)),
      // p = (e^eps - e^{eps/2}) / (2 e^{eps/2} + 2) = e^{eps/2}(e^{eps/2}-1)/(2(e^{eps/2}+1))
      p_(std::exp(epsilon / 2) / (2 * c_)),
      grid_(c_, c_ - 1 > 0 ? c_ - 1 : 0x1.0p-60, epsilon) {}

double Piecewise::Variance(double t) const {
  const double a = half_exp_m1_;
  return t * t / a + (a + 4) / (3 * a * a);
}

double Piecewise::Sample(double t, RandomSource& rng) const {
  return grid_.Sample(grid_.WindowStart(Left(t)), rng);
}

absl::StatusOr<std::unique_ptr<PiecewiseMechanism>> PiecewiseMechanism::Create(
    MechanismSpec spec) {
  if (spec.kind != MechanismKind::kPiecewise) {
    return absl::InvalidArgumentError("PiecewiseMechanism needs kind piecewise");
  }
  ASSIGN_OR_RETURN(spec, ValidateSpec(spec, /*default_sampled=*/1));
  return std::unique_ptr<PiecewiseMechanism>(new PiecewiseMechanism(spec));
}

double PiecewiseMechanism::EstimateVariance(double x) const {
  // V = alpha + (t* + 1) Delta / 2 has Var (Delta/2)^2 Var_pm(t);
  // Y = (d/k) V on a sampled dimension: Var Y = (d/k)(Var V + x^2) - x^2.
  const double half = 0.5 * (spec().beta - spec().alpha);
  const double var_v = half * half * pm_.Variance(ToCanonical(x));
  return scale() * (var_v + x * x) - x * x;
}

SparseReport PiecewiseMechanism::PerturbValid(absl::Span<const double> x,
                                                RandomSource& rng) const {
  SparseReport r;
  r.dimension = static_cast<uint32_t>(dimension());
  r.indices = rng.SampleWithoutReplacement(r.dimension,
                                           static_cast<uint32_t>(sampled()));
  r.values.reserve(r.indices.size());
  for (uint32_t j : r.indices) r.values.push_back(pm_.Sample(ToCanonical(Clip(x[j])), rng));
  return r;
}

absl::Status PiecewiseMechanism::ValidateValues(const SparseReport& r) const {
  for (size_t i = 0; i < r.values.size(); ++i) {
    if (std::abs(r.values[i]) > pm_.c()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value ", r.values[i], " at position ", i,
          " is outside the Piecewise output range [-", pm_.c(), ", ", pm_.c(),
          "]"));
    }
  }
  return absl::OkStatus();
}

// (d/k) FromCanonical(t*) with t* in [-C, C] on a reported dimension, 0 on
// the others.
double PiecewiseMechanism::EstimateBound() const {
  return scale() * std::max(std::abs(FromCanonical(-pm_.c())),
                            std::abs(FromCanonical(pm_.c())));
}

void PiecewiseMechanism::EstimateValid(const SparseReport& r,
                                       absl::Span<double> out) const {
  for (size_t i = 0; i < r.indices.size(); ++i) {
    out[r.indices[i]] = scale() * FromCanonical(r.values[i]);
  }
}

}  // namespace ldpgraph

// Multi-bit encoder and rectifier: LPGNN (Sajadmanesh & Gatica-Perez,
// "Locally private graph neural networks", CCS 2021), Algorithm 1.
//
// Encoder (agent): sample m of d dimensions; for a sampled dimension i,
//   t_i ~ Bernoulli(1/(e^{eps/m}+1) + (x_i - alpha)/(beta - alpha)
//                   * (e^{eps/m}-1)/(e^{eps/m}+1))
//   x*_i = 2 t_i - 1 in {-1, +1}; unsampled dimensions are 0.
// The report is m (index, sign bit) pairs.
//
// Rectifier (curator, unbiased):
//   x~ = d (beta - alpha) / (2m) * (e^{eps/m}+1)/(e^{eps/m}-1) * x* + (alpha+beta)/2
//   Var[x~_i] = A^2 m/d - (x_i - (alpha+beta)/2)^2,  A the factor before x*.
// Default m = max(1, min(d, floor(eps / 2.18))) (LPGNN).
// Outputs are bits: no floating-point channel to protect.
#pragma once

#include <memory>

#include "common/mechanisms/feature_mechanism.h"

namespace ldpgraph {

class MultiBitMechanism final : public FeatureMechanism {
 public:
  // spec.kind must be kMultiBit.
  static absl::StatusOr<std::unique_ptr<MultiBitMechanism>> Create(
      MechanismSpec spec);

  // LPGNN's default m for a budget and dimension.
  static int DefaultM(double epsilon, int d);

  // P(t_i = 1) for a clipped input x.
  double ProbabilityOne(double x) const;
  // The rectifier's factor A = d (beta-alpha)/(2m) (e^{eps/m}+1)/(e^{eps/m}-1).
  double rectifier_scale() const { return scale_; }

  double EstimateMean(double x) const override;
  double EstimateVariance(double x) const override;
  double EstimateBound() const override;

 private:
  explicit MultiBitMechanism(MechanismSpec spec);

  SparseReport PerturbValid(absl::Span<const double> x,
                              RandomSource& rng) const override;
  void EstimateValid(const SparseReport& report,
                     absl::Span<double> out) const override;
  bool bit_reports() const override { return true; }

  double e_;      // e^{eps/m}
  double scale_;  // A
};

}  // namespace ldpgraph

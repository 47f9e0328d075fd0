// One-bit mechanism / PGC: Sajadmanesh & Gatica-Perez, "When differential
// privacy meets graph neural networks" (eqs. 3 and 5), after Duchi et al.
//
// Every one of the d dimensions is reported as one bit, each with budget
// eps_dim = eps / d, so that the report as a whole spends eps (sequential
// composition over the dimensions):
//   y ~ Bernoulli(1/(e^eps_dim+1) + (x - alpha)/Delta * (e^eps_dim-1)/(e^eps_dim+1))
// Estimator (curator, unbiased):
//   y* = ((e^eps_dim + 1) y - 1)/(e^eps_dim - 1) * Delta + alpha
//   Var[y*] = Delta^2 e^eps_dim/(e^eps_dim - 1)^2 + (x - alpha)(beta - x)
// The paper lets a node answer a repeated query with its stored y; in
// ldpgraph that is the budget memo's job (common/dp/accounting.h).
#pragma once

#include <memory>

#include "common/mechanisms/feature_mechanism.h"

namespace ldpgraph {

class OneBitMechanism final : public FeatureMechanism {
 public:
  // spec.kind must be kOneBit; sampled, if set, must equal d.
  static absl::StatusOr<std::unique_ptr<OneBitMechanism>> Create(
      MechanismSpec spec);

  // Budget of each dimension, eps / d.
  double epsilon_per_dimension() const { return eps_dim_; }
  // P(y = 1) for a clipped input x.
  double ProbabilityOne(double x) const;

  double EstimateMean(double x) const override { return x; }
  double EstimateVariance(double x) const override;
  double EstimateBound() const override;

 private:
  explicit OneBitMechanism(MechanismSpec spec);

  SparseReport PerturbValid(absl::Span<const double> x,
                              RandomSource& rng) const override;
  void EstimateValid(const SparseReport& report,
                     absl::Span<double> out) const override;
  bool dense_reports() const override { return true; }
  bool bit_reports() const override { return true; }

  double eps_dim_;
  double e_;     // e^eps_dim
  double one_;   // y* for y = 1
  double zero_;  // y* for y = 0
};

}  // namespace ldpgraph

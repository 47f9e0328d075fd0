// The Laplace mechanism on a node's feature vector (Dwork et al. 2006), in
// the two forms PrivGE and LPGNN compare against.
//
// All dimensions (k = d): each x_j + Lap(Delta d / eps), eps/d each.
// Sampled (k < d): k of d dimensions, each x_j + Lap(Delta k / eps).
// Delta = beta - alpha. Estimator (curator): (d/k) * value for a reported
// dimension, 0 otherwise; unbiased, Var = (d/k)(2 lambda^2 + x^2) - x^2.
//
// Floating-point safety follows Google's differential-privacy library: the
// clipped input is rounded to a grid of power-of-two granularity
// g ~ lambda * 2^-30 (and kept inside the grid-rounded range, so the
// sensitivity stays <= Delta), and the noise is g times a two-sided geometric
// draw with parameter g / lambda (internal/discrete_sampling.h). Every
// released value is a multiple of g whatever the input, and the privacy loss
// is exactly that of the discrete Laplace: <= eps/k per dimension.
#pragma once

#include <memory>

#include "common/mechanisms/feature_mechanism.h"

namespace ldpgraph {

class LaplaceMechanism final : public FeatureMechanism {
 public:
  // spec.kind must be kLaplace; k defaults to d (all dimensions).
  static absl::StatusOr<std::unique_ptr<LaplaceMechanism>> Create(
      MechanismSpec spec);

  // Noise scale lambda = Delta k / eps.
  double lambda() const { return lambda_; }
  // Grid granularity g of released values.
  double granularity() const { return granularity_; }
  // d / k.
  double scale() const { return static_cast<double>(dimension()) / sampled(); }

  double EstimateMean(double x) const override { return x; }
  double EstimateVariance(double x) const override;

 private:
  explicit LaplaceMechanism(MechanismSpec spec);

  SparseReport PerturbValid(absl::Span<const double> x,
                              RandomSource& rng) const override;
  void EstimateValid(const SparseReport& report,
                     absl::Span<double> out) const override;
  bool dense_reports() const override { return sampled() == dimension(); }

  double lambda_;
  double granularity_;
  double grid_low_;   // alpha rounded up to the grid, in units of g
  double grid_high_;  // beta rounded down to the grid, in units of g
};

}  // namespace ldpgraph

// The Piecewise mechanism: Wang et al., "Collecting and analyzing
// multidimensional data with local differential privacy", ICDE 2019
// (Algorithms 2 and 4). Formulas: mechanisms.md.
//
// One dimension, t in [-1, 1], budget eps:
//   C = (e^{eps/2} + 1)/(e^{eps/2} - 1);  p = (e^eps - e^{eps/2})/(2 e^{eps/2} + 2)
//   l(t) = (C+1)/2 t - (C-1)/2;  r(t) = l(t) + C - 1
//   density p on [l, r], p / e^eps on [-C, l) U (r, C]; unbiased;
//   Var = t^2/(e^{eps/2} - 1) + (e^{eps/2} + 3)/(3 (e^{eps/2} - 1)^2)
// d dimensions: sample k of d, eps/k each. Inputs are mapped from
// [alpha, beta] to [-1, 1]; reports carry the canonical t*.
// Estimator (curator): x^_j = (d/k) (alpha + (t*_j + 1)(beta - alpha)/2) for
// a reported j, 0 otherwise; unbiased.
//
// Sampling is discretised exactly like the square wave's
// (internal/discrete_sampling.h): a fixed-size window of grid points, so the
// release is exactly eps/k-LDP per dimension with no floating-point channel.
#pragma once

#include <memory>

#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/internal/discrete_sampling.h"

namespace ldpgraph {

// The scalar Piecewise mechanism. Immutable; thread-safe.
class Piecewise {
 public:
  explicit Piecewise(double epsilon);

  double c() const { return c_; }
  double p() const { return p_; }
  double Left(double t) const { return (c_ + 1) / 2 * t - (c_ - 1) / 2; }
  double Right(double t) const { return Left(t) + c_ - 1; }
  double Variance(double t) const;
  // One draw for t in [-1, 1].
  double Sample(double t, RandomSource& rng) const;

  const internal::WindowedGrid& grid() const { return grid_; }

 private:
  double epsilon_;
  double half_exp_m1_;  // e^{eps/2} - 1
  double c_;
  double p_;
  internal::WindowedGrid grid_;
};

class PiecewiseMechanism final : public FeatureMechanism {
 public:
  // spec.kind must be kPiecewise; k defaults to 1. d = k = 1 is the 1-D
  // mechanism.
  static absl::StatusOr<std::unique_ptr<PiecewiseMechanism>> Create(
      MechanismSpec spec);

  // The scalar mechanism each sampled dimension uses (budget eps/k).
  const Piecewise& piecewise() const { return pm_; }
  // d / k.
  double scale() const { return static_cast<double>(dimension()) / sampled(); }

  double EstimateMean(double x) const override { return x; }
  double EstimateVariance(double x) const override;
  double EstimateBound() const override;

 private:
  explicit PiecewiseMechanism(MechanismSpec spec)
      : FeatureMechanism(spec), pm_(spec.epsilon / *spec.sampled) {}

  SparseReport PerturbValid(absl::Span<const double> x,
                              RandomSource& rng) const override;
  absl::Status ValidateValues(const SparseReport& report) const override;
  void EstimateValid(const SparseReport& report,
                     absl::Span<double> out) const override;

  Piecewise pm_;
};

}  // namespace ldpgraph

// HDS, the high-dimensional square wave: PrivGE Algorithm 2 (Li et al.,
// "Privacy-preserving graph embedding based on local differential privacy").
//
// Sample k of d dimensions uniformly without replacement; each sampled
// dimension gets the square wave (square_wave.h) with eps/k, the others 0.
// Inputs are first mapped affinely from [alpha, beta] to [-1, 1]; reports and
// estimates are in those canonical coordinates (PrivGE normalises features to
// [-1, 1], where canonical and raw coincide).
//
//   C = (k/d) * b (e^{eps/k} - 1) / (b e^{eps/k} + 1)    (b at eps/k)
//   E[out_j] = C x_j
//   Var[out_j] = k (b^3 e^{eps/k} + 3b^2 + 3b + 1) / (3 d (b e^{eps/k} + 1))
//                + (C - C^2) x_j^2
//
// Estimator: none, by design. The curator uses the report as it is: PrivGE
// argues (Section 3) that unbiasing multiplies the noise by 1/C and hurts the
// embedding more than the bias does.
#pragma once

#include <memory>

#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/square_wave.h"

namespace ldpgraph {

class HdsMechanism : public FeatureMechanism {
 public:
  // spec.kind must be kHds; k defaults to 1.
  static absl::StatusOr<std::unique_ptr<HdsMechanism>> Create(
      MechanismSpec spec);

  // The square wave each sampled dimension uses (budget eps/k).
  const SquareWave& square_wave() const { return wave_; }
  // C of Lemma 3.2: E[out_j] = C x_j (canonical x_j).
  double c() const;

  double EstimateMean(double x) const override;
  double EstimateVariance(double x) const override;

 protected:
  HdsMechanism(MechanismSpec spec)
      : FeatureMechanism(spec), wave_(spec.epsilon / *spec.sampled) {}

  SparseReport PerturbValid(absl::Span<const double> x,
                              RandomSource& rng) const override;
  absl::Status ValidateValues(const SparseReport& report) const override;
  void EstimateValid(const SparseReport& report,
                     absl::Span<double> out) const override;

 private:
  SquareWave wave_;
};

// The square wave as a feature mechanism on a single value (d = 1): the
// one-dimensional case of HDS (k = d = 1, C = b (e^eps - 1) / (b e^eps + 1)).
class SquareWaveMechanism final : public HdsMechanism {
 public:
  // spec.kind must be kSquareWave and spec.dimension 1.
  static absl::StatusOr<std::unique_ptr<SquareWaveMechanism>> Create(
      MechanismSpec spec);

 private:
  using HdsMechanism::HdsMechanism;
};

}  // namespace ldpgraph

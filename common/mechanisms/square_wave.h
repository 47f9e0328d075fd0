// The square wave mechanism on one value in [-1, 1]: PrivGE (Li et al.),
// Algorithm 1, after Li et al., "Estimating numerical distributions under
// local differential privacy", SIGMOD 2020. Formulas: mechanisms.md.
//
//   b = (eps e^eps - e^eps + 1) / (e^eps (e^eps - eps - 1))
//   output in [-1-b, 1+b]; density p = e^eps / (2 b e^eps + 2) on [t-b, t+b],
//   q = 1 / (2 b e^eps + 2) elsewhere.
//
// Sampling is discretised (common/mechanisms/internal/discrete_sampling.h):
// outputs are multiples of a power-of-two granularity g <= b * 2^-20 and the
// high-density window holds a fixed number of grid points, so the released
// value is exactly eps-LDP and cannot reveal t through floating-point gaps.
// The discretisation moves the mean and variance by a relative O(2^-20).
#pragma once

#include "common/mechanisms/internal/discrete_sampling.h"
#include "common/random/random.h"

namespace ldpgraph {

// b(eps), accurate for every eps > 0: a series for eps < 1, where the
// closed form loses all its digits to cancellation, and a form that cannot
// overflow for large eps (b -> 0).
double SquareWaveB(double epsilon);

// The scalar square wave with budget eps. Immutable; thread-safe.
class SquareWave {
 public:
  // epsilon finite and > 0 (checked by the mechanisms that own one).
  explicit SquareWave(double epsilon);

  double epsilon() const { return epsilon_; }
  double b() const { return b_; }
  // Densities inside and outside the window.
  double p() const { return p_; }
  double q() const { return q_; }
  // E[out] = scale() * t, scale = b (e^eps - 1) / (b e^eps + 1).
  double scale() const { return scale_; }
  // E[out] and Var[out] for input t.
  double Mean(double t) const { return scale_ * t; }
  double Variance(double t) const;

  // One draw for t in [-1, 1] (the caller clips).
  double Sample(double t, RandomSource& rng) const;

  const internal::WindowedGrid& grid() const { return grid_; }

 private:
  double epsilon_;
  double b_;
  double p_;
  double q_;
  double scale_;
  internal::WindowedGrid grid_;
};

}  // namespace ldpgraph

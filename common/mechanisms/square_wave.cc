#include "common/mechanisms/square_wave.h"

#include <cmath>

namespace ldpgraph {

double SquareWaveB(double eps) {
  if (eps < 1.0) {
    // b = [sum_{n>=2} (n-1) eps^(n-2) / n!] / [e^eps sum_{n>=2} eps^(n-2) / n!]
    // (numerator and denominator of the closed form divided by eps^2).
    double num = 0, den = 0, term = 0.5;  // term = eps^(n-2) / n!, n = 2
    for (int n = 2; n < 40; ++n) {
      num += (n - 1) * term;
      den += term;
      term *= eps / (n + 1);
    }
    return num / (std::exp(eps) * den);
  }
  // Divide numerator and denominator by e^eps:
  // b = (eps - 1 + e^-eps) / (e^eps - eps - 1).
  const double den = std::expm1(eps) - eps;
  if (!std::isfinite(den)) return 0.0;
  return (eps - 1.0 + std::exp(-eps)) / den;
}

namespace {
// b e^eps without overflow: b e^eps = (eps - 1 + e^-eps) / (1 - (1 + eps) e^-eps)
// for eps >= 1.
double BTimesExp(double eps, double b) {
  if (eps < 1.0) return b * std::exp(eps);
  return (eps - 1.0 + std::exp(-eps)) / (1.0 - (1.0 + eps) * std::exp(-eps));
}
}  // namespace

SquareWave::SquareWave(double epsilon)
    : epsilon_(epsilon),
      b_(SquareWaveB(epsilon)),
      grid_(1.0 + b_, 2.0 * b_ > 0 ? 2.0 * b_ : 0x1.0p-60, epsilon) {
  const double be = BTimesExp(epsilon, b_);  // b e^eps
  p_ = be / b_ / (2 * be + 2);               // e^eps / (2 b e^eps + 2)
  if (!std::isfinite(p_)) p_ = 0.0;          // b = 0: window is a point mass
  q_ = 1.0 / (2 * be + 2);
  // b (e^eps - 1) / (b e^eps + 1) = (b e^eps - b) / (b e^eps + 1)
  scale_ = (be - b_) / (be + 1);
}

double SquareWave::Variance(double t) const {
  const double be = BTimesExp(epsilon_, b_);
  const double b = b_;
  // E[out^2] = (b^3 e^eps + 3b^2 + 3b + 1) / (3 (b e^eps + 1)) + scale t^2
  const double second =
      (b * b * be + 3 * b * b + 3 * b + 1) / (3 * (be + 1)) + scale_ * t * t;
  return second - scale_ * scale_ * t * t;
}

double SquareWave::Sample(double t, RandomSource& rng) const {
  return grid_.Sample(grid_.WindowStart(t - b_), rng);
}

}  // namespace ldpgraph

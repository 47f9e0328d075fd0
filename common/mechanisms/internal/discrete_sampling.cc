#include "common/mechanisms/internal/discrete_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace ldpgraph::internal {

double PowerOfTwoAtMost(double x) {
  int exponent;
  const double mantissa = std::frexp(x, &exponent);  // x = m * 2^e, m in [0.5, 1)
  (void)mantissa;
  return std::ldexp(1.0, exponent - 1);
}

double PowerOfTwoAtLeast(double x) {
  const double p = PowerOfTwoAtMost(x);
  return p == x ? p : 2 * p;
}

WindowedGrid::WindowedGrid(double range_half_width, double window_width,
                           double epsilon) {
  constexpr double kWindowPoints = 0x1.0p20;
  constexpr double kMaxRangePoints = 0x1.0p50;
  double g = PowerOfTwoAtMost(window_width / kWindowPoints);
  g = std::max(g, PowerOfTwoAtLeast(2 * range_half_width / kMaxRangePoints));
  granularity_ = g;
  half_points_ = static_cast<int64_t>(std::floor(range_half_width / g));
  const int64_t total = 2 * half_points_ + 1;
  window_points_ = std::clamp<int64_t>(
      static_cast<int64_t>(std::floor(window_width / g)), 1, total);
  // P(window) = M e^eps / (M e^eps + (N - M)), written so that e^eps cannot
  // overflow.
  const double m = static_cast<double>(window_points_);
  const double rest = static_cast<double>(total - window_points_);
  p_window_ = m / (m + rest * std::exp(-epsilon));
}

int64_t WindowedGrid::WindowStart(double window_left) const {
  const double idx = std::nearbyint(window_left / granularity_);
  const int64_t lo = -half_points_;
  const int64_t hi = half_points_ - window_points_ + 1;
  if (!(idx > static_cast<double>(lo))) return lo;
  if (!(idx < static_cast<double>(hi))) return hi;
  return static_cast<int64_t>(idx);
}

int64_t WindowedGrid::SampleIndex(int64_t start, RandomSource& rng) const {
  const int64_t total = 2 * half_points_ + 1;
  if (window_points_ == total || rng.Bernoulli(p_window_)) {
    return start + static_cast<int64_t>(
                       rng.UniformInt(static_cast<uint64_t>(window_points_)));
  }
  // Uniform over the points outside the window: draw a rank among them and
  // skip over the window.
  int64_t r = -half_points_ + static_cast<int64_t>(rng.UniformInt(
                                  static_cast<uint64_t>(total - window_points_)));
  if (r >= start) r += window_points_;
  return r;
}

int64_t SampleGeometric(double lambda, RandomSource& rng) {
  constexpr int64_t kMax = int64_t{1} << 62;
  // Mass beyond kMax: return the cap with that probability.
  if (rng.UniformDouble() >
      -std::expm1(-lambda * static_cast<double>(kMax))) {
    return kMax;
  }
  // Invariant: the sample lies in (left, right].
  int64_t left = 0;
  int64_t right = kMax;
  while (left + 1 < right) {
    // A midpoint that splits the remaining mass about in half, so the search
    // takes O(log) steps whatever lambda is.
    const double span = static_cast<double>(right - left);
    int64_t mid = left + static_cast<int64_t>(std::floor(
                             -(std::log(0.5) + std::log1p(std::exp(-lambda * span))) /
                             lambda));
    mid = std::clamp(mid, left + 1, right - 1);
    // P(sample in (left, mid] | sample in (left, right]).
    const double q = std::expm1(-lambda * static_cast<double>(mid - left)) /
                     std::expm1(-lambda * span);
    if (rng.UniformDouble() <= q) {
      right = mid;
    } else {
      left = mid;
    }
  }
  return right;
}

int64_t SampleTwoSidedGeometric(double lambda, RandomSource& rng) {
  // |z| + 1 is geometric; a zero drawn with a negative sign is redrawn so that
  // zero is not counted twice.
  while (true) {
    const int64_t magnitude = SampleGeometric(lambda, rng) - 1;
    const bool negative = (rng.Next64() & 1) != 0;
    if (magnitude == 0 && negative) continue;
    return negative ? -magnitude : magnitude;
  }
}

}  // namespace ldpgraph::internal

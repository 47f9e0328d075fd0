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
  // Block decomposition. With a block size B (a power of two: 1 when
  // lambda >= 1, else the largest with lambda B <= 1, capped at 2^61, so
  // lambda B is in (1/2, 1] for 2^-61 <= lambda < 1), write K - 1 = B Y + Z:
  //   Y, the number of whole blocks, is geometric on {0, 1, ...} with
  //     P(Y >= y + 1 | Y >= y) = e^{-lambda B}: a run of Bernoulli trials,
  //     about 1.5 of them on average;
  //   Z, the offset in the block, has P(z) proportional to e^{-lambda z} on
  //     [0, B): a uniform proposal accepted with probability
  //     e^{-lambda z} >= e^{-1}, so about 1.6 proposals.
  // By memorylessness P(K - 1 = B y + z) = (1 - e^-lambda) e^{-lambda (B y + z)}:
  // the geometric distribution itself, with no truncation and no search, at
  // the precision of the Bernoulli thresholds (2^-64). Values beyond kMax are
  // capped.
  const double block =
      lambda >= 1.0 ? 1.0 : std::min(PowerOfTwoAtMost(1.0 / lambda), 0x1.0p61);
  const uint64_t b = static_cast<uint64_t>(block);
  const double p_next_block = std::exp(-lambda * block);
  int64_t blocks = 0;
  while (rng.Bernoulli(p_next_block)) {
    if (++blocks > kMax / static_cast<int64_t>(b)) return kMax;
  }
  uint64_t offset = 0;
  if (b > 1) {
    do {
      offset = rng.UniformInt(b);
    } while (!rng.Bernoulli(std::exp(-lambda * static_cast<double>(offset))));
  }
  const int64_t k = blocks * static_cast<int64_t>(b) + static_cast<int64_t>(offset) + 1;
  return std::min(k, kMax);
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

// Tests for the floating-point-safe samplers: grid geometry, exactness of
// the window probabilities, and the geometric / discrete Laplace draws.
#include "common/mechanisms/internal/discrete_sampling.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

namespace ldpgraph::internal {
namespace {

TEST(PowerOfTwoTest, AtMostAndAtLeast) {
  EXPECT_EQ(PowerOfTwoAtMost(1.0), 1.0);
  EXPECT_EQ(PowerOfTwoAtMost(3.0), 2.0);
  EXPECT_EQ(PowerOfTwoAtMost(0.3), 0.25);
  EXPECT_EQ(PowerOfTwoAtLeast(0.3), 0.5);
  EXPECT_EQ(PowerOfTwoAtLeast(4.0), 4.0);
  EXPECT_EQ(PowerOfTwoAtLeast(4.5), 8.0);
  EXPECT_EQ(PowerOfTwoAtMost(1e-20), std::ldexp(1.0, -67));
}

TEST(WindowedGridTest, GeometryForSquareWaveLikeWindow) {
  // R = 1.5, window 1.0: g = 2^-20 (largest power of two with >= 2^20 points
  // in the window), 2^20 window points, floor(1.5 * 2^20) half points.
  WindowedGrid grid(1.5, 1.0, 1.0);
  EXPECT_EQ(grid.granularity(), std::ldexp(1.0, -20));
  EXPECT_EQ(grid.window_points(), int64_t{1} << 20);
  EXPECT_EQ(grid.half_points(), 3 * (int64_t{1} << 19));
  // P(window) = M e / (M e + (N - M)).
  const double m = grid.window_points();
  const double n = 2 * grid.half_points() + 1;
  EXPECT_NEAR(grid.window_probability(), m * M_E / (m * M_E + (n - m)), 1e-15);
}

TEST(WindowedGridTest, WindowStartIsRoundedAndClamped) {
  WindowedGrid grid(1.5, 1.0, 1.0);
  const double g = grid.granularity();
  EXPECT_EQ(grid.WindowStart(0.0), 0);
  EXPECT_EQ(grid.WindowStart(0.25), static_cast<int64_t>(0.25 / g));
  // A window starting at the far left clamps to the first point; at the far
  // right it clamps so the whole window fits.
  EXPECT_EQ(grid.WindowStart(-100.0), -grid.half_points());
  EXPECT_EQ(grid.WindowStart(100.0),
            grid.half_points() - grid.window_points() + 1);
}

TEST(WindowedGridTest, CoarsensWhenRangeWouldHoldTooManyPoints) {
  // A tiny window in a wide range: granularity limited by 2^50 range points.
  WindowedGrid grid(1000.0, 1e-12, 1.0);
  EXPECT_LE(2 * grid.half_points() + 1, (int64_t{1} << 50) + 1);
  EXPECT_EQ(grid.window_points(), 1);
}

TEST(WindowedGridTest, HugeEpsilonDoesNotOverflow) {
  WindowedGrid grid(1.0, 0.5, 1000.0);
  EXPECT_EQ(grid.window_probability(), 1.0);
}

TEST(WindowedGridTest, EveryOutputIsOnTheGridInRangeAndWindowMassIsRight) {
  // Coarse grid so outcomes can be counted exactly: R = 1, window 0.5,
  // eps = 1; override nothing, just check frequencies.
  WindowedGrid grid(1.0, 0.5, 1.0);
  SeededRandomForTesting rng(11);
  const int64_t start = grid.WindowStart(-0.2);
  const int n = 200000;
  int in_window = 0;
  for (int i = 0; i < n; ++i) {
    const int64_t idx = grid.SampleIndex(start, rng);
    ASSERT_GE(idx, -grid.half_points());
    ASSERT_LE(idx, grid.half_points());
    in_window += idx >= start && idx < start + grid.window_points();
    const double v = grid.Sample(start, rng);
    ASSERT_EQ(v, std::nearbyint(v / grid.granularity()) * grid.granularity());
  }
  const double p = grid.window_probability();
  EXPECT_NEAR(static_cast<double>(in_window) / n, p,
              5 * std::sqrt(p * (1 - p) / n));
}

TEST(WindowedGridTest, OutsideWindowIsUniformOnBothSides) {
  // Points left of the window and right of it must be equally likely per
  // point: compare the two sides' masses to their point counts.
  WindowedGrid grid(1.0, 0.5, 2.0);
  SeededRandomForTesting rng(12);
  const int64_t start = grid.WindowStart(0.1);
  const double left_points = start + grid.half_points();
  const double right_points =
      grid.half_points() - (start + grid.window_points()) + 1;
  int left = 0, right = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    const int64_t idx = grid.SampleIndex(start, rng);
    left += idx < start;
    right += idx >= start + grid.window_points();
  }
  const double outside = left + right;
  const double p_left = left_points / (left_points + right_points);
  EXPECT_NEAR(left / outside, p_left,
              5 * std::sqrt(p_left * (1 - p_left) / outside));
}

TEST(GeometricTest, MeanMatchesFormula) {
  SeededRandomForTesting rng(13);
  for (double lambda : {0.05, 0.7, 3.0}) {
    const int n = 100000;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; ++i) {
      const double k = static_cast<double>(SampleGeometric(lambda, rng));
      ASSERT_GE(k, 1);
      sum += k;
      sum2 += k * k;
    }
    // Geometric on {1,...} with success probability s = 1 - e^-lambda:
    // mean 1/s, variance (1 - s)/s^2.
    const double s = -std::expm1(-lambda);
    const double mean = 1 / s, var = (1 - s) / (s * s);
    EXPECT_NEAR(sum / n, mean, 5 * std::sqrt(var / n)) << lambda;
  }
}

TEST(GeometricTest, PointProbabilitiesForLargeLambda) {
  // lambda = ln 2: P(1) = 1/2, P(2) = 1/4, P(3) = 1/8.
  SeededRandomForTesting rng(14);
  std::map<int64_t, int> counts;
  const int n = 400000;
  for (int i = 0; i < n; ++i) ++counts[SampleGeometric(std::log(2.0), rng)];
  for (int k = 1; k <= 3; ++k) {
    const double p = std::ldexp(1.0, -k);
    EXPECT_NEAR(static_cast<double>(counts[k]) / n, p,
                5 * std::sqrt(p * (1 - p) / n))
        << k;
  }
}

TEST(GeometricTest, TinyLambdaStaysFiniteAndScales) {
  // lambda = 2^-30: mean about 2^30; the binary search must terminate and
  // land in the right order of magnitude.
  SeededRandomForTesting rng(15);
  const double lambda = std::ldexp(1.0, -30);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(SampleGeometric(lambda, rng));
  const double mean = 1 / -std::expm1(-lambda);
  EXPECT_NEAR(sum / n, mean, 5 * mean / std::sqrt(n));
}

TEST(TwoSidedGeometricTest, SymmetricWithRightZeroMassAndVariance) {
  SeededRandomForTesting rng(16);
  const double lambda = 0.5;
  const int n = 400000;
  int zeros = 0;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double z = static_cast<double>(SampleTwoSidedGeometric(lambda, rng));
    zeros += z == 0;
    sum += z;
    sum2 += z * z;
  }
  // P(0) = (1 - a)/(1 + a), a = e^-lambda; Var = 2a/(1 - a)^2.
  const double a = std::exp(-lambda);
  const double p0 = (1 - a) / (1 + a);
  const double var = 2 * a / ((1 - a) * (1 - a));
  EXPECT_NEAR(static_cast<double>(zeros) / n, p0, 5 * std::sqrt(p0 * (1 - p0) / n));
  EXPECT_NEAR(sum / n, 0.0, 5 * std::sqrt(var / n));
  EXPECT_NEAR(sum2 / n, var, 0.02 * var);
}

}  // namespace
}  // namespace ldpgraph::internal

// Tests for the Piecewise mechanism (Wang et al., ICDE'19): C, p, l(t), r(t), reports, estimator and moments.
#include "common/mechanisms/piecewise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/internal/mechanism_testing.h"
#include "common/random/random.h"

namespace ldpgraph {
namespace {

using ::ldpgraph::testing_util::ExpectEstimateMoments;
using ::ldpgraph::testing_util::ExpectInvalidArgument;
using ::ldpgraph::testing_util::ExpectMomentFormulas;
using ::ldpgraph::testing_util::ExpectRelNear;
using ::ldpgraph::testing_util::OkOrNull;
using ::ldpgraph::testing_util::SeededReport;

// --- mechanisms.md, written out ------------------------------------------------
// C = (e^{eps/2} + 1) / (e^{eps/2} - 1)
double HandC(double eps) {
  const double h = std::exp(eps / 2);
  return (h + 1) / (h - 1);
}
// p = (e^eps - e^{eps/2}) / (2 e^{eps/2} + 2)
double HandP(double eps) {
  const double h = std::exp(eps / 2);
  return (std::exp(eps) - h) / (2 * h + 2);
}
// Var = t^2 / (e^{eps/2} - 1) + (e^{eps/2} + 3) / (3 (e^{eps/2} - 1)^2)
double HandScalarVariance(double eps, double t) {
  const double h = std::exp(eps / 2);
  return t * t / (h - 1) + (h + 3) / (3 * (h - 1) * (h - 1));
}
// Sampled k of d, eps/k each, reported dimension estimated by
// Y = (d/k) V, V = alpha + (t* + 1) Delta / 2 (0 when not sampled). Then
// E[Y] = x and Var[Y] = (d/k) ((Delta/2)^2 Var_pm(t) + x^2) - x^2.
double HandVariance(int d, int k, double eps, double alpha, double beta,
                    double x) {
  const double t = 2 * (x - alpha) / (beta - alpha) - 1;
  const double half = (beta - alpha) / 2;
  const double s = static_cast<double>(d) / k;
  return s * (half * half * HandScalarVariance(eps / k, t) + x * x) - x * x;
}

std::unique_ptr<PiecewiseMechanism> MakePiecewise(int d, int k, double eps,
                                                  double alpha = -1,
                                                  double beta = 1) {
  return OkOrNull(PiecewiseMechanism::Create(
      {MechanismKind::kPiecewise, eps, d, k, alpha, beta}));
}

TEST(PiecewiseTest, CAndPMatchReference) {
  // mpmath at 50 digits.
  struct Case {
    double eps, c, p;
  };
  for (const Case& c : {Case{1.0, 4.0829881650735965683, 0.20190130414820950879},
                        Case{0.5, 8.0416233283755969285, 0.079836207458072638009},
                        Case{4.0, 1.3130352854993313036, 2.8137309714874426696}}) {
    SCOPED_TRACE(testing::Message() << "eps = " << c.eps);
    const Piecewise pm(c.eps);
    ExpectRelNear(pm.c(), c.c);
    ExpectRelNear(pm.p(), c.p);
    ExpectRelNear(pm.c(), HandC(c.eps));
    ExpectRelNear(pm.p(), HandP(c.eps));
  }
}

TEST(PiecewiseTest, LeftAndRightEnds) {
  for (double eps : {0.5, 1.0, 4.0}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    const Piecewise pm(eps);
    const double c = HandC(eps);
    // t = 1: l = 1, r = C. t = -1: l = -C, r = -1. t = 0: symmetric.
    EXPECT_NEAR(pm.Left(1.0), 1.0, 1e-12 * c);
    ExpectRelNear(pm.Right(1.0), c);
    ExpectRelNear(pm.Left(-1.0), -c);
    EXPECT_NEAR(pm.Right(-1.0), -1.0, 1e-12 * c);
    ExpectRelNear(pm.Left(0.0), -(c - 1) / 2);
    ExpectRelNear(pm.Right(0.0), (c - 1) / 2);
    // l(t) = (C+1)/2 t - (C-1)/2 at t = 0.3.
    ExpectRelNear(pm.Left(0.3), (c + 1) / 2 * 0.3 - (c - 1) / 2);
  }
}

TEST(PiecewiseTest, DensityIntegratesToOne) {
  for (double eps : {0.1, 0.5, 1.0, 4.0, 10.0}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    const Piecewise pm(eps);
    // p on [l, r] (width C - 1), p / e^eps on the rest of [-C, C] (width C + 1).
    const double mass =
        pm.p() * (pm.c() - 1) + pm.p() * std::exp(-eps) * (pm.c() + 1);
    EXPECT_NEAR(mass, 1.0, 1e-12);
  }
}

TEST(PiecewiseTest, ScalarVarianceMatchesFormula) {
  for (double eps : {0.5, 1.0, 4.0}) {
    for (double t : {-1.0, 0.0, 0.3, 1.0}) {
      SCOPED_TRACE(testing::Message() << "eps = " << eps << ", t = " << t);
      ExpectRelNear(Piecewise(eps).Variance(t), HandScalarVariance(eps, t));
    }
  }
}

TEST(PiecewiseTest, HighDensityIntervalHasProbabilityPTimesCMinusOne) {
  constexpr int kDraws = 200000;
  for (double eps : {0.5, 1.0, 4.0}) {
    for (double t : {-1.0, 0.3, 1.0}) {
      SCOPED_TRACE(testing::Message() << "eps = " << eps << ", t = " << t);
      const Piecewise pm(eps);
      const double c = HandC(eps);
      const double l = (c + 1) / 2 * t - (c - 1) / 2, r = l + c - 1;
      SeededRandomForTesting rng(5);
      int inside = 0, out_of_range = 0;
      for (int i = 0; i < kDraws; ++i) {
        const double y = pm.Sample(t, rng);
        if (y >= l && y <= r) ++inside;
        if (std::abs(y) > c) ++out_of_range;
      }
      const double p_window = HandP(eps) * (c - 1);
      EXPECT_NEAR(static_cast<double>(inside) / kDraws, p_window,
                  5 * std::sqrt(p_window * (1 - p_window) / kDraws));
      EXPECT_EQ(out_of_range, 0);
    }
  }
}

TEST(PiecewiseMechanismTest, DefaultsAndScale) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kPiecewise;
  spec.dimension = 8;
  auto m = PiecewiseMechanism::Create(spec);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->sampled(), 1);
  EXPECT_DOUBLE_EQ((*m)->scale(), 8.0);
  auto k2 = MakePiecewise(8, 2, 4.0);
  ASSERT_NE(k2, nullptr);
  EXPECT_DOUBLE_EQ(k2->scale(), 4.0);
  // Each sampled dimension uses eps / k.
  ExpectRelNear(k2->piecewise().c(), HandC(2.0));
}

TEST(PiecewiseMechanismTest, EstimateIsDOverKTimesFromCanonical) {
  // Range [0, 5], d = 4, k = 2: a reported t* maps to (d/k) (0 + (t*+1) 5/2).
  auto m = MakePiecewise(4, 2, 2.0, 0.0, 5.0);
  ASSERT_NE(m, nullptr);
  const double c = HandC(1.0);
  SparseReport r;
  r.dimension = 4;
  r.indices = {0, 3};
  r.values = {0.5, -c};
  std::vector<double> out(4, 9.0);
  ASSERT_TRUE(m->Estimate(r, absl::MakeSpan(out)).ok());
  EXPECT_DOUBLE_EQ(out[0], 2 * 1.5 * 2.5);
  EXPECT_DOUBLE_EQ(out[1], 0.0);
  EXPECT_DOUBLE_EQ(out[2], 0.0);
  EXPECT_NEAR(out[3], 2 * (1 - c) * 2.5, 1e-12);
}

TEST(PiecewiseMechanismTest, ValidateReportRejectsValueOutsideC) {
  auto m = MakePiecewise(4, 1, 1.0);
  ASSERT_NE(m, nullptr);
  const double c = HandC(1.0);
  SparseReport r;
  r.dimension = 4;
  r.indices = {1};
  r.values = {c * (1 - 1e-15)};
  EXPECT_TRUE(m->ValidateReport(r).ok());
  r.values = {c * (1 + 1e-12)};
  ExpectInvalidArgument(m->ValidateReport(r), "outside the Piecewise output range");
  r.values = {-c * (1 + 1e-12)};
  ExpectInvalidArgument(m->ValidateReport(r), "outside the Piecewise output range");
}

TEST(PiecewiseMechanismTest, ReportsValidateAndStayInRange) {
  auto m = MakePiecewise(10, 3, 1.5, 0.0, 1.0);
  ASSERT_NE(m, nullptr);
  const double c = m->piecewise().c();
  SeededRandomForTesting rng(2);
  std::vector<double> x(10, 0.4);
  for (int rep = 0; rep < 1000; ++rep) {
    auto r = m->Perturb(x, rng);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->indices.size(), 3u);
    for (double v : r->values) EXPECT_LE(std::abs(v), c);
    ASSERT_TRUE(m->ValidateReport(*r).ok());
  }
}

TEST(PiecewiseMechanismTest, OutOfRangeInputsAreClippedToTheBounds) {
  auto m = MakePiecewise(3, 2, 2.0, 0.0, 1.0);
  ASSERT_NE(m, nullptr);
  const double inf = std::numeric_limits<double>::infinity();
  auto report = [&](std::vector<double> x) {
    return SeededReport(*m, x, /*seed=*/12).values;
  };
  const auto at_bounds = report({1.0, 0.0, 1.0});
  EXPECT_EQ(report({10.0, -10.0, inf}), at_bounds);
  EXPECT_EQ(report({inf, -inf, 2.0}), at_bounds);
  EXPECT_NE(report({0.5, 0.5, 0.5}), at_bounds);
}

// --- Moments ------------------------------------------------------------------

using PiecewiseCase = ::ldpgraph::testing_util::MomentCase;

class PiecewiseMomentsTest : public testing::TestWithParam<PiecewiseCase> {};

TEST_P(PiecewiseMomentsTest, MeanAndVarianceMatchFormulas) {
  const PiecewiseCase c = GetParam();
  auto m = MakePiecewise(c.d, c.k, c.eps, c.alpha, c.beta);
  ASSERT_NE(m, nullptr);
  const double mean = c.x;  // unbiased
  const double var = HandVariance(c.d, c.k, c.eps, c.alpha, c.beta, c.x);
  ExpectMomentFormulas(*m, c.x, mean, var);

  std::vector<double> x(c.d, c.beta);
  x[0] = c.x;
  ExpectEstimateMoments(*m, x, /*seed=*/31415, /*draws=*/200000, mean, var);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PiecewiseMomentsTest,
    testing::Values(
        PiecewiseCase{1, 1, 0.5, -1, 1, -1.0}, PiecewiseCase{1, 1, 0.5, -1, 1, 0.3},
        PiecewiseCase{1, 1, 0.5, -1, 1, 1.0}, PiecewiseCase{1, 1, 1.0, -1, 1, -1.0},
        PiecewiseCase{1, 1, 1.0, -1, 1, 0.3}, PiecewiseCase{1, 1, 1.0, -1, 1, 1.0},
        PiecewiseCase{1, 1, 4.0, -1, 1, -1.0}, PiecewiseCase{1, 1, 4.0, -1, 1, 0.3},
        PiecewiseCase{1, 1, 4.0, -1, 1, 1.0}, PiecewiseCase{4, 1, 1.0, -1, 1, 0.3},
        PiecewiseCase{4, 2, 4.0, -1, 1, -1.0}, PiecewiseCase{1, 1, 1.0, 0, 1, 0.2},
        PiecewiseCase{3, 1, 4.0, 0, 5, 4.0}, PiecewiseCase{4, 2, 4.0, 0, 5, 0.0},
        // UPGNET-PM's shape: [0, 1], k = floor(eps / 2.5) of d.
        PiecewiseCase{8, 2, 5.0, 0, 1, 0.7}));

// Floating-point safety (Mironov 2012): whatever the input, every released
// value is a multiple of the grid's power-of-two granularity inside [-C, C].
TEST(PiecewiseTest, ReleasedValuesAreOnOneGridWhateverTheInput) {
  SeededRandomForTesting rng(78);
  for (double eps : {0.1, 1.0, 5.0}) {
    Piecewise pm(eps);
    const double g = pm.grid().granularity();
    EXPECT_EQ(g, std::ldexp(1.0, std::ilogb(g))) << "not a power of two";
    for (int i = 0; i <= 200; ++i) {
      const double t = std::min(1.0, -1.0 + i / 100.0 + (i % 3) / 3e3);
      for (int j = 0; j < 50; ++j) {
        const double v = pm.Sample(t, rng);
        ASSERT_EQ(v, std::nearbyint(v / g) * g) << "eps " << eps << " t " << t;
        ASSERT_LE(std::abs(v), pm.c()) << "eps " << eps << " t " << t;
      }
    }
  }
}

}  // namespace
}  // namespace ldpgraph

// Tests for the Laplace mechanism (all d or sampled k of d): lambda, granularity, reports, estimator and moments.
#include "common/mechanisms/laplace.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
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

// --- mechanisms.md, written out --------------------------------------------------
// x + Lap(lambda), lambda = Delta k / eps (k = d when every dimension is
// reported); estimate (d/k) * value on a reported dimension, 0 otherwise:
// E = x, Var = (d/k) (2 lambda^2 + x^2) - x^2.
double HandLambda(int k, double eps, double alpha, double beta) {
  return (beta - alpha) * k / eps;
}
double HandVariance(int d, int k, double eps, double alpha, double beta,
                    double x) {
  const double lambda = HandLambda(k, eps, alpha, beta);
  const double s = static_cast<double>(d) / k;
  return s * (2 * lambda * lambda + x * x) - x * x;
}

std::unique_ptr<LaplaceMechanism> MakeLaplace(int d, std::optional<int> k,
                                              double eps, double alpha = -1,
                                              double beta = 1) {
  return OkOrNull(LaplaceMechanism::Create(
      {MechanismKind::kLaplace, eps, d, k, alpha, beta}));
}

bool IsPowerOfTwo(double g) {
  int exponent;
  return g > 0 && std::frexp(g, &exponent) == 0.5;
}

TEST(LaplaceTest, LambdaIsDeltaKOverEps) {
  auto all = MakeLaplace(8, std::nullopt, 2.0);  // k defaults to d
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->sampled(), 8);
  EXPECT_DOUBLE_EQ(all->lambda(), 8.0);
  EXPECT_DOUBLE_EQ(all->scale(), 1.0);
  auto sampled = MakeLaplace(8, 2, 2.0);
  ASSERT_NE(sampled, nullptr);
  EXPECT_DOUBLE_EQ(sampled->lambda(), 2.0);
  EXPECT_DOUBLE_EQ(sampled->scale(), 4.0);
  auto range = MakeLaplace(3, 1, 0.5, 0.0, 5.0);
  ASSERT_NE(range, nullptr);
  EXPECT_DOUBLE_EQ(range->lambda(), 10.0);
}

TEST(LaplaceTest, GranularityExamples) {
  // lambda = 8 (a power of two): g = 8 * 2^-30 = 2^-27 exactly.
  auto a = MakeLaplace(8, 8, 2.0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->granularity(), std::ldexp(1.0, -27));
  // lambda = 3: the next power of two above 3 * 2^-30 is 2^-28.
  auto b = MakeLaplace(3, 3, 2.0);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->granularity(), std::ldexp(1.0, -28));
}

TEST(LaplaceTest, GranularityIsPowerOfTwoWithLambdaOverGIn2To29And2To30) {
  for (double eps : {1e-3, 0.1, 0.3, 0.5, 1.0, 3.0, 7.0, 100.0}) {
    for (int k : {1, 3, 10}) {
      for (double beta : {0.001, 1.0, 5.0, 1000.0}) {
        SCOPED_TRACE(testing::Message()
                     << "eps = " << eps << ", k = " << k << ", beta = " << beta);
        auto m = MakeLaplace(10, k, eps, -1.0, beta);
        ASSERT_NE(m, nullptr);
        ExpectRelNear(m->lambda(), HandLambda(k, eps, -1.0, beta));
        const double g = m->granularity();
        EXPECT_TRUE(IsPowerOfTwo(g)) << g;
        const double ratio = m->lambda() / g;
        EXPECT_GT(ratio, std::ldexp(1.0, 29));
        EXPECT_LE(ratio, std::ldexp(1.0, 30));
      }
    }
  }
}

TEST(LaplaceTest, ReleasedValuesAreMultiplesOfTheGranularity) {
  auto m = MakeLaplace(5, 5, 1.0, -1.0, 1.0);
  ASSERT_NE(m, nullptr);
  const double g = m->granularity();
  SeededRandomForTesting rng(4);
  // Inputs that are not on the grid.
  const std::vector<double> x = {0.1, -1.0 / 3, 0.7071067811865476, 1.0, -1.0};
  for (int rep = 0; rep < 2000; ++rep) {
    auto r = m->Perturb(x, rng);
    ASSERT_TRUE(r.ok());
    for (double v : r->values) {
      const double units = v / g;
      ASSERT_EQ(units, std::nearbyint(units)) << v;
    }
  }
}

TEST(LaplaceTest, DenseWhenAllDimensionsAndSparseWhenSampled) {
  SeededRandomForTesting rng(6);
  auto dense = MakeLaplace(4, 4, 1.0);
  ASSERT_NE(dense, nullptr);
  const std::vector<double> x = {0.1, 0.2, 0.3, 0.4};
  auto r = dense->Perturb(x, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->dense);
  EXPECT_TRUE(r->indices.empty());
  EXPECT_EQ(r->values.size(), 4u);
  EXPECT_TRUE(dense->ValidateReport(*r).ok());
  EXPECT_EQ(r->CompactBytes(), 32u);

  auto sparse = MakeLaplace(4, 2, 1.0);
  ASSERT_NE(sparse, nullptr);
  auto s = sparse->Perturb(x, rng);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->dense);
  EXPECT_EQ(s->indices.size(), 2u);
  EXPECT_EQ(s->values.size(), 2u);
  EXPECT_TRUE(sparse->ValidateReport(*s).ok());
  EXPECT_EQ(s->CompactBytes(), 24u);

  // Each mechanism rejects the other's shape.
  ExpectInvalidArgument(dense->ValidateReport(*s),
                        "laplace reports every dimension: expected "
                        "a dense report with no indices");
  SparseReport dense_for_sparse = *r;
  ExpectInvalidArgument(sparse->ValidateReport(dense_for_sparse),
                        "laplace reports are sparse, got a dense report");
}

TEST(LaplaceTest, EstimateScalesByDOverK) {
  auto sparse = MakeLaplace(4, 2, 1.0);
  ASSERT_NE(sparse, nullptr);
  SparseReport r;
  r.dimension = 4;
  r.indices = {0, 2};
  r.values = {1.5, -2.0};
  std::vector<double> out(4, 7.0);
  ASSERT_TRUE(sparse->Estimate(r, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, testing::ElementsAre(3.0, 0.0, -4.0, 0.0));

  auto dense = MakeLaplace(3, 3, 1.0);
  ASSERT_NE(dense, nullptr);
  SparseReport d;
  d.dimension = 3;
  d.dense = true;
  d.values = {0.5, -12.0, 3.25};
  std::vector<double> out3(3);
  ASSERT_TRUE(dense->Estimate(d, absl::MakeSpan(out3)).ok());
  EXPECT_THAT(out3, testing::ElementsAre(0.5, -12.0, 3.25));
}

TEST(LaplaceTest, ValidateReportRejectsNonFiniteValue) {
  auto m = MakeLaplace(3, 3, 1.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 3;
  r.dense = true;
  for (double bad : {std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity(), std::nan("")}) {
    r.values = {0.0, bad, 1.0};
    ExpectInvalidArgument(m->ValidateReport(r), "value at position 1 is not finite");
  }
}

TEST(LaplaceTest, OutOfRangeInputsAreClippedToTheBounds) {
  auto m = MakeLaplace(3, 3, 1.0, 0.0, 5.0);
  ASSERT_NE(m, nullptr);
  const double inf = std::numeric_limits<double>::infinity();
  auto report = [&](std::vector<double> x) {
    return SeededReport(*m, x, /*seed=*/13).values;
  };
  const auto at_bounds = report({5.0, 0.0, 5.0});
  EXPECT_EQ(report({50.0, -3.0, inf}), at_bounds);
  EXPECT_EQ(report({inf, -inf, 1e300}), at_bounds);
  EXPECT_NE(report({2.0, 2.0, 2.0}), at_bounds);
}

// --- Moments ---------------------------------------------------------------------

using LaplaceCase = ::ldpgraph::testing_util::MomentCase;

class LaplaceMomentsTest : public testing::TestWithParam<LaplaceCase> {};

TEST_P(LaplaceMomentsTest, MeanAndVarianceMatchFormulas) {
  const LaplaceCase c = GetParam();
  auto m = MakeLaplace(c.d, c.k, c.eps, c.alpha, c.beta);
  ASSERT_NE(m, nullptr);
  const double mean = c.x;
  const double var = HandVariance(c.d, c.k, c.eps, c.alpha, c.beta, c.x);
  ExpectMomentFormulas(*m, c.x, mean, var);

  std::vector<double> x(c.d, c.alpha);
  x[0] = c.x;
  ExpectEstimateMoments(*m, x, /*seed=*/8128, /*draws=*/200000, mean, var);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LaplaceMomentsTest,
    testing::Values(
        // All d (dense), eps/d per dimension.
        LaplaceCase{4, 4, 0.5, -1, 1, -1.0}, LaplaceCase{4, 4, 0.5, -1, 1, 0.3},
        LaplaceCase{4, 4, 0.5, -1, 1, 1.0}, LaplaceCase{4, 4, 1.0, -1, 1, -1.0},
        LaplaceCase{4, 4, 1.0, -1, 1, 0.3}, LaplaceCase{4, 4, 1.0, -1, 1, 1.0},
        LaplaceCase{4, 4, 4.0, -1, 1, -1.0}, LaplaceCase{4, 4, 4.0, -1, 1, 0.3},
        LaplaceCase{4, 4, 4.0, -1, 1, 1.0}, LaplaceCase{1, 1, 4.0, -1, 1, 0.3},
        // Sampled k of d.
        LaplaceCase{4, 1, 1.0, -1, 1, 0.3}, LaplaceCase{4, 2, 4.0, -1, 1, -1.0},
        // Other ranges.
        LaplaceCase{2, 2, 4.0, 0, 5, 4.0}, LaplaceCase{3, 1, 1.0, 0, 1, 0.2}));

}  // namespace
}  // namespace ldpgraph

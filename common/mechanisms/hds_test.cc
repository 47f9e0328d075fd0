// Tests for HDS (PrivGE Algorithm 2): C, sampling, clipping, reports and moments.
#include "common/mechanisms/hds.h"

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
using ::ldpgraph::testing_util::SampleEstimateMoments;
using ::ldpgraph::testing_util::SeededReport;
using ::testing::HasSubstr;

// --- mechanisms.md, written out (long double; used at eps/k >= 0.5) --------
long double HandB(long double eps) {
  const long double e = std::exp(eps);
  return (eps * e - e + 1) / (e * (e - eps - 1));
}
// C = (k/d) * b (e^{eps/k} - 1) / (b e^{eps/k} + 1), b at eps/k.
long double HandC(int d, int k, long double eps) {
  const long double ek = eps / k, e = std::exp(ek), b = HandB(ek);
  return static_cast<long double>(k) / d * b * (e - 1) / (b * e + 1);
}
// Var[out_j] = k (b^3 e^{eps/k} + 3b^2 + 3b + 1) / (3 d (b e^{eps/k} + 1))
//              + (C - C^2) t^2.
long double HandVariance(int d, int k, long double eps, long double t) {
  const long double ek = eps / k, e = std::exp(ek), b = HandB(ek);
  const long double c = HandC(d, k, eps);
  return k * (b * b * b * e + 3 * b * b + 3 * b + 1) / (3 * d * (b * e + 1)) +
         (c - c * c) * t * t;
}

std::unique_ptr<FeatureMechanism> MakeHds(int d, int k, double eps,
                                          double alpha = -1, double beta = 1) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kHds;
  spec.epsilon = eps;
  spec.dimension = d;
  spec.sampled = k;
  spec.alpha = alpha;
  spec.beta = beta;
  return OkOrNull(CreateFeatureMechanism(spec));
}

TEST(HdsTest, CForCoraShapedInput) {
  // d = 1433, k = 10, eps = 1: mpmath at 50 digits.
  auto m = HdsMechanism::Create(
      {MechanismKind::kHds, 1.0, 1433, 10, -1.0, 1.0});
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectRelNear((*m)->c(), 0.00033757278687784879025);
  ExpectRelNear((*m)->c(), static_cast<double>(HandC(1433, 10, 1.0)));
  // Each sampled dimension spends eps / k.
  EXPECT_DOUBLE_EQ((*m)->square_wave().epsilon(), 0.1);
}

TEST(HdsTest, CMatchesFormulaAcrossParameters) {
  struct Case {
    int d, k;
    double eps;
  };
  for (const Case& c : {Case{1, 1, 1.0}, Case{4, 1, 0.5}, Case{4, 2, 4.0},
                        Case{100, 7, 7.0}, Case{16, 16, 8.0}}) {
    SCOPED_TRACE(testing::Message()
                 << "d = " << c.d << ", k = " << c.k << ", eps = " << c.eps);
    auto m = HdsMechanism::Create(
        {MechanismKind::kHds, c.eps, c.d, c.k, -1.0, 1.0});
    ASSERT_TRUE(m.ok()) << m.status();
    ExpectRelNear((*m)->c(), static_cast<double>(HandC(c.d, c.k, c.eps)));
  }
  // d = k = 1, eps = 1: C = scale(1) = 1/e.
  auto one = HdsMechanism::Create({MechanismKind::kHds, 1.0, 1, 1, -1.0, 1.0});
  ASSERT_TRUE(one.ok());
  ExpectRelNear((*one)->c(), std::exp(-1.0));
}

TEST(HdsTest, DefaultKIsOne) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kHds;
  spec.dimension = 50;
  auto m = CreateFeatureMechanism(spec);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->sampled(), 1);
}

TEST(HdsTest, ReportHasKAscendingIndicesAndValuesInRange) {
  auto m = MakeHds(20, 5, 2.0);
  ASSERT_NE(m, nullptr);
  const double limit = 1 + SquareWaveB(2.0 / 5);
  SeededRandomForTesting rng(3);
  std::vector<double> x(20);
  for (int i = 0; i < 20; ++i) x[i] = -1 + 0.1 * i;
  for (int rep = 0; rep < 1000; ++rep) {
    auto r = m->Perturb(x, rng);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->dimension, 20u);
    EXPECT_FALSE(r->dense);
    ASSERT_EQ(r->indices.size(), 5u);
    ASSERT_EQ(r->values.size(), 5u);
    EXPECT_TRUE(r->bits.empty());
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_LT(r->indices[i], 20u);
      if (i > 0) {
        EXPECT_GT(r->indices[i], r->indices[i - 1]);
      }
      EXPECT_LE(std::abs(r->values[i]), limit);
    }
    ASSERT_TRUE(m->ValidateReport(*r).ok());
  }
}

TEST(HdsTest, EveryDimensionIsSampledWithProbabilityKOverD) {
  constexpr int kD = 10, kK = 3, kReports = 100000;
  auto m = MakeHds(kD, kK, 3.0);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(11);
  std::vector<double> x(kD, 0.0);
  std::vector<int> count(kD, 0);
  for (int rep = 0; rep < kReports; ++rep) {
    auto r = m->Perturb(x, rng);
    ASSERT_TRUE(r.ok());
    for (uint32_t j : r->indices) ++count[j];
  }
  const double p = static_cast<double>(kK) / kD;
  const double se = std::sqrt(p * (1 - p) / kReports);
  for (int j = 0; j < kD; ++j) {
    EXPECT_NEAR(static_cast<double>(count[j]) / kReports, p, 5 * se)
        << "dimension " << j;
  }
}

TEST(HdsTest, EstimateIsRawValueAtReportedIndicesAndZeroElsewhere) {
  auto m = MakeHds(5, 2, 2.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 5;
  r.indices = {1, 4};
  r.values = {0.75, -1.25};
  std::vector<double> out(5, 42.0);
  ASSERT_TRUE(m->Estimate(r, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, testing::ElementsAre(0.0, 0.75, 0.0, 0.0, -1.25));
}

TEST(HdsTest, OutOfRangeInputsAreClippedToTheBounds) {
  // Same seed: an input of 10 (or +inf) must yield exactly the report of 1,
  // and -inf exactly that of -1.
  auto m = MakeHds(4, 2, 1.0);
  ASSERT_NE(m, nullptr);
  const double inf = std::numeric_limits<double>::infinity();
  auto report = [&](std::vector<double> x) {
    return SeededReport(*m, x, /*seed=*/2024);
  };
  const SparseReport clipped = report({1.0, 1.0, -1.0, 0.5});
  for (const auto& x : {std::vector<double>{10.0, 1.0, -1.0, 0.5},
                        std::vector<double>{inf, 1.0e300, -inf, 0.5},
                        std::vector<double>{1.0, inf, -7.0, 0.5}}) {
    const SparseReport r = report(x);
    EXPECT_EQ(r.indices, clipped.indices);
    EXPECT_EQ(r.values, clipped.values);
  }
  // Sanity: an in-range change does change the report.
  EXPECT_NE(report({0.0, 0.0, 0.0, 0.5}).values, clipped.values);
}

TEST(HdsTest, ClippedInputHasTheMomentsOfTheBound) {
  // x = 10 on [-1, 1], d = k = 1: mean C * 1, not C * 10.
  auto m = MakeHds(1, 1, 1.0);
  ASSERT_NE(m, nullptr);
  constexpr int kDraws = 100000;
  const auto s = SampleEstimateMoments(*m, {10.0}, /*seed=*/8, kDraws);
  ASSERT_TRUE(s.has_value());
  const double var = static_cast<double>(HandVariance(1, 1, 1.0, 1.0));
  EXPECT_NEAR(s->mean, static_cast<double>(HandC(1, 1, 1.0)),
              5 * std::sqrt(var / kDraws));
}

TEST(HdsTest, ValidateReportRejectsValueOutsideOnePlusB) {
  auto m = MakeHds(4, 1, 2.0);
  ASSERT_NE(m, nullptr);
  const double limit = 1 + SquareWaveB(2.0);
  SparseReport r;
  r.dimension = 4;
  r.indices = {2};
  r.values = {-limit};
  EXPECT_TRUE(m->ValidateReport(r).ok());
  r.values = {-limit * (1 + 1e-12)};
  const absl::Status s = m->ValidateReport(r);
  ExpectInvalidArgument(s, "outside the square wave's output range");
  EXPECT_THAT(s.message(), HasSubstr("position 0"));
  // Estimate validates too.
  std::vector<double> out(4);
  EXPECT_EQ(m->Estimate(r, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HdsTest, ValidateReportRejectsDenseReport) {
  auto m = MakeHds(3, 3, 2.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 3;
  r.dense = true;
  r.values = {0, 0, 0};
  ExpectInvalidArgument(m->ValidateReport(r),
                        "hds reports are sparse, got a dense report");
}

TEST(HdsTest, ValidateReportRejectsBitsInsteadOfValues) {
  auto m = MakeHds(3, 1, 2.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 3;
  r.indices = {0};
  r.bits = {true};
  ExpectInvalidArgument(m->ValidateReport(r),
                        "carry 1 values and no bits; got 0 values and 1 bits");
}

// --- Moments ------------------------------------------------------------------

using HdsCase = ::ldpgraph::testing_util::MomentCase;

class HdsMomentsTest : public testing::TestWithParam<HdsCase> {};

TEST_P(HdsMomentsTest, MeanAndVarianceMatchFormulas) {
  const HdsCase c = GetParam();
  auto m = MakeHds(c.d, c.k, c.eps, c.alpha, c.beta);
  ASSERT_NE(m, nullptr);
  const double t = 2 * (c.x - c.alpha) / (c.beta - c.alpha) - 1;
  const double mean = static_cast<double>(HandC(c.d, c.k, c.eps)) * t;
  const double var = static_cast<double>(HandVariance(c.d, c.k, c.eps, t));
  ExpectMomentFormulas(*m, c.x, mean, var, /*mean_floor=*/1e-3);

  // Estimate dimension 0; the others hold different values.
  std::vector<double> x(c.d, 0.5 * (c.alpha + c.beta));
  x[0] = c.x;
  if (c.d > 1) x[1] = c.beta;
  ExpectEstimateMoments(*m, x, /*seed=*/4321, /*draws=*/200000, mean, var);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HdsMomentsTest,
    testing::Values(HdsCase{4, 1, 0.5, -1, 1, -1.0}, HdsCase{4, 1, 0.5, -1, 1, 0.3},
                    HdsCase{4, 1, 0.5, -1, 1, 1.0}, HdsCase{4, 1, 1.0, -1, 1, -1.0},
                    HdsCase{4, 1, 1.0, -1, 1, 0.3}, HdsCase{4, 1, 1.0, -1, 1, 1.0},
                    HdsCase{4, 1, 4.0, -1, 1, -1.0}, HdsCase{4, 1, 4.0, -1, 1, 0.3},
                    HdsCase{4, 1, 4.0, -1, 1, 1.0}, HdsCase{6, 3, 3.0, -1, 1, -1.0},
                    HdsCase{6, 3, 3.0, -1, 1, 0.3}, HdsCase{6, 3, 3.0, -1, 1, 1.0},
                    HdsCase{4, 2, 1.0, 0, 1, 0.25}, HdsCase{2, 1, 4.0, 0, 5, 5.0}));

}  // namespace
}  // namespace ldpgraph

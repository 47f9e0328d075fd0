// Tests for the Multi-bit encoder and rectifier (LPGNN Algorithm 1): m, A, P(t=1), reports and moments.
#include "common/mechanisms/multibit.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
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
using ::ldpgraph::testing_util::SeededReportBits;

// --- mechanisms.md, written out -------------------------------------------------
// A = d (beta - alpha) / (2m) * (e^{eps/m} + 1) / (e^{eps/m} - 1)
double HandA(int d, int m, double eps, double alpha, double beta) {
  const double e = std::exp(eps / m);
  return d * (beta - alpha) / (2.0 * m) * (e + 1) / (e - 1);
}
// P(t = 1) = 1/(e^{eps/m}+1) + (x - alpha)/(beta - alpha) (e^{eps/m}-1)/(e^{eps/m}+1)
double HandProbabilityOne(int m, double eps, double alpha, double beta,
                          double x) {
  const double e = std::exp(eps / m);
  return 1 / (e + 1) + (x - alpha) / (beta - alpha) * (e - 1) / (e + 1);
}
// x~ = A x* + mid with x* = 0 w.p. 1 - m/d, else +-1: unbiased, and
// Var = A^2 m/d - (x - mid)^2.
double HandVariance(int d, int m, double eps, double alpha, double beta,
                    double x) {
  const double a = HandA(d, m, eps, alpha, beta), mid = (alpha + beta) / 2;
  return a * a * m / d - (x - mid) * (x - mid);
}

std::unique_ptr<MultiBitMechanism> MakeMultiBit(int d, std::optional<int> m,
                                                double eps, double alpha = -1,
                                                double beta = 1) {
  return OkOrNull(
      MultiBitMechanism::Create({MechanismKind::kMultiBit, eps, d, m, alpha, beta}));
}

TEST(MultiBitTest, DefaultMFollowsLpgnn) {
  // m = max(1, min(d, floor(eps / 2.18))).
  EXPECT_EQ(MultiBitMechanism::DefaultM(1.0, 1433), 1);
  EXPECT_EQ(MultiBitMechanism::DefaultM(0.01, 1433), 1);
  EXPECT_EQ(MultiBitMechanism::DefaultM(2.17, 1433), 1);
  EXPECT_EQ(MultiBitMechanism::DefaultM(2.18, 1433), 1);
  EXPECT_EQ(MultiBitMechanism::DefaultM(4.36, 1433), 2);
  EXPECT_EQ(MultiBitMechanism::DefaultM(4.35, 1433), 1);
  EXPECT_EQ(MultiBitMechanism::DefaultM(6.54, 1433), 3);
  EXPECT_EQ(MultiBitMechanism::DefaultM(100.0, 1433), 45);
  // d caps m.
  EXPECT_EQ(MultiBitMechanism::DefaultM(100.0, 3), 3);
  EXPECT_EQ(MultiBitMechanism::DefaultM(4.36, 1), 1);
}

TEST(MultiBitTest, UnsetSampledResolvesToDefaultM) {
  auto m = MakeMultiBit(1433, std::nullopt, 4.36);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->sampled(), 2);
  auto capped = MakeMultiBit(3, std::nullopt, 100.0);
  ASSERT_NE(capped, nullptr);
  EXPECT_EQ(capped->sampled(), 3);
}

TEST(MultiBitTest, RectifierScaleMatchesReference) {
  // mpmath at 50 digits.
  auto a = MakeMultiBit(10, 2, 2.0, 0.0, 1.0);
  ASSERT_NE(a, nullptr);
  ExpectRelNear(a->rectifier_scale(), 5.4098835343466321219);
  auto b = MakeMultiBit(1433, 3, 8.0);
  ASSERT_NE(b, nullptr);
  ExpectRelNear(b->rectifier_scale(), 549.00323467871710368);
  for (double eps : {0.5, 1.0, 4.0}) {
    auto c = MakeMultiBit(7, 3, eps, -2.0, 5.0);
    ASSERT_NE(c, nullptr);
    ExpectRelNear(c->rectifier_scale(), HandA(7, 3, eps, -2.0, 5.0));
  }
}

TEST(MultiBitTest, ProbabilityOneAtBoundsAndMidpoint) {
  auto m = MakeMultiBit(4, 2, 2.0, 0.0, 5.0);  // eps/m = 1
  ASSERT_NE(m, nullptr);
  const double e = std::exp(1.0);
  ExpectRelNear(m->ProbabilityOne(0.0), 1 / (e + 1));
  ExpectRelNear(m->ProbabilityOne(5.0), e / (e + 1));
  ExpectRelNear(m->ProbabilityOne(2.5), 0.5);
  ExpectRelNear(m->ProbabilityOne(1.0), HandProbabilityOne(2, 2.0, 0, 5, 1.0));
}

TEST(MultiBitTest, EstimateIsMidPlusMinusAAtSampledAndMidElsewhere) {
  auto m = MakeMultiBit(4, 2, 2.0, 0.0, 5.0);
  ASSERT_NE(m, nullptr);
  const double a = HandA(4, 2, 2.0, 0.0, 5.0), mid = 2.5;
  SparseReport r;
  r.dimension = 4;
  r.indices = {1, 3};
  r.bits = {true, false};
  std::vector<double> out(4, -1.0);
  ASSERT_TRUE(m->Estimate(r, absl::MakeSpan(out)).ok());
  EXPECT_DOUBLE_EQ(out[0], mid);
  EXPECT_NEAR(out[1], mid + a, 1e-12 * a);
  EXPECT_DOUBLE_EQ(out[2], mid);
  EXPECT_NEAR(out[3], mid - a, 1e-12 * a);
}

TEST(MultiBitTest, ReportCarriesMBitsAndNoValues) {
  auto m = MakeMultiBit(30, 4, 4.0);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  const std::vector<double> x(30, 0.2);
  auto r = m->Perturb(x, rng);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->dense);
  EXPECT_EQ(r->indices.size(), 4u);
  EXPECT_EQ(r->bits.size(), 4u);
  EXPECT_TRUE(r->values.empty());
  EXPECT_TRUE(m->ValidateReport(*r).ok());
  // 4 indices * 4 bytes + 4 bits in one byte.
  EXPECT_EQ(r->CompactBytes(), 17u);
}

TEST(MultiBitTest, ValidateReportRejectsValuesInsteadOfBits) {
  auto m = MakeMultiBit(4, 2, 2.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 4;
  r.indices = {0, 2};
  r.values = {1.0, -1.0};
  ExpectInvalidArgument(m->ValidateReport(r),
                        "multibit reports carry 2 bits and no values; got 0 "
                        "bits and 2 values");
}

TEST(MultiBitTest, ValidateReportRejectsTooFewBits) {
  auto m = MakeMultiBit(4, 2, 2.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 4;
  r.indices = {0, 2};
  r.bits = {true};
  ExpectInvalidArgument(m->ValidateReport(r), "got 1 bits and 0 values");
}

TEST(MultiBitTest, OutOfRangeInputsAreClippedToTheBounds) {
  // With the same seed, x = +5 (range [-1, 1]) and +inf report exactly what
  // x = beta reports; -inf what alpha reports.
  auto m = MakeMultiBit(3, 3, 3.0);
  ASSERT_NE(m, nullptr);
  const double inf = std::numeric_limits<double>::infinity();
  auto bits = [&](std::vector<double> x) {
    return SeededReportBits(*m, x, /*seed=*/606, /*reports=*/200);
  };
  const auto at_bounds = bits({1.0, -1.0, 1.0});
  EXPECT_EQ(bits({5.0, -5.0, inf}), at_bounds);
  EXPECT_EQ(bits({inf, -inf, 1e300}), at_bounds);
  EXPECT_NE(bits({0.0, 0.0, 0.0}), at_bounds);
}

TEST(MultiBitTest, ClippedInputHasTheBitFrequencyOfBeta) {
  // Statistically too: P(t = 1) for x = +5 equals P(t = 1 | x = beta).
  auto m = MakeMultiBit(1, 1, 1.0);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(17);
  constexpr int kDraws = 200000;
  int ones = 0;
  const std::vector<double> x = {5.0};
  for (int i = 0; i < kDraws; ++i) {
    auto r = m->Perturb(x, rng);
    ASSERT_TRUE(r.ok());
    ones += r->bits[0];
  }
  const double p = std::exp(1.0) / (std::exp(1.0) + 1);
  EXPECT_NEAR(static_cast<double>(ones) / kDraws, p,
              5 * std::sqrt(p * (1 - p) / kDraws));
}

// --- Moments -----------------------------------------------------------------------

struct MultiBitCase {
  int d, m;
  double eps, alpha, beta, x;
};

void PrintTo(const MultiBitCase& c, std::ostream* os) {
  *os << "d=" << c.d << " m=" << c.m << " eps=" << c.eps << " range=["
      << c.alpha << "," << c.beta << "] x=" << c.x;
}

class MultiBitMomentsTest : public testing::TestWithParam<MultiBitCase> {};

TEST_P(MultiBitMomentsTest, MeanAndVarianceMatchFormulas) {
  const MultiBitCase c = GetParam();
  auto m = MakeMultiBit(c.d, c.m, c.eps, c.alpha, c.beta);
  ASSERT_NE(m, nullptr);
  const double mean = c.x;  // the rectifier is unbiased
  const double var = HandVariance(c.d, c.m, c.eps, c.alpha, c.beta, c.x);
  ExpectMomentFormulas(*m, c.x, mean, var);

  std::vector<double> x(c.d, c.alpha);
  x[0] = c.x;
  ExpectEstimateMoments(*m, x, /*seed=*/2718, /*draws=*/200000, mean, var);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MultiBitMomentsTest,
    testing::Values(
        MultiBitCase{4, 1, 0.5, -1, 1, -1.0}, MultiBitCase{4, 1, 0.5, -1, 1, 0.3},
        MultiBitCase{4, 1, 0.5, -1, 1, 1.0}, MultiBitCase{4, 1, 1.0, -1, 1, -1.0},
        MultiBitCase{4, 1, 1.0, -1, 1, 0.3}, MultiBitCase{4, 1, 1.0, -1, 1, 1.0},
        MultiBitCase{4, 1, 4.0, -1, 1, -1.0}, MultiBitCase{4, 1, 4.0, -1, 1, 0.3},
        MultiBitCase{4, 1, 4.0, -1, 1, 1.0}, MultiBitCase{4, 2, 4.0, -1, 1, 0.3},
        MultiBitCase{1, 1, 1.0, -1, 1, 0.3}, MultiBitCase{3, 1, 1.0, 0, 5, 0.0},
        MultiBitCase{3, 1, 1.0, 0, 5, 2.0}, MultiBitCase{3, 2, 4.0, 0, 5, 5.0},
        MultiBitCase{5, 5, 4.0, 0, 1, 0.8}));

}  // namespace
}  // namespace ldpgraph

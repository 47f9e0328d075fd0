// Tests for the one-bit mechanism / PGC (after Duchi et al.): eps per dimension, y*, P(y=1) and moments.
#include "common/mechanisms/onebit.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
using ::testing::HasSubstr;

// --- mechanisms.md, written out (eps here is the per-dimension budget) -----
// y* = ((e^eps + 1) y - 1) / (e^eps - 1) * Delta + alpha
double HandYStar(double eps, double alpha, double beta, int y) {
  const double e = std::exp(eps);
  return ((e + 1) * y - 1) / (e - 1) * (beta - alpha) + alpha;
}
// Var[y*] = Delta^2 e^eps / (e^eps - 1)^2 + (x - alpha)(beta - x)
double HandVariance(double eps, double alpha, double beta, double x) {
  const double e = std::exp(eps), delta = beta - alpha;
  return delta * delta * e / ((e - 1) * (e - 1)) + (x - alpha) * (beta - x);
}

std::unique_ptr<OneBitMechanism> MakeOneBit(int d, double eps, double alpha = -1,
                                            double beta = 1,
                                            std::optional<int> sampled = {}) {
  return OkOrNull(OneBitMechanism::Create(
      {MechanismKind::kOneBit, eps, d, sampled, alpha, beta}));
}

TEST(OneBitTest, EpsilonPerDimensionIsEpsOverD) {
  auto m = MakeOneBit(4, 2.0);
  ASSERT_NE(m, nullptr);
  EXPECT_DOUBLE_EQ(m->epsilon_per_dimension(), 0.5);
  EXPECT_DOUBLE_EQ(m->epsilon(), 2.0);  // the report as a whole spends eps
  EXPECT_EQ(m->sampled(), 4);
}

TEST(OneBitTest, RejectsSampledOtherThanD) {
  for (int k : {1, 2, 4}) {
    auto m = OneBitMechanism::Create(
        {MechanismKind::kOneBit, 1.0, 3, k, -1.0, 1.0});
    ASSERT_FALSE(m.ok()) << "k = " << k;
    ExpectInvalidArgument(m.status(),
                          "onebit reports every dimension: sampled must be d = 3");
    EXPECT_THAT(m.status().message(), HasSubstr(absl::StrCat("got ", k)));
  }
  // sampled = d is accepted.
  EXPECT_NE(MakeOneBit(3, 1.0, -1, 1, 3), nullptr);
}

TEST(OneBitTest, YStarForBothBitsMatchesReference) {
  // d = 3, eps = 3: eps_dim = 1; range [0, 5]. mpmath at 50 digits:
  // y = 1: e/(e-1) * 5 = 7.9098835343466321219; y = 0: -5/(e-1).
  auto m = MakeOneBit(3, 3.0, 0.0, 5.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 3;
  r.dense = true;
  r.bits = {true, false, true};
  std::vector<double> out(3);
  ASSERT_TRUE(m->Estimate(r, absl::MakeSpan(out)).ok());
  ExpectRelNear(out[0], 7.9098835343466321219);
  ExpectRelNear(out[1], -2.9098835343466321219);
  ExpectRelNear(out[2], 7.9098835343466321219);
  for (double eps : {0.5, 1.0, 4.0}) {
    auto one = MakeOneBit(1, eps, -2.0, 3.0);
    ASSERT_NE(one, nullptr);
    SparseReport s;
    s.dimension = 1;
    s.dense = true;
    double v = 0;
    for (int y : {0, 1}) {
      s.bits = {y == 1};
      ASSERT_TRUE(one->Estimate(s, absl::MakeSpan(&v, 1)).ok());
      ExpectRelNear(v, HandYStar(eps, -2.0, 3.0, y));
    }
  }
}

TEST(OneBitTest, ProbabilityOneAtBoundsAndMidpoint) {
  auto m = MakeOneBit(2, 2.0, 0.0, 5.0);  // eps_dim = 1
  ASSERT_NE(m, nullptr);
  const double e = std::exp(1.0);
  ExpectRelNear(m->ProbabilityOne(0.0), 1 / (e + 1));
  ExpectRelNear(m->ProbabilityOne(5.0), e / (e + 1));
  ExpectRelNear(m->ProbabilityOne(2.5), 0.5);
  ExpectRelNear(m->ProbabilityOne(1.0), 1 / (e + 1) + 0.2 * (e - 1) / (e + 1));
}

TEST(OneBitTest, ReportIsDenseBits) {
  auto m = MakeOneBit(1433, 1.0);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  const std::vector<double> x(1433, 0.0);
  auto r = m->Perturb(x, rng);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->dense);
  EXPECT_TRUE(r->indices.empty());
  EXPECT_TRUE(r->values.empty());
  EXPECT_EQ(r->bits.size(), 1433u);
  EXPECT_EQ(r->size(), 1433u);
  EXPECT_EQ(r->CompactBytes(), 180u);  // ceil(1433 / 8)
  EXPECT_TRUE(m->ValidateReport(*r).ok());
}

TEST(OneBitTest, ValidateReportRejectsSparseReport) {
  auto m = MakeOneBit(3, 1.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 3;
  r.indices = {0, 1, 2};
  r.bits = {true, false, true};
  ExpectInvalidArgument(m->ValidateReport(r),
                        "onebit reports every dimension: expected a "
                        "dense report with no indices");
  // dense flag set but indices present: also rejected.
  r.dense = true;
  EXPECT_EQ(m->ValidateReport(r).code(), absl::StatusCode::kInvalidArgument);
}

TEST(OneBitTest, ValidateReportRejectsWrongBitCount) {
  auto m = MakeOneBit(3, 1.0);
  ASSERT_NE(m, nullptr);
  SparseReport r;
  r.dimension = 3;
  r.dense = true;
  r.bits = {true, false};
  ExpectInvalidArgument(m->ValidateReport(r),
                        "onebit reports carry 3 bits and no values; got 2 bits");
}

TEST(OneBitTest, OutOfRangeInputsAreClippedToTheBounds) {
  auto m = MakeOneBit(3, 3.0, 0.0, 5.0);
  ASSERT_NE(m, nullptr);
  const double inf = std::numeric_limits<double>::infinity();
  auto bits = [&](std::vector<double> x) {
    return SeededReportBits(*m, x, /*seed=*/31, /*reports=*/200);
  };
  const auto at_bounds = bits({5.0, 0.0, 5.0});
  EXPECT_EQ(bits({7.0, -3.0, inf}), at_bounds);
  EXPECT_EQ(bits({inf, -inf, 1e308}), at_bounds);
  EXPECT_NE(bits({2.5, 2.5, 2.5}), at_bounds);
}

// --- Moments -------------------------------------------------------------------

struct OneBitCase {
  int d;
  double eps, alpha, beta, x;
};

void PrintTo(const OneBitCase& c, std::ostream* os) {
  *os << "d=" << c.d << " eps=" << c.eps << " range=[" << c.alpha << ","
      << c.beta << "] x=" << c.x;
}

class OneBitMomentsTest : public testing::TestWithParam<OneBitCase> {};

TEST_P(OneBitMomentsTest, MeanAndVarianceMatchFormulas) {
  const OneBitCase c = GetParam();
  auto m = MakeOneBit(c.d, c.eps, c.alpha, c.beta);
  ASSERT_NE(m, nullptr);
  const double eps_dim = c.eps / c.d;
  const double mean = c.x;  // y* is unbiased
  const double var = HandVariance(eps_dim, c.alpha, c.beta, c.x);
  ExpectMomentFormulas(*m, c.x, mean, var);

  // Estimate the last dimension; the others sit at beta.
  std::vector<double> x(c.d, c.beta);
  x[c.d - 1] = c.x;
  ExpectEstimateMoments(*m, x, /*seed=*/1618, /*draws=*/200000, mean, var,
                        /*dimension=*/c.d - 1);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, OneBitMomentsTest,
    testing::Values(OneBitCase{1, 0.5, -1, 1, -1.0}, OneBitCase{1, 0.5, -1, 1, 0.3},
                    OneBitCase{1, 0.5, -1, 1, 1.0}, OneBitCase{1, 1.0, -1, 1, -1.0},
                    OneBitCase{1, 1.0, -1, 1, 0.3}, OneBitCase{1, 1.0, -1, 1, 1.0},
                    OneBitCase{1, 4.0, -1, 1, -1.0}, OneBitCase{1, 4.0, -1, 1, 0.3},
                    OneBitCase{1, 4.0, -1, 1, 1.0}, OneBitCase{2, 4.0, -1, 1, 0.3},
                    OneBitCase{4, 4.0, 0, 5, 0.0}, OneBitCase{4, 4.0, 0, 5, 1.5},
                    OneBitCase{2, 1.0, 0, 5, 5.0}, OneBitCase{3, 3.0, 0, 1, 0.9}));

}  // namespace
}  // namespace ldpgraph

// Tests for k-ary randomized response on labels: p, q, transition matrix, unbiased one-hot and frequencies.
#include "common/mechanisms/label_rr.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/mechanisms/internal/mechanism_testing.h"
#include "common/random/random.h"

namespace ldpgraph {
namespace {

using ::ldpgraph::testing_util::ExpectInvalidArgument;
using ::ldpgraph::testing_util::ExpectRelNear;
using ::ldpgraph::testing_util::OkOrNull;

std::unique_ptr<LabelRandomizedResponse> MakeRr(double eps, int classes) {
  return OkOrNull(LabelRandomizedResponse::Create(eps, classes));
}

TEST(LabelRrTest, KeepAndOtherProbabilities) {
  // p = e^eps / (e^eps + c - 1), q = 1 / (e^eps + c - 1).
  const double e = std::exp(1.0);
  auto two = MakeRr(1.0, 2);
  ASSERT_NE(two, nullptr);
  ExpectRelNear(two->keep_probability(), e / (e + 1));
  ExpectRelNear(two->other_probability(), 1 / (e + 1));
  auto seven = MakeRr(1.0, 7);
  ASSERT_NE(seven, nullptr);
  ExpectRelNear(seven->keep_probability(), e / (e + 6));
  ExpectRelNear(seven->other_probability(), 1 / (e + 6));
  EXPECT_EQ(seven->classes(), 7);
  EXPECT_EQ(seven->epsilon(), 1.0);
  auto small = MakeRr(0.01, 3);
  ASSERT_NE(small, nullptr);
  ExpectRelNear(small->keep_probability(), std::exp(0.01) / (std::exp(0.01) + 2));
}

TEST(LabelRrTest, HugeEpsilonStaysFinite) {
  auto m = MakeRr(1000.0, 5);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->keep_probability(), 1.0);
  EXPECT_GE(m->other_probability(), 0.0);
  EXPECT_LT(m->other_probability(), 1e-300);
  auto v = m->UnbiasedOneHot(2);
  ASSERT_TRUE(v.ok());
  for (double x : *v) EXPECT_TRUE(std::isfinite(x));
  EXPECT_DOUBLE_EQ((*v)[2], 1.0);
}

TEST(LabelRrTest, TransitionMatrixRowsSumToOne) {
  for (int c : {2, 3, 7, 40}) {
    for (double eps : {0.1, 1.0, 5.0}) {
      SCOPED_TRACE(testing::Message() << "c = " << c << ", eps = " << eps);
      auto m = MakeRr(eps, c);
      ASSERT_NE(m, nullptr);
      const std::vector<double> t = m->TransitionMatrix();
      ASSERT_EQ(t.size(), static_cast<size_t>(c * c));
      const double e = std::exp(eps);
      for (int i = 0; i < c; ++i) {
        double row = 0;
        for (int j = 0; j < c; ++j) {
          row += t[i * c + j];
          ExpectRelNear(t[i * c + j], (i == j ? e : 1.0) / (e + c - 1));
        }
        EXPECT_NEAR(row, 1.0, 1e-12);
      }
    }
  }
}

TEST(LabelRrTest, UnbiasedOneHotValues) {
  // (e_j - q 1) / (p - q): (1 - q)/(p - q) at j, -q/(p - q) elsewhere.
  // c = 3, eps = 1: p - q = (e - 1)/(e + 2), so 1 at j gives (e + 1)/(e - 1)
  // and -1/(e - 1) elsewhere.
  auto m = MakeRr(1.0, 3);
  ASSERT_NE(m, nullptr);
  const double e = std::exp(1.0);
  auto v = m->UnbiasedOneHot(1);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 3u);
  ExpectRelNear((*v)[0], -1 / (e - 1));
  ExpectRelNear((*v)[1], (e + 1) / (e - 1));
  ExpectRelNear((*v)[2], -1 / (e - 1));
  // The entries of an unbiased one-hot sum to 1.
  EXPECT_NEAR((*v)[0] + (*v)[1] + (*v)[2], 1.0, 1e-12);
}

TEST(LabelRrTest, UnbiasedOneHotInvertsTheTransitionMatrix) {
  // sum_j T[i][j] UnbiasedOneHot(j) = e_i exactly.
  for (int c : {2, 5}) {
    auto m = MakeRr(0.7, c);
    ASSERT_NE(m, nullptr);
    const auto t = m->TransitionMatrix();
    for (int i = 0; i < c; ++i) {
      std::vector<double> expectation(c, 0.0);
      for (int j = 0; j < c; ++j) {
        auto v = m->UnbiasedOneHot(j);
        ASSERT_TRUE(v.ok());
        for (int l = 0; l < c; ++l) expectation[l] += t[i * c + j] * (*v)[l];
      }
      for (int l = 0; l < c; ++l) {
        EXPECT_NEAR(expectation[l], l == i ? 1.0 : 0.0, 1e-12);
      }
    }
  }
}

TEST(LabelRrTest, RejectsEpsilonZero) {
  auto m = LabelRandomizedResponse::Create(0.0, 3);
  ExpectInvalidArgument(m.status(), "epsilon must be finite and > 0, got 0");
}

TEST(LabelRrTest, RejectsNegativeEpsilon) {
  auto m = LabelRandomizedResponse::Create(-1.0, 3);
  ExpectInvalidArgument(m.status(), "epsilon must be finite and > 0, got -1");
}

TEST(LabelRrTest, RejectsNanEpsilon) {
  auto m = LabelRandomizedResponse::Create(std::nan(""), 3);
  ExpectInvalidArgument(m.status(), "epsilon must be finite and > 0");
}

TEST(LabelRrTest, RejectsInfiniteEpsilon) {
  auto m = LabelRandomizedResponse::Create(
      std::numeric_limits<double>::infinity(), 3);
  ExpectInvalidArgument(m.status(), "epsilon must be finite and > 0, got inf");
}

TEST(LabelRrTest, RejectsFewerThanTwoClasses) {
  for (int c : {1, 0, -3}) {
    auto m = LabelRandomizedResponse::Create(1.0, c);
    ExpectInvalidArgument(m.status(), absl::StrCat("needs >= 2 classes, got ", c));
  }
}

TEST(LabelRrTest, PerturbRejectsOutOfRangeLabel) {
  auto m = MakeRr(1.0, 4);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  ExpectInvalidArgument(m->Perturb(4, rng).status(), "label 4 is out of range [0, 4)");
  ExpectInvalidArgument(m->Perturb(-1, rng).status(), "label -1 is out of range [0, 4)");
}

TEST(LabelRrTest, ValidateAndUnbiasedOneHotRejectOutOfRangeReport) {
  auto m = MakeRr(1.0, 4);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->ValidateReport(0).ok());
  EXPECT_TRUE(m->ValidateReport(3).ok());
  ExpectInvalidArgument(m->ValidateReport(4), "label 4 is out of range [0, 4)");
  ExpectInvalidArgument(m->ValidateReport(-2), "label -2 is out of range [0, 4)");
  ExpectInvalidArgument(m->UnbiasedOneHot(7).status(), "label 7 is out of range [0, 4)");
}

TEST(LabelRrTest, ReportFrequenciesMatchPAndQ) {
  constexpr int kC = 5, kDraws = 200000, kTrue = 2;
  for (double eps : {0.5, 1.0, 4.0}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    auto m = MakeRr(eps, kC);
    ASSERT_NE(m, nullptr);
    SeededRandomForTesting rng(99);
    std::vector<int> count(kC, 0);
    for (int i = 0; i < kDraws; ++i) {
      auto r = m->Perturb(kTrue, rng);
      ASSERT_TRUE(r.ok());
      ASSERT_GE(*r, 0);
      ASSERT_LT(*r, kC);
      ++count[*r];
    }
    const double e = std::exp(eps);
    const double p = e / (e + kC - 1), q = 1 / (e + kC - 1);
    for (int j = 0; j < kC; ++j) {
      const double expected = j == kTrue ? p : q;
      EXPECT_NEAR(static_cast<double>(count[j]) / kDraws, expected,
                  5 * std::sqrt(expected * (1 - expected) / kDraws))
          << "label " << j;
    }
  }
}

TEST(LabelRrTest, UnbiasedOneHotAveragesToTheTrueOneHot) {
  constexpr int kC = 4, kDraws = 200000, kTrue = 3;
  constexpr double kEps = 1.0;
  auto m = MakeRr(kEps, kC);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(123);
  std::vector<double> sum(kC, 0.0);
  for (int i = 0; i < kDraws; ++i) {
    auto r = m->Perturb(kTrue, rng);
    ASSERT_TRUE(r.ok());
    auto v = m->UnbiasedOneHot(*r);
    ASSERT_TRUE(v.ok());
    for (int l = 0; l < kC; ++l) sum[l] += (*v)[l];
  }
  // Component l takes (1-q)/(p-q) when l is reported (probability p if
  // l = true label, else q) and -q/(p-q) otherwise: Var = P(1-P)/(p-q)^2.
  const double e = std::exp(kEps);
  const double p = e / (e + kC - 1), q = 1 / (e + kC - 1);
  for (int l = 0; l < kC; ++l) {
    const double prob = l == kTrue ? p : q;
    const double se = std::sqrt(prob * (1 - prob) / ((p - q) * (p - q)) / kDraws);
    EXPECT_NEAR(sum[l] / kDraws, l == kTrue ? 1.0 : 0.0, 5 * se) << "component " << l;
  }
}

TEST(LabelRrTest, SameSeedSameReports) {
  auto m = MakeRr(1.0, 6);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting a(5), b(5);
  for (int i = 0; i < 100; ++i) {
    auto ra = m->Perturb(i % 6, a);
    auto rb = m->Perturb(i % 6, b);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(*ra, *rb);
  }
}

}  // namespace
}  // namespace ldpgraph

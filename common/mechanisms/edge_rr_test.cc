// Tests for randomized response on a neighbour bit vector (Qin et al.): p, q, input checks, report statistics, degree estimate.
#include "common/mechanisms/edge_rr.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "common/mechanisms/internal/mechanism_testing.h"
#include "common/random/random.h"

namespace ldpgraph {
namespace {

using ::ldpgraph::testing_util::ExpectInvalidArgument;
using ::ldpgraph::testing_util::ExpectRelNear;
using ::ldpgraph::testing_util::OkOrNull;

std::unique_ptr<EdgeRandomizedResponse> MakeRr(double eps, uint32_t n) {
  return OkOrNull(EdgeRandomizedResponse::Create(eps, n));
}

TEST(EdgeRrTest, KeepAndFlipProbabilities) {
  // A bit is flipped with probability 1 / (1 + e^eps).
  for (double eps : {0.1, 1.0, 5.0, 40.0}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    auto m = MakeRr(eps, 100);
    ASSERT_NE(m, nullptr);
    const double e = std::exp(eps);
    ExpectRelNear(m->flip_probability(), 1 / (1 + e));
    ExpectRelNear(m->keep_probability(), e / (1 + e));
    EXPECT_EQ(m->nodes(), 100u);
    EXPECT_EQ(m->epsilon(), eps);
  }
}

TEST(EdgeRrTest, UnbiasedBitAndDegreeEstimator) {
  // eps = 1: p - q = (e-1)/(e+1); (1 - q)/(p - q) = e/(e-1); -q/(p - q) = -1/(e-1).
  auto m = MakeRr(1.0, 101);
  ASSERT_NE(m, nullptr);
  const double e = std::exp(1.0);
  ExpectRelNear(m->UnbiasedBit(true), e / (e - 1));
  ExpectRelNear(m->UnbiasedBit(false), -1 / (e - 1));
  // (count - q (n-1)) / (p - q) with n - 1 = 100.
  const double q = 1 / (1 + e), pq = (e - 1) / (e + 1);
  ExpectRelNear(m->EstimateDegree(40), (40 - 100 * q) / pq);
  ExpectRelNear(m->EstimateDegree(0), -100 * q / pq);
}

// --- Rejected inputs ----------------------------------------------------------------

TEST(EdgeRrTest, RejectsEpsilonZero) {
  ExpectInvalidArgument(EdgeRandomizedResponse::Create(0.0, 10).status(),
                        "epsilon must be finite and > 0, got 0");
}

TEST(EdgeRrTest, RejectsNegativeEpsilon) {
  ExpectInvalidArgument(EdgeRandomizedResponse::Create(-0.5, 10).status(),
                        "epsilon must be finite and > 0, got -0.5");
}

TEST(EdgeRrTest, RejectsNanEpsilon) {
  ExpectInvalidArgument(EdgeRandomizedResponse::Create(std::nan(""), 10).status(),
                        "epsilon must be finite and > 0");
}

TEST(EdgeRrTest, RejectsInfiniteEpsilon) {
  ExpectInvalidArgument(EdgeRandomizedResponse::Create(
                            std::numeric_limits<double>::infinity(), 10)
                            .status(),
                        "epsilon must be finite and > 0, got inf");
}

TEST(EdgeRrTest, RejectsFewerThanTwoNodes) {
  ExpectInvalidArgument(EdgeRandomizedResponse::Create(1.0, 1).status(),
                        "needs n >= 2 nodes, got 1");
  ExpectInvalidArgument(EdgeRandomizedResponse::Create(1.0, 0).status(),
                        "needs n >= 2 nodes, got 0");
}

TEST(EdgeRrTest, RejectsNodeOutOfRange) {
  auto m = MakeRr(1.0, 10);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  const std::vector<uint32_t> none;
  ExpectInvalidArgument(m->Perturb(10, none, rng).status(),
                        "node 10 is out of range [0, 10)");
  ExpectInvalidArgument(m->ValidateReport(12, none), "node 12 is out of range [0, 10)");
}

TEST(EdgeRrTest, RejectsNeighbourEqualToNode) {
  auto m = MakeRr(1.0, 10);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  const std::vector<uint32_t> nb = {2, 5, 7};
  ExpectInvalidArgument(m->Perturb(5, nb, rng).status(),
                        "neighbours[1] is the node itself (5)");
}

TEST(EdgeRrTest, RejectsNeighboursNotAscending) {
  auto m = MakeRr(1.0, 10);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  const std::vector<uint32_t> nb = {1, 7, 3};
  ExpectInvalidArgument(m->Perturb(0, nb, rng).status(),
                        "neighbours must be strictly ascending: "
                        "position 2 has 3 after 7");
}

TEST(EdgeRrTest, RejectsDuplicateNeighbours) {
  auto m = MakeRr(1.0, 10);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  const std::vector<uint32_t> nb = {1, 4, 4};
  ExpectInvalidArgument(m->Perturb(0, nb, rng).status(),
                        "neighbours must be strictly ascending: "
                        "position 2 has 4 after 4");
}

TEST(EdgeRrTest, RejectsNeighbourOutOfRange) {
  auto m = MakeRr(1.0, 10);
  ASSERT_NE(m, nullptr);
  SeededRandomForTesting rng(1);
  const std::vector<uint32_t> nb = {3, 10};
  ExpectInvalidArgument(m->Perturb(0, nb, rng).status(),
                        "neighbours[1] = 10 is out of range [0, 10)");
}

TEST(EdgeRrTest, ValidateReportChecksOrderRangeAndSelf) {
  auto m = MakeRr(1.0, 10);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->ValidateReport(4, std::vector<uint32_t>{0, 3, 9}).ok());
  EXPECT_TRUE(m->ValidateReport(4, std::vector<uint32_t>{}).ok());
  ExpectInvalidArgument(m->ValidateReport(4, std::vector<uint32_t>{0, 4}),
                        "report[1] is the node itself (4)");
  ExpectInvalidArgument(m->ValidateReport(4, std::vector<uint32_t>{5, 2}),
                        "report must be strictly ascending: position 1 has 2 after 5");
  ExpectInvalidArgument(m->ValidateReport(4, std::vector<uint32_t>{1, 11}),
                        "report[1] = 11 is out of range [0, 10)");
}

// --- Statistics of the report -------------------------------------------------------

struct EdgeCase {
  double eps;
  uint32_t n;
  uint32_t v;
  std::vector<uint32_t> neighbours;
  int draws;
};

void PrintTo(const EdgeCase& c, std::ostream* os) {
  *os << "eps=" << c.eps << " n=" << c.n << " v=" << c.v
      << " deg=" << c.neighbours.size() << " draws=" << c.draws;
}

class EdgeRrStatisticsTest : public testing::TestWithParam<EdgeCase> {};

TEST_P(EdgeRrStatisticsTest, KeepsNeighboursWithPAndReportsOthersWithQ) {
  const EdgeCase c = GetParam();
  auto m = MakeRr(c.eps, c.n);
  ASSERT_NE(m, nullptr);
  const double e = std::exp(c.eps);
  const double p = e / (1 + e), q = 1 / (1 + e);
  const size_t deg = c.neighbours.size();
  std::vector<char> is_neighbour(c.n, 0);
  for (uint32_t u : c.neighbours) is_neighbour[u] = 1;

  SeededRandomForTesting rng(424242);
  std::vector<int> hits(c.n, 0);
  double degree_sum = 0;
  for (int draw = 0; draw < c.draws; ++draw) {
    auto r = m->Perturb(c.v, c.neighbours, rng);
    ASSERT_TRUE(r.ok()) << r.status();
    for (size_t i = 0; i < r->size(); ++i) {
      ASSERT_LT((*r)[i], c.n);
      ASSERT_NE((*r)[i], c.v) << "the report contains the node itself";
      if (i > 0) {
        ASSERT_GT((*r)[i], (*r)[i - 1]) << "not strictly ascending";
      }
      ++hits[(*r)[i]];
    }
    ASSERT_TRUE(m->ValidateReport(c.v, *r).ok());
    degree_sum += m->EstimateDegree(r->size());
  }
  EXPECT_EQ(hits[c.v], 0);

  // True neighbours kept with probability p.
  if (deg > 0) {
    double kept = 0;
    for (uint32_t u : c.neighbours) kept += hits[u];
    const double trials = static_cast<double>(deg) * c.draws;
    EXPECT_NEAR(kept / trials, p, 5 * std::sqrt(p * (1 - p) / trials));
  }
  // Non-neighbours reported with probability q, overall and in each of ten
  // position buckets (a position-dependent bias, e.g. at the ends of the
  // geometric walk, would show there).
  constexpr int kBuckets = 10;
  std::vector<double> bucket_hits(kBuckets, 0), bucket_trials(kBuckets, 0);
  double other_hits = 0, other_trials = 0;
  for (uint32_t u = 0; u < c.n; ++u) {
    if (u == c.v || is_neighbour[u]) continue;
    const int b = static_cast<int>(static_cast<uint64_t>(u) * kBuckets / c.n);
    bucket_hits[b] += hits[u];
    bucket_trials[b] += c.draws;
    other_hits += hits[u];
    other_trials += c.draws;
  }
  if (other_trials > 0) {
    EXPECT_NEAR(other_hits / other_trials, q,
                5 * std::sqrt(q * (1 - q) / other_trials));
  }
  for (int b = 0; b < kBuckets; ++b) {
    if (bucket_trials[b] == 0) continue;
    EXPECT_NEAR(bucket_hits[b] / bucket_trials[b], q,
                5 * std::sqrt(q * (1 - q) / bucket_trials[b]))
        << "bucket " << b;
  }
  // The first and last non-neighbour positions of the row.
  for (uint32_t u : {0u, c.n - 1}) {
    if (u == c.v) continue;
    const double prob = is_neighbour[u] ? p : q;
    EXPECT_NEAR(static_cast<double>(hits[u]) / c.draws, prob,
                5 * std::sqrt(prob * (1 - prob) / c.draws))
        << "position " << u;
  }
  // The degree estimator is unbiased:
  // Var = (deg p(1-p) + (n-1-deg) q(1-q)) / (p-q)^2.
  const double var_deg = (deg * p * (1 - p) + (c.n - 1.0 - deg) * q * (1 - q)) /
                         ((p - q) * (p - q));
  EXPECT_NEAR(degree_sum / c.draws, static_cast<double>(deg),
              5 * std::sqrt(var_deg / c.draws));
}

std::vector<uint32_t> TwentyNeighboursOf1000() {
  // Includes both ends of the row and both sides of v.
  std::vector<uint32_t> nb = {0, 999, 1001, 1999};
  for (uint32_t u = 37; nb.size() < 20; u += 97) {
    if (u != 999 && u != 1000 && u != 1001) nb.push_back(u);
  }
  std::sort(nb.begin(), nb.end());
  return nb;
}

std::vector<uint32_t> SpreadNeighbours(uint32_t v, uint32_t n, int count) {
  std::vector<uint32_t> nb;
  for (uint32_t u = 3; nb.size() < static_cast<size_t>(count) && u < n; u += 89) {
    if (u != v) nb.push_back(u);
  }
  return nb;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EdgeRrStatisticsTest,
    testing::Values(EdgeCase{1.0, 2000, 1000, TwentyNeighboursOf1000(), 2000},
                    EdgeCase{0.2, 2000, 1000, TwentyNeighboursOf1000(), 1000},
                    EdgeCase{4.0, 2000, 1000, TwentyNeighboursOf1000(), 4000},
                    EdgeCase{1.0, 2000, 0, SpreadNeighbours(0, 2000, 20), 2000},
                    EdgeCase{1.0, 2000, 1999, SpreadNeighbours(1999, 2000, 20), 2000},
                    EdgeCase{1.0, 2000, 7, {}, 2000},
                    EdgeCase{1.0, 2, 0, {1}, 20000},
                    EdgeCase{1.0, 2, 1, {}, 20000},
                    EdgeCase{2.0, 50, 25, {1, 2, 3, 24, 26, 48, 49}, 20000}));

TEST(EdgeRrTest, SameSeedSameReport) {
  auto m = MakeRr(1.0, 500);
  ASSERT_NE(m, nullptr);
  const std::vector<uint32_t> nb = {1, 10, 100, 499};
  SeededRandomForTesting a(77), b(77);
  for (int i = 0; i < 20; ++i) {
    auto ra = m->Perturb(3, nb, a);
    auto rb = m->Perturb(3, nb, b);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(*ra, *rb);
  }
}

TEST(EdgeRrTest, SecureSourcesGiveDifferentReports) {
  auto m = MakeRr(1.0, 2000);
  ASSERT_NE(m, nullptr);
  auto a = SecureRandom::Create();
  auto b = SecureRandom::Create();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<uint32_t> nb = {1, 10, 100};
  auto ra = m->Perturb(3, nb, **a);
  auto rb = m->Perturb(3, nb, **b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  // ~540 of 1999 positions each: equal reports have probability ~2^-1900.
  EXPECT_NE(*ra, *rb);
}

}  // namespace
}  // namespace ldpgraph

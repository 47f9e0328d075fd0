#include "common/attacks/edge_poisoning.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/random/random.h"
#include "common/wire/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::poisoning {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNodes = 1000;

// Every tenth node is the attacker's.
std::vector<uint32_t> EveryTenth(uint32_t n) {
  std::vector<uint32_t> out;
  for (uint32_t v = 0; v < n; v += 10) out.push_back(v);
  return out;
}

std::unique_ptr<EdgeAdversary> Make(uint32_t n = kNodes, int victims = 50) {
  auto a = EdgeAdversary::Create(n, EveryTenth(n), victims);
  EXPECT_TRUE(a.ok()) << a.status();
  return std::move(*a);
}

void ExpectInvalid(const absl::StatusOr<std::unique_ptr<EdgeAdversary>>& a,
                   const char* message) {
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr(message));
}

TEST(EdgeAdversaryTest, CreateFailsBelowThreeNodes) {
  ExpectInvalid(EdgeAdversary::Create(2, {0}, 5), "needs n >= 3 nodes, got 2");
}

TEST(EdgeAdversaryTest, CreateFailsZeroVictims) {
  ExpectInvalid(EdgeAdversary::Create(10, {0}, 0),
                "needs victims >= 1 per node, got 0");
}

TEST(EdgeAdversaryTest, CreateFailsNodeOutOfRange) {
  ExpectInvalid(EdgeAdversary::Create(10, {3, 10}, 5),
                "malicious[1] = 10 out of range [0, 10)");
}

TEST(EdgeAdversaryTest, CreateFailsUnsortedNodes) {
  ExpectInvalid(EdgeAdversary::Create(10, {4, 4}, 5),
                "strictly ascending: malicious[1] = 4 after 4");
}

TEST(EdgeAdversaryTest, CreateFailsWithoutAnHonestNode) {
  ExpectInvalid(EdgeAdversary::Create(3, {0, 1, 2}, 5),
                "controls every node");
}

TEST(EdgeAdversaryTest, HonestNodeHasNoVictims) {
  auto a = Make();
  SeededRandomForTesting rng(1);
  auto v = a->Victims(3, rng);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("node 3 is not the attacker's"));
}

TEST(EdgeAdversaryTest, VictimsAreDistinctHonestAndAscending) {
  auto a = Make();
  EXPECT_EQ(a->victims_per_node(), 50u);
  EXPECT_EQ(a->claimed_degree(), 998.0);
  SeededRandomForTesting rng(2);
  for (uint32_t v : a->malicious()) {
    auto victims = a->Victims(v, rng);
    ASSERT_TRUE(victims.ok()) << victims.status();
    ASSERT_EQ(victims->size(), 50u);
    EXPECT_TRUE(std::is_sorted(victims->begin(), victims->end()));
    EXPECT_EQ(std::adjacent_find(victims->begin(), victims->end()),
              victims->end());
    for (uint32_t u : *victims) {
      EXPECT_LT(u, kNodes);
      EXPECT_FALSE(a->Controls(u)) << u;
    }
  }
}

TEST(EdgeAdversaryTest, VictimsAreCappedAtTheHonestNodes) {
  auto a = EdgeAdversary::Create(5, {0, 2}, 50);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->victims_per_node(), 3u);
  SeededRandomForTesting rng(3);
  auto victims = (*a)->Victims(0, rng);
  ASSERT_TRUE(victims.ok());
  EXPECT_EQ(*victims, (std::vector<uint32_t>{1, 3, 4}));
}

// Uniform over the 900 honest nodes: each is drawn 50/900 of the time.
TEST(EdgeAdversaryTest, VictimsAreUniformOverHonestNodes) {
  auto a = Make();
  SeededRandomForTesting rng(4);
  std::vector<int> hits(kNodes, 0);
  constexpr int kDraws = 3600;
  for (int i = 0; i < kDraws; ++i) {
    auto victims = a->Victims(0, rng);
    ASSERT_TRUE(victims.ok());
    for (uint32_t u : *victims) ++hits[u];
  }
  const double expected = kDraws * 50.0 / 900.0;  // 200 per honest node
  double chi2 = 0;
  for (uint32_t u = 0; u < kNodes; ++u) {
    if (a->Controls(u)) {
      EXPECT_EQ(hits[u], 0);
      continue;
    }
    chi2 += (hits[u] - expected) * (hits[u] - expected) / expected;
  }
  // 899 degrees of freedom (less for draws without replacement): mean 899,
  // sd 42.4; 1100 is 4.7 sd out.
  EXPECT_LT(chi2, 1100);
  EXPECT_GT(chi2, 700);
}

TEST(EdgeAdversaryTest, RrReportHoldsTheVictimsAndHonestLookingNoise) {
  auto a = Make();
  auto rr = EdgeRandomizedResponse::Create(1.0, kNodes);
  ASSERT_TRUE(rr.ok());
  const double p = (*rr)->flip_probability();
  v1::MechanismSpec spec;
  spec.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  spec.set_epsilon(1.0);
  spec.set_dimension(kNodes);
  ASSERT_TRUE(wire::ValidateWireSpec(spec).ok());
  double extra = 0;
  for (uint32_t v : a->malicious()) {
    SeededRandomForTesting rng(100 + v), replay(100 + v);
    auto report = a->CraftRrReport(**rr, v, rng);
    ASSERT_TRUE(report.ok()) << report.status();
    auto victims = a->Victims(v, replay);
    ASSERT_TRUE(victims.ok());
    EXPECT_TRUE(std::includes(report->begin(), report->end(),
                              victims->begin(), victims->end()));
    EXPECT_TRUE((*rr)->ValidateReport(v, *report).ok());
    v1::EdgeReport w;
    for (uint32_t u : *report) w.add_neighbours(u);
    EXPECT_TRUE(wire::ValidateEdgeReport(w, spec, v).ok());
    extra += static_cast<double>(report->size() - victims->size());
  }
  // The other n - 1 - V bits are randomized response of 0: each 1 with
  // probability p. Mean over 100 nodes of Binomial(949, p): sd 1.37.
  const double mean = extra / static_cast<double>(a->malicious().size());
  EXPECT_NEAR(mean, 949 * p, 6.0);
}

TEST(EdgeAdversaryTest, RrReportRefusesAnotherGraphSize) {
  auto a = Make();
  auto rr = EdgeRandomizedResponse::Create(1.0, kNodes + 1);
  ASSERT_TRUE(rr.ok());
  SeededRandomForTesting rng(5);
  auto report = a->CraftRrReport(**rr, 0, rng);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.status().message(), HasSubstr("over 1001 nodes"));
}

TEST(EdgeAdversaryTest, BlinkReportClaimsTheLargestDegreeAndPassesTheCodec) {
  auto a = Make();
  const edges::BlinkParams params{.epsilon = 1.0, .delta = 0.1};
  auto client = edges::BlinkClient::Create(params, kNodes);
  ASSERT_TRUE(client.ok());
  v1::MechanismSpec spec;
  spec.set_kind(v1::MECHANISM_KIND_EDGE_BLINK);
  spec.set_epsilon(1.0);
  spec.set_dimension(kNodes);
  spec.mutable_blink()->set_degree_share(0.1);
  ASSERT_TRUE(wire::ValidateWireSpec(spec).ok());
  for (uint32_t v : a->malicious()) {
    SeededRandomForTesting rng(7 + v), replay(7 + v);
    auto report = a->CraftBlinkReport(**client, v, rng);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->noisy_degree, kNodes - 2.0);
    auto victims = a->Victims(v, replay);
    ASSERT_TRUE(victims.ok());
    EXPECT_TRUE(std::includes(report->neighbours.begin(),
                              report->neighbours.end(), victims->begin(),
                              victims->end()));
    v1::EdgeReport w;
    for (uint32_t u : report->neighbours) w.add_neighbours(u);
    w.set_noisy_degree(report->noisy_degree);
    EXPECT_TRUE(wire::ValidateEdgeReport(w, spec, v).ok()) << v;
  }
  // And the curator estimates from such reports like any others.
  std::vector<edges::BlinkReport> reports(kNodes);
  SeededRandomForTesting rng(9);
  for (uint32_t v = 0; v < kNodes; ++v) {
    auto r = a->Controls(v) ? a->CraftBlinkReport(**client, v, rng)
                            : (*client)->Report(v, {}, rng);
    ASSERT_TRUE(r.ok());
    reports[v] = *r;
  }
  auto est = edges::EstimateBlinkGraph(params, kNodes, reports, {});
  ASSERT_TRUE(est.ok()) << est.status();
  EXPECT_EQ(est->clipped_high, 0u);  // n - 2 is inside the clip
}

TEST(EdgeAdversaryTest, SameSeedSameReport) {
  auto a = Make();
  auto rr = EdgeRandomizedResponse::Create(2.0, kNodes);
  ASSERT_TRUE(rr.ok());
  SeededRandomForTesting r1(11), r2(11), r3(12);
  auto x = a->CraftRrReport(**rr, 20, r1);
  auto y = a->CraftRrReport(**rr, 20, r2);
  auto z = a->CraftRrReport(**rr, 20, r3);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_EQ(*x, *y);
  EXPECT_NE(*x, *z);
}

}  // namespace
}  // namespace ldpgraph::poisoning

#include "server/pipeline/edge_screen.h"

#include <cmath>
#include <memory>
#include <optional>

#include "common/attacks/edge_poisoning.h"
#include "common/dataset/generator.h"
#include "common/edges/blink.h"
#include "common/mechanisms/edge_rr.h"
#include "common/random/random.h"
#include "common/random/seed_mix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::pipeline {
namespace {

using ::testing::HasSubstr;

double Flip(double eps_a) { return 1.0 / (1.0 + std::exp(eps_a)); }

EdgeScreenParams P(uint32_t n, double p,
                   std::optional<double> degree_epsilon = std::nullopt,
                   double alpha = 1e-3) {
  EdgeScreenParams out;
  out.nodes = n;
  out.flip_probability = p;
  out.degree_epsilon = degree_epsilon;
  out.alpha = alpha;
  return out;
}

// A generated graph (degree-corrected SBM, mean degree 10).
Graph MakeGraph(uint32_t n, uint64_t seed) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = n;
  o.features = 8;
  o.seed = seed;
  auto d = GenerateDataset(o);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(d->graph);
}

// Every node's randomized-response report at eps, each from its own seeded
// stream; the adversary's nodes (if any) craft theirs.
EdgeReports RrReports(const Graph& g, double eps, uint64_t seed,
                      const poisoning::EdgeAdversary* adversary = nullptr) {
  const uint32_t n = static_cast<uint32_t>(g.num_nodes());
  auto rr = EdgeRandomizedResponse::Create(eps, n);
  EXPECT_TRUE(rr.ok());
  EdgeReports out;
  out.neighbours.resize(n);
  for (uint32_t v = 0; v < n; ++v) {
    SeededRandomForTesting rng(NodeNoiseSeed(seed, v));
    auto r = adversary != nullptr && adversary->Controls(v)
                 ? adversary->CraftRrReport(**rr, v, rng)
                 : (*rr)->Perturb(v, g.neighbors(v), rng);
    EXPECT_TRUE(r.ok()) << r.status();
    out.neighbours[v] = std::move(*r);
  }
  return out;
}

EdgeReports BlinkReports(const Graph& g, const edges::BlinkParams& params,
                         uint64_t seed,
                         const poisoning::EdgeAdversary* adversary = nullptr) {
  const uint32_t n = static_cast<uint32_t>(g.num_nodes());
  auto client = edges::BlinkClient::Create(params, n);
  EXPECT_TRUE(client.ok());
  EdgeReports out;
  out.neighbours.resize(n);
  out.noisy_degrees.resize(n);
  for (uint32_t v = 0; v < n; ++v) {
    SeededRandomForTesting rng(NodeNoiseSeed(seed, v));
    auto r = adversary != nullptr && adversary->Controls(v)
                 ? adversary->CraftBlinkReport(**client, v, rng)
                 : (*client)->Report(v, g.neighbors(v), rng);
    EXPECT_TRUE(r.ok()) << r.status();
    out.neighbours[v] = std::move(r->neighbours);
    out.noisy_degrees[v] = r->noisy_degree;
  }
  return out;
}

EdgeScreenParams RrParams(uint32_t n, double eps, double alpha = 1e-3) {
  return P(n, Flip(eps), std::nullopt, alpha);
}

EdgeScreenParams BlinkScreenParams(uint32_t n,
                                   const edges::BlinkParams& params,
                                   double alpha = 1e-3) {
  return P(n, Flip(params.adjacency_epsilon()), params.degree_epsilon(),
           alpha);
}

void ExpectInvalid(const EdgeScreenParams& p, const EdgeReports& r,
                   const char* message) {
  auto s = ScreenEdgeReports(p, r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr(message));
}

EdgeReports Empty(uint32_t n) {
  EdgeReports r;
  r.neighbours.resize(n);
  return r;
}

TEST(EdgeScreenParamsTest, FailsOneNode) {
  ExpectInvalid(P(1, 0.2), Empty(1),
                "nodes must be >= 2, got 1");
}

TEST(EdgeScreenParamsTest, FailsFlipProbabilityOfOneHalf) {
  ExpectInvalid(P(5, 0.5), Empty(5),
                "flip probability must be in (0, 1/2), got 0.5");
}

TEST(EdgeScreenParamsTest, FailsFlipProbabilityZero) {
  ExpectInvalid(P(5, 0), Empty(5),
                "flip probability must be in (0, 1/2), got 0");
}

TEST(EdgeScreenParamsTest, FailsDegreeEpsilonInfinity) {
  ExpectInvalid(P(5, 0.2, INFINITY), Empty(5),
                "degree epsilon must be finite and > 0, got inf");
}

TEST(EdgeScreenParamsTest, FailsAlphaOne) {
  ExpectInvalid(P(5, 0.2, std::nullopt, 1), Empty(5),
                "alpha must be in (0, 1), got 1");
}

TEST(EdgeScreenReportsTest, FailsWrongNumberOfLists) {
  ExpectInvalid(P(5, 0.2), Empty(4),
                "4 neighbour lists for 5 nodes");
}

TEST(EdgeScreenReportsTest, FailsWrongNumberOfReportedFlags) {
  EdgeReports r = Empty(5);
  r.reported = {true, true};
  ExpectInvalid(P(5, 0.2), r,
                "2 reported flags for 5 nodes");
}

TEST(EdgeScreenReportsTest, FailsBlinkWithoutDegrees) {
  ExpectInvalid(
      P(5, 0.2, 0.1), Empty(5),
      "0 noisy degrees for 5 nodes");
}

TEST(EdgeScreenReportsTest, FailsUnsortedList) {
  EdgeReports r = Empty(5);
  r.neighbours[2] = {3, 1};
  ExpectInvalid(P(5, 0.2), r,
                "node 2's report must be strictly ascending, below 5 and "
                "without 2; entry 1 is 1");
}

TEST(EdgeScreenReportsTest, FailsNodeInItsOwnList) {
  EdgeReports r = Empty(5);
  r.neighbours[2] = {2};
  ExpectInvalid(P(5, 0.2), r, "entry 0 is 2");
}

TEST(EdgeScreenReportsTest, FailsNeighbourOutOfRange) {
  EdgeReports r = Empty(5);
  r.neighbours[0] = {1, 5};
  ExpectInvalid(P(5, 0.2), r, "entry 1 is 5");
}

TEST(EdgeScreenReportsTest, FailsNonFiniteDegree) {
  EdgeReports r = Empty(5);
  r.noisy_degrees = {1, 1, NAN, 1, 1};
  ExpectInvalid(
      P(5, 0.2, 0.1), r,
      "node 2's noisy degree is not finite");
}

// Counts by hand on a small example; a non-reporter is no evidence.
TEST(EdgeScreenTest, CountsOneSidedClaimsAmongReporters) {
  EdgeReports r = Empty(4);
  r.neighbours[0] = {1, 2, 3};  // 1 confirms, 2 does not, 3 did not report
  r.neighbours[1] = {0, 2};     // 0 confirms, 2 does not
  r.neighbours[2] = {};
  r.neighbours[3] = {0};
  r.reported = {true, true, true, false};
  auto s = ScreenEdgeReports(P(4, 0.1), r);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->reporters, 3u);
  EXPECT_EQ(s->one_sided, (std::vector<uint32_t>{1, 1, 0, 0}));
  EXPECT_EQ(s->max_one_sided, 1u);
  EXPECT_NEAR(s->one_sided_mean, 2 * 0.1 * 0.9, 1e-12);
  EXPECT_EQ(s->one_sided_threshold,
            BinomialUpperQuantile(2, 0.09, 1e-3 / 3));
  EXPECT_TRUE(s->flagged.empty());
}

// Node 0 is honest and adjacent to nodes 1..6, which deny it and claim ten
// victims each: a one-shot test would flag node 0 too (6 denied claims);
// the peeling flags the six first, after which node 0's claims are no
// longer denied by anybody it trusts.
TEST(EdgeScreenTest, PeelingSparesTheNeighboursOfFlaggedNodes) {
  EdgeReports r = Empty(40);
  r.neighbours[0] = {1, 2, 3, 4, 5, 6};
  for (uint32_t v = 1; v <= 6; ++v) {
    for (uint32_t u = 10; u < 20; ++u) r.neighbours[v].push_back(u);
  }
  const uint64_t t = BinomialUpperQuantile(39, 0.01 * 0.99, 1e-3 / 40);
  ASSERT_LT(t, 6u);  // node 0 alone would be flagged
  auto s = ScreenEdgeReports(P(40, 0.01), r);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->flagged, (std::vector<uint32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s->one_sided[0], 0u);
  EXPECT_EQ(s->one_sided[3], 10u);
  EXPECT_EQ(s->one_sided_threshold, t);
  EXPECT_EQ(s->one_sided_last_threshold,
            BinomialUpperQuantile(33, 0.01 * 0.99, 1e-3 / 40));
  EXPECT_EQ(s->max_one_sided, 0u);
}

TEST(EdgeScreenTest, DegreeGapIsNoisyDegreeMinusTheBitsEstimate) {
  EdgeReports r = Empty(5);
  r.neighbours[0] = {1, 2, 3, 4};
  r.noisy_degrees = {1.5, 0, 0, 0, 0};
  const double p = 0.2;
  auto s = ScreenEdgeReports(P(5, p, 0.5), r);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(s->degree_gap[0], 1.5 - (4 - 4 * p) / (1 - 2 * p), 1e-12);
  EXPECT_NEAR(s->degree_gap[1], 0 - (0 - 4 * p) / (1 - 2 * p), 1e-12);
  EXPECT_EQ(s->checks, 2);
  EXPECT_NEAR(s->degree_level, 1e-3 / (2 * 5), 1e-15);
  EXPECT_NEAR(s->degree_threshold,
              DegreeNoiseBound(0.5, 1e-4 / 2) +
                  BitsDeviationBound(4, p, 1e-4 / 2) / (1 - 2 * p),
              1e-12);
}

// Bernstein's bound lies above the exact quantile of the extreme case (all
// terms of one sign, a binomial), and within a factor of the Gaussian one.
TEST(EdgeScreenBoundsTest, BitsBoundCoversTheBinomialTail) {
  for (auto [bits, p, level] : {std::tuple{2999, 0.27, 1e-7},
                                std::tuple{2999, 0.29, 1e-7},
                                std::tuple{500, 0.01, 1e-5},
                                std::tuple{100, 0.4, 1e-3}}) {
    const double t = BitsDeviationBound(bits, p, level);
    const double upper =
        static_cast<double>(BinomialUpperQuantile(bits, p, level / 2)) -
        bits * p;
    EXPECT_GE(t, upper) << bits << " " << p;
    const double sd = std::sqrt(bits * p * (1 - p));
    EXPECT_LE(t, 2.0 * (upper + 1) + 3 * sd) << bits << " " << p;
  }
}

// The discrete Laplace's exact two-sided tail beyond t_l is below the level.
TEST(EdgeScreenBoundsTest, NoiseBoundCoversTheDiscreteLaplaceTail) {
  for (double eps_d : {0.1, 0.5, 2.0}) {
    const edges::BlinkParams params{.epsilon = eps_d / 0.1, .delta = 0.1};
    const double g = params.degree_granularity();
    const double r = std::exp(-g * eps_d);
    const double level = 1e-6;
    const double t = DegreeNoiseBound(eps_d, level);
    const double k = std::floor(t / g) + 1;  // P(|Z| >= k) = 2 r^k / (1 + r)
    const double tail = 2 * std::exp(k * std::log(r)) / (1 + r);
    EXPECT_LE(tail, level) << eps_d;
    EXPECT_GE(tail, level / 4) << eps_d;  // and not far off
  }
}

// c_i ~ Binomial(n - 1, p(1 - p)) whatever the graph: its mean and variance
// over the nodes of a generated graph.
TEST(EdgeScreenTest, OneSidedClaimsFollowTheBinomial) {
  const Graph g = MakeGraph(600, 3);
  const double eps = 1.0, p = Flip(eps);
  auto s = ScreenEdgeReports(RrParams(600, eps), RrReports(g, eps, 5));
  ASSERT_TRUE(s.ok()) << s.status();
  double mean = 0, var = 0;
  for (uint32_t c : s->one_sided) mean += c;
  mean /= 600;
  for (uint32_t c : s->one_sided) var += (c - mean) * (c - mean);
  var /= 599;
  const double mu = 599 * p * (1 - p);
  EXPECT_NEAR(mean, mu, 4 * std::sqrt(mu * (1 - p * (1 - p)) / 600));
  EXPECT_NEAR(var, mu * (1 - p * (1 - p)), 0.2 * mu);
}

// The check: 3000 honest nodes at eps_e 1, both mechanisms. With
// probability >= 1 - alpha nothing is flagged; the thresholds stay near the
// statistics' spread, so the screen is not vacuous.
TEST(EdgeScreenTest, HonestNodesAreAlmostNeverFlagged) {
  const Graph g = MakeGraph(3000, 1);
  {
    auto s = ScreenEdgeReports(RrParams(3000, 1.0), RrReports(g, 1.0, 11));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_LE(s->flagged.size(), 1u);
    const double sd = std::sqrt(s->one_sided_mean);
    EXPECT_LT(s->one_sided_threshold, s->one_sided_mean + 7 * sd);
    EXPECT_GT(s->max_one_sided, s->one_sided_mean + 2 * sd);
  }
  {
    const edges::BlinkParams params{.epsilon = 1.0, .delta = 0.1};
    auto s = ScreenEdgeReports(BlinkScreenParams(3000, params),
                               BlinkReports(g, params, 12));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_LE(s->flagged.size(), 1u);
    EXPECT_LE(s->degree_flagged.size(), 1u);
    // The largest honest gap is a good part of the threshold (about 5 of
    // its ~7 standard deviations).
    EXPECT_GT(s->max_degree_gap, 0.3 * s->degree_threshold);
  }
}

// The bound over many small honest populations at a loose alpha: the share
// of screens that flag anybody stays below alpha.
TEST(EdgeScreenTest, FalseFlagRateIsBelowAlpha) {
  const Graph g = MakeGraph(300, 2);
  const edges::BlinkParams params{.epsilon = 2.0, .delta = 0.2};
  int any = 0;
  constexpr int kTrials = 200;
  for (int t = 0; t < kTrials; ++t) {
    auto s = ScreenEdgeReports(BlinkScreenParams(300, params, 0.2),
                               BlinkReports(g, params, 1000 + t));
    ASSERT_TRUE(s.ok());
    any += s->flagged.empty() ? 0 : 1;
  }
  // alpha 0.2; 3 sd of a Binomial(200, 0.2) share is 0.085.
  EXPECT_LE(any, kTrials * 0.285);
}

std::vector<uint32_t> EveryTenth(uint32_t n) {
  std::vector<uint32_t> out;
  for (uint32_t v = 5; v < n; v += 10) out.push_back(v);
  return out;
}

// The fake-edges attacker under Blink at eps_e 1: every degree-inflating
// node is flagged by the degree check; honest collateral stays small.
TEST(EdgeScreenTest, FlagsEveryFakeEdgesAttackerUnderBlink) {
  const Graph g = MakeGraph(3000, 1);
  auto adversary = poisoning::EdgeAdversary::Create(3000, EveryTenth(3000), 50);
  ASSERT_TRUE(adversary.ok());
  const edges::BlinkParams params{.epsilon = 1.0, .delta = 0.1};
  auto s = ScreenEdgeReports(BlinkScreenParams(3000, params),
                             BlinkReports(g, params, 13, adversary->get()));
  ASSERT_TRUE(s.ok()) << s.status();
  int malicious = 0, honest = 0;
  for (uint32_t v : s->flagged) {
    ((*adversary)->Controls(v) ? malicious : honest)++;
  }
  EXPECT_EQ(malicious, 300);
  EXPECT_EQ(s->degree_flagged.size(), 300u + honest);
  EXPECT_LE(honest, 3);
}

// Under randomized response the attacker shows only in its one-sided
// claims: caught at eps_e 8, unseen at eps_e 1 (the header's limitation).
TEST(EdgeScreenTest, FlagsFakeEdgesUnderRrWhenTheNoiseIsLow) {
  const Graph g = MakeGraph(3000, 1);
  auto adversary = poisoning::EdgeAdversary::Create(3000, EveryTenth(3000), 50);
  ASSERT_TRUE(adversary.ok());
  auto high = ScreenEdgeReports(RrParams(3000, 8.0),
                                RrReports(g, 8.0, 14, adversary->get()));
  ASSERT_TRUE(high.ok()) << high.status();
  EXPECT_EQ(high->flagged, (*adversary)->malicious());
  auto low = ScreenEdgeReports(RrParams(3000, 1.0),
                               RrReports(g, 1.0, 15, adversary->get()));
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_LE(low->flagged.size(), 3u);
}

TEST(EdgeScreenTest, NonReportersAreNeverFlagged) {
  const Graph g = MakeGraph(600, 4);
  auto adversary = poisoning::EdgeAdversary::Create(600, EveryTenth(600), 50);
  ASSERT_TRUE(adversary.ok());
  const edges::BlinkParams params{.epsilon = 1.0, .delta = 0.1};
  EdgeReports r = BlinkReports(g, params, 16, adversary->get());
  r.reported.assign(600, true);
  // Only the nodes v = 3 (mod 4) report: 15, 35, ... of the attacker's.
  for (uint32_t v = 0; v < 600; v += 2) r.reported[v] = false;
  for (uint32_t v = 1; v < 600; v += 4) r.reported[v] = false;
  auto s = ScreenEdgeReports(BlinkScreenParams(600, params), r);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->reporters, 150u);
  for (uint32_t v : s->flagged) EXPECT_TRUE(r.reported[v]) << v;
  // The malicious reporters (odd ids 5, 15, ...: v % 4 == 3 among them).
  int expected = 0;
  for (uint32_t v : (*adversary)->malicious()) expected += r.reported[v];
  int caught = 0;
  for (uint32_t v : s->flagged) caught += (*adversary)->Controls(v);
  EXPECT_EQ(caught, expected);
}

TEST(EdgeScreenTest, ToJsonNamesTheFigures) {
  const Graph g = MakeGraph(300, 5);
  const edges::BlinkParams params{.epsilon = 1.0, .delta = 0.1};
  auto s = ScreenEdgeReports(BlinkScreenParams(300, params),
                             BlinkReports(g, params, 17));
  ASSERT_TRUE(s.ok());
  const nlohmann::json j = EdgeScreenToJson(*s);
  EXPECT_EQ(j["screen"], "applied");
  EXPECT_EQ(j["reporters"], 300);
  EXPECT_EQ(j["checks"], 2);
  EXPECT_EQ(j["one_sided"]["threshold"], s->one_sided_threshold);
  EXPECT_EQ(j["degree"]["threshold"], s->degree_threshold);
  EXPECT_EQ(j["flagged_nodes"], s->flagged.size());
  auto rr = ScreenEdgeReports(RrParams(300, 1.0), RrReports(g, 1.0, 18));
  ASSERT_TRUE(rr.ok());
  EXPECT_FALSE(EdgeScreenToJson(*rr).contains("degree"));
}

}  // namespace
}  // namespace ldpgraph::pipeline

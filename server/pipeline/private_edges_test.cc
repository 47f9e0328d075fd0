#include "server/pipeline/private_edges.h"

#include <cmath>
#include <memory>

#include "common/dataset/generator.h"
#include "common/edges/substitution.h"
#include "common/mechanisms/edge_rr.h"
#include "common/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::pipeline {
namespace {

using ::testing::HasSubstr;

Graph MakeGraph(uint32_t n, uint64_t seed) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = n;
  o.features = 8;
  o.seed = seed;
  auto d = GenerateDataset(o);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(d->graph);
}

// Seeded per-node streams of (seed, run), as `ldpgraph eval` draws them.
struct Streams {
  Streams(uint32_t n, uint64_t seed, int run) {
    const uint64_t s = EdgeNoiseSeed(seed, run);
    for (uint32_t v = 0; v < n; ++v) {
      streams.emplace_back(NodeNoiseSeed(s, v));
    }
  }
  RandomSource& operator()(uint32_t v) { return streams[v]; }
  std::vector<SeededRandomForTesting> streams;
};

std::vector<uint32_t> EveryTenth(uint32_t n) {
  std::vector<uint32_t> out;
  for (uint32_t v = 3; v < n; v += 10) out.push_back(v);
  return out;
}

absl::StatusOr<PrivateEdges> Build(const Graph& g, const PrivateEdgesConfig& c,
                                   const poisoning::EdgeAdversary* a = nullptr,
                                   uint64_t seed = 1) {
  Streams s(static_cast<uint32_t>(g.num_nodes()), seed, 0);
  return BuildPrivateEdges(g, c, a, [&](uint32_t v) -> RandomSource& {
    return s(v);
  });
}

PrivateEdgesConfig Config(EdgeMechanism kind, double eps) {
  PrivateEdgesConfig c;
  c.kind = kind;
  c.epsilon = eps;
  return c;
}

void ExpectInvalidConfig(const PrivateEdgesConfig& c, const char* message) {
  const absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(message));
}

TEST(PrivateEdgesConfigTest, FailsEpsilonZero) {
  ExpectInvalidConfig(Config(EdgeMechanism::kRr, 0),
                      "edge epsilon must be finite and > 0, got 0");
}

TEST(PrivateEdgesConfigTest, FailsEpsilonInfinity) {
  ExpectInvalidConfig(Config(EdgeMechanism::kBlink, INFINITY),
                      "edge epsilon must be finite and > 0, got inf");
}

TEST(PrivateEdgesConfigTest, FailsBlinkDeltaOne) {
  PrivateEdgesConfig c;
  c.blink_delta = 1.0;
  ExpectInvalidConfig(c, "delta");
}

TEST(PrivateEdgesConfigTest, FailsBlinkIterationsZero) {
  PrivateEdgesConfig c;
  c.blink_iterations = 0;
  ExpectInvalidConfig(c, "blink iterations must be >= 1, got 0");
}

TEST(PrivateEdgesConfigTest, FailsScreenAlphaZero) {
  PrivateEdgesConfig c;
  c.edge_consistency = true;
  c.screen_alpha = 0;
  ExpectInvalidConfig(c, "edge screen alpha must be in (0, 1), got 0");
}

TEST(PrivateEdgesConfigTest, FlipProbabilityUsesTheAdjacencyBudget) {
  EXPECT_NEAR(Config(EdgeMechanism::kRr, 2).flip_probability(),
              1 / (1 + std::exp(2.0)), 1e-15);
  PrivateEdgesConfig blink = Config(EdgeMechanism::kBlink, 2);
  blink.blink_delta = 0.25;
  EXPECT_NEAR(blink.flip_probability(), 1 / (1 + std::exp(1.5)), 1e-15);
}

TEST(EdgeNoiseSeedTest, SeparatesRunsAndTheFeatureStreams) {
  EXPECT_NE(EdgeNoiseSeed(1, 0), EdgeNoiseSeed(1, 1));
  EXPECT_NE(EdgeNoiseSeed(1, 0), EdgeNoiseSeed(2, 0));
  EXPECT_NE(EdgeNoiseSeed(1, 0), NoiseSeed(1, 0));
}

TEST(PrivateEdgesTest, RefusesMoreReportedPairsThanTheCap) {
  const Graph g = MakeGraph(300, 1);
  PrivateEdgesConfig c = Config(EdgeMechanism::kRr, 1);
  c.max_reported_pairs = 1000;  // 300 * 299 / 2 * 0.27 = 12,000 expected
  auto e = Build(g, c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(e.status().message(), HasSubstr("more than the cap of 1000"));
}

TEST(PrivateEdgesTest, RefusesAnAttackerOverAnotherGraph) {
  const Graph g = MakeGraph(300, 1);
  auto a = poisoning::EdgeAdversary::Create(301, {0}, 5);
  ASSERT_TRUE(a.ok());
  auto e = Build(g, {}, a->get());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("has 301 nodes"));
}

// Without attacker or screen: exactly the lower-id assembly of every node's
// randomized response from its stream.
TEST(PrivateEdgesTest, RrGraphIsTheLowerIdAssembly) {
  const Graph g = MakeGraph(400, 2);
  const PrivateEdgesConfig c = Config(EdgeMechanism::kRr, 3);
  auto e = Build(g, c);
  ASSERT_TRUE(e.ok()) << e.status();
  Streams s(400, 1, 0);
  auto rr = EdgeRandomizedResponse::Create(3, 400);
  ASSERT_TRUE(rr.ok());
  std::vector<std::vector<uint32_t>> reports(400);
  uint64_t entries = 0;
  for (uint32_t v = 0; v < 400; ++v) {
    auto r = (*rr)->Perturb(v, g.neighbors(v), s(v));
    ASSERT_TRUE(r.ok());
    reports[v] = *r;
    entries += r->size();
  }
  auto expected = edges::AssembleGraph(400, reports,
                                       edges::Symmetrisation::kLowerId);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(e->graph.Edges(), expected->Edges());
  EXPECT_EQ(e->reported_entries, entries);
  EXPECT_FALSE(e->screen.has_value());
  EXPECT_FALSE(e->blink.has_value());
}

TEST(PrivateEdgesTest, BlinkGraphIsTheEstimateOfEveryReport) {
  const Graph g = MakeGraph(400, 2);
  PrivateEdgesConfig c = Config(EdgeMechanism::kBlink, 4);
  c.blink_variant = edges::BlinkVariant::kTopK;
  auto e = Build(g, c);
  ASSERT_TRUE(e.ok()) << e.status();
  Streams s(400, 1, 0);
  const edges::BlinkParams params{.epsilon = 4, .delta = 0.1};
  auto client = edges::BlinkClient::Create(params, 400);
  ASSERT_TRUE(client.ok());
  std::vector<edges::BlinkReport> reports(400);
  for (uint32_t v = 0; v < 400; ++v) {
    auto r = (*client)->Report(v, g.neighbors(v), s(v));
    ASSERT_TRUE(r.ok());
    reports[v] = *r;
  }
  edges::BlinkEstimateOptions eo;
  eo.variant = edges::BlinkVariant::kTopK;
  auto expected = edges::EstimateBlinkGraph(params, 400, reports, eo);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(e->graph.Edges(), expected->graph.Edges());
  ASSERT_TRUE(e->blink.has_value());
  EXPECT_EQ(e->blink->target_edges, expected->target_edges);
  EXPECT_EQ(e->degree_scale, 1.0);
}

// With honest reports the screen flags nobody and changes nothing.
TEST(PrivateEdgesTest, ScreenOfHonestReportsKeepsTheGraph) {
  const Graph g = MakeGraph(1000, 3);
  for (EdgeMechanism kind : {EdgeMechanism::kRr, EdgeMechanism::kBlink}) {
    PrivateEdgesConfig c = Config(kind, 2);
    auto plain = Build(g, c);
    c.edge_consistency = true;
    auto screened = Build(g, c);
    ASSERT_TRUE(plain.ok() && screened.ok()) << screened.status();
    ASSERT_TRUE(screened->screen.has_value());
    EXPECT_TRUE(screened->screen->flagged.empty());
    EXPECT_EQ(screened->graph.Edges(), plain->graph.Edges());
  }
}

double MeanDegree(const Graph& g, const std::vector<uint32_t>& nodes) {
  double sum = 0;
  for (uint32_t v : nodes) sum += g.degree(v);
  return sum / static_cast<double>(nodes.size());
}

// Blink at eps_e 1: the attacker's nodes become hubs; the screen flags all
// of them and isolates them.
TEST(PrivateEdgesTest, BlinkAttackersAreHubsUntilScreened) {
  const Graph g = MakeGraph(2000, 4);
  auto a = poisoning::EdgeAdversary::Create(2000, EveryTenth(2000), 50);
  ASSERT_TRUE(a.ok());
  PrivateEdgesConfig c = Config(EdgeMechanism::kBlink, 1);
  auto attacked = Build(g, c, a->get());
  ASSERT_TRUE(attacked.ok()) << attacked.status();
  EXPECT_EQ(attacked->malicious.size(), 200u);
  EXPECT_EQ(attacked->victims_per_node, 50u);
  EXPECT_GT(MeanDegree(attacked->graph, (*a)->malicious()), 50.0);
  EXPECT_GT(attacked->malicious_edges, 200u * 50u);

  c.edge_consistency = true;
  auto screened = Build(g, c, a->get());
  ASSERT_TRUE(screened.ok()) << screened.status();
  EXPECT_EQ(screened->malicious_flagged, 200u);
  EXPECT_LE(screened->screen->flagged.size(), 203u);
  EXPECT_EQ(screened->malicious_edges, 0u);
  for (uint32_t v : screened->screen->flagged) {
    EXPECT_EQ(screened->graph.degree(v), 0u) << v;
  }
  EXPECT_NEAR(screened->degree_scale,
              (2000.0 - screened->screen->flagged.size() - 1) / 1999.0, 1e-12);
  const nlohmann::json j = PrivateEdgesToJson(*screened);
  EXPECT_EQ(j["malicious_flagged"], 200);
  EXPECT_EQ(j["screen"]["flagged_nodes"], screened->screen->flagged.size());
  EXPECT_EQ(j["edges"], screened->graph.num_edges());
  EXPECT_TRUE(j["blink"].contains("degree_scale"));
}

// Randomized response at eps_e 8: the attacker's one-sided claims give it
// away, and every pair with a flagged endpoint is dropped.
TEST(PrivateEdgesTest, RrAttackersAreIsolatedWhenFlagged) {
  const Graph g = MakeGraph(2000, 5);
  auto a = poisoning::EdgeAdversary::Create(2000, EveryTenth(2000), 50);
  ASSERT_TRUE(a.ok());
  PrivateEdgesConfig c = Config(EdgeMechanism::kRr, 8);
  auto attacked = Build(g, c, a->get());
  ASSERT_TRUE(attacked.ok()) << attacked.status();
  // Lower-id assembly: a victim above the attacker is wired to it.
  EXPECT_GT(attacked->malicious_edges, 200u * 15u);
  c.edge_consistency = true;
  auto screened = Build(g, c, a->get());
  ASSERT_TRUE(screened.ok()) << screened.status();
  EXPECT_EQ(screened->screen->flagged, (*a)->malicious());
  EXPECT_EQ(screened->malicious_flagged, 200u);
  EXPECT_EQ(screened->malicious_edges, 0u);
  EXPECT_FALSE(PrivateEdgesToJson(*screened).contains("blink"));
}

TEST(PrivateEdgesTest, ConfigToJsonRecordsTheSettings) {
  PrivateEdgesConfig c = Config(EdgeMechanism::kBlink, 2);
  c.edge_consistency = true;
  const nlohmann::json j = PrivateEdgesConfigToJson(c);
  EXPECT_EQ(j["mechanism"], "blink");
  EXPECT_EQ(j["blink_variant"], "hard");
  EXPECT_EQ(j["screen_alpha"], kDefaultEdgeScreenAlpha);
  c.kind = EdgeMechanism::kRr;
  c.edge_consistency = false;
  const nlohmann::json r = PrivateEdgesConfigToJson(c);
  EXPECT_FALSE(r.contains("blink_delta"));
  EXPECT_FALSE(r.contains("screen_alpha"));
}

}  // namespace
}  // namespace ldpgraph::pipeline

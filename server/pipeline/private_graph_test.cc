// Tests for the private graphs of the edge LDP grid: each node's round-1
// report is exactly the report the pipeline perturbs its features into
// (same stream, same draw), so the curator trains on what the neighbours
// exchanged; substitution keeps every node's degree but for its unresolved
// drops; randomized response keeps about the expected number of edges;
// Blink's graph is the curator's estimate from the nodes' edge streams.
#include "server/pipeline/private_graph.h"

#include <cmath>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/dataset/feature_schema.h"
#include "common/dataset/generator.h"
#include "common/testing/generated_datasets.h"
#include "common/wire/codec.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/private_edges.h"

namespace ldpgraph::pipeline {
namespace {

Dataset Generated(size_t nodes, double homophily, uint64_t seed) {
  return testing_datasets::SmallDataset(nodes, homophily, seed);
}

// LPGNN's node task as `ldpgraph edges` runs a cell: Multi-bit features on
// [0, 1] at eps_x, labels clean, a GCN; few epochs (plumbing only).
PipelineConfig Cell(double eps_x) {
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.mechanism = "multibit";
  c.epsilon = eps_x;
  c.scaling = FeatureScaling::kUnit;
  c.feature_steps = 2;
  c.label_steps = 2;
  c.node_model.kind = training::NodeModelKind::kGcn;
  c.dataset_settings = false;
  c.kprop_norm = KPropNorm::kMean;
  c.label_denoising = LabelDenoising::kVote;
  c.node_model.train.max_epochs = 60;
  c.node_model.train.patience = 20;
  c.keep_node_outputs = true;
  return c;
}

PrivateGraphConfig ConfigOf(PrivateGraphKind kind, double eps_e) {
  PrivateGraphConfig c;
  c.kind = kind;
  c.epsilon = eps_e;
  return c;
}

// The report each node sends its neighbours is the pipeline's draw: the
// same wire bytes as Perturb on the node's pipeline stream, the same
// estimates as SimulateFeatureReports, and a pipeline run handed those
// estimates scores exactly what a run drawing them itself scores.
TEST(PrivateGraphTest, FeatureReportsAreThePipelinesDraw) {
  const Dataset d = Generated(200, 0.8, 3);
  const PipelineConfig c = Cell(2.0);
  auto features = MakeExchangeFeatures(c, d);
  ASSERT_TRUE(features.ok()) << features.status();
  const uint64_t seed = 7;
  const int run = 1;
  SparseRows estimates;
  auto own = NodeFeatureReports(d, c, **features, seed, run, nullptr,
                                &estimates);
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->size(), d.graph.num_nodes());

  auto mech = BuildFeatureMechanism(c, d);
  ASSERT_TRUE(mech.ok()) << mech.status();
  const SparseRows x = ScaleDatasetFeatures(d, c.scaling);
  std::vector<SeededRandomForTesting> streams;
  for (uint32_t v = 0; v < d.graph.num_nodes(); ++v) {
    streams.emplace_back(NodeNoiseSeed(NoiseSeed(seed, run), v));
  }
  auto pipeline_estimates = SimulateFeatureReports(
      x, **mech, [&](size_t v) -> RandomSource& { return streams[v]; });
  ASSERT_TRUE(pipeline_estimates.ok());
  for (uint32_t v = 0; v < d.graph.num_nodes(); ++v) {
    std::vector<double> row(x.cols, 0.0);
    for (size_t i = 0; i < x.row_indices(v).size(); ++i) {
      row[x.row_indices(v)[i]] = x.row_values(v)[i];
    }
    SeededRandomForTesting stream(NodeNoiseSeed(NoiseSeed(seed, run), v));
    auto report = (*mech)->Perturb(row, stream);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ((*own)[v].SerializeAsString(),
              wire::EncodeFeatureReport(*report).SerializeAsString())
        << "node " << v;
  }
  EXPECT_EQ(estimates.offsets, pipeline_estimates->offsets);
  EXPECT_EQ(estimates.indices, pipeline_estimates->indices);
  EXPECT_EQ(estimates.values, pipeline_estimates->values);

  RunOverrides given;
  given.features = &estimates;
  auto drawn = RunPipeline(d, c, seed, run);
  auto handed = RunPipeline(d, c, seed, run, given);
  ASSERT_TRUE(drawn.ok() && handed.ok());
  EXPECT_EQ(drawn->metric, handed->metric);
  EXPECT_EQ(drawn->training.best_epoch, handed->training.best_epoch);
  ASSERT_TRUE(drawn->node_outputs && handed->node_outputs);
  EXPECT_EQ(drawn->node_outputs->data, handed->node_outputs->data);
}

TEST(PrivateGraphTest, SubstitutionKeepsDegreesButForUnresolvedDrops) {
  const Dataset d = Generated(300, 0.8, 4);
  const PipelineConfig c = Cell(1.0);
  auto features = MakeExchangeFeatures(c, d);
  ASSERT_TRUE(features.ok());
  auto own = NodeFeatureReports(d, c, **features, 1, 0, nullptr, nullptr);
  ASSERT_TRUE(own.ok());
  auto noise = EdgeNoise::Create(d.graph.num_nodes(), false);
  ASSERT_TRUE(noise.ok());
  for (PrivateGraphKind g : {PrivateGraphKind::kNs1, PrivateGraphKind::kNs2}) {
    noise->Reset(1, 0);
    auto pg =
        BuildPrivateGraph(d.graph, ConfigOf(g, 1.0), *features, *own, *noise);
    ASSERT_TRUE(pg.ok()) << pg.status();
    ASSERT_TRUE(pg->stats.has_value());
    uint64_t dropped = 0, unresolved = 0;
    for (uint32_t v = 0; v < d.graph.num_nodes(); ++v) {
      const auto& s = pg->node_stats[v];
      EXPECT_EQ(s.degree, d.graph.degree(v));
      EXPECT_EQ(pg->reports[v].size(), d.graph.degree(v) - s.unresolved)
          << (g == PrivateGraphKind::kNs1 ? "ns1" : "ns2") << " node " << v;
      EXPECT_EQ(s.dropped, s.substituted + s.unresolved);
      // The assembled graph holds each node's whole report.
      for (uint32_t u : pg->reports[v]) EXPECT_TRUE(pg->graph.HasEdge(v, u));
      dropped += s.dropped;
      unresolved += s.unresolved;
    }
    EXPECT_EQ(pg->stats->dropped, dropped);
    EXPECT_EQ(pg->stats->unresolved, unresolved);
    // q = 1/(1 + e) drops about 27% of the 900 edge ends...
    const double q = 1 / (1 + std::exp(1.0));
    EXPECT_NEAR(double(dropped) / pg->stats->degree, q, 0.05);
    // ...and most of them find a substitute.
    EXPECT_GT(pg->stats->substituted, pg->stats->unresolved);
    EXPECT_GT(pg->stats->messages, 0u);
    // Replayable: the same streams give the same graph.
    noise->Reset(1, 0);
    auto again = BuildPrivateGraph(d.graph, ConfigOf(g, 1.0), *features, *own,
                                   *noise);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->reports, pg->reports);
  }
}

TEST(PrivateGraphTest, RandomizedResponseKeepsTheLowerEndpointsBit) {
  const Dataset d = Generated(200, 0.8, 5);
  auto noise = EdgeNoise::Create(d.graph.num_nodes(), false);
  ASSERT_TRUE(noise.ok());
  noise->Reset(1, 0);
  auto pg = BuildPrivateGraph(d.graph, ConfigOf(PrivateGraphKind::kRr, 1.0),
                              nullptr, {}, *noise);
  ASSERT_TRUE(pg.ok()) << pg.status();
  const double expected =
      ExpectedRrEdges(200, 1.0) +
      d.graph.num_edges() * (1 - 2 / (1 + std::exp(1.0)));
  EXPECT_NEAR(pg->graph.num_edges(), expected, 0.05 * expected);
  EXPECT_NEAR(ExpectedRrEdges(19717, 2.0), 23.0e6, 0.2e6);  // pubmed
}

// Blink's graph is the library's estimate from the nodes' reports, each
// drawn from the node's edge stream; replayed after Reset.
TEST(PrivateGraphTest, BlinkGraphIsTheCuratorsEstimateFromTheEdgeStreams) {
  const Dataset d = Generated(200, 0.8, 5);
  PrivateGraphConfig blink = ConfigOf(PrivateGraphKind::kBlink, 4.0);
  blink.blink_delta = 0.2;
  blink.blink_variant = edges::BlinkVariant::kHard;
  auto noise = EdgeNoise::Create(d.graph.num_nodes(), false);
  ASSERT_TRUE(noise.ok());
  noise->Reset(1, 0);
  auto pg = BuildPrivateGraph(d.graph, blink, nullptr, {}, *noise);
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE(pg->blink.has_value());
  EXPECT_FALSE(pg->stats.has_value());

  const edges::BlinkParams params{.epsilon = 4.0, .delta = 0.2};
  auto client = edges::BlinkClient::Create(params, 200);
  ASSERT_TRUE(client.ok());
  std::vector<edges::BlinkReport> reports;
  for (uint32_t v = 0; v < 200; ++v) {
    SeededRandomForTesting rng(NodeNoiseSeed(EdgeNoiseSeed(1, 0), v));
    reports.push_back(*(*client)->Report(v, d.graph.neighbors(v), rng));
  }
  edges::BlinkEstimateOptions eo;
  eo.variant = edges::BlinkVariant::kHard;
  auto direct = edges::EstimateBlinkGraph(params, 200, reports, eo);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(pg->graph.Edges(), direct->graph.Edges());
  EXPECT_EQ(pg->blink->expected_edges, direct->expected_edges);
  EXPECT_GT(pg->graph.num_edges(), d.graph.num_edges() / 3);

  noise->Reset(1, 1);  // another run: other noise, another graph
  auto other = BuildPrivateGraph(d.graph, blink, nullptr, {}, *noise);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->graph.Edges(), pg->graph.Edges());
}

}  // namespace
}  // namespace ldpgraph::pipeline

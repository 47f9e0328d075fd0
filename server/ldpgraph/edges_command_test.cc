// Tests for `ldpgraph edges`: bad command lines are usage errors naming the
// flag (exit 2) before any work; each node's round-1 report is exactly the
// report the pipeline perturbs its features into (same stream, same draw),
// so the curator trains on what the neighbours exchanged; substitution keeps
// every node's degree but for its unresolved drops; the link-inference
// attack finds the true graph's edges in a homophilous graph's outputs and
// much less of them behind dense randomized response; the JSON holds the
// documented keys and says which cells were skipped and why.
#include "server/ldpgraph/edges_command.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/feature_schema.h"
#include "common/dataset/generator.h"
#include "common/files.h"
#include "common/testing/svg_shape.h"
#include "common/testing/temp_folder.h"
#include "common/wire/codec.h"

namespace ldpgraph::tool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

struct Result {
  int code;
  std::string out, err;
};

Result Edges(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunEdges(args, out, err);
  return {code, out.str(), err.str()};
}

Dataset Generated(size_t nodes, double homophily, uint64_t seed) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = nodes;
  o.classes = 3;
  o.features = 16;
  o.avg_degree = 6;
  o.homophily = homophily;
  o.seed = seed;
  return *GenerateDataset(o);
}

// Few epochs: these tests check plumbing and strong effects only.
EdgesOptions Quick() {
  EdgesOptions o;
  o.runs = 1;
  o.epochs = 60;
  o.patience = 20;
  o.feature_steps = 2;
  o.models = {training::NodeModelKind::kGcn};
  return o;
}

TEST(EdgesCommandTest, FlagErrorsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "--dataset is required"},
      {{"--dataset", "x", "--graphs", "ns3"},
       "--graphs must be one of ns1, ns2, rr, true, blink, mlp, got 'ns3'"},
      {{"--dataset", "x", "--graphs", "mlp,mlp"},
       "--graphs lists 'mlp' twice"},
      {{"--dataset", "x", "--attacks", "gradient"},
       "--attacks must be similarity or linkteller, got 'gradient'"},
      {{"--dataset", "x", "--attacks", "linkteller,linkteller"},
       "--attacks lists 'linkteller' twice"},
      {{"--dataset", "x", "--linkteller-sources", "-1"},
       "--linkteller-sources must be an integer >= 0"},
      {{"--dataset", "x", "--blink-delta", "0"},
       "--blink-delta must be in (0, 1), got 0"},
      {{"--dataset", "x", "--blink-delta", "1"},
       "--blink-delta must be in (0, 1), got 1"},
      {{"--dataset", "x", "--blink-iterations", "0"},
       "--blink-iterations must be an integer >= 1"},
      {{"--dataset", "x", "--blink-variant", "soft"},
       "--blink-variant must be one of hard, topk, hybrid, got 'soft'"},
      {{"--dataset", "x", "--graphs", "rr,rr"}, "--graphs lists 'rr' twice"},
      {{"--dataset", "x", "--models", "gat"},
       "--models must be gcn or sage, got 'gat'"},
      {{"--dataset", "x", "--edge-epsilons", "1,inf"},
       "--edge-epsilons takes budgets > 0, comma separated; got 'inf'"},
      {{"--dataset", "x", "--feature-epsilons", "0"},
       "--feature-epsilons takes budgets > 0 or inf"},
      {{"--dataset", "x", "--label-epsilons", "1,1"},
       "--label-epsilons lists 1 twice"},
      {{"--dataset", "x", "--runs", "0"}, "--runs must be an integer >= 1"},
      {{"--dataset", "x", "--top-k", "0"}, "--top-k must be an integer >= 1"},
      {{"--dataset", "x", "--max-dummies", "-1"},
       "--max-dummies must be an integer >= 0"},
      {{"--dataset", "x", "--dummy-std", "-0.5"},
       "--dummy-std must be >= 0, got -0.5"},
      {{"--dataset", "x", "--similarity", "dot"},
       "--similarity must be cosine or l2, got 'dot'"},
      {{"--dataset", "x", "--threads", "0"},
       "--threads must be an integer >= 1"},
      {{"--dataset", "x", "--format", "csv"},
       "--format must be table or json, got 'csv'"},
      {{"--dataset", "x", "--max-rr-edges", "-3"}, "max-rr-edges"},
      {{"--dataset", "x", "--edge-epsilon", "1"}, "edge-epsilon"},
      {{"--dataset", "x", "--plot", ""}, "--plot needs a file name"},
      {{"--dataset", "x", "--plot", "/nonexistent/ldpgraph/e.svg"},
       "--plot /nonexistent/ldpgraph/e.svg: no directory '/nonexistent/ldpgraph'"},
      {{"--dataset", "x", "--graphs", "true,mlp", "--plot", "e.svg"},
       "--plot draws against eps_e: --graphs needs ns1, ns2, rr or blink"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = Edges(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_THAT(r.err, HasSubstr("ldpgraph edges --help"));
    EXPECT_TRUE(r.out.empty());
  }
}

TEST(EdgesCommandTest, MissingDatasetIsARuntimeError) {
  const Result r = Edges({"--dataset", "/nonexistent/ldpgraph-edges"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/ldpgraph-edges"));
}

TEST(EdgesCommandTest, HelpExplainsGraphsAttackAndNoise) {
  const Result r = Edges({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"ns1", "ns2", "rr", "true", "cosine similarity",
                        "NOT private", "--secure", "skipped: RR graph of ~N",
                        "--max-rr-edges", "attack_auc", "substitution",
                        "blink", "--blink-delta", "--blink-variant",
                        "expected_edges", "--attacks", "LinkTeller",
                        "--linkteller-sources", "linkteller_auc",
                        "linkteller_seconds", "mlp", "(default 100, about 800 scored",
                        "exactly 0.5"}) {
    EXPECT_THAT(r.out, HasSubstr(s));
  }
}

TEST(EdgesCommandTest, DefaultsAreTheThesisGrid) {
  auto o = ParseEdgesOptions({"--dataset", "d"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->edge_epsilons, (std::vector<double>{0.1, 1, 2, 8}));
  EXPECT_EQ(o->feature_epsilons, (std::vector<double>{1, 2, 3, kNoPrivacy}));
  EXPECT_EQ(o->label_epsilons, (std::vector<double>{1, 3, kNoPrivacy}));
  EXPECT_EQ(o->graphs.size(), 4u);
  EXPECT_EQ(o->models.size(), 2u);
  EXPECT_EQ(o->runs, 2);
  EXPECT_EQ(o->max_rr_edges, 20'000'000u);
  EXPECT_EQ(o->blink_delta, 0.1);
  EXPECT_EQ(o->blink_variant, edges::BlinkVariant::kHard);
  EXPECT_TRUE(o->similarity_attack);
  EXPECT_TRUE(o->linkteller_attack);
  EXPECT_EQ(o->linkteller_sources, 100u);
  auto lt = ParseEdgesOptions({"--dataset", "d", "--attacks", "linkteller",
                               "--linkteller-sources", "0", "--graphs",
                               "mlp,true"});
  ASSERT_TRUE(lt.ok()) << lt.status();
  EXPECT_FALSE(lt->similarity_attack);
  EXPECT_TRUE(lt->linkteller_attack);
  EXPECT_EQ(lt->linkteller_sources, 0u);
  EXPECT_EQ(lt->graphs,
            (std::vector<EdgeGraph>{EdgeGraph::kMlp, EdgeGraph::kTrue}));
  auto b = ParseEdgesOptions({"--dataset", "d", "--graphs", "blink",
                              "--blink-delta", "0.3", "--blink-variant",
                              "topk", "--blink-iterations", "1500"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->graphs, std::vector<EdgeGraph>{EdgeGraph::kBlink});
  EXPECT_EQ(b->blink_delta, 0.3);
  EXPECT_EQ(b->blink_variant, edges::BlinkVariant::kTopK);
  EXPECT_EQ(b->blink_iterations, 1500);
  EXPECT_EQ(o->blink_iterations, 200);
  // The substitution defaults are the library's, and the help says which.
  const edges::SubstitutionParams library;
  EXPECT_EQ(o->top_k, library.top_k);
  EXPECT_EQ(o->max_dummies, library.max_dummies);
  EXPECT_EQ(o->dummy_mean, library.dummy_mean);
  EXPECT_EQ(o->dummy_std, library.dummy_std);
  EXPECT_EQ(o->similarity, edges::Similarity::kCosine);
  const std::string help = EdgesHelp();
  EXPECT_THAT(help, HasSubstr(absl::StrCat("dropped neighbour (default ",
                                           library.top_k, ")")));
  EXPECT_THAT(help, HasSubstr(absl::StrCat("relay (default ",
                                           library.max_dummies, ")")));
  DatasetMeta cora, pubmed;
  cora.name = "cora";
  pubmed.name = "pubmed";
  auto c = CellConfig(*o, cora, 1, 1, training::NodeModelKind::kGcn);
  EXPECT_EQ(c.feature_steps, 16);
  EXPECT_EQ(c.label_steps, 2);
  EXPECT_EQ(c.mechanism, "multibit");
  EXPECT_EQ(c.scaling, FeatureScaling::kUnit);
  EXPECT_TRUE(c.keep_node_outputs);
  auto p = CellConfig(*o, pubmed, kNoPrivacy, kNoPrivacy,
                      training::NodeModelKind::kSage);
  EXPECT_EQ(p.label_steps, 0);
  EXPECT_EQ(p.mechanism, "none");
  EXPECT_FALSE(p.label_epsilon.has_value());
  EXPECT_EQ(p.node_model.kind, training::NodeModelKind::kSage);
}

// The report each node sends its neighbours is the pipeline's draw: the
// same wire bytes as Perturb on the node's pipeline stream, the same
// estimates as SimulateFeatureReports, and a pipeline run handed those
// estimates scores exactly what a run drawing them itself scores.
TEST(EdgesCommandTest, FeatureReportsAreThePipelinesDraw) {
  const Dataset d = Generated(200, 0.8, 3);
  EdgesOptions o = Quick();
  const auto c = CellConfig(o, d.meta, 2.0, kNoPrivacy,
                            training::NodeModelKind::kGcn);
  auto features = MakeExchangeFeatures(c, d);
  ASSERT_TRUE(features.ok()) << features.status();
  const uint64_t seed = 7;
  const int run = 1;
  SparseRows estimates;
  auto own = NodeFeatureReports(d, c, **features, seed, run, nullptr,
                                &estimates);
  ASSERT_TRUE(own.ok()) << own.status();
  ASSERT_EQ(own->size(), d.graph.num_nodes());

  auto mech = pipeline::BuildFeatureMechanism(c, d);
  ASSERT_TRUE(mech.ok()) << mech.status();
  const SparseRows x = ScaleDatasetFeatures(d, c.scaling);
  std::vector<SeededRandomForTesting> streams;
  for (uint32_t v = 0; v < d.graph.num_nodes(); ++v) {
    streams.emplace_back(NodeNoiseSeed(pipeline::NoiseSeed(seed, run), v));
  }
  auto pipeline_estimates = pipeline::SimulateFeatureReports(
      x, **mech, [&](size_t v) -> RandomSource& { return streams[v]; });
  ASSERT_TRUE(pipeline_estimates.ok());
  for (uint32_t v = 0; v < d.graph.num_nodes(); ++v) {
    std::vector<double> row(x.cols, 0.0);
    for (size_t i = 0; i < x.row_indices(v).size(); ++i) {
      row[x.row_indices(v)[i]] = x.row_values(v)[i];
    }
    SeededRandomForTesting stream(
        NodeNoiseSeed(pipeline::NoiseSeed(seed, run), v));
    auto report = (*mech)->Perturb(row, stream);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ((*own)[v].SerializeAsString(),
              wire::EncodeFeatureReport(*report).SerializeAsString())
        << "node " << v;
  }
  EXPECT_EQ(estimates.offsets, pipeline_estimates->offsets);
  EXPECT_EQ(estimates.indices, pipeline_estimates->indices);
  EXPECT_EQ(estimates.values, pipeline_estimates->values);

  pipeline::RunOverrides given;
  given.features = &estimates;
  auto drawn = pipeline::RunPipeline(d, c, seed, run);
  auto handed = pipeline::RunPipeline(d, c, seed, run, given);
  ASSERT_TRUE(drawn.ok() && handed.ok());
  EXPECT_EQ(drawn->metric, handed->metric);
  EXPECT_EQ(drawn->training.best_epoch, handed->training.best_epoch);
  ASSERT_TRUE(drawn->node_outputs && handed->node_outputs);
  EXPECT_EQ(drawn->node_outputs->data, handed->node_outputs->data);
}

TEST(EdgesCommandTest, SubstitutionKeepsDegreesButForUnresolvedDrops) {
  const Dataset d = Generated(300, 0.8, 4);
  EdgesOptions o = Quick();
  const auto c = CellConfig(o, d.meta, 1.0, kNoPrivacy,
                            training::NodeModelKind::kGcn);
  auto features = MakeExchangeFeatures(c, d);
  ASSERT_TRUE(features.ok());
  auto own = NodeFeatureReports(d, c, **features, 1, 0, nullptr, nullptr);
  ASSERT_TRUE(own.ok());
  auto noise = EdgeNoise::Create(d.graph.num_nodes(), false);
  ASSERT_TRUE(noise.ok());
  for (EdgeGraph g : {EdgeGraph::kNs1, EdgeGraph::kNs2}) {
    noise->Reset(1, 0);
    auto pg = BuildPrivateGraph(g, 1.0, d.graph, o, *features, *own, *noise);
    ASSERT_TRUE(pg.ok()) << pg.status();
    ASSERT_TRUE(pg->stats.has_value());
    uint64_t dropped = 0, unresolved = 0;
    for (uint32_t v = 0; v < d.graph.num_nodes(); ++v) {
      const auto& s = pg->node_stats[v];
      EXPECT_EQ(s.degree, d.graph.degree(v));
      EXPECT_EQ(pg->reports[v].size(), d.graph.degree(v) - s.unresolved)
          << EdgeGraphName(g) << " node " << v;
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
    auto again = BuildPrivateGraph(g, 1.0, d.graph, o, *features, *own,
                                   *noise);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->reports, pg->reports);
  }
}

TEST(EdgesCommandTest, RandomizedResponseKeepsTheLowerEndpointsBit) {
  const Dataset d = Generated(200, 0.8, 5);
  EdgesOptions o = Quick();
  auto noise = EdgeNoise::Create(d.graph.num_nodes(), false);
  ASSERT_TRUE(noise.ok());
  noise->Reset(1, 0);
  auto pg = BuildPrivateGraph(EdgeGraph::kRr, 1.0, d.graph, o, nullptr, {},
                              *noise);
  ASSERT_TRUE(pg.ok()) << pg.status();
  const double expected =
      ExpectedRrEdges(200, 1.0) +
      d.graph.num_edges() * (1 - 2 / (1 + std::exp(1.0)));
  EXPECT_NEAR(pg->graph.num_edges(), expected, 0.05 * expected);
  EXPECT_NEAR(ExpectedRrEdges(19717, 2.0), 23.0e6, 0.2e6);  // pubmed
}

// Blink's graph is the library's estimate from the nodes' reports, each
// drawn from the node's edge stream; replayed after Reset.
TEST(EdgesCommandTest, BlinkGraphIsTheCuratorsEstimateFromTheEdgeStreams) {
  const Dataset d = Generated(200, 0.8, 5);
  EdgesOptions o = Quick();
  o.blink_delta = 0.2;
  o.blink_variant = edges::BlinkVariant::kHard;
  auto noise = EdgeNoise::Create(d.graph.num_nodes(), false);
  ASSERT_TRUE(noise.ok());
  noise->Reset(1, 0);
  auto pg = BuildPrivateGraph(EdgeGraph::kBlink, 4.0, d.graph, o, nullptr,
                              {}, *noise);
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
  auto other = BuildPrivateGraph(EdgeGraph::kBlink, 4.0, d.graph, o, nullptr,
                                 {}, *noise);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->graph.Edges(), pg->graph.Edges());
}

// In the grid: a large budget gives about the true graph (topk: about as
// many edges), a small one keeps few true edges; the cell says what the
// curator found.
TEST(EdgesCommandTest, BlinkCellsReportTheEstimate) {
  const Dataset d = Generated(300, 0.9, 8);
  EdgesOptions o = Quick();
  o.graphs = {EdgeGraph::kBlink};
  o.edge_epsilons = {0.5, 12};
  o.feature_epsilons = {kNoPrivacy};
  o.label_epsilons = {kNoPrivacy};
  o.blink_variant = edges::BlinkVariant::kTopK;
  auto grid = RunEdgesGrid(d, o, nullptr);
  ASSERT_TRUE(grid.ok()) << grid.status();
  const json& cells = (*grid)["cells"];
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ((*grid)["parameters"]["blink_variant"], "topk");
  EXPECT_EQ((*grid)["parameters"]["blink_delta"], 0.1);
  const json& weak = cells[0];
  const json& strong = cells[1];
  EXPECT_EQ(strong["graph"], "blink");
  EXPECT_EQ(strong["edge_epsilon"], 12);
  EXPECT_TRUE(strong["substitution"].is_null());
  ASSERT_FALSE(strong["blink"].is_null());
  EXPECT_GT(strong["true_edges_kept"]["mean"].get<double>(), 0.9);
  EXPECT_NEAR(strong["graph_edges"]["mean"].get<double>(),
              d.graph.num_edges(), 0.1 * d.graph.num_edges());
  EXPECT_NEAR(strong["blink"]["target_edges"].get<double>(),
              d.graph.num_edges(), 0.1 * d.graph.num_edges());
  EXPECT_LT(weak["true_edges_kept"]["mean"].get<double>(), 0.5);
  EXPECT_GT(weak["blink"]["reported_pairs"].get<double>(),
            strong["blink"]["reported_pairs"].get<double>());
  EXPECT_EQ(strong["blink"]["per_run"].size(), 1u);
  EXPECT_TRUE(strong["blink"]["per_run"][0]["converged"].get<bool>());
  EXPECT_EQ((*grid)["parameters"]["blink_iterations"], 200);
  EXPECT_GT(strong["accuracy"]["mean"].get<double>(), 0.6);
  EXPECT_GT(strong["attack_auc"]["mean"].get<double>(), 0.7);
}

TEST(EdgesCommandTest, NonEdgesAreDistinctAndReproducible) {
  const Dataset d = Generated(100, 0.8, 6);
  auto a = SampleNonEdges(d.graph, d.graph.num_edges(), 11);
  auto b = SampleNonEdges(d.graph, d.graph.num_edges(), 11);
  ASSERT_EQ(a.size(), d.graph.num_edges());
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const Edge& e : a) {
    EXPECT_LT(e.u, e.v);
    EXPECT_FALSE(d.graph.HasEdge(e.u, e.v));
    EXPECT_TRUE(seen.insert({e.u, e.v}).second);
  }
  EXPECT_TRUE(a == b);
  // A complete graph on 3 nodes has no non-edges; a path on 3 has one.
  auto path = Graph::FromEdges(3, std::vector<Edge>{{0, 1}, {1, 2}});
  ASSERT_TRUE(path.ok());
  auto one = SampleNonEdges(*path, 5, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], (Edge{0, 2}));
}

TEST(EdgesCommandTest, AttackAucByHand) {
  // 4 nodes, edges {0,1} and {2,3}; outputs equal along edges, orthogonal
  // across: every edge scores 1, every non-edge 0.
  auto g = Graph::FromEdges(4, std::vector<Edge>{{0, 1}, {2, 3}});
  ASSERT_TRUE(g.ok());
  DenseMatrix out(4, 2);
  out.at(0, 0) = out.at(1, 0) = 0.9f;
  out.at(2, 1) = out.at(3, 1) = 0.7f;
  auto auc = SimilarityAttackAuc(*g, out, {{0, 2}, {1, 3}});
  ASSERT_TRUE(auc.ok());
  EXPECT_DOUBLE_EQ(*auc, 1.0);
  // Identical outputs everywhere: all ties, 0.5.
  DenseMatrix same(4, 2);
  for (float& x : same.data) x = 0.5f;
  EXPECT_DOUBLE_EQ(*SimilarityAttackAuc(*g, same, {{0, 2}, {1, 3}}), 0.5);
  EXPECT_FALSE(SimilarityAttackAuc(*g, DenseMatrix(3, 2), {{0, 2}}).ok());
  EXPECT_FALSE(SimilarityAttackAuc(*g, out, {}).ok());
}

// The adversary reads the true graph's edges off the outputs of a model
// trained on it (homophily 0.9: linked nodes get alike posteriors); behind
// randomized response at eps_e = 0.1 (about half of all pairs linked) the
// outputs say much less about the true edges. The true cell is also
// exactly `ldpgraph eval`'s run.
TEST(EdgesCommandTest, AttackSeesTheTrueGraphMoreThanRandomizedResponse) {
  const Dataset d = Generated(300, 0.9, 8);
  EdgesOptions o = Quick();
  o.graphs = {EdgeGraph::kRr, EdgeGraph::kTrue};
  o.edge_epsilons = {0.1};
  o.feature_epsilons = {kNoPrivacy};
  o.label_epsilons = {kNoPrivacy};
  auto grid = RunEdgesGrid(d, o, nullptr);
  ASSERT_TRUE(grid.ok()) << grid.status();
  const json& cells = (*grid)["cells"];
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0]["graph"], "rr");
  EXPECT_EQ(cells[1]["graph"], "true");
  const double rr = cells[0]["attack_auc"]["mean"].get<double>();
  const double truth = cells[1]["attack_auc"]["mean"].get<double>();
  EXPECT_GT(truth, 0.75) << "rr " << rr;
  EXPECT_GT(truth, rr + 0.1) << "true " << truth;
  EXPECT_GT(cells[0]["graph_edges"]["mean"].get<double>(),
            0.4 * ExpectedRrEdges(300, 0.1));

  const auto c = CellConfig(o, d.meta, kNoPrivacy, kNoPrivacy,
                            training::NodeModelKind::kGcn);
  auto eval = pipeline::RunPipeline(d, c, o.seed, 0);
  ASSERT_TRUE(eval.ok());
  EXPECT_EQ(cells[1]["accuracy"]["values"][0].get<double>(), eval->metric);
}

// LinkTeller finds the true graph's edges by querying the model trained on
// it, much less of them behind dense randomized response, and nothing at
// all in the graph-free MLP (exactly 0.5, computed). Running it changes no
// cell's accuracy or similarity AUC.
TEST(EdgesCommandTest, LinkTellerAndTheGraphFreeBaseline) {
  const Dataset d = Generated(300, 0.9, 8);
  EdgesOptions o = Quick();
  o.graphs = {EdgeGraph::kRr, EdgeGraph::kTrue, EdgeGraph::kMlp};
  o.models = {training::NodeModelKind::kGcn, training::NodeModelKind::kSage};
  o.edge_epsilons = {0.1};
  o.feature_epsilons = {kNoPrivacy};
  o.label_epsilons = {kNoPrivacy};
  o.linkteller_sources = 0;
  auto grid = RunEdgesGrid(d, o, nullptr);
  ASSERT_TRUE(grid.ok()) << grid.status();
  const json& cells = (*grid)["cells"];
  // Per model: rr, true, mlp.
  ASSERT_EQ(cells.size(), 6u);
  auto lt = [&](size_t i) {
    return cells[i]["linkteller_auc"]["mean"].get<double>();
  };
  for (size_t m : {0, 3}) {
    EXPECT_EQ(cells[m + 2]["graph"], "mlp");
    EXPECT_TRUE(cells[m + 2]["edge_epsilon"].is_null());
    EXPECT_GT(lt(m + 1), 0.8) << cells[m + 1]["model"];
    EXPECT_GT(lt(m + 1), lt(m) + 0.1) << cells[m]["model"];
    EXPECT_EQ(lt(m + 2), 0.5);
    EXPECT_EQ(cells[m + 2]["graph_edges"]["mean"].get<double>(), 0.0);
  }
  // The MLP is trained once and reported in both models' tables.
  EXPECT_EQ(cells[2]["accuracy"], cells[5]["accuracy"]);
  EXPECT_EQ(cells[2]["attack_auc"], cells[5]["attack_auc"]);
  EXPECT_EQ((*grid)["attacks"], json({"similarity", "linkteller"}));

  o.linkteller_attack = false;
  auto plain = RunEdgesGrid(d, o, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (size_t i = 0; i < cells.size(); ++i) {
    const json& c = (*plain)["cells"][i];
    EXPECT_EQ(c["accuracy"], cells[i]["accuracy"]) << i;
    EXPECT_EQ(c["attack_auc"], cells[i]["attack_auc"]) << i;
    EXPECT_TRUE(c["linkteller_auc"].is_null());
  }
  const std::string table = EdgesTables(*plain);
  EXPECT_THAT(table, HasSubstr("| mlp"));
  EXPECT_THAT(table, Not(HasSubstr("LinkTeller")));
  EXPECT_THAT(EdgesTables(*grid), HasSubstr("LinkTeller attack AUC"));

  // A sample of sources scores fewer directions, the same way.
  o.linkteller_attack = true;
  o.similarity_attack = false;
  o.graphs = {EdgeGraph::kTrue};
  o.models = {training::NodeModelKind::kGcn};
  o.linkteller_sources = 100;
  auto sampled = RunEdgesGrid(d, o, nullptr);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  const json& cell = (*sampled)["cells"][0];
  EXPECT_TRUE(cell["attack_auc"].is_null());
  EXPECT_GT(cell["linkteller_auc"]["mean"].get<double>(), 0.8);
  EXPECT_EQ((*sampled)["parameters"]["linkteller"]["sources_drawn"], 100);
}

TEST(EdgesCommandTest, LinkTellerSourcesAndErrors) {
  const std::vector<bool> all = LinkTellerSources(50, 0, 1);
  EXPECT_EQ(std::count(all.begin(), all.end(), true), 50);
  EXPECT_EQ(LinkTellerSources(50, 80, 1), all);
  const std::vector<bool> ten = LinkTellerSources(50, 10, 1);
  EXPECT_EQ(std::count(ten.begin(), ten.end(), true), 10);
  EXPECT_EQ(LinkTellerSources(50, 10, 1), ten);  // public, reproducible
  EXPECT_NE(LinkTellerSources(50, 10, 2), ten);
  // A run that kept no model cannot be queried.
  const Dataset d = Generated(60, 0.8, 3);
  const std::vector<Edge> non_edges = SampleNonEdges(d.graph, 10, 1);
  pipeline::RunResult r;
  const auto c = CellConfig(Quick(), d.meta, kNoPrivacy, kNoPrivacy,
                            training::NodeModelKind::kGcn);
  auto auc = LinkTellerAttackAuc(d.graph, non_edges, d.graph, c, r, nullptr, 1);
  ASSERT_FALSE(auc.ok());
  EXPECT_THAT(auc.status().message(), HasSubstr("keep_node_model"));
}

TEST(EdgesCommandTest, JsonHasTheDocumentedKeysAndSaysWhatWasSkipped) {
  TempFolder tmp;
  Dataset d = Generated(120, 0.8, 9);
  ASSERT_TRUE(WriteDataset(d, tmp.File("gen")).ok());
  const Result r =
      Edges({"--dataset", tmp.File("gen"), "--edge-epsilons", "1,8",
             "--feature-epsilons", "2,inf", "--label-epsilons", "inf",
             "--models", "gcn", "--runs", "2", "--epochs", "5",
             "--feature-steps", "1", "--max-rr-edges", "100", "--threads",
             "2", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("NOT differentially private"));
  EXPECT_THAT(r.err, HasSubstr("similarity AUC"));
  EXPECT_THAT(r.err, HasSubstr("LinkTeller AUC"));
  const json j = json::parse(r.out);
  for (const char* key : {"dataset", "nodes", "edges", "seed", "runs",
                          "noise_source", "attack", "parameters", "cells",
                          "seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["noise_source"], "seeded-not-private");
  EXPECT_EQ(j["parameters"]["similarity"], "cosine");
  EXPECT_EQ(j["parameters"]["pipeline"]["method"], "lpgnn");
  // ns1, ns2, rr at 2 budgets, and true once: 7 rows x 2 eps_x.
  ASSERT_EQ(j["cells"].size(), 14u);
  int skipped = 0, substitution = 0;
  for (const json& c : j["cells"]) {
    for (const char* key : {"model", "graph", "edge_epsilon",
                            "feature_epsilon", "label_epsilon", "skipped"}) {
      EXPECT_TRUE(c.contains(key)) << key;
    }
    EXPECT_TRUE(c["label_epsilon"].is_null());
    if (!c["skipped"].is_null()) {
      // 120 nodes: RR at eps_e 1 expects ~1920 edges, at 8 ~2.4: over 100
      // only the first.
      ++skipped;
      EXPECT_EQ(c["graph"], "rr");
      EXPECT_EQ(c["edge_epsilon"], 1.0);
      EXPECT_THAT(c["skipped"].get<std::string>(),
                  HasSubstr("RR graph of ~1920 edges"));
      EXPECT_FALSE(c.contains("accuracy"));
      continue;
    }
    for (const char* key : {"accuracy", "attack_auc", "linkteller_auc",
                            "linkteller_seconds", "graph_edges",
                            "graph_seconds", "seconds"}) {
      ASSERT_TRUE(c.contains(key)) << key;
      EXPECT_EQ(c[key]["values"].size(), 2u) << key;
      EXPECT_TRUE(c[key].contains("mean") && c[key].contains("std")) << key;
    }
    if (c["graph"] == "true") {
      EXPECT_TRUE(c["edge_epsilon"].is_null());
    }
    if (c["graph"] == "ns1" || c["graph"] == "ns2") {
      ++substitution;
      const json& s = c["substitution"];
      for (const char* key :
           {"dropped", "substituted", "unresolved", "dropped_per_node",
            "substituted_per_node", "unresolved_per_node", "messages",
            "message_bytes", "vectors_sent", "seconds", "per_run"}) {
        EXPECT_TRUE(s.contains(key)) << key;
      }
      EXPECT_EQ(s["per_run"].size(), 2u);
      EXPECT_GT(s["message_bytes"].get<double>(), 0);
    } else {
      EXPECT_TRUE(c["substitution"].is_null());
    }
  }
  EXPECT_EQ(skipped, 2);
  EXPECT_EQ(substitution, 8);

  // The table of the same grid names every row and the skipped cell.
  const Result t =
      Edges({"--dataset", tmp.File("gen"), "--edge-epsilons", "1",
             "--feature-epsilons", "inf", "--label-epsilons", "inf",
             "--models", "sage", "--runs", "1", "--epochs", "5",
             "--max-rr-edges", "100"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("GraphSAGE on generated"));
  EXPECT_THAT(t.out, HasSubstr("| ns1"));
  EXPECT_THAT(t.out, HasSubstr("| true"));
  EXPECT_THAT(t.out, HasSubstr("skipped"));
  EXPECT_THAT(t.out,
              HasSubstr("rr eps_e=1: skipped: RR graph of ~1920 edges"));
}

TEST(EdgesCommandTest, PlotWritesTheChartsAfterTheOutput) {
  TempFolder tmp;
  Dataset d = Generated(120, 0.8, 9);
  ASSERT_TRUE(WriteDataset(d, tmp.File("gen")).ok());
  const std::vector<std::string> grid = {
      "--dataset", tmp.File("gen"), "--graphs", "rr,ns1,true,mlp",
      "--edge-epsilons", "4,8", "--feature-epsilons", "inf",
      "--label-epsilons", "inf", "--models", "gcn", "--runs", "1",
      "--epochs", "5", "--feature-steps", "1", "--linkteller-sources", "20"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = grid;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const Result r = Edges(with({"--plot", tmp.File("e.svg")}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| rr"));  // the table, as without --plot
  // Polylines: rr and ns1 by eps_e; rr, ns1, true and mlp by attack AUC.
  const std::vector<std::pair<std::string, int>> files = {
      {"e.svg", 2}, {"e-attack-similarity.svg", 2}, {"e-attack-linkteller.svg", 2},
      {"e-tradeoff-similarity.svg", 4}, {"e-tradeoff-linkteller.svg", 4}};
  for (const auto& [name, polylines] : files) {
    EXPECT_THAT(r.err, HasSubstr("ldpgraph edges: wrote " + tmp.File(name)));
    auto svg = ReadFileToString(tmp.File(name));
    ASSERT_TRUE(svg.ok()) << name;
    const testing::SvgShape shape = testing::ReadSvgShape(*svg);
    EXPECT_TRUE(shape.well_formed) << name;
    EXPECT_EQ(shape.polylines, polylines) << name;
    EXPECT_THAT(shape.texts, ::testing::Contains(HasSubstr("epsilon"))) << name;
    EXPECT_THAT(shape.texts, ::testing::Contains("true graph")) << name;
  }
  // true and mlp as dashed references, in the plot and the legend.
  EXPECT_EQ(testing::ReadSvgShape(*ReadFileToString(tmp.File("e.svg"))).dashed, 4);

  // A chart that cannot be written (its name is a folder's): the JSON is
  // printed whole, then the error, exit 1.
  std::filesystem::create_directories(tmp.File("taken.svg"));
  const Result bad =
      Edges(with({"--plot", tmp.File("taken.svg"), "--format", "json"}));
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(json::accept(bad.out)) << bad.out;
  EXPECT_THAT(bad.err, HasSubstr("ldpgraph edges: --plot " + tmp.File("taken.svg")));
}

}  // namespace
}  // namespace ldpgraph::tool

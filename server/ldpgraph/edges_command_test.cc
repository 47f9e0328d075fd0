// Tests for `ldpgraph edges`: bad command lines are usage errors naming the
// flag (exit 2) before any work; the link-inference attacks find the true
// graph's edges in a homophilous graph's outputs and much less of them
// behind dense randomized response; the JSON holds the documented keys and
// says which cells were skipped and why. (The private graphs themselves:
// server/pipeline/private_graph_test.cc; the attacks by hand:
// server/attacks/link_inference_test.cc.)
#include "server/ldpgraph/edges_command.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/generator.h"
#include "common/files.h"
#include "common/testing/generated_datasets.h"
#include "common/testing/svg_shape.h"
#include "common/testing/temp_folder.h"
#include "server/pipeline/pipeline.h"

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
  return testing_datasets::SmallDataset(nodes, homophily, seed);
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
            0.4 * pipeline::ExpectedRrEdges(300, 0.1));

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

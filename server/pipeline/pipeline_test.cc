#include "server/pipeline/pipeline.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/attacks/poisoning.h"
#include "common/dataset/feature_schema.h"
#include "common/dataset/generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::pipeline {
namespace {

Dataset Generated(size_t nodes, double homophily, uint64_t seed) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = nodes;
  o.homophily = homophily;
  o.seed = seed;
  o.features = 32;
  return *GenerateDataset(o);
}

PipelineConfig Quick(Method m, Task t) {
  PipelineConfig c = DefaultConfig(m, t);
  c.node_model.train.max_epochs = 150;
  c.node_model.train.patience = 30;
  c.link_model.train.max_epochs = 150;
  c.link_model.train.patience = 30;
  c.feature_steps = 2;
  c.dataset_settings = false;  // the tests set K_x and K_y themselves
  // One training per run: the tests of auto (both) set it themselves.
  c.propagation = NodePropagation::kPpr;
  return c;
}

TEST(PipelineTest, NodeClassificationLearnsAndPrivacyCostsAccuracy) {
  const Dataset d = Generated(800, 0.8, 1);
  PipelineConfig raw =
      Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  raw.mechanism = "none";
  auto clean = RunPipeline(d, raw, 1, 0);
  ASSERT_TRUE(clean.ok()) << clean.status();
  // 6 balanced classes: chance is about 1/6.
  EXPECT_GT(clean->metric, 0.6);
  EXPECT_EQ(clean->noise_source, "none");
  PipelineConfig hds =
      Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  hds.epsilon = 0.5;
  auto noisy = RunPipeline(d, hds, 1, 0);
  ASSERT_TRUE(noisy.ok()) << noisy.status();
  EXPECT_EQ(noisy->noise_source, "seeded-not-private");
  EXPECT_GT(noisy->metric, 0.3);  // the graph still carries the classes
  EXPECT_LT(noisy->metric, clean->metric);
  EXPECT_GT(noisy->perturb_seconds, 0.0);
}

TEST(PipelineTest, EveryMechanismRunsThroughPrivGe) {
  // Laplace's unbiased estimates reach hundreds here; push's threshold
  // scales with them, so this finishes in well under a second.
  const Dataset d = Generated(300, 0.8, 6);
  for (const char* m : {"laplace", "piecewise", "multibit", "hds", "onebit"}) {
    PipelineConfig c =
        Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
    c.mechanism = m;
    auto r = RunPipeline(d, c, 1, 0);
    ASSERT_TRUE(r.ok()) << m << ": " << r.status();
    EXPECT_GT(r->metric, 0.0) << m;
  }
}

TEST(PipelineTest, ThreadsDoNotChangeTheResult) {
  const Dataset d = Generated(400, 0.7, 2);
  for (Task task : {v1::PIPELINE_TASK_NODE, v1::PIPELINE_TASK_LINK}) {
    PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, task);
    EXPECT_EQ(c.threads, 0);  // every core by default
    c.threads = 1;
    auto one = RunPipeline(d, c, 5, 0);
    c.threads = 3;
    auto three = RunPipeline(d, c, 5, 0);
    ASSERT_TRUE(one.ok() && three.ok());
    EXPECT_EQ(one->metric, three->metric);
    EXPECT_EQ(one->training.best_validation, three->training.best_validation);
    EXPECT_EQ(one->training.best_epoch, three->training.best_epoch);
  }
}

TEST(PipelineTest, RunsAreReproducibleAndIndependent) {
  const Dataset d = Generated(400, 0.7, 2);
  for (Method m : {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN}) {
    PipelineConfig c = Quick(m, v1::PIPELINE_TASK_NODE);
    auto a = RunPipeline(d, c, 5, 0);
    auto b = RunPipeline(d, c, 5, 0);
    auto other = RunPipeline(d, c, 5, 1);
    ASSERT_TRUE(a.ok() && b.ok() && other.ok());
    EXPECT_EQ(a->metric, b->metric);
    EXPECT_EQ(a->training.best_epoch, b->training.best_epoch);
    // Another run redraws split, noise and weights. Accuracies on a few
    // hundred nodes are coarse, so compare them together with the epochs.
    auto figures = [](const RunResult& r) {
      return std::make_tuple(r.metric, r.training.best_validation,
                             r.training.best_epoch, r.training.epochs);
    };
    EXPECT_NE(figures(*a), figures(*other));
  }
}

TEST(PipelineTest, SecureNoiseSaysSo) {
  const Dataset d = Generated(200, 0.7, 3);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.secure_noise = true;
  auto r = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->noise_source, "secure");
}

TEST(PipelineTest, LabelDenoisingBeatsTheRawReports) {
  const Dataset d = Generated(1200, 0.9, 4);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.label_epsilon = 1.0;
  auto r = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->label_agreement && r->label_agreement_raw);
  // Randomized response keeps a label with e/(e + 5) = 0.35 for 6 classes.
  EXPECT_NEAR(*r->label_agreement_raw, std::exp(1.0) / (std::exp(1.0) + 5),
              0.05);
  // Neighbours' reports, averaged on a homophilous graph, recover more.
  EXPECT_GT(*r->label_agreement, *r->label_agreement_raw + 0.1);
  EXPECT_GT(r->metric, 0.4);

  c.label_epsilon = 30.0;  // practically clean
  c.label_steps = 0;
  auto clean = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(clean.ok());
  EXPECT_DOUBLE_EQ(*clean->label_agreement, 1.0);
}

// LPGNN's published treatment and ldpgraph's earlier vote both recover
// labels from the neighbours' reports; the published one trains through the
// propagated channel and selects with the capped rule, so its selected
// validation accuracy (against the reports) never exceeds what the channel
// keeps.
TEST(PipelineTest, PublishedAndVoteDenoisingBothLearn) {
  const Dataset d = Generated(1200, 0.9, 4);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.label_epsilon = 1.0;
  c.label_steps = 2;
  const double keep = std::exp(1.0) / (std::exp(1.0) + 5);
  for (LabelDenoising how : {LabelDenoising::kPublished, LabelDenoising::kVote}) {
    c.label_denoising = how;
    auto r = RunPipeline(d, c, 1, 0);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(*r->label_agreement, *r->label_agreement_raw + 0.1)
        << LabelDenoisingName(how);
    EXPECT_GT(r->metric, 0.4) << LabelDenoisingName(how);
    if (how == LabelDenoising::kPublished) {
      EXPECT_LE(r->training.best_validation, keep + 1e-6);
      // No early stopping: every epoch of the budget runs.
      EXPECT_EQ(r->training.epochs, c.node_model.train.max_epochs);
    }
  }
  EXPECT_EQ(*ParseLabelDenoising("vote"), LabelDenoising::kVote);
  EXPECT_FALSE(ParseLabelDenoising("median").ok());
}

// Tuning trains every candidate on the run's split and reports and keeps
// the first with the best validation score; the run then trains that pair.
TEST(PipelineTest, StepTuningKeepsTheBestCandidate) {
  const Dataset d = Generated(600, 0.9, 5);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.node_model.train.max_epochs = 60;
  c.label_epsilon = 1.0;
  c.tune_feature_steps = {0, 2};
  c.tune_label_steps = {0, 3};
  auto r = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& cands = r->tuning["candidates"];
  ASSERT_EQ(cands.size(), 4u);
  double best = -1;
  int kx = -1, ky = -1;
  for (const auto& cand : cands) {
    if (cand["validation"].get<double>() > best) {
      best = cand["validation"].get<double>();
      kx = cand["feature_steps"];
      ky = cand["label_steps"];
    }
  }
  EXPECT_EQ(r->tuning["feature_steps"], kx);
  EXPECT_EQ(r->tuning["label_steps"], ky);
  // The kept pair, trained as configured, is the untuned run with it.
  PipelineConfig fixed = c;
  fixed.tune_feature_steps.clear();
  fixed.tune_label_steps.clear();
  fixed.feature_steps = kx;
  fixed.label_steps = ky;
  auto direct = RunPipeline(d, fixed, 1, 0);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->metric, r->metric);
}

TEST(PipelineTest, PrivGeAutoKeepsTheBetterPropagation) {
  const Dataset d = Generated(600, 0.9, 5);
  ASSERT_EQ(DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE)
                .propagation,
            NodePropagation::kAuto);  // PrivGE's default
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.propagation = NodePropagation::kAuto;
  auto r = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& cands = r->tuning["candidates"];
  ASSERT_EQ(cands.size(), 2u);
  EXPECT_EQ(cands[0]["propagation"], "ppr");
  EXPECT_EQ(cands[1]["propagation"], "kprop");
  const std::string kept =
      cands[1]["validation"].get<double>() > cands[0]["validation"].get<double>()
          ? "kprop"
          : "ppr";
  EXPECT_EQ(r->tuning["propagation"], kept);
  // The kept candidate is the run with that propagation alone.
  PipelineConfig fixed = c;
  auto parsed = ParseNodePropagation(kept);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  fixed.propagation = *parsed;
  auto direct = RunPipeline(d, fixed, 1, 0);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(direct->metric, r->metric);
  EXPECT_EQ(direct->training.best_validation, r->training.best_validation);
  EXPECT_TRUE(direct->tuning.is_null());
  // The link task propagates by PPR whatever the node task's setting.
  EXPECT_EQ(ConfigToJson(c)["propagation"]["method"], "auto");
  EXPECT_EQ(ConfigToJson(DefaultConfig(v1::PIPELINE_METHOD_PRIVGE,
                                       v1::PIPELINE_TASK_LINK))
                ["propagation"]["method"],
            "ppr-push");
}

// Past auto_ppr_max_nodes, auto trains KProp alone, says so, and gives
// what --propagation kprop gives; at the bound itself both still run.
TEST(PipelineTest, PrivGeAutoSkipsPprPastItsBound) {
  const Dataset d = Generated(600, 0.9, 5);
  EXPECT_EQ(DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE)
                .auto_ppr_max_nodes,
            100000u);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.propagation = NodePropagation::kAuto;
  c.auto_ppr_max_nodes = 600;
  auto both = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->tuning["candidates"].size(), 2u);
  EXPECT_FALSE(both->tuning.contains("ppr_skipped"));
  c.auto_ppr_max_nodes = 599;
  auto skipped = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  ASSERT_EQ(skipped->tuning["candidates"].size(), 1u);
  EXPECT_EQ(skipped->tuning["candidates"][0]["propagation"], "kprop");
  EXPECT_EQ(skipped->tuning["propagation"], "kprop");
  EXPECT_THAT(skipped->tuning["ppr_skipped"].get<std::string>(),
              testing::HasSubstr("600 nodes pass auto's 599"));
  EXPECT_EQ(ConfigToJson(c)["propagation"]["auto_ppr_max_nodes"], 599);
  PipelineConfig kprop = c;
  kprop.propagation = NodePropagation::kKProp;
  auto direct = RunPipeline(d, kprop, 1, 0);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(direct->metric, skipped->metric);
  EXPECT_EQ(direct->training.best_validation,
            skipped->training.best_validation);
}

// PPR's gain on the classes against the noise is bounded whatever alpha
// (docs/papers.md, "Accuracy as the graph grows"); K steps of KProp are
// not. On a graph whose classes PPR cannot separate from HDS's noise, 16
// steps do.
TEST(PipelineTest, KPropStepsSeparateWherePprCannot) {
  const Dataset d = Generated(2000, 0.8, 7);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.propagation = NodePropagation::kPpr;
  auto ppr = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(ppr.ok()) << ppr.status();
  c.propagation = NodePropagation::kKProp;
  c.feature_steps = 16;
  auto kprop = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(kprop.ok()) << kprop.status();
  EXPECT_GT(kprop->metric, 0.85);
  EXPECT_GT(kprop->metric, ppr->metric + 0.15)
      << "kprop " << kprop->metric << ", ppr " << ppr->metric;
}

// LPGNN's model learns from unbiased estimates; HDS's reports (C * x, C
// about 0.008 here) left it at chance until the curator unbiased them.
TEST(PipelineTest, LpgnnLearnsFromHdsReports) {
  const Dataset d = Generated(1000, 0.8, 1);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.feature_steps = 8;
  auto multibit = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(multibit.ok()) << multibit.status();
  c.mechanism = "hds";
  auto hds = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(hds.ok()) << hds.status();
  EXPECT_GT(hds->metric, 0.6);  // chance is about 1/6
  EXPECT_GT(hds->metric, multibit->metric - 0.15)
      << "hds " << hds->metric << ", multibit " << multibit->metric;
}

// Link prediction must not see the edges it is scored on. On a graph with no
// structure beyond its edges (random edges, every node its own one-hot
// feature), a propagation that kept the test edges would put each endpoint's
// mass in the other's embedding and score them far above non-edges; without
// them the test edges look like any other pair.
// A graph with no structure to learn: `pairs` uniformly random node pairs
// (self pairs skipped, repeats merged) on n nodes, alternating labels, and a
// one-hot feature per node (nothing shared between nodes either).
Dataset RandomGraph(size_t n, size_t pairs) {
  Dataset d;
  d.meta.name = "random";
  d.meta.nodes = n;
  d.meta.features = n;
  d.meta.classes = 2;
  PublicRandom rng(7);
  std::vector<Edge> edges;
  while (edges.size() < pairs) {
    NodeId u = rng.UniformInt(n), v = rng.UniformInt(n);
    if (u != v) edges.push_back({u, v});
  }
  d.graph = *Graph::FromEdges(n, edges, {.merge_duplicates = true});
  d.meta.edges = d.graph.num_edges();
  for (size_t v = 0; v < n; ++v) {
    d.labels.push_back(v % 2);
    const uint32_t idx = v;
    const float one = 1.0f;
    d.features.AppendRow({&idx, 1}, {&one, 1});
  }
  d.features.cols = n;
  return d;
}

TEST(PipelineTest, LinkPredictionHoldsOutTheTestEdges) {
  const Dataset d = RandomGraph(400, 800);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_LINK);
  c.mechanism = "none";
  c.scaling = FeatureScaling::kUnit;
  auto r = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->metric, 0.7) << "test edges leaked into propagation";

  // The same pipeline on a graph with communities does learn.
  const Dataset structured = Generated(800, 0.9, 8);
  PipelineConfig s = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_LINK);
  s.mechanism = "none";
  auto good = RunPipeline(structured, s, 1, 0);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_GT(good->metric, 0.65);
}

PipelineConfig QuickRelease(Method m, Task t) {
  PipelineConfig c = Quick(m, t);
  c.release.se_privgemb.dim = 32;
  c.release.dpne.dim = 32;
  c.release.dpne.sweeps = 5;
  return c;
}

// SE-PrivGEmb and DPNE: the structure embedding alone classifies nodes of a
// homophilous graph and predicts its held-out links; on a random graph the
// held-out links are unpredictable, so nothing of them leaked into the
// embedding; a private release reports its guarantee (what it is worth at
// that budget is docs/papers.md's grid, not a test's).
TEST(PipelineTest, StructureReleasesLearnTheGraphAndNotTheTestEdges) {
  const Dataset structured = Generated(800, 0.9, 8);
  const Dataset random = RandomGraph(400, 1600);
  for (Method m : {v1::PIPELINE_METHOD_SE_PRIVGEMB, v1::PIPELINE_METHOD_DPNE}) {
    SCOPED_TRACE(MethodName(m));
    PipelineConfig node = QuickRelease(m, v1::PIPELINE_TASK_NODE);
    node.mechanism = "none";
    auto clean = RunPipeline(structured, node, 1, 0);
    ASSERT_TRUE(clean.ok()) << clean.status();
    EXPECT_GT(clean->metric, 0.5);  // 6 classes: chance is about 1/6
    EXPECT_EQ(clean->noise_source, "none");
    EXPECT_EQ(clean->release["private"], false);

    PipelineConfig link = QuickRelease(m, v1::PIPELINE_TASK_LINK);
    link.mechanism = "none";
    auto good = RunPipeline(structured, link, 1, 0);
    ASSERT_TRUE(good.ok()) << good.status();
    EXPECT_GT(good->metric, 0.65);
    auto blind = RunPipeline(random, link, 1, 0);
    ASSERT_TRUE(blind.ok()) << blind.status();
    EXPECT_LT(blind->metric, 0.62) << "test edges leaked into the embedding";

    PipelineConfig priv = QuickRelease(m, v1::PIPELINE_TASK_NODE);
    priv.epsilon = 2;
    auto released = RunPipeline(structured, priv, 1, 0);
    ASSERT_TRUE(released.ok()) << released.status();
    EXPECT_EQ(released->noise_source, "seeded-not-private");
    ASSERT_TRUE(released->release.contains("guarantee"));
    EXPECT_LE(released->release["guarantee"]["epsilon"].get<double>(),
              2.0 + 1e-9);
  }
}

TEST(PipelineTest, StructureReleasesRefuseFeatureSettings) {
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_DPNE, v1::PIPELINE_TASK_NODE);
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.mechanism = "hds";
  EXPECT_THAT(ValidateConfig(c).message(),
              ::testing::HasSubstr("uses no feature mechanism"));
  c = DefaultConfig(v1::PIPELINE_METHOD_SE_PRIVGEMB, v1::PIPELINE_TASK_NODE);
  c.label_epsilon = 1;
  EXPECT_THAT(ValidateConfig(c).message(),
              ::testing::HasSubstr("no label budget"));
  c = DefaultConfig(v1::PIPELINE_METHOD_SE_PRIVGEMB, v1::PIPELINE_TASK_LINK);
  c.epsilon = -1;
  EXPECT_EQ(ValidateConfig(c).code(), absl::StatusCode::kInvalidArgument);
  Collected collected;
  EXPECT_EQ(RunPipelineOnCollected(
                Generated(200, 0.8, 6),
                DefaultConfig(v1::PIPELINE_METHOD_DPNE, v1::PIPELINE_TASK_NODE),
                collected, 1)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineTest, RunResultJsonHasEveryFigureButTheMetric) {
  RunResult r;
  r.metric = 0.8;
  r.micro_f1 = 0.8;
  r.macro_f1 = 0.7;
  r.training.epochs = 12;
  r.training.best_epoch = 9;
  r.training.best_validation = 0.75;
  r.propagate_seconds = 1.5;
  nlohmann::json j = RunResultToJson(r);
  for (const char* key :
       {"epochs", "best_epoch", "validation", "seconds_per_epoch",
        "perturb_seconds", "propagate_seconds", "train_seconds", "micro_f1",
        "macro_f1"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["epochs"], 12);
  EXPECT_EQ(j["best_epoch"], 9);
  EXPECT_EQ(j["macro_f1"], 0.7);
  EXPECT_EQ(j["propagate_seconds"], 1.5);
  EXPECT_FALSE(j.contains("metric"));
  EXPECT_FALSE(j.contains("label_agreement"));
  EXPECT_FALSE(j.contains("tuning"));
  EXPECT_FALSE(j.contains("release"));
  r.label_agreement = 0.9;
  r.label_agreement_raw = 0.6;
  r.tuning = {{"feature_steps", 4}};
  j = RunResultToJson(r);
  EXPECT_EQ(j["label_agreement"], 0.9);
  EXPECT_EQ(j["label_agreement_raw"], 0.6);
  EXPECT_EQ(j["tuning"]["feature_steps"], 4);
}

TEST(PipelineTest, ReplacementGraphIsWhatTheCuratorLearnsOn) {
  const Dataset d = Generated(300, 0.9, 4);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.epsilon = 2;
  auto plain = RunPipeline(d, c, 3, 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->node_outputs.has_value());  // nobody asked
  c.keep_node_outputs = true;
  // The same graph, as an override: the same run, outputs kept.
  RunOverrides same;
  same.graph = &d.graph;
  auto copy = RunPipeline(d, c, 3, 0, same);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->metric, plain->metric);
  ASSERT_TRUE(copy->node_outputs.has_value());
  ASSERT_EQ(copy->node_outputs->rows, d.graph.num_nodes());
  ASSERT_EQ(copy->node_outputs->cols, static_cast<size_t>(d.meta.classes));
  for (size_t v = 0; v < d.graph.num_nodes(); ++v) {
    double sum = 0;
    for (float p : copy->node_outputs->row(v)) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  // A graph without edges: KProp and the GNN see no neighbours, and the
  // noisy features alone do much worse.
  auto empty = Graph::FromEdges(d.graph.num_nodes(), {});
  ASSERT_TRUE(empty.ok());
  RunOverrides none;
  none.graph = &*empty;
  auto alone = RunPipeline(d, c, 3, 0, none);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_LT(alone->metric, plain->metric - 0.1);
}

TEST(PipelineTest, OverridesOfTheWrongShapeAreRefused) {
  const Dataset d = Generated(200, 0.8, 5);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  auto small = Graph::FromEdges(199, {});
  ASSERT_TRUE(small.ok());
  RunOverrides o;
  o.graph = &*small;
  auto r = RunPipeline(d, c, 1, 0, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("199 nodes; the dataset has 200"));
  PipelineConfig link =
      Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_LINK);
  o.graph = &d.graph;
  EXPECT_EQ(RunPipeline(d, link, 1, 0, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  SparseRows x;
  x.cols = 32;
  RunOverrides f;
  f.features = &x;
  r = RunPipeline(d, c, 1, 0, f);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("overriding features are 0 x 32"));
}

TEST(PipelineTest, BuildFeatureMechanismIsTheRunsMechanism) {
  const Dataset d = Generated(200, 0.8, 6);
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.epsilon = 3;
  auto m = BuildFeatureMechanism(c, d);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->kind(), MechanismKind::kMultiBit);
  EXPECT_EQ((*m)->epsilon(), 3);
  EXPECT_EQ((*m)->dimension(), 32);
  EXPECT_EQ((*m)->spec().alpha, 0);
  EXPECT_EQ((*m)->spec().beta, 1);
  c.mechanism = "none";
  EXPECT_EQ(BuildFeatureMechanism(c, d).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SimulateFeatureReportsTest, MatchesEachAgentsReport) {
  const Dataset d = Generated(200, 0.7, 9);
  MechanismSpec spec;
  spec.kind = MechanismKind::kMultiBit;
  spec.epsilon = 2;
  spec.dimension = 32;
  spec.alpha = 0;
  spec.beta = 1;
  auto mech = *CreateFeatureMechanism(spec);
  SeededRandomForTesting a(3), b(3);
  auto all = SimulateFeatureReports(d.features, *mech, a);
  ASSERT_TRUE(all.ok());
  // Row by row with the same stream: identical, and Multi-bit's unreported
  // dimensions carry (alpha + beta) / 2, so rows are dense.
  for (size_t v = 0; v < 50; ++v) {
    std::vector<double> x(32, 0.0), est(32, 0.0);
    auto idx = d.features.row_indices(v);
    auto val = d.features.row_values(v);
    for (size_t i = 0; i < idx.size(); ++i) x[idx[i]] = val[i];
    auto report = mech->Perturb(x, b);
    ASSERT_TRUE(report.ok());
    ASSERT_TRUE(mech->Estimate(*report, absl::MakeSpan(est)).ok());
    ASSERT_EQ(all->row_indices(v).size(), 32u);
    for (int j = 0; j < 32; ++j) {
      EXPECT_FLOAT_EQ(all->row_values(v)[j], static_cast<float>(est[j]));
    }
  }
}

}  // namespace
}  // namespace ldpgraph::pipeline

namespace ldpgraph::pipeline {
namespace {

// The poisoning attack, offline: with a fifth of the nodes malicious (their
// features crafted, their label reports the target class), the share of
// other classes' test nodes predicted as the target rises clearly above the
// same seeded run's without attack; the confusion matrix counts every test
// node; without an attack class there is no target rate, and a class alone
// measures without attacking (the run's metric unchanged).
TEST(PipelineTest, PoisoningRaisesTheTargetRate) {
  const Dataset d = Generated(800, 0.8, 3);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.epsilon = 3;
  c.label_epsilon = 3;
  auto plain = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->target_rate);
  ASSERT_EQ(plain->confusion.size(), static_cast<size_t>(d.meta.classes));
  uint64_t test_nodes = 0, correct = 0;
  for (size_t a = 0; a < plain->confusion.size(); ++a) {
    for (size_t b = 0; b < plain->confusion.size(); ++b) {
      test_nodes += plain->confusion[a][b];
      if (a == b) correct += plain->confusion[a][b];
    }
  }
  EXPECT_EQ(test_nodes, 200u);  // the default 50/25/25 split of 800 nodes
  EXPECT_NEAR(double(correct) / test_nodes, plain->metric, 1e-9);

  c.attack_class = 2;
  auto measured = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->metric, plain->metric);
  ASSERT_TRUE(measured->target_rate);
  EXPECT_DOUBLE_EQ(*measured->target_rate, *TargetRate(plain->confusion, 2));

  c.attack_fraction = 0.2;
  auto attacked = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(attacked.ok()) << attacked.status();
  ASSERT_TRUE(attacked->target_rate);
  EXPECT_GT(*attacked->target_rate, *measured->target_rate + 0.1);
  const nlohmann::json j = RunResultToJson(*attacked);
  EXPECT_EQ(j["target_rate"], *attacked->target_rate);
  EXPECT_EQ(j["confusion"].size(), static_cast<size_t>(d.meta.classes));
  const nlohmann::json p = ConfigToJson(c);
  EXPECT_EQ(p["attack"]["fraction"], 0.2);
  EXPECT_EQ(p["attack"]["class"], 2);
  EXPECT_EQ(p["attack"]["dims"], 10);
  // Seeded: the attack replays exactly.
  auto again = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->metric, attacked->metric);
  EXPECT_EQ(again->confusion, attacked->confusion);

  // With the report screen the simulation counts the attacker's nodes it
  // caught: the flagged nodes among SimulatedMalicious(seed 1)'s draw.
  c.defences.screen = true;
  auto screened = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(screened.ok()) << screened.status();
  const nlohmann::json& s = screened->screen;
  ASSERT_TRUE(s.contains("malicious_flagged")) << s.dump();
  const std::vector<uint32_t> malicious =
      poisoning::MaliciousNodes(800, /*seed=*/1, 0.2);
  uint32_t caught = 0;
  for (const nlohmann::json& v : s["flagged"]) {
    caught += std::binary_search(malicious.begin(), malicious.end(),
                                 v.get<uint32_t>());
  }
  EXPECT_EQ(s["malicious"].get<size_t>(), malicious.size());
  EXPECT_EQ(s["malicious_flagged"].get<uint32_t>(), caught);
  EXPECT_GT(caught, 0u);
  EXPECT_LE(*screened->target_rate, *attacked->target_rate);
}

TEST(PipelineTest, PoisoningSettingsAreValidated) {
  const Dataset d = Generated(200, 0.8, 3);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.attack_fraction = 0.1;
  EXPECT_THAT(ValidateConfig(c).message(),
              ::testing::HasSubstr("needs its target class"));
  c.attack_class = 0;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.attack_fraction = 1.0;
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.attack_fraction = 0.1;
  c.attack_dims = 0;
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.attack_dims = 10;
  c.attack_class = d.meta.classes;  // one past the last class
  EXPECT_EQ(RunPipeline(d, c, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  c.attack_class = 0;
  c.mechanism = "none";
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.mechanism = "laplace";
  EXPECT_EQ(RunPipeline(d, c, 1, 0).status().code(),
            absl::StatusCode::kUnimplemented);
  PipelineConfig link =
      Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_LINK);
  link.attack_class = 0;
  EXPECT_FALSE(ValidateConfig(link).ok());
}

// The report screen on an honest seeded run: applied, it flags (almost)
// nobody, and the accuracy barely moves (with nobody flagged the run is the
// same run).
TEST(PipelineScreenTest, ScreenOnAnHonestRunCostsLittle) {
  const Dataset d = Generated(800, 0.8, 3);
  for (Method m : {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN}) {
    PipelineConfig c = Quick(m, v1::PIPELINE_TASK_NODE);
    c.epsilon = 3;
    if (m == v1::PIPELINE_METHOD_LPGNN) c.label_epsilon = 3;
    auto plain = RunPipeline(d, c, 5, 0);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_TRUE(plain->screen.is_null());
    EXPECT_FALSE(ConfigToJson(c).contains("defence"));
    c.defences.screen = true;
    auto screened = RunPipeline(d, c, 5, 0);
    ASSERT_TRUE(screened.ok()) << screened.status();
    ASSERT_TRUE(screened->screen.is_object());
    EXPECT_EQ(screened->screen["screen"], "applied");
    EXPECT_EQ(screened->screen["reports"], 800);
    EXPECT_LE(screened->screen["flagged_nodes"].get<int>(), 8);
    EXPECT_NEAR(screened->metric, plain->metric, 0.03);
    if (screened->screen["flagged_nodes"] == 0) {
      EXPECT_EQ(screened->metric, plain->metric);
    }
    EXPECT_EQ(RunResultToJson(*screened)["screen"], screened->screen);
    EXPECT_EQ(ConfigToJson(c)["defence"]["kind"], "screen");
  }
}

TEST(PipelineScreenTest, ScreenIsANoOpWithoutSampling) {
  const Dataset d = Generated(300, 0.8, 4);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.mechanism = "onebit";
  c.defences.screen = true;
  auto r = RunPipeline(d, c, 2, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->screen["screen"], "not applicable");
  c.mechanism = "none";
  EXPECT_THAT(ValidateConfig(c).message(),
              ::testing::HasSubstr("needs a feature mechanism"));
  c.mechanism = "hds";
  c.screen_alpha = 1.5;
  EXPECT_THAT(ValidateConfig(c).message(),
              ::testing::HasSubstr("screen-alpha must be in (0, 1)"));
}

// Collected::untrusted: nodes the curator's screen flagged never train or
// select, and their label reports go unused; with every node untrusted
// nothing is left to train on.
TEST(PipelineScreenTest, UntrustedNodesLeaveTrainingAndValidation) {
  const Dataset d = Generated(300, 0.8, 5);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.label_epsilon = 1;
  Collected collected;
  collected.features = ScaleDatasetFeatures(d, c.scaling);
  // The odd nodes report a wrong label (the poisoned ones).
  collected.label_reports = d.labels;
  for (uint32_t v = 1; v < 300; v += 2) {
    (*collected.label_reports)[v] = (d.labels[v] + 1) % d.meta.classes;
  }
  auto all = RunPipelineOnCollected(d, c, collected, 1);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_LT(*all->label_agreement_raw, 0.6);
  for (uint32_t v = 1; v < 300; v += 2) collected.untrusted.push_back(v);
  auto honest = RunPipelineOnCollected(d, c, collected, 1);
  ASSERT_TRUE(honest.ok()) << honest.status();
  EXPECT_EQ(*honest->label_agreement_raw, 1.0);
  for (uint32_t v = 0; v < 300; v += 2) collected.untrusted.push_back(v);
  std::sort(collected.untrusted.begin(), collected.untrusted.end());
  auto none = RunPipelineOnCollected(d, c, collected, 1);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(),
              ::testing::HasSubstr("left no training or validation node"));
}

// Z in a file of rows (ZStorage::kFile) is Z in memory, propagated slice by
// slice: PPR (dense, and compressed rows when the MLP takes them), KProp,
// and auto's two candidates give the same bits, clamped or not; slices of
// 16 columns over 40, the last one narrower.
TEST(PipelineTest, ZInAFileOfRowsGivesTheSameResults) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 600;
  o.homophily = 0.9;
  o.seed = 11;
  o.features = 40;
  const Dataset d = *GenerateDataset(o);
  PipelineConfig base =
      Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  base.z_slice_bytes = 16 * 600 * 2 * sizeof(float);
  base.keep_node_outputs = true;  // every node's posteriors, compared
  struct Case {
    const char* name;
    NodePropagation propagation;
    double sparse_density;  // 1: PPR's Z goes to compressed rows
    double clip;
    int batch_rows;
  };
  for (const Case& k : {Case{"ppr", NodePropagation::kPpr, 0.125, 10, -1},
                        Case{"ppr unclamped, batches", NodePropagation::kPpr,
                             0.125, 0, 64},
                        Case{"ppr compressed", NodePropagation::kPpr, 1.0,
                             10, 64},
                        Case{"kprop", NodePropagation::kKProp, 0.125, 3, 64},
                        Case{"auto", NodePropagation::kAuto, 0.125, 10, -1}}) {
    SCOPED_TRACE(k.name);
    PipelineConfig c = base;
    c.propagation = k.propagation;
    c.node_model.sparse_input_density = k.sparse_density;
    c.standardize_clip = k.clip;
    c.node_model.batch_rows = k.batch_rows;
    c.z_storage = ZStorage::kMemory;
    auto memory = RunPipeline(d, c, 1, 0);
    ASSERT_TRUE(memory.ok()) << memory.status();
    c.z_storage = ZStorage::kFile;
    auto file = RunPipeline(d, c, 1, 0);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_GT(memory->metric, 0.5);
    EXPECT_EQ(file->metric, memory->metric);
    EXPECT_EQ(file->training.best_validation,
              memory->training.best_validation);
    EXPECT_EQ(file->training.epochs, memory->training.epochs);
    EXPECT_EQ(file->training.best_epoch, memory->training.best_epoch);
    EXPECT_EQ(file->confusion, memory->confusion);
    EXPECT_EQ(file->tuning, memory->tuning);
    ASSERT_TRUE(file->node_outputs && memory->node_outputs);
    EXPECT_TRUE(file->node_outputs->data == memory->node_outputs->data);
  }
  // The slices must not matter either: one slice of all 40 columns.
  PipelineConfig c = base;
  c.z_storage = ZStorage::kFile;
  auto sliced = RunPipeline(d, c, 1, 0);
  c.z_slice_bytes = uint64_t{1} << 30;
  auto whole = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(sliced.ok() && whole.ok());
  EXPECT_TRUE(sliced->node_outputs->data == whole->node_outputs->data);
  EXPECT_EQ(sliced->training.best_validation,
            whole->training.best_validation);
}

// Where Z's file cannot go, the run says so and names the folder; the
// settings that cannot read Z from a file are refused.
TEST(PipelineTest, ZFileErrorsNameTheFolderAndTheSetting) {
  const Dataset d = Generated(300, 0.9, 12);
  PipelineConfig c = Quick(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.z_storage = ZStorage::kFile;
  c.scratch_dir = "/nonexistent/scratch";
  auto missing = RunPipeline(d, c, 1, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              testing::HasSubstr("/nonexistent/scratch"));
  PipelineConfig labels = c;
  labels.scratch_dir.clear();
  labels.label_epsilon = 1.0;
  labels.label_denoising = LabelDenoising::kPublished;
  EXPECT_THAT(std::string(ValidateConfig(labels).message()),
              testing::HasSubstr("predictions propagated"));
  PipelineConfig lpgnn = Quick(v1::PIPELINE_METHOD_LPGNN,
                               v1::PIPELINE_TASK_NODE);
  lpgnn.z_storage = ZStorage::kFile;
  EXPECT_THAT(std::string(ValidateConfig(lpgnn).message()),
              testing::HasSubstr("PrivGE's node task"));
  PipelineConfig zero = Quick(v1::PIPELINE_METHOD_PRIVGE,
                              v1::PIPELINE_TASK_NODE);
  zero.z_slice_bytes = 0;
  EXPECT_FALSE(ValidateConfig(zero).ok());
  EXPECT_EQ(ConfigToJson(c)["propagation"]["z_storage"], "file");
}

}  // namespace
}  // namespace ldpgraph::pipeline

#include "server/pipeline/baselines.h"

#include <cmath>
#include <iostream>
#include <vector>

#include "common/dataset/generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::pipeline {
namespace {

// Two 6-cliques joined by one edge, and an isolated node 12.
Graph TwoCliques() {
  std::vector<Edge> edges;
  for (NodeId base : {0u, 6u}) {
    for (NodeId u = 0; u < 6; ++u) {
      for (NodeId v = u + 1; v < 6; ++v) edges.push_back({base + u, base + v});
    }
  }
  edges.push_back({5, 6});
  return *Graph::FromEdges(13, edges);
}

TEST(PropagateLabelsTest, EachCliqueTakesItsTrainingLabel) {
  const Graph g = TwoCliques();
  auto lp = PropagateLabels(g, 3, {0, 11}, {2, 1}, {1, 10}, {2, 1}, 1);
  ASSERT_TRUE(lp.ok()) << lp.status();
  for (NodeId v = 0; v < 6; ++v) EXPECT_EQ(lp->predictions[v], 2) << v;
  for (NodeId v = 6; v < 12; ++v) EXPECT_EQ(lp->predictions[v], 1) << v;
  // No label reaches node 12: the commonest training label (a tie: the
  // lower class).
  EXPECT_EQ(lp->predictions[12], 1);
  ASSERT_EQ(lp->validation.size(), std::size(kLabelPropagationAlphas));
  for (double v : lp->validation) EXPECT_EQ(v, 1.0);
  EXPECT_EQ(lp->alpha, kLabelPropagationAlphas[0]);  // the first best
  // A training node without a label (-1) is left out; bad input refused.
  EXPECT_TRUE(PropagateLabels(g, 3, {0, 11}, {-1, 1}, {}, {}, 1).ok());
  EXPECT_FALSE(PropagateLabels(g, 3, {0}, {3}, {}, {}, 1).ok());
  EXPECT_FALSE(PropagateLabels(g, 3, {0, 1}, {1}, {}, {}, 1).ok());
  EXPECT_FALSE(PropagateLabels(g, 3, {20}, {1}, {}, {}, 1).ok());
}

TEST(FeatureFreeFeaturesTest, StandardNormalAndReproducible) {
  const SparseRows x = FeatureFreeFeatures(400, 25, 7);
  ASSERT_EQ(x.rows, 400u);
  ASSERT_EQ(x.cols, 25u);
  ASSERT_EQ(x.nnz(), 400u * 25u);
  double sum = 0, squares = 0, fourth = 0;
  for (float v : x.values) {
    sum += v;
    squares += double{v} * v;
    fourth += double{v} * v * v * v;
  }
  const double n = x.values.size(), mean = sum / n, var = squares / n;
  // 10,000 draws: the mean's standard error is 0.01, the variance's
  // sqrt(2/n) = 0.014, the fourth moment's (3) sqrt(96/n) ~ 0.1. Bounds at
  // 5 standard errors.
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.07);
  EXPECT_NEAR(fourth / n, 3.0, 0.5);
  EXPECT_EQ(FeatureFreeFeatures(400, 25, 7).values, x.values);
  EXPECT_NE(FeatureFreeFeatures(400, 25, 8).values, x.values);
}

TEST(BaselineConfigTest, RawAndFeatureFreeRunTheMethodWithoutReports) {
  PipelineConfig c = DefaultConfig(v1::PIPELINE_METHOD_LPGNN,
                                   v1::PIPELINE_TASK_NODE);
  c.attack_fraction = 0.1;
  c.attack_class = 0;
  c.defences.screen = true;
  c.feature_steps = 4;
  c.dataset_settings = false;  // resolved at the run's budget
  auto raw = BaselineConfig(c, Baseline::kRaw);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->mechanism, "none");
  EXPECT_EQ(raw->attack_fraction, 0);
  EXPECT_FALSE(raw->attack_class);
  EXPECT_FALSE(raw->defences.any());
  EXPECT_EQ(raw->aggregator, FeatureAggregator::kKProp);
  EXPECT_EQ(raw->feature_steps, 4);
  // LPGNN's raw baseline takes the settings table's non-private row.
  EXPECT_TRUE(raw->dataset_settings);
  EXPECT_TRUE(ValidateConfig(*raw).ok());
  auto ff = BaselineConfig(c, Baseline::kFeatureFree);
  ASSERT_TRUE(ff.ok());
  EXPECT_EQ(ff->aggregator, FeatureAggregator::kHoa);
  EXPECT_EQ(ff->feature_steps, kFeatureFreeSteps);
  EXPECT_TRUE(ff->standardize);
  EXPECT_FALSE(ff->dataset_settings);  // the method's own settings
  EXPECT_TRUE(ValidateConfig(*ff).ok());
  // UPGNET keeps its own HOA and K; its NFR goes (no reports).
  PipelineConfig u = DefaultConfig(v1::PIPELINE_METHOD_UPGNET,
                                   v1::PIPELINE_TASK_NODE);
  u.feature_steps = 8;
  auto uff = BaselineConfig(u, Baseline::kFeatureFree);
  ASSERT_TRUE(uff.ok());
  EXPECT_EQ(uff->feature_steps, 8);
  EXPECT_EQ(uff->nfr_tau, 0);
  EXPECT_TRUE(uff->standardize);
  // The baselines stop earlier than the method's 500 epochs; a shorter
  // patience of the user's stays.
  EXPECT_EQ(u.node_model.train.patience, 500);
  EXPECT_EQ(uff->node_model.train.patience, kBaselinePatience);
  u.node_model.train.patience = 20;
  EXPECT_EQ(BaselineConfig(u, Baseline::kRaw)->node_model.train.patience, 20);
  EXPECT_TRUE(ValidateConfig(*uff).ok());
  EXPECT_FALSE(BaselineConfig(c, Baseline::kGraphLabels).ok());
  PipelineConfig dpne = DefaultConfig(v1::PIPELINE_METHOD_DPNE,
                                      v1::PIPELINE_TASK_NODE);
  EXPECT_FALSE(BaselineApplies(dpne, Baseline::kFeatureFree));
  EXPECT_TRUE(BaselineApplies(dpne, Baseline::kGraphLabels));
  PipelineConfig link = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE,
                                      v1::PIPELINE_TASK_LINK);
  EXPECT_FALSE(BaselineApplies(link, Baseline::kGraphLabels));
}

Dataset Generated(uint64_t seed) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 600;
  o.homophily = 0.8;
  o.seed = seed;
  o.features = 32;
  return *GenerateDataset(o);
}

// On a homophilous graph the graph alone carries the classes: label
// propagation and HOA over random features both learn them, on the run's
// own split. KProp's K steps alone wash random features out to each
// component's constant: the HOA baseline exists for that.
TEST(RunBaselineTest, TheGraphAloneLearnsTheClasses) {
  const Dataset d = Generated(3);
  PipelineConfig c = DefaultConfig(v1::PIPELINE_METHOD_UPGNET,
                                   v1::PIPELINE_TASK_NODE);
  c.node_model.train.max_epochs = 200;
  c.threads = 1;
  auto lp = RunBaseline(d, c, Baseline::kGraphLabels, 1, 0);
  ASSERT_TRUE(lp.ok()) << lp.status();
  // 6 classes: chance is about 1/6.
  EXPECT_GT(lp->metric, 0.6);
  EXPECT_EQ(lp->tuning["candidates"].size(),
            std::size(kLabelPropagationAlphas));
  auto ff = RunBaseline(d, c, Baseline::kFeatureFree, 1, 0);
  ASSERT_TRUE(ff.ok()) << ff.status();
  EXPECT_GT(ff->metric, 0.8);
  EXPECT_EQ(ff->noise_source, "none");
  // The same random features through 32 KProp steps alone.
  PipelineConfig kprop = c;
  kprop.aggregator = FeatureAggregator::kKProp;
  auto config = BaselineConfig(kprop, Baseline::kFeatureFree);
  ASSERT_TRUE(config.ok());
  config->aggregator = FeatureAggregator::kKProp;
  config->feature_steps = 32;
  const SparseRows random = FeatureFreeFeatures(
      d.graph.num_nodes(), d.meta.features, StageSeed(1, 0, Stage::kBaseline));
  RunOverrides o;
  o.features = &random;
  auto washed = RunPipeline(d, *config, 1, 0, o);
  ASSERT_TRUE(washed.ok()) << washed.status();
  std::cout << "graph-labels " << lp->metric << ", feature-free (HOA) "
            << ff->metric << ", feature-free by KProp alone "
            << washed->metric << "\n";
  EXPECT_LT(washed->metric + 0.4, ff->metric)
      << "HOA " << ff->metric << ", KProp " << washed->metric;
  // The method's own reports without the graph: what the graph adds. Here
  // Multi-bit at eps 1 leaves little of 32 features, the graph most.
  auto method = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(method.ok()) << method.status();
  auto alone = RunBaseline(d, c, Baseline::kNoGraph, 1, 0);
  ASSERT_TRUE(alone.ok()) << alone.status();
  std::cout << "method " << method->metric << ", no graph " << alone->metric
            << "\n";
  EXPECT_LT(alone->metric + 0.3, method->metric);
  EXPECT_FALSE(BaselineConfig(c, Baseline::kNoGraph).ok());
  // A graph of the wrong size is refused.
  const Graph small = *Graph::FromEdges(3, {{0, 1}});
  EXPECT_FALSE(RunBaseline(d, c, Baseline::kRaw, 1, 0, &small).ok());
}

}  // namespace
}  // namespace ldpgraph::pipeline

namespace ldpgraph::pipeline {
namespace {

// --inputs auto trains the reports, the positional columns and both, and
// keeps the best validation; --smooth records each strength it tried, 0
// (the model's own predictions) first, and keeps the best validation.
TEST(RunNodeInputsTest, AutoKeepsTheBestCandidateAndSmoothSaysWhatItChose) {
  const Dataset d = Generated(5);
  PipelineConfig c = DefaultConfig(v1::PIPELINE_METHOD_UPGNET,
                                   v1::PIPELINE_TASK_NODE);
  c.node_model.train.max_epochs = 100;
  c.threads = 1;
  c.epsilon = 0.5;
  c.feature_steps = 8;
  c.inputs = NodeInputs::kAuto;
  c.positional_features = 16;
  c.smooth = true;
  ASSERT_TRUE(ValidateConfig(c).ok());
  auto r = RunPipeline(d, c, 1, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& candidates = r->tuning["candidates"];
  ASSERT_EQ(candidates.size(), 3u) << r->tuning.dump();
  EXPECT_EQ(candidates[0]["inputs"], "reports");
  EXPECT_EQ(candidates[1]["inputs"], "positional");
  EXPECT_EQ(candidates[2]["inputs"], "both");
  double best = -1;
  std::string kept;
  for (const auto& cand : candidates) {
    if (cand["validation"].get<double>() > best) {
      best = cand["validation"].get<double>();
      kept = cand["inputs"].get<std::string>();
    }
  }
  EXPECT_EQ(r->tuning["inputs"], kept);
  EXPECT_EQ(r->tuning["positional_features"], 16);
  const auto& smooth = r->smooth;
  ASSERT_EQ(smooth["candidates"].size(), 1 + std::size(kLabelPropagationAlphas) +
                                             std::size(kSmoothMixWeights));
  EXPECT_EQ(smooth["candidates"][0]["alpha"], 0.0);
  double best_smooth = -1, alpha = -1, mix = 0;
  for (const auto& cand : smooth["candidates"]) {
    if (cand["validation"].get<double>() > best_smooth) {
      best_smooth = cand["validation"].get<double>();
      alpha = cand.value("alpha", 0.0);
      mix = cand.value("mix", 0.0);
    }
  }
  EXPECT_EQ(smooth["alpha"].get<double>(), alpha);
  EXPECT_EQ(smooth["mix"].get<double>(), mix);
  if (alpha == 0 && mix == 0) {
    EXPECT_EQ(smooth["accuracy_before"].get<double>(), r->metric);
  }
  EXPECT_FALSE(r->node_outputs);  // kept for the smoothing only
  // Positional inputs refuse what they cannot serve.
  c.defences.robust = true;
  EXPECT_FALSE(ValidateConfig(c).ok());
}

}  // namespace
}  // namespace ldpgraph::pipeline

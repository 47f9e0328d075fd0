// Tests for the pipeline's configuration library alone (it links no
// stage): LPGNN's dataset settings, validation naming the bad setting, the
// settings as JSON, the attack's target rate and the defences' names.
#include "server/pipeline/config.h"

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::pipeline {
namespace {

TEST(ConfigTest, DatasetSettingsFollowLpgnnsPublishedTable) {
  DatasetMeta pubmed, cora;
  pubmed.name = "pubmed";
  cora.name = "cora";
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.label_epsilon = 1.0;
  PipelineConfig p = c;
  ResolveDatasetSettings(pubmed, &p);
  EXPECT_EQ(p.feature_steps, 4);
  EXPECT_EQ(p.label_steps, 2);
  EXPECT_DOUBLE_EQ(p.node_model.train.adam.weight_decay, 1e-4);
  EXPECT_DOUBLE_EQ(p.node_model.dropout, 0.25);
  EXPECT_FALSE(p.dataset_settings);
  ResolveDatasetSettings(cora, &p);  // resolved once: unchanged
  EXPECT_EQ(p.feature_steps, 4);
  PipelineConfig k = c;
  ResolveDatasetSettings(cora, &k);
  EXPECT_EQ(k.feature_steps, 2);
  EXPECT_EQ(k.label_steps, 8);
  PipelineConfig clean =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  ResolveDatasetSettings(cora, &clean);
  EXPECT_EQ(clean.feature_steps, 16);
  EXPECT_EQ(clean.label_steps, 0);
  EXPECT_DOUBLE_EQ(clean.node_model.train.adam.weight_decay, 1e-2);
  EXPECT_DOUBLE_EQ(clean.node_model.dropout, 0.75);
  // The nearest tabulated budgets: eps_x 0.12 -> 0.1, eps_y 2.4 -> 2.
  PipelineConfig near =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  near.epsilon = 0.12;
  near.label_epsilon = 2.4;
  ResolveDatasetSettings(cora, &near);
  EXPECT_EQ(near.feature_steps, 16);
  EXPECT_EQ(near.label_steps, 4);
  PipelineConfig raw =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  raw.mechanism = "none";
  raw.label_epsilon = 1.0;
  ResolveDatasetSettings(pubmed, &raw);
  EXPECT_EQ(raw.feature_steps, 0);
  EXPECT_EQ(raw.label_steps, 2);
  EXPECT_DOUBLE_EQ(raw.node_model.dropout, 0.0);
  PipelineConfig off = c;
  off.dataset_settings = false;
  off.feature_steps = 5;
  ResolveDatasetSettings(pubmed, &off);
  EXPECT_EQ(off.feature_steps, 5);
}

TEST(ConfigTest, ValidatesTheConfig) {
  auto expect_bad = [](PipelineConfig c, absl::string_view needle) {
    absl::Status s = ValidateConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s;
  };
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.mechanism = "gaussian";
  expect_bad(c, "mechanism");
  c = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.epsilon = 0;
  expect_bad(c, "epsilon");
  c = DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_LINK);
  expect_bad(c, "node classification");
  c = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.threads = -1;
  expect_bad(c, "threads must be >= 0 (0 = every core)");
  c = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_LINK);
  c.label_epsilon = 1;
  expect_bad(c, "label budget");
  c = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.ppr.alpha = 0;
  expect_bad(c, "alpha");
  c = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  c.node_model.kind = training::NodeModelKind::kGcn;
  expect_bad(c, "MLP");
  // The clamp of the standardised Z: PrivGE's node task, 10 by default.
  c = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_NODE);
  EXPECT_EQ(c.standardize_clip, 10.0);
  EXPECT_EQ(ConfigToJson(c)["propagation"]["standardize_clip"], 10.0);
  c.standardize_clip = -1;
  expect_bad(c, "clip must be finite and >= 0");
  c.standardize_clip = std::numeric_limits<double>::infinity();
  expect_bad(c, "clip must be finite and >= 0");
  c.standardize_clip = 0;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.standardize_clip = 3;
  c.standardize = false;
  expect_bad(c, "with standardisation on");
  c = DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  EXPECT_EQ(c.standardize_clip, 0.0);
  c.standardize = true;
  c.standardize_clip = 3;
  expect_bad(c, "PrivGE's node task");
  EXPECT_EQ(DefaultConfig(v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_TASK_LINK)
                .standardize_clip,
            0.0);
}

TEST(ConfigTest, ConfigJsonNamesEverySetting) {
  nlohmann::json j = ConfigToJson(
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE));
  EXPECT_EQ(j["method"], "lpgnn");
  EXPECT_EQ(j["mechanism"], "multibit");
  EXPECT_EQ(j["model"]["kind"], "sage");
  EXPECT_EQ(j["model"]["activation"], "selu");
  EXPECT_EQ(j["propagation"]["steps"], 2);
  EXPECT_EQ(j["propagation"]["normalisation"], "symmetric");
  EXPECT_EQ(j["label_steps"], 8);
  EXPECT_EQ(j["noise"], "seeded-not-private");
  EXPECT_TRUE(j["label_epsilon"].is_null());
}

TEST(TargetRateTest, CountsOtherClassesPredictedAsTheTarget) {
  const std::vector<std::vector<uint32_t>> m = {{5, 1, 0}, {2, 6, 2}, {3, 0, 1}};
  // Target 0: rows 1 and 2 hold 10 + 4 nodes, 2 + 3 of them predicted 0.
  EXPECT_DOUBLE_EQ(*TargetRate(m, 0), 5.0 / 14);
  EXPECT_DOUBLE_EQ(*TargetRate(m, 2), 2.0 / 16);
  EXPECT_FALSE(TargetRate(m, 3).ok());
  EXPECT_FALSE(TargetRate({{1, 2}, {3}}, 0).ok());
}

TEST(DefencesTest, ParsesACommaListAndNamesItCanonically) {
  auto d = ParseDefences("robust, screen");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->screen && d->robust && !d->edge_consistency);
  EXPECT_EQ(DefencesName(*d), "screen,robust");
  EXPECT_EQ(DefencesName(*ParseDefences("none")), "none");
  EXPECT_FALSE(ParseDefences("none").value().any());
  EXPECT_EQ(DefencesName(*ParseDefences("edge-consistency")),
            "edge-consistency");
  EXPECT_EQ(ParseDefences("scrn").status().message(),
            "--defence: defence must be a comma list of none, screen, robust, "
            "edge-consistency, got 'scrn': unknown 'scrn'");
  EXPECT_THAT(ParseDefences("screen,screen").status().message(),
              ::testing::HasSubstr("'screen' twice"));
  EXPECT_THAT(ParseDefences("none,robust").status().message(),
              ::testing::HasSubstr("none with another defence"));
  EXPECT_THAT(ParseDefences("screen,").status().message(),
              ::testing::HasSubstr("an empty name"));
}

// A deployed curator's baselines: what it holds anyway, never the raw
// features.
TEST(ParseDeployedBaselinesTest, TheCuratorsOwn) {
  auto b = ParseDeployedBaselines("graph-labels,no-graph,feature-free",
                                  "--baselines");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (std::vector<Baseline>{Baseline::kGraphLabels,
                                       Baseline::kNoGraph,
                                       Baseline::kFeatureFree}));
  EXPECT_TRUE(ParseDeployedBaselines("none", "--baselines")->empty());
  EXPECT_TRUE(ParseDeployedBaselines("", "--baselines")->empty());
  auto raw = ParseDeployedBaselines("no-graph,raw", "--baselines");
  EXPECT_EQ(raw.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(raw.status().message(), ::testing::HasSubstr("'raw'"));
  EXPECT_THAT(raw.status().message(), ::testing::HasSubstr("--baselines"));
}

}  // namespace
}  // namespace ldpgraph::pipeline

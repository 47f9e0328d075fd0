// Tests for `ldpgraph eval` and `ldpgraph repro`: every bad command line is
// a usage error naming the flag (exit 2) before any work; a missing dataset
// is a runtime error naming the path (exit 1); a real run on a small
// generated dataset prints one JSON object with every field the issue lists
// and every parameter (defaults included), says its noise is not private,
// and reproduces; repro fills the paper column only where a paper reports a
// number.
#include "server/ldpgraph/eval_command.h"
#include "server/ldpgraph/eval_baselines.h"
#include "server/ldpgraph/sweep_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/dataset/generator.h"
#include "common/files.h"
#include "common/testing/svg_shape.h"
#include "common/random/random.h"

namespace ldpgraph::tool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Result {
  int code;
  std::string out, err;
};

Result Eval(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunEval(args, out, err);
  return {code, out.str(), err.str()};
}

Result Repro(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunRepro(args, out, err);
  return {code, out.str(), err.str()};
}

class EvalCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        (fs::temp_directory_path() /
         ("ldpgraph_eval_test_" + std::to_string(getpid())))
            .string());
    GeneratorOptions o = DefaultGeneratorOptions();
    o.nodes = 300;
    o.features = 16;
    o.classes = 3;
    auto d = GenerateDataset(o);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(WriteDataset(*d, *dir_ + "/gen").ok());
    // The same data under a name the papers report on, for the paper column.
    d->meta.name = "cora";
    ASSERT_TRUE(WriteDataset(*d, *dir_ + "/cora").ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string gen() { return *dir_ + "/gen"; }
  static std::string cora() { return *dir_ + "/cora"; }
  static std::string* dir_;
};
std::string* EvalCommandTest::dir_ = nullptr;

TEST_F(EvalCommandTest, UsageErrorsNameTheFlag) {
  const std::string d = gen();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "--dataset is required"},
      {{"--dataset", d, "--task", "graph"},
       "--task must be one of node, link, got 'graph'"},
      {{"--dataset", d, "--method", "gcn"},
       "--method must be one of privge, lpgnn, se-privgemb, dpne, upgnet, got 'gcn'"},
      {{"--dataset", d, "--mechanism", "gauss"}, "mechanism"},
      {{"--dataset", d, "--mechanism", "none", "--epsilon", "1"},
       "--epsilon needs a --mechanism"},
      {{"--dataset", d, "--epsilon", "-1"}, "epsilon"},
      {{"--dataset", d, "--k", "2", "--m", "2"}, "--k or --m"},
      {{"--dataset", d, "--batch-epochs", "0"},
       "--batch-epochs must be an integer >= 1"},
      {{"--dataset", d, "--task", "link", "--batch-patience", "x"},
       "--batch-patience"},
      {{"--dataset", d, "--split", "fixd"}, "--split"},
      {{"--dataset", d, "--lpgnn-settings", "x.csv"},
       "--lpgnn-settings applies to --method lpgnn"},
      {{"--dataset", d, "--init", "torch"},
       "--init applies to the graph models"},
      {{"--dataset", d, "--method", "lpgnn", "--init", "he"}, "--init"},
      {{"--dataset", d, "--batch-decays", "2"},
       "--batch-decays applies to --task link"},
      {{"--dataset", d, "--task", "link", "--batch-decays", "-1"},
       "--batch-decays must be an integer >= 0"},
      {{"--dataset", d, "--propagation", "ppr", "--feature-steps", "4"},
       "--feature-steps applies to KProp"},
      {{"--dataset", d, "--task", "link", "--feature-steps", "4"},
       "--feature-steps applies to KProp"},
      {{"--dataset", d, "--method", "lpgnn", "--propagation", "kprop"},
       "--propagation applies to --method privge on --task node"},
      {{"--dataset", d, "--propagation", "heat"},
       "--propagation must be one of ppr, kprop, auto, got 'heat'"},
      {{"--dataset", d, "--method", "lpgnn", "--standardize-clip", "3"},
       "--standardize-clip applies to --method privge on --task node"},
      {{"--dataset", d, "--standardize-clip", "-1"},
       "--standardize-clip must be finite and >= 0 (0: no clamp), got -1"},
      {{"--dataset", d, "--no-standardize", "--standardize-clip", "3"},
       "--standardize-clip clamps the standardised Z: it needs the"},
      {{"--dataset", d, "--propagation", "ppr", "--auto-ppr-max-nodes", "5"},
       "--auto-ppr-max-nodes applies to --propagation auto"},
      {{"--dataset", d, "--auto-ppr-max-nodes", "-5"},
       "--auto-ppr-max-nodes must be >= 0, got -5"},
      {{"--dataset", d, "--method", "lpgnn", "--z-storage", "file"},
       "--z-storage applies to --method privge on --task node"},
      {{"--dataset", d, "--z-storage", "disk"},
       "--z-storage must be one of auto, memory, file, got 'disk'"},
      {{"--dataset", d, "--task", "link", "--scratch-dir", "/tmp"},
       "--scratch-dir applies to --method privge on --task node"},
      {{"--dataset", d, "--scratch-dir", ""}, "--scratch-dir needs a folder"},
      {{"--dataset", d, "--z-storage", "file", "--label-epsilon", "1"},
       "cannot serve predictions propagated with label reports"},
      {{"--dataset", d, "--method", "lpgnn", "--alpha", "0.2"},
       "--alpha, --r and --rmax apply"},
      {{"--dataset", d, "--alpha", "1.5"}, "alpha"},
      {{"--dataset", d, "--loss", "pairwise"}, "--loss applies to --task link"},
      {{"--dataset", d, "--task", "link", "--label-epsilon", "1"},
       "node classification only"},
      {{"--dataset", d, "--method", "lpgnn", "--task", "link"},
       "LPGNN is evaluated on node classification"},
      {{"--dataset", d, "--model", "gat"}, "--model must be mlp, gcn or sage"},
      {{"--dataset", d, "--task", "link", "--model", "gcn"}, "lr or mlp"},
      {{"--dataset", d, "--dropout", "1"}, "--dropout must be in [0, 1)"},
      {{"--dataset", d, "--input-dropout", "-0.5"}, "--input-dropout"},
      {{"--dataset", d, "--lr", "0"}, "--lr must be > 0"},
      {{"--dataset", d, "--runs", "0"}, "--runs must be an integer >= 1"},
      {{"--dataset", d, "--threads", "-1"},
       "--threads must be an integer >= 0, got -1"},
      {{"--dataset", d, "--format", "xml"}, "--format must be table or json"},
      {{"--dataset", d, "--split", "half"}, "--split must be random"},
      {{"--dataset", d, "--bogus", "1"}, "bogus"},
      {{"--dataset", d, "--dim", "8"},
       "--dim applies to --method se-privgemb or dpne"},
      {{"--dataset", d, "--method", "dpne", "--negatives", "3"},
       "--negatives applies to --method se-privgemb"},
      {{"--dataset", d, "--method", "se-privgemb", "--sweeps", "3"},
       "--sweeps applies to --method dpne"},
      {{"--dataset", d, "--method", "se-privgemb", "--proximity", "katz"},
       "--proximity must be one of degree, deepwalk, uniform, got 'katz'"},
      {{"--dataset", d, "--method", "se-privgemb", "--noise-multiplier", "0"},
       "noise_multiplier"},
      {{"--dataset", d, "--method", "se-privgemb", "--release-optimizer",
        "rmsprop"},
       "--release-optimizer must be one of sgd, adam, got 'rmsprop'"},
      {{"--dataset", d, "--method", "se-privgemb", "--release-steps", "0"},
       "--release-steps must be an integer >= 1, got 0"},
      {{"--dataset", d, "--method", "dpne", "--release-optimizer", "adam"},
       "--release-optimizer applies to --method se-privgemb"},
      {{"--dataset", d, "--method", "dpne", "--mechanism", "hds"},
       "uses no feature mechanism"},
      {{"--dataset", d, "--method", "dpne", "--label-epsilon", "1"},
       "no label budget"},
      {{"--dataset", d, "--method", "lpgnn", "--label-denoising", "median"},
       "--label-denoising must be one of published, vote, got 'median'"},
      {{"--dataset", d, "--propagation", "ppr", "--kprop-norm", "mean"},
       "--kprop-norm applies to KProp"},
      {{"--dataset", d, "--method", "lpgnn", "--kprop-norm", "sum"},
       "--kprop-norm must be one of mean, symmetric, got 'sum'"},
      {{"--dataset", d, "--tune-feature-steps", "2,4"},
       "--tune-feature-steps applies to --method lpgnn"},
      {{"--dataset", d, "--method", "lpgnn", "--tune-label-steps", "2,x"},
       "--tune-label-steps must be 'default' or a comma-separated list"},
      {{"--dataset", d, "--nfr", "0.5"},
       "--nfr applies to --method lpgnn or upgnet"},
      {{"--dataset", d, "--method", "upgnet", "--nfr", "1"},
       "--nfr must be in [0, 1) (0: off), got 1"},
      {{"--dataset", d, "--method", "upgnet", "--mechanism", "none", "--nfr",
        "0.5"},
       "--nfr regularises a mechanism's reports"},
      {{"--dataset", d, "--method", "lpgnn", "--aggregator", "sum"},
       "--aggregator must be one of kprop, hoa, got 'sum'"},
      {{"--dataset", d, "--aggregator", "hoa"},
       "--aggregator applies to --method lpgnn or upgnet"},
      {{"--dataset", d, "--method", "upgnet", "--tune-nfr", "0.5,1.5"},
       "--tune-nfr must be 'default' or a comma-separated list"},
      {{"--dataset", d, "--tune-lr", "0.1"},
       "--tune-lr applies to --method lpgnn or upgnet"},
      {{"--dataset", d, "--method", "upgnet", "--tune-dropout", "0.5,1"},
       "--tune-dropout must be 'default' or a comma-separated list"},
      {{"--dataset", d, "--method", "upgnet", "--inputs", "all"},
       "--inputs must be one of reports, positional, both, auto, got 'all'"},
      {{"--dataset", d, "--method", "upgnet", "--positional-features", "8"},
       "--positional-features applies to --inputs positional, both or auto"},
      {{"--dataset", d, "--task", "link", "--baselines"},
       "--baselines applies to the node task"},
      {{"--dataset", d, "--method", "upgnet", "--task", "link"},
       "UPGNET is evaluated on node classification"},
  };
  for (const auto& [args, needle] : cases) {
    Result r = Eval(args);
    EXPECT_EQ(r.code, 2) << needle;
    EXPECT_THAT(r.err, HasSubstr(needle));
    EXPECT_TRUE(r.out.empty());
  }
}

// A structure release through eval: the JSON names the release's settings
// and each run's guarantee, and the non-private version says it has none.
TEST_F(EvalCommandTest, StructureReleasesReportTheirGuarantee) {
  const std::string d = *dir_ + "/gen";
  for (const char* method : {"se-privgemb", "dpne"}) {
    SCOPED_TRACE(method);
    Result r = Eval({"--dataset", d, "--method", method, "--epsilon", "2",
                     "--dim", "8", "--runs", "1", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("NOT differentially private"));
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["parameters"]["method"], method);
    EXPECT_EQ(j["parameters"]["mechanism"], "central");
    EXPECT_EQ(j["parameters"]["release"]["dim"], 8);
    const auto& release = j["per_run"][0]["release"];
    EXPECT_LE(release["guarantee"]["epsilon"].get<double>(), 2.0 + 1e-9);
    EXPECT_EQ(release["noise_source"], "seeded-not-private");
    if (std::string(method) == "se-privgemb") {
      EXPECT_EQ(j["parameters"]["release"]["optimizer"], "sgd");
      EXPECT_TRUE(j["parameters"]["release"]["max_steps"].is_null());
      Result adam = Eval({"--dataset", d, "--method", method, "--epsilon", "2",
                          "--dim", "8", "--runs", "1", "--format", "json",
                          "--release-optimizer", "adam", "--release-steps",
                          "5"});
      ASSERT_EQ(adam.code, 0) << adam.err;
      auto ja = nlohmann::json::parse(adam.out);
      EXPECT_EQ(ja["parameters"]["release"]["optimizer"], "adam");
      EXPECT_EQ(ja["parameters"]["release"]["max_steps"], 5);
      EXPECT_EQ(ja["per_run"][0]["release"]["optimizer"], "adam");
      EXPECT_EQ(ja["per_run"][0]["release"]["steps"], 5);
    }
    Result clean = Eval({"--dataset", d, "--method", method, "--mechanism",
                         "none", "--dim", "8", "--runs", "1"});
    ASSERT_EQ(clean.code, 0) << clean.err;
    EXPECT_THAT(clean.out, HasSubstr("non-private"));
  }
}

// --defence screen: every run records its screen, the parameters the
// defence; honest seeded reports are (almost) never flagged, and a run that
// flags nobody is the run without the screen.
TEST_F(EvalCommandTest, DefenceScreenReportsItsFigures) {
  const std::vector<std::string> base = {"--dataset", gen(), "--runs", "2",
                                         "--epochs", "30", "--format", "json"};
  std::vector<std::string> screened = base;
  screened.insert(screened.end(), {"--defence", "screen", "--screen-alpha",
                                   "0.01"});
  Result plain = Eval(base), with = Eval(screened);
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(with.code, 0) << with.err;
  const auto p = nlohmann::json::parse(plain.out);
  const auto w = nlohmann::json::parse(with.out);
  EXPECT_FALSE(p["parameters"].contains("defence"));
  EXPECT_EQ(w["parameters"]["defence"]["kind"], "screen");
  EXPECT_EQ(w["parameters"]["defence"]["alpha"], 0.01);
  for (int run = 0; run < 2; ++run) {
    const auto& s = w["per_run"][run]["screen"];
    EXPECT_EQ(s["screen"], "applied");
    EXPECT_EQ(s["alpha"], 0.01);
    EXPECT_EQ(s["reports"], 300);
    EXPECT_FALSE(p["per_run"][run].contains("screen"));
    if (s["flagged_nodes"] == 0) {
      EXPECT_EQ(w["values"][run], p["values"][run]);
    }
  }
  Result bad = Eval({"--dataset", gen(), "--defence", "filter"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--defence: defence must be a comma list of none, screen, robust, edge-consistency"));
  bad = Eval({"--dataset", gen(), "--defence", "screen", "--screen-alpha", "2"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--screen-alpha must be in (0, 1), got 2"));
}

TEST_F(EvalCommandTest, MissingDatasetIsARuntimeError) {
  Result r = Eval({"--dataset", "/nonexistent/ds"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/ds"));
}

TEST_F(EvalCommandTest, HelpExplains) {
  Result r = Eval({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--label-epsilon"));
  EXPECT_THAT(r.out, HasSubstr("Examples"));
  r = Repro({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("82.4"));  // PrivGE Table 2, cora HDS eps 1
}

TEST_F(EvalCommandTest, JsonHasEveryFieldAndReproduces) {
  const std::vector<std::string> args = {
      "--dataset", gen(), "--runs", "2", "--epochs", "60", "--seed", "3",
      "--format", "json"};
  Result r = Eval(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr(std::string(kSeededWarning)));
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"task", "metric", "mean", "std", "runs", "values",
                          "seconds", "parameters", "dataset", "seed",
                          "per_run", "noise_source"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["task"], "node");
  EXPECT_EQ(j["metric"], "accuracy");
  EXPECT_EQ(j["runs"], 2);
  ASSERT_EQ(j["values"].size(), 2u);
  const double mean = (j["values"][0].get<double>() +
                       j["values"][1].get<double>()) / 2;
  EXPECT_NEAR(j["mean"].get<double>(), mean, 1e-12);
  // Defaults are spelled out.
  EXPECT_EQ(j["parameters"]["mechanism"], "hds");
  EXPECT_EQ(j["parameters"]["epsilon"], 1.0);
  EXPECT_EQ(j["parameters"]["propagation"]["alpha"], 0.05);
  EXPECT_EQ(j["parameters"]["model"]["training"]["max_epochs"], 60);
  EXPECT_EQ(j["noise_source"], "seeded-not-private");
  // Same seed, same numbers, whatever the threads (default: every core).
  std::vector<std::string> one_thread = args;
  one_thread.insert(one_thread.end(), {"--threads", "1"});
  Result again = Eval(one_thread);
  ASSERT_EQ(again.code, 0);
  EXPECT_EQ(nlohmann::json::parse(again.out)["values"], j["values"]);
}

// UPGNET with --baselines: every baseline's summary beside the method's,
// paired by run (the differences are the method's values minus the
// baseline's), the per-run figures, and the table's sentences.
TEST_F(EvalCommandTest, BaselinesStandBesideTheMethod) {
  Result r = Eval({"--dataset", gen(), "--method", "upgnet", "--runs", "2",
                   "--epochs", "40", "--feature-steps", "4", "--baselines",
                   "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters"]["method"], "upgnet");
  EXPECT_EQ(j["parameters"]["propagation"]["aggregator"], "hoa");
  EXPECT_EQ(j["parameters"]["propagation"]["nfr_tau"], 0.9);
  EXPECT_EQ(j["parameters"]["propagation"]["standardize"], true);
  ASSERT_TRUE(j.contains("baselines")) << r.out;
  for (const char* key : {"feature_free", "graph_labels", "raw"}) {
    ASSERT_TRUE(j["baselines"].contains(key)) << key;
    const auto& b = j["baselines"][key];
    ASSERT_EQ(b["values"].size(), 2u) << key;
    EXPECT_EQ(b["difference"]["values"].size(), 2u) << key;
    for (int run = 0; run < 2; ++run) {
      EXPECT_NEAR(b["difference"]["values"][run].get<double>(),
                  j["values"][run].get<double>() -
                      b["values"][run].get<double>(),
                  1e-12);
      EXPECT_EQ(j["per_run"][run]["baselines"][key], b["values"][run]);
    }
    EXPECT_GE(b["mean"].get<double>(), 0.0);
    EXPECT_LE(b["mean"].get<double>(), 1.0);
  }
  EXPECT_EQ(j["baselines_summary"].size(), 3u);
  // The model's settings tuned per run by validation: every combination
  // trained, the best kept and said.
  Result tuned = Eval({"--dataset", gen(), "--method", "upgnet", "--runs", "1",
                       "--epochs", "30", "--feature-steps", "4", "--tune-lr",
                       "0.01,0.001", "--tune-dropout", "0.25,0.5", "--format",
                       "json"});
  ASSERT_EQ(tuned.code, 0) << tuned.err;
  const auto tj = nlohmann::json::parse(tuned.out)["per_run"][0]["tuning"];
  ASSERT_EQ(tj["candidates"].size(), 4u) << tj.dump();
  double best = -1;
  nlohmann::json kept;
  for (const auto& cand : tj["candidates"]) {
    if (cand["validation"].get<double>() > best) {
      best = cand["validation"].get<double>();
      kept = cand;
    }
  }
  EXPECT_EQ(tj["learning_rate"], kept["learning_rate"]);
  EXPECT_EQ(tj["dropout"], kept["dropout"]);
  EXPECT_EQ(tj["weight_decay"], 0.01);  // upgnet's, not tuned
  EXPECT_GT(j["baselines_seconds"].get<double>(), 0.0);
  // The table says it in words, one line per baseline.
  Result table = Eval({"--dataset", gen(), "--method", "lpgnn", "--runs", "1",
                       "--epochs", "20", "--baselines"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("beside it, on the same splits"));
  EXPECT_THAT(table.out, HasSubstr("graph alone (no reports)"));
  EXPECT_THAT(table.out, HasSubstr("graph and labels (label propagation)"));
  EXPECT_THAT(table.out, HasSubstr("raw features (no feature privacy)"));
  EXPECT_THAT(table.err, HasSubstr("run 1/1 baselines:"));
  // On raw features the raw baseline is the method itself: left out.
  Result raw = Eval({"--dataset", gen(), "--method", "lpgnn", "--mechanism",
                     "none", "--runs", "1", "--epochs", "20", "--baselines",
                     "--format", "json"});
  ASSERT_EQ(raw.code, 0) << raw.err;
  EXPECT_FALSE(nlohmann::json::parse(raw.out)["baselines"].contains("raw"));
}

// `ldpgraph sweep`: each method's line over the budgets, the baselines
// once, a chart; bad flags are usage errors naming the flag.
TEST_F(EvalCommandTest, SweepDrawsEachMethodBesideTheBaselines) {
  auto sweep = [](const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int code = RunSweep(args, out, err);
    return Result{code, out.str(), err.str()};
  };
  for (const auto& [args, needle] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "--dataset is required"},
           {{"--dataset", gen(), "--methods", "lpgnn,gcn"},
            "--methods: unknown method 'gcn'"},
           {{"--dataset", gen(), "--epsilons", "1,inf"},
            "--epsilons takes finite budgets > 0"},
           {{"--dataset", gen(), "--runs", "0"}, "--runs"}}) {
    Result r = sweep(args);
    EXPECT_EQ(r.code, 2) << needle;
    EXPECT_THAT(r.err, HasSubstr(needle));
  }
  const std::string plot = *dir_ + "/sweep.svg";
  Result r = sweep({"--dataset", gen(), "--methods", "upgnet-mbm,lpgnn",
                    "--epsilons", "1,4", "--runs", "1", "--format", "json",
                    "--plot", plot});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  ASSERT_EQ(j["lines"].size(), 2u);
  EXPECT_EQ(j["lines"][0]["method"], "upgnet-mbm");
  ASSERT_EQ(j["lines"][1]["cells"].size(), 2u);
  EXPECT_EQ(j["lines"][1]["cells"][1]["epsilon"], 4.0);
  EXPECT_EQ(j["lines"][1]["cells"][1]["parameters"]["method"], "lpgnn");
  for (const char* key : {"feature_free", "graph_labels", "raw"}) {
    ASSERT_TRUE(j["baselines"].contains(key)) << key;
    EXPECT_EQ(j["baselines"][key]["values"].size(), 1u);
  }
  EXPECT_THAT(r.err, HasSubstr("wrote " + plot));
  auto svg = ReadFileToString(plot);
  ASSERT_TRUE(svg.ok());
  EXPECT_THAT(*svg, HasSubstr("graph alone (no reports)"));
  EXPECT_THAT(*svg, HasSubstr("UPGNET-MBM"));
  // A saved sweep prints and draws the same without running again.
  const std::string saved = *dir_ + "/sweep.json";
  {
    std::ofstream f(saved);
    f << r.out;
  }
  Result again = sweep({"--from-json", saved});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("UPGNET-MBM (Multi-bit, NFR, HOA)"));
  EXPECT_THAT(again.out, HasSubstr("graph and labels (label propagation)"));
  Result mixed = sweep({"--from-json", saved, "--runs", "3"});
  EXPECT_EQ(mixed.code, 2);
  EXPECT_THAT(mixed.err, HasSubstr("--runs applies to a sweep that runs"));
  Result broken = sweep({"--from-json", plot});
  EXPECT_EQ(broken.code, 1);
  EXPECT_THAT(broken.err, HasSubstr("is not a sweep's JSON"));
}

// The summary's verdict follows the paired difference's standard error:
// a win or a loss past two of them, level within, none from one run.
TEST(BaselinesToJsonTest, SaysWhoWinsOnlyWhenTheRunsCanTell) {
  const std::vector<EvalBaseline> b = {{"feature_free", "graph alone"},
                                       {"graph_labels", "graph and labels"},
                                       {"raw", "raw"}};
  const std::vector<double> method = {0.80, 0.82, 0.84, 0.86};
  // Differences: +0.10 each (a clear gain), -0.05 each (a clear loss), and
  // +-0.01 alternating (level).
  const std::vector<std::vector<double>> values = {
      {0.70, 0.72, 0.74, 0.76},
      {0.85, 0.87, 0.89, 0.91},
      {0.79, 0.83, 0.83, 0.87}};
  const nlohmann::json j = BaselinesToJson(b, values, method);
  const auto& s = j["summary"];
  ASSERT_EQ(s.size(), 3u);
  EXPECT_THAT(s[0].get<std::string>(), HasSubstr("the method adds 10.0"));
  EXPECT_THAT(s[1].get<std::string>(), HasSubstr("here the baseline wins"));
  EXPECT_THAT(s[2].get<std::string>(), HasSubstr("level with"));
  EXPECT_NEAR(j["graph_labels"]["difference"]["mean"].get<double>(), -0.05,
              1e-12);
  const nlohmann::json one =
      BaselinesToJson({b[0]}, {{0.70}}, std::vector<double>{0.80});
  EXPECT_THAT(one["summary"][0].get<std::string>(),
              HasSubstr("no spread to judge by"));
}

// With --edges the baselines add the run without any edge and the run on
// the true graph.
TEST_F(EvalCommandTest, BaselinesOfAPrivateGraph) {
  Result r = Eval({"--dataset", gen(), "--method", "lpgnn", "--runs", "1",
                   "--epochs", "20", "--edges", "rr", "--edge-epsilon", "4",
                   "--baselines", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"feature_free", "graph_labels", "raw", "no_graph", "true_graph"}) {
    EXPECT_TRUE(j["baselines"].contains(key)) << key;
  }
  EXPECT_EQ(j["baselines"]["true_graph"]["label"],
            "true graph (no edge privacy)");
  // The true graph's run is the run without --edges.
  Result plain = Eval({"--dataset", gen(), "--method", "lpgnn", "--runs", "1",
                       "--epochs", "20", "--format", "json"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(j["baselines"]["true_graph"]["values"][0],
            nlohmann::json::parse(plain.out)["values"][0]);
}

TEST_F(EvalCommandTest, LinkAndLabelNoiseRuns) {
  Result link = Eval({"--dataset", gen(), "--task", "link", "--runs", "1",
                      "--epochs", "40", "--format", "json"});
  ASSERT_EQ(link.code, 0) << link.err;
  auto j = nlohmann::json::parse(link.out);
  EXPECT_EQ(j["metric"], "roc_auc");
  EXPECT_EQ(j["parameters"]["model"]["loss"], "pairwise");
  Result lpgnn = Eval({"--dataset", gen(), "--method", "lpgnn",
                       "--label-epsilon", "2", "--runs", "1", "--epochs", "40",
                       "--feature-steps", "2", "--format", "json"});
  ASSERT_EQ(lpgnn.code, 0) << lpgnn.err;
  j = nlohmann::json::parse(lpgnn.out);
  EXPECT_EQ(j["parameters"]["label_epsilon"], 2.0);
  EXPECT_EQ(j["parameters"]["label_denoising"], "published");
  EXPECT_TRUE(j["per_run"][0].contains("label_agreement"));
  // Tuning records each candidate and the pair it kept.
  Result tuned = Eval({"--dataset", gen(), "--method", "lpgnn",
                       "--label-epsilon", "2", "--runs", "1", "--epochs", "20",
                       "--tune-feature-steps", "1,2", "--tune-label-steps",
                       "0,2", "--format", "json"});
  ASSERT_EQ(tuned.code, 0) << tuned.err;
  j = nlohmann::json::parse(tuned.out);
  EXPECT_EQ(j["per_run"][0]["tuning"]["candidates"].size(), 4u);
  EXPECT_TRUE(j["per_run"][0]["tuning"].contains("feature_steps"));
  Result table = Eval({"--dataset", gen(), "--mechanism", "none", "--runs",
                       "1", "--epochs", "20"});
  ASSERT_EQ(table.code, 0);
  EXPECT_THAT(table.out, HasSubstr("raw features: accuracy"));
  // No noise drawn: no warning.
  EXPECT_THAT(table.err, ::testing::Not(HasSubstr("NOT differentially")));
}

// LPGNN's settings: a user's file adds rows for its own dataset (here the
// generator's name, "generated"), and a value given on the command line
// stays while the table sets the others.
TEST_F(EvalCommandTest, LpgnnSettingsComeFromTheTableAndAUsersFile) {
  const std::string path = *dir_ + "/settings.csv";
  std::ofstream(path)
      << "dataset,eps_x,eps_y,feature_steps,label_steps,learning_rate,"
         "weight_decay,dropout\n"
         "generated,1,2,3,1,0.02,0.001,0.3\n";
  Result r = Eval({"--dataset", gen(), "--method", "lpgnn", "--label-epsilon",
                   "2", "--runs", "1", "--epochs", "5", "--lpgnn-settings",
                   path, "--dropout", "0.1", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out)["parameters"];
  EXPECT_EQ(j["propagation"]["steps"], 3);
  EXPECT_EQ(j["label_steps"], 1);
  EXPECT_DOUBLE_EQ(j["model"]["training"]["learning_rate"].get<double>(),
                   0.02);
  EXPECT_DOUBLE_EQ(j["model"]["dropout"].get<double>(), 0.1);
  // Without the file the dataset takes cora's row (eps_x 1, eps_y 2: K_x 8,
  // K_y 4); --feature-steps stays.
  r = Eval({"--dataset", gen(), "--method", "lpgnn", "--label-epsilon", "2",
            "--runs", "1", "--epochs", "5", "--feature-steps", "1",
            "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out)["parameters"];
  EXPECT_EQ(j["propagation"]["steps"], 1);
  EXPECT_EQ(j["label_steps"], 4);
  // A broken file is a usage error naming the file and line.
  std::ofstream(path) << "dataset,eps_x\n";
  r = Eval({"--dataset", gen(), "--method", "lpgnn", "--lpgnn-settings",
            path});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ":1: expected the header line"));
}

// --split fixed: every run tests on the same nodes (the confusion
// matrices' row sums, the test nodes per class, agree); the default draws a
// split per run.
TEST_F(EvalCommandTest, FixedSplitKeepsTheTestNodesAcrossRuns) {
  auto class_counts = [](const nlohmann::json& run) {
    std::vector<int> counts;
    for (const auto& row : run["confusion"]) {
      int sum = 0;
      for (const auto& v : row) sum += v.get<int>();
      counts.push_back(sum);
    }
    return counts;
  };
  for (const char* split : {"fixed", "random"}) {
    Result r = Eval({"--dataset", gen(), "--mechanism", "none", "--runs", "3",
                     "--epochs", "5", "--split", split, "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto runs = nlohmann::json::parse(r.out)["per_run"];
    ASSERT_EQ(runs.size(), 3u);
    const bool same = class_counts(runs[0]) == class_counts(runs[1]) &&
                      class_counts(runs[1]) == class_counts(runs[2]);
    EXPECT_EQ(same, std::string(split) == "fixed") << split;
  }
}

TEST_F(EvalCommandTest, ReproFillsThePaperColumnWherePublished) {
  Result r = Repro({"--paper", "privge", "--task", "link", "--dataset",
                    cora(), "--mechanisms", "hds", "--epsilons", "1,inf",
                    "--runs", "1", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["cells"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["cells"][0]["paper"].get<double>(), 0.824);
  EXPECT_EQ(j["cells"][1]["mechanism"], "none");
  EXPECT_DOUBLE_EQ(j["cells"][1]["paper"].get<double>(), 0.931);
  // DPNE, Table 1: cora at eps 1 and non-private.
  r = Repro({"--paper", "dpne", "--dataset", cora(), "--epsilons", "1,inf",
             "--runs", "1", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["cells"].size(), 2u);
  EXPECT_EQ(j["cells"][0]["mechanism"], "central");
  EXPECT_DOUBLE_EQ(j["cells"][0]["paper"].get<double>(), 0.662);
  EXPECT_EQ(j["cells"][1]["mechanism"], "none");
  EXPECT_DOUBLE_EQ(j["cells"][1]["paper"].get<double>(), 0.700);
  // Another name: no published number.
  r = Repro({"--paper", "privge", "--dataset", gen(), "--mechanisms", "hds",
             "--epsilons", "1", "--runs", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("eps=1"));
  EXPECT_THAT(r.out, ::testing::Not(::testing::ContainsRegex("\\[[0-9]")));
}

TEST_F(EvalCommandTest, ReproBaselinesStandUnderTheGrid) {
  Result r = Repro({"--paper", "lpgnn", "--dataset", gen(), "--epsilons",
                    "1", "--label-epsilons", "inf", "--runs", "1",
                    "--baselines", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"feature_free", "graph_labels", "raw"}) {
    ASSERT_TRUE(j["baselines"].contains(key)) << key;
    EXPECT_EQ(j["baselines"][key]["values"].size(), 1u);
  }
  Result table = Repro({"--paper", "lpgnn", "--dataset", gen(), "--epsilons",
                        "1", "--label-epsilons", "inf", "--runs", "1",
                        "--baselines"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("baselines beside it"));
  EXPECT_THAT(table.out, HasSubstr("graph alone (no reports)"));
  Result link = Repro({"--paper", "privge", "--task", "link", "--dataset",
                       gen(), "--baselines"});
  EXPECT_EQ(link.code, 2);
  EXPECT_THAT(link.err, HasSubstr("--baselines applies to the node task"));
}

TEST_F(EvalCommandTest, ReproUsageErrors) {
  EXPECT_EQ(Repro({"--dataset", gen()}).code, 2);
  Result r = Repro({"--paper", "deepwalk", "--dataset", gen()});
  EXPECT_THAT(r.err, HasSubstr("--paper must be one of privge, lpgnn, dpne, "
                               "got 'deepwalk'"));
  r = Repro({"--paper", "dpne", "--dataset", gen(), "--mechanisms", "hds"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--mechanisms does not apply to --paper dpne"));
  r = Repro({"--paper", "lpgnn", "--dataset", gen(), "--task", "link"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--task for --paper lpgnn must be one of node, "
                               "got 'link'"));
  r = Repro({"--paper", "privge", "--dataset", gen(), "--epsilons", "1,0"});
  EXPECT_THAT(r.err, HasSubstr("--epsilons takes budgets > 0"));
  r = Repro({"--paper", "privge", "--dataset", gen(), "--label-epsilons",
             "1"});
  EXPECT_THAT(r.err, HasSubstr("--label-epsilons is for --paper lpgnn"));
  r = Repro({"--paper", "privge", "--dataset", gen(), "--epsilons", "inf",
             "--plot", "r.svg"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--plot draws against epsilon"));
  r = Repro({"--paper", "privge", "--dataset", gen(), "--plot",
             "/nonexistent/ldpgraph/r.svg"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("no directory '/nonexistent/ldpgraph'"));
  EXPECT_TRUE(r.out.empty());
}

TEST_F(EvalCommandTest, ReproPlotDrawsEachRowAgainstEpsilon) {
  const std::vector<std::string> grid = {
      "--paper", "privge", "--dataset", gen(), "--mechanisms", "hds,laplace",
      "--epsilons", "1,4,inf", "--runs", "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = grid;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::string file = *dir_ + "/repro.svg";
  Result r = Repro(with({"--plot", file}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("hds"));  // the table, as without --plot
  EXPECT_THAT(r.err, HasSubstr("ldpgraph repro: wrote " + file));
  auto svg = ReadFileToString(file);
  ASSERT_TRUE(svg.ok());
  const testing::SvgShape shape = testing::ReadSvgShape(*svg);
  EXPECT_TRUE(shape.well_formed);
  EXPECT_EQ(shape.polylines, 2);  // hds and laplace
  EXPECT_EQ(shape.dashed, 2);     // raw features, in the plot and the legend
  EXPECT_THAT(shape.texts, ::testing::Contains(HasSubstr("epsilon")));
  EXPECT_THAT(shape.texts, ::testing::Contains("hds"));
  EXPECT_THAT(shape.texts, ::testing::Contains("raw features (non-private)"));
  // A chart that cannot be written (its name is a folder's): the JSON is
  // printed whole, then the error, exit 1.
  fs::create_directories(*dir_ + "/taken.svg");
  r = Repro(with({"--plot", *dir_ + "/taken.svg", "--format", "json"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;
  EXPECT_THAT(r.err, HasSubstr("ldpgraph repro: --plot " + *dir_ + "/taken.svg"));
}

}  // namespace
}  // namespace ldpgraph::tool

// Tests for the --plot charts of `ldpgraph repro` and `ldpgraph edges`,
// from JSON built here as the commands build it: one line per row or
// private graph with the means and stds of its cells, the budget-free cells
// as reference lines, file suffixes as documented, and bad JSON refused
// with the key named.
#include "server/ldpgraph/charts.h"

#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/testing/temp_folder.h"

namespace ldpgraph::tool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

json ReproCell(const std::string& mechanism, json eps, json label_eps,
               double mean, double std) {
  return {{"mechanism", mechanism}, {"epsilon", eps},
          {"label_epsilon", label_eps}, {"mean", mean},
          {"std", std}, {"values", json::array()}};
}

json PrivgeReport() {
  return {{"paper", "privge"}, {"dataset", "cora"}, {"task", "node"},
          {"metric", "accuracy"}, {"runs", 3}, {"seed", 1},
          {"cells",
           {ReproCell("hds", 0.1, nullptr, 0.6, 0.02),
            ReproCell("hds", 1, nullptr, 0.7, 0.01),
            ReproCell("none", nullptr, nullptr, 0.85, 0.005),
            ReproCell("laplace", 0.1, nullptr, 0.3, 0.05),
            ReproCell("laplace", 1, nullptr, 0.5, 0.04)}}};
}

TEST(ReproChartsTest, OneLinePerMechanismAndRawFeaturesAsAReference) {
  auto charts = ReproCharts(PrivgeReport());
  ASSERT_TRUE(charts.ok()) << charts.status();
  ASSERT_EQ(charts->size(), 1u);
  EXPECT_EQ((*charts)[0].first, "");
  const plot::LineChart& c = (*charts)[0].second;
  EXPECT_TRUE(c.log_x);
  EXPECT_THAT(c.x_label, HasSubstr("epsilon"));
  EXPECT_THAT(c.title, HasSubstr("PrivGE, node classification on cora"));
  EXPECT_THAT(c.title, HasSubstr("3 runs"));
  ASSERT_EQ(c.series.size(), 2u);
  EXPECT_EQ(c.series[0].name, "hds");
  EXPECT_THAT(c.series[0].points,
              ElementsAre(std::pair<double, double>{0.1, 0.6},
                          std::pair<double, double>{1, 0.7}));
  EXPECT_THAT(c.series[0].error, ElementsAre(0.02, 0.01));
  EXPECT_EQ(c.series[1].name, "laplace");
  ASSERT_EQ(c.references.size(), 1u);
  EXPECT_EQ(c.references[0].y, 0.85);
  EXPECT_EQ(c.references[0].error, 0.005);
  EXPECT_TRUE(plot::RenderSvg(c).ok());
}

TEST(ReproChartsTest, LpgnnRowsAreLabelBudgets) {
  json r = PrivgeReport();
  r["paper"] = "lpgnn";
  r["cells"] = {ReproCell("multibit", 1, 1, 0.5, 0.1),
                ReproCell("multibit", 2, 1, 0.6, 0.1),
                ReproCell("none", nullptr, 1, 0.7, 0.1),
                ReproCell("multibit", 1, nullptr, 0.8, 0.1),
                ReproCell("none", nullptr, nullptr, 0.9, 0.1)};
  auto charts = ReproCharts(r);
  ASSERT_TRUE(charts.ok()) << charts.status();
  const plot::LineChart& c = (*charts)[0].second;
  ASSERT_EQ(c.series.size(), 2u);
  EXPECT_EQ(c.series[0].name, "eps_y=1");
  EXPECT_EQ(c.series[0].points.size(), 2u);
  EXPECT_EQ(c.series[1].name, "eps_y=inf");
  ASSERT_EQ(c.references.size(), 2u);
  EXPECT_EQ(c.references[0].name, "raw features, eps_y=1");
  EXPECT_EQ(c.references[1].name, "raw features, eps_y=inf");
  EXPECT_THAT(c.x_label, HasSubstr("epsilon_x"));
}

TEST(ReproChartsTest, SaysWhatIsWrong) {
  EXPECT_THAT(ReproCharts(json::array()).status().message(), HasSubstr("object"));
  json r = PrivgeReport();
  r.erase("metric");
  EXPECT_THAT(ReproCharts(r).status().message(), HasSubstr("'metric'"));
  r = PrivgeReport();
  r["cells"][1]["mean"] = "0.7";
  auto s = ReproCharts(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cell 1: 'mean'"));
  r = PrivgeReport();
  r["cells"][0]["epsilon"] = "1";
  EXPECT_THAT(ReproCharts(r).status().message(), HasSubstr("cell 0: 'epsilon'"));
  r = PrivgeReport();
  r["cells"] = {ReproCell("none", nullptr, nullptr, 0.85, 0.005)};
  EXPECT_THAT(ReproCharts(r).status().message(), HasSubstr("finite epsilon"));
}

json Summary(double mean, double std) {
  return {{"mean", mean}, {"std", std}, {"values", json::array()}};
}

json EdgeCell(const std::string& model, const std::string& graph, json eps_e,
              double acc, json sim, json lt) {
  return {{"model", model}, {"graph", graph}, {"edge_epsilon", eps_e},
          {"feature_epsilon", nullptr}, {"label_epsilon", nullptr},
          {"skipped", nullptr}, {"accuracy", Summary(acc, 0.01)},
          {"attack_auc", sim}, {"linkteller_auc", lt}};
}

// One model, eps_x = eps_y = inf: ns1 and rr at eps_e 1 and 8 (rr at 1
// skipped), true and mlp.
json EdgesGrid(const std::vector<std::string>& models) {
  json cells = json::array();
  for (const std::string& m : models) {
    cells.push_back(EdgeCell(m, "ns1", 1, 0.6, Summary(0.7, 0.02), Summary(0.6, 0.01)));
    cells.push_back(EdgeCell(m, "ns1", 8, 0.7, Summary(0.8, 0.02), Summary(0.7, 0.01)));
    cells.push_back({{"model", m}, {"graph", "rr"}, {"edge_epsilon", 1},
                     {"feature_epsilon", nullptr}, {"label_epsilon", nullptr},
                     {"skipped", "RR graph of ~1920 edges"}});
    cells.push_back(EdgeCell(m, "rr", 8, 0.75, Summary(0.85, 0.01), Summary(0.9, 0.01)));
    cells.push_back(EdgeCell(m, "true", nullptr, 0.8, Summary(0.9, 0.01), Summary(0.95, 0.0)));
    cells.push_back(EdgeCell(m, "mlp", nullptr, 0.5, Summary(0.6, 0.01), Summary(0.5, 0.0)));
  }
  return {{"dataset", "cora"}, {"runs", 2},
          {"parameters",
           {{"models", models},
            {"feature_epsilons", {nullptr}},
            {"label_epsilons", {nullptr}},
            {"graphs", {"ns1", "rr", "true", "mlp"}}}},
          {"cells", cells}};
}

json SweepCell(double eps, double mean, double std) {
  return {{"epsilon", eps}, {"accuracy", {{"mean", mean}, {"std", std}}}};
}

json SweepReport() {
  return {{"command", "sweep"}, {"dataset", "citeseer"}, {"runs", 10},
          {"lines",
           {{{"method", "lpgnn"}, {"label", "LPGNN"},
             {"cells", {SweepCell(0.01, 0.5, 0.02), SweepCell(1, 0.6, 0.01)}}},
            {{"method", "upgnet-mbm"}, {"label", "UPGNET-MBM"},
             {"cells", {SweepCell(0.01, 0.6, 0.02), SweepCell(1, 0.68, 0.01)}}}}},
          {"baselines",
           {{"feature_free",
             {{"label", "graph alone (no reports)"},
              {"accuracy", {{"mean", 0.68}, {"std", 0.01}}}}},
            {"raw",
             {{"label", "raw features (no feature privacy)"},
              {"accuracy", {{"mean", 0.75}, {"std", 0.02}}}}}}}};
}

TEST(SweepChartsTest, OneLinePerMethodAndTheBaselinesAsReferences) {
  auto charts = SweepCharts(SweepReport());
  ASSERT_TRUE(charts.ok()) << charts.status();
  ASSERT_EQ(charts->size(), 1u);
  const plot::LineChart& c = (*charts)[0].second;
  EXPECT_TRUE(c.log_x);
  EXPECT_THAT(c.title, HasSubstr("citeseer"));
  EXPECT_THAT(c.title, HasSubstr("10 runs"));
  ASSERT_EQ(c.series.size(), 2u);
  EXPECT_EQ(c.series[1].name, "UPGNET-MBM");
  EXPECT_THAT(c.series[1].points,
              ElementsAre(std::pair<double, double>{0.01, 0.6},
                          std::pair<double, double>{1, 0.68}));
  EXPECT_THAT(c.series[1].error, ElementsAre(0.02, 0.01));
  ASSERT_EQ(c.references.size(), 2u);
  EXPECT_EQ(c.references[0].name, "graph alone (no reports)");
  EXPECT_EQ(c.references[0].y, 0.68);
  EXPECT_EQ(c.references[1].error, 0.02);
  EXPECT_TRUE(plot::RenderSvg(c).ok());
}

TEST(SweepChartsTest, SaysWhatIsWrong) {
  json j = SweepReport();
  j.erase("lines");
  auto no_lines = SweepCharts(j);
  ASSERT_FALSE(no_lines.ok());
  EXPECT_THAT(no_lines.status().message(), HasSubstr("'lines'"));
  j = SweepReport();
  j["lines"][0]["cells"][1].erase("accuracy");
  auto no_accuracy = SweepCharts(j);
  ASSERT_FALSE(no_accuracy.ok());
  EXPECT_THAT(no_accuracy.status().message(), HasSubstr("line 0"));
  j = SweepReport();
  j["lines"][0]["cells"] = json::array();
  EXPECT_FALSE(SweepCharts(j).ok());
  j = SweepReport();
  j["baselines"]["raw"].erase("accuracy");
  EXPECT_FALSE(SweepCharts(j).ok());
}

TEST(EdgesChartsTest, AccuracyAttacksAndTradeoffOfOneCombination) {
  auto charts = EdgesCharts(EdgesGrid({"gcn"}));
  ASSERT_TRUE(charts.ok()) << charts.status();
  std::vector<std::string> suffixes;
  for (const auto& [s, c] : *charts) suffixes.push_back(s);
  EXPECT_THAT(suffixes,
              ElementsAre("", "attack-similarity", "attack-linkteller",
                          "tradeoff-similarity", "tradeoff-linkteller"));
  const plot::LineChart& acc = (*charts)[0].second;
  EXPECT_TRUE(acc.log_x);
  EXPECT_THAT(acc.x_label, HasSubstr("epsilon_e"));
  EXPECT_THAT(acc.title, HasSubstr("cora, GCN, eps_x=inf, eps_y=inf, 2 runs"));
  ASSERT_EQ(acc.series.size(), 2u);
  EXPECT_EQ(acc.series[0].name, "ns1");
  EXPECT_THAT(acc.series[0].points,
              ElementsAre(std::pair<double, double>{1, 0.6},
                          std::pair<double, double>{8, 0.7}));
  EXPECT_EQ(acc.series[1].name, "rr");  // the skipped cell left out
  EXPECT_THAT(acc.series[1].points, ElementsAre(std::pair<double, double>{8, 0.75}));
  ASSERT_EQ(acc.references.size(), 2u);
  EXPECT_EQ(acc.references[0].name, "true graph");
  EXPECT_EQ(acc.references[0].y, 0.8);
  EXPECT_EQ(acc.references[1].name, "mlp (no graph)");

  // Each graph keeps its colour in every chart.
  EXPECT_EQ(acc.series[0].colour, acc.references[0].colour - 3);  // ns1, true

  const plot::LineChart& att = (*charts)[2].second;  // LinkTeller
  EXPECT_THAT(att.y_label, HasSubstr("LinkTeller"));
  ASSERT_EQ(att.series.size(), 2u);
  EXPECT_EQ(att.series[0].name, "ns1");
  EXPECT_EQ(att.series[0].colour, acc.series[0].colour);
  EXPECT_THAT(att.series[0].points,
              ElementsAre(std::pair<double, double>{1, 0.6},
                          std::pair<double, double>{8, 0.7}));
  ASSERT_EQ(att.references.size(), 3u);  // true, mlp, 0.5
  EXPECT_EQ(att.references[0].y, 0.95);
  EXPECT_EQ(att.references.back().y, 0.5);

  const plot::LineChart& trade = (*charts)[3].second;
  EXPECT_FALSE(trade.log_x);
  ASSERT_EQ(trade.series.size(), 4u);  // ns1, rr, true, mlp
  EXPECT_EQ(trade.series[0].name, "ns1");
  EXPECT_THAT(trade.series[0].points,
              ElementsAre(std::pair<double, double>{0.7, 0.6},
                          std::pair<double, double>{0.8, 0.7}));
  EXPECT_THAT(trade.series[0].labels, ElementsAre("ε=1", "ε=8"));
  EXPECT_EQ(trade.series[2].name, "true graph");
  EXPECT_THAT(trade.series[2].points,
              ElementsAre(std::pair<double, double>{0.9, 0.8}));
  for (const auto& [suffix, c] : *charts) {
    EXPECT_TRUE(plot::RenderSvg(c).ok()) << suffix;
  }
}

TEST(EdgesChartsTest, SeveralCombinationsAreKeyedAndAttacksNotRunAreLeftOut) {
  json grid = EdgesGrid({"gcn", "sage"});
  for (json& c : grid["cells"]) {
    if (c.contains("linkteller_auc")) c["linkteller_auc"] = nullptr;
  }
  auto charts = EdgesCharts(grid);
  ASSERT_TRUE(charts.ok()) << charts.status();
  std::vector<std::string> suffixes;
  for (const auto& [s, c] : *charts) suffixes.push_back(s);
  EXPECT_THAT(suffixes,
              ElementsAre("gcn-xinf-yinf", "gcn-xinf-yinf-attack-similarity",
                          "gcn-xinf-yinf-tradeoff-similarity", "sage-xinf-yinf",
                          "sage-xinf-yinf-attack-similarity",
                          "sage-xinf-yinf-tradeoff-similarity"));
  EXPECT_THAT((*charts)[3].second.title, HasSubstr("GraphSAGE"));
}

TEST(EdgesChartsTest, SaysWhatIsWrong) {
  EXPECT_THAT(EdgesCharts(json::object()).status().message(),
              HasSubstr("'parameters'"));
  json grid = EdgesGrid({"gcn"});
  grid["parameters"].erase("label_epsilons");
  EXPECT_THAT(EdgesCharts(grid).status().message(), HasSubstr("'label_epsilons'"));
  grid = EdgesGrid({"gcn"});
  grid["cells"][1].erase("accuracy");
  EXPECT_THAT(EdgesCharts(grid).status().message(),
              HasSubstr("cell 1: a cell not skipped needs 'accuracy'"));
  grid = EdgesGrid({"gcn"});
  grid["cells"][3]["attack_auc"] = 0.5;
  EXPECT_THAT(EdgesCharts(grid).status().message(),
              HasSubstr("cell 3: 'attack_auc' must be"));
  grid = EdgesGrid({"gcn"});
  json kept = json::array();
  for (const json& c : grid["cells"]) {
    if (c["graph"] == "true" || c["graph"] == "mlp") kept.push_back(c);
  }
  grid["cells"] = kept;
  auto s = EdgesCharts(grid).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("gcn-xinf-yinf has no private graph"));
}

TEST(WritePlotTest, NamesEveryFileOrTheFailure) {
  TempFolder tmp;
  std::ostringstream err;
  EXPECT_EQ(WritePlot("edges", tmp.File("e.svg"), EdgesCharts(EdgesGrid({"gcn"})),
                      err),
            0);
  EXPECT_THAT(err.str(), HasSubstr("ldpgraph edges: wrote " + tmp.File("e.svg")));
  EXPECT_THAT(err.str(), HasSubstr(tmp.File("e-tradeoff-linkteller.svg")));
  EXPECT_TRUE(std::filesystem::exists(tmp.File("e-attack-similarity.svg")));
  err.str("");
  EXPECT_EQ(WritePlot("edges", tmp.File("no/e.svg"),
                      EdgesCharts(EdgesGrid({"gcn"})), err),
            1);
  EXPECT_THAT(err.str(), HasSubstr("ldpgraph edges: --plot " + tmp.File("no/e.svg")));
  err.str("");
  EXPECT_EQ(WritePlot("repro", tmp.File("r.svg"), ReproCharts(json::object()), err), 1);
  EXPECT_THAT(err.str(), HasSubstr("'paper'"));
}

TEST(CheckPlotPathTest, TheDirectoryMustExist) {
  TempFolder tmp;
  EXPECT_TRUE(CheckPlotPath(tmp.File("a.svg")).ok());
  EXPECT_TRUE(CheckPlotPath("a.svg").ok());
  EXPECT_THAT(CheckPlotPath(tmp.File("missing/a.svg")).message(),
              HasSubstr("no directory '" + tmp.File("missing") + "'"));
  EXPECT_FALSE(CheckPlotPath("").ok());
}

}  // namespace
}  // namespace ldpgraph::tool

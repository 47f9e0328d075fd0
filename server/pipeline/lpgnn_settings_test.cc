#include "server/pipeline/lpgnn_settings.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "common/testing/temp_folder.h"

namespace ldpgraph::pipeline {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kHeader[] =
    "dataset,eps_x,eps_y,feature_steps,label_steps,learning_rate,"
    "weight_decay,dropout\n";

TEST(LpgnnSettingsTest, BuiltInHoldsTheAuthorsGridForFourDatasets) {
  const LpgnnSettings& t = LpgnnSettings::BuiltIn();
  ASSERT_EQ(t.rows().size(), 4u * 6 * 5);
  std::set<std::string> names;
  for (const LpgnnSettingsRow& r : t.rows()) names.insert(r.dataset);
  EXPECT_EQ(names, (std::set<std::string>{"cora", "pubmed", "facebook",
                                          "lastfm"}));
  // Spot checks against the authors' hparams files.
  const LpgnnSettingsRow* cora = t.Find("cora", 1, 1);
  ASSERT_NE(cora, nullptr);
  EXPECT_EQ(cora->feature_steps, 2);
  EXPECT_EQ(cora->label_steps, 8);
  EXPECT_DOUBLE_EQ(cora->weight_decay, 1e-3);
  const LpgnnSettingsRow* fb = t.Find("facebook", 1, 1);
  ASSERT_NE(fb, nullptr);
  EXPECT_EQ(fb->feature_steps, 2);
  EXPECT_EQ(fb->label_steps, 4);
  EXPECT_DOUBLE_EQ(fb->learning_rate, 0.001);
  EXPECT_DOUBLE_EQ(fb->weight_decay, 1e-2);
  EXPECT_DOUBLE_EQ(fb->dropout, 0.5);
  const LpgnnSettingsRow* lastfm = t.Find("lastfm", kInf, kInf);
  ASSERT_NE(lastfm, nullptr);
  EXPECT_EQ(lastfm->feature_steps, 0);
  EXPECT_EQ(lastfm->label_steps, 0);
  EXPECT_DOUBLE_EQ(lastfm->learning_rate, 0.001);
  EXPECT_DOUBLE_EQ(lastfm->dropout, 0.25);
  const LpgnnSettingsRow* lastfm_clean_labels = t.Find("lastfm", 3, kInf);
  ASSERT_NE(lastfm_clean_labels, nullptr);
  EXPECT_EQ(lastfm_clean_labels->feature_steps, 16);
}

TEST(LpgnnSettingsTest, FindTakesTheNearestBudgetsAndFallsBackToCora) {
  const LpgnnSettings& t = LpgnnSettings::BuiltIn();
  // eps_x 0.12 -> 0.1, eps_y 2.4 -> 2.
  const LpgnnSettingsRow* near = t.Find("cora", 0.12, 2.4);
  ASSERT_NE(near, nullptr);
  EXPECT_DOUBLE_EQ(near->eps_x, 0.1);
  EXPECT_DOUBLE_EQ(near->eps_y, 2);
  // A huge finite budget is still finite: 3, not inf.
  EXPECT_DOUBLE_EQ(t.Find("cora", 1e6, 1)->eps_x, 3);
  EXPECT_TRUE(std::isinf(t.Find("cora", kInf, 1)->eps_x));
  // A dataset without rows takes cora's row.
  EXPECT_EQ(t.Find("citeseer", 1, 1), t.Find("cora", 1, 1));
}

TEST(LpgnnSettingsTest, AUsersRowsReplaceAndExtend) {
  auto mine = LpgnnSettings::Parse(
      std::string("# my graph\n") + kHeader +
          "cora,1,1,4,4,0.02,0,0.1\n"
          "mygraph,2,inf,3,0,0.05,1e-5,0.2\n",
      "mine.csv");
  ASSERT_TRUE(mine.ok()) << mine.status();
  LpgnnSettings t = LpgnnSettings::BuiltIn();
  t.Merge(*mine);
  EXPECT_EQ(t.rows().size(), 4u * 6 * 5 + 1);
  EXPECT_EQ(t.Find("cora", 1, 1)->feature_steps, 4);
  EXPECT_DOUBLE_EQ(t.Find("cora", 1, 1)->learning_rate, 0.02);
  // The only row of mygraph serves every budget.
  for (double ex : {0.01, 2.0, kInf}) {
    const LpgnnSettingsRow* r = t.Find("mygraph", ex, 1);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->feature_steps, 3);
    EXPECT_DOUBLE_EQ(r->dropout, 0.2);
  }
}

TEST(LpgnnSettingsTest, FileRowsLoadAndMissingFilesAreNamed) {
  TempFolder dir;
  const std::string path = dir.path() + "/extra.csv";
  std::ofstream(path) << kHeader << "mygraph,1,1,1,2,0.01,0,0.5\n";
  auto t = LpgnnSettings::BuiltInWithFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->Find("mygraph", 1, 1)->label_steps, 2);
  auto missing = LpgnnSettings::BuiltInWithFile(dir.path() + "/none.csv");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  std::ofstream(path) << kHeader << "mygraph,1,1,1,2,0.01,0\n";
  auto bad = LpgnnSettings::BuiltInWithFile(path);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(path + ":2:"), std::string::npos)
      << bad.status();
}

TEST(LpgnnSettingsTest, ParseNamesTheLineAndWhatIsWrong) {
  const std::pair<std::string, std::string> cases[] = {
      {"# only a comment\n", "f.csv: no header line"},
      {"cora,1,1,2,8,0.01,1e-3,0.5\n", ":1: expected the header line"},
      {"dataset,eps_x\n", ":1: expected the header line"},
      {std::string(kHeader) + "cora,1,1,2,8\n", ":2: expected 8"},
      {std::string(kHeader) + "cora,0,1,2,8,0.01,0,0.5\n", ":2: eps_x must"},
      {std::string(kHeader) + "cora,1,x,2,8,0.01,0,0.5\n", ":2: eps_y must"},
      {std::string(kHeader) + "cora,1,1,-1,8,0.01,0,0.5\n",
       ":2: feature_steps must"},
      {std::string(kHeader) + "cora,1,1,2,1.5,0.01,0,0.5\n",
       ":2: label_steps must"},
      {std::string(kHeader) + "cora,1,1,2,8,0,0,0.5\n",
       ":2: learning_rate must"},
      {std::string(kHeader) + "cora,1,1,2,8,0.01,-1,0.5\n",
       ":2: weight_decay must"},
      {std::string(kHeader) + "cora,1,1,2,8,0.01,0,1\n", ":2: dropout must"},
      {std::string(kHeader) + ",1,1,2,8,0.01,0,0.5\n", ":2: empty dataset"},
      {std::string(kHeader) + "cora,1,1,2,8,0.01,0,0.5\n\n" +
           "cora,1.0,1,2,8,0.01,0,0.5\n",
       ":4: a second row for cora"},
  };
  for (const auto& [text, expected] : cases) {
    auto t = LpgnnSettings::Parse(text, "f.csv");
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(expected), std::string::npos)
        << t.status() << " for\n" << text;
  }
}

}  // namespace
}  // namespace ldpgraph::pipeline

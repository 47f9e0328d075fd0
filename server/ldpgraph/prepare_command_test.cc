#include "server/ldpgraph/prepare_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/dataset/dataset.h"
#include "common/dataset/device_index.h"
#include "common/dataset/feature_schema.h"
#include "common/dataset/generator.h"
#include "common/testing/shared_datasets.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::tool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

int Prepare(const std::vector<std::string>& args, std::string* out,
        std::string* err) {
  std::ostringstream o, e;
  const int code = RunPrepare(args, o, e);
  *out = o.str();
  *err = e.str();
  return code;
}

TEST(PrepareCommandTest, ComputesTheCentralSchemaIntoACopyAndLabelsIt) {
  const std::string cora = SharedDatasetsDir() + "/cora";
  if (!fs::exists(cora + "/meta.json")) GTEST_SKIP() << "no cora";
  TempFolder tmp;
  const std::string copy = tmp.File("cora");
  std::string out, err;
  ASSERT_EQ(Prepare({"--dataset", cora, "--out", copy, "--json"}, &out, &err), 0)
      << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["schema"], "central");
  EXPECT_EQ(j["feature_range"], nlohmann::json::array({0.0, 1.0}));
  auto meta = LoadDatasetMeta(copy);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->feature_schema, kCentralSchemaNote);
  EXPECT_TRUE(fs::exists(copy + "/" + kDeviceIndexFile));
  // The data are the same.
  auto a = LoadDataset(cora);
  auto b = LoadDataset(copy);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->labels, b->labels);
  EXPECT_EQ(a->features.values, b->features.values);
  EXPECT_EQ(a->graph.num_edges(), b->graph.num_edges());
  // Preparing the prepared copy in place keeps its declared schema.
  ASSERT_EQ(Prepare({"--dataset", copy}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("feature schema declared: one range [0, 1] for "
                             "all 1433 features"));
}

TEST(PrepareCommandTest, PerFeatureRangesWhenOneRangeWouldScaleDifferently) {
  TempFolder tmp;
  Dataset d;
  d.meta.name = "t";
  d.meta.classes = 2;
  d.graph = *Graph::FromEdges(2, {{0, 1}});
  d.labels = {0, 1};
  d.features.cols = 2;
  d.features.AppendRow(std::vector<uint32_t>{0}, std::vector<float>{3});
  d.features.AppendRow(std::vector<uint32_t>{1}, std::vector<float>{0.5f});
  ASSERT_TRUE(WriteDataset(d, tmp.File("in")).ok());
  std::string out, err;
  ASSERT_EQ(Prepare({"--dataset", tmp.File("in")}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("2 per-feature ranges"));
  EXPECT_THAT(out, HasSubstr("as the papers preprocess"));
  auto meta = LoadDatasetMeta(tmp.File("in"));
  ASSERT_TRUE(meta.ok());
  using R = std::pair<double, double>;
  EXPECT_EQ(meta->feature_ranges, (std::vector<R>{{0, 3}, {0, 0.5}}));
}

TEST(PrepareCommandTest, BadUsageAndBrokenFoldersSayWhat) {
  TempFolder tmp;
  std::string out, err;
  EXPECT_EQ(Prepare({}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--dataset is required"));
  EXPECT_EQ(Prepare({"--dataset", tmp.File("missing")}, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("not found"));
  fs::create_directories(tmp.File("full"));
  std::ofstream(tmp.File("full/x")) << "x";
  EXPECT_EQ(Prepare({"--dataset", tmp.path(), "--out", tmp.File("full")}, &out,
                &err),
            2);
  EXPECT_THAT(err, HasSubstr("is not empty"));
  EXPECT_THAT(Prepare({"--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("CENTRALLY"));
}

}  // namespace
}  // namespace ldpgraph::tool

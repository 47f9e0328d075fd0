#include "common/dataset/feature_schema.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/dataset/generator.h"
#include "common/testing/shared_datasets.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

using ::testing::HasSubstr;

// The papers' central preprocessing: x scaled with the schema of its own
// values.
SparseRows Central(const SparseRows& x, FeatureScaling s) {
  return ScaleFeatures(x, CentralFeatureSchema(x), s);
}

// 3 rows x 5 columns:
//   col 0: stored in every row: -2, 2, 0 (stored zero)  -> min -2, max 2
//   col 1: rows 0, 1 store 4, 2; row 2 absent (0)       -> min 0, max 4
//   col 2: row 1 stores -1; others absent               -> min -1, max 0
//   col 3: every row stores 3                           -> constant
//   col 4: never stored                                 -> constant 0
SparseRows SmallMatrix() {
  SparseRows x;
  x.cols = 5;
  x.AppendRow(std::vector<uint32_t>{0, 1, 3}, std::vector<float>{-2, 4, 3});
  x.AppendRow(std::vector<uint32_t>{0, 1, 2, 3},
              std::vector<float>{2, 2, -1, 3});
  x.AppendRow(std::vector<uint32_t>{0, 3}, std::vector<float>{0, 3});
  return x;
}

TEST(FeatureScalingTest, UnitByHand) {
  const SparseRows y = Central(SmallMatrix(), FeatureScaling::kUnit);
  // col 0: (x + 2) / 4 -> 0, 1, 0.5.   col 1: x / 4 -> 1, 0.5, (0 dropped).
  // col 2: (x + 1) / 1 -> row 1: 0 (dropped); rows 0, 2: 1 (dense).
  // col 3, col 4: constant -> lo = 0, dropped.
  EXPECT_EQ(y.rows, 3u);
  EXPECT_EQ(y.cols, 5u);
  EXPECT_EQ(y.offsets, (std::vector<uint64_t>{0, 2, 4, 6}));
  EXPECT_EQ(y.indices, (std::vector<uint32_t>{1, 2, 0, 1, 0, 2}));
  EXPECT_EQ(y.values, (std::vector<float>{1, 1, 1, 0.5f, 0.5f, 1}));
}

TEST(FeatureScalingTest, SymmetricByHand) {
  const SparseRows y =
      Central(SmallMatrix(), FeatureScaling::kSymmetric);
  // col 0: -1 + 2 (x + 2) / 4 -> -1, 1, 0 (dropped).
  // col 1: -1 + 2 x / 4 -> 1, 0 (dropped), absent 0 -> -1 (dense).
  // col 2: -1 + 2 (x + 1) -> row 1: -1; absent -> 1 (dense).
  // col 3: constant -> -1.   col 4: constant -> -1 (dense).
  const DenseMatrix d = y.ToDense();
  const std::vector<float> expected = {
      -1, 1, 1, -1, -1,   //
      1, 0, -1, -1, -1,   //
      0, -1, 1, -1, -1};  //
  EXPECT_EQ(d.data, expected);
  // Zeros are not stored.
  EXPECT_EQ(y.nnz(), 13u);
  for (float v : y.values) EXPECT_NE(v, 0.0f);
  // Indices strictly ascending in each row.
  for (size_t i = 0; i < y.rows; ++i) {
    auto idx = y.row_indices(i);
    EXPECT_TRUE(std::adjacent_find(idx.begin(), idx.end(),
                                   std::greater_equal<uint32_t>()) ==
                idx.end());
  }
}

TEST(FeatureScalingTest, NonNegativeSparseDataStaysSparseInUnit) {
  SparseRows x;
  x.cols = 4;
  x.AppendRow(std::vector<uint32_t>{1}, std::vector<float>{2});
  x.AppendRow(std::vector<uint32_t>{3}, std::vector<float>{0.5f});
  x.AppendRow({}, {});
  const SparseRows y = Central(x, FeatureScaling::kUnit);
  EXPECT_EQ(y.indices, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(y.values, (std::vector<float>{1, 1}));
}

TEST(FeatureScalingTest, NoneCopiesAndScalingIsDeterministic) {
  const SparseRows x = SmallMatrix();
  const SparseRows same = Central(x, FeatureScaling::kNone);
  EXPECT_EQ(same.offsets, x.offsets);
  EXPECT_EQ(same.indices, x.indices);
  EXPECT_EQ(same.values, x.values);
  const SparseRows a = Central(x, FeatureScaling::kSymmetric);
  const SparseRows b = Central(x, FeatureScaling::kSymmetric);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.values, b.values);
}

TEST(FeatureScalingTest, ValuesStayInRange) {
  SparseRows x;
  x.cols = 3;
  for (int i = 0; i < 50; ++i) {
    const float v = static_cast<float>(i * 7 % 13) * 0.37f - 1.1f;
    x.AppendRow(std::vector<uint32_t>{0, static_cast<uint32_t>(1 + i % 2)},
                std::vector<float>{v, v * 1e6f});
  }
  for (FeatureScaling s : {FeatureScaling::kUnit, FeatureScaling::kSymmetric}) {
    const auto [lo, hi] = *ScaledRange(s, DatasetMeta());
    const SparseRows y = Central(x, s);
    float seen_min = 1e9f, seen_max = -1e9f;
    for (float v : y.ToDense().data) {
      EXPECT_GE(v, lo);
      EXPECT_LE(v, hi);
      seen_min = std::min(seen_min, v);
      seen_max = std::max(seen_max, v);
    }
    EXPECT_EQ(seen_min, lo);
    EXPECT_EQ(seen_max, hi);
  }
}

TEST(FeatureSchemaTest, CentralByHand) {
  const FeatureSchema schema = CentralFeatureSchema(SmallMatrix());
  using R = std::pair<double, double>;
  EXPECT_EQ(schema.ranges, (std::vector<R>{{-2, 2}, {0, 4}, {-1, 0}, {3, 3},
                                           {0, 0}}));
}

TEST(FeatureSchemaTest, RowScalingIsTheMatrixRowValueForValue) {
  const SparseRows x = SmallMatrix();
  const FeatureSchema schema = CentralFeatureSchema(x);
  for (FeatureScaling s : {FeatureScaling::kNone, FeatureScaling::kUnit,
                           FeatureScaling::kSymmetric}) {
    const DenseMatrix whole = ScaleFeatures(x, schema, s).ToDense();
    for (size_t i = 0; i < x.rows; ++i) {
      const std::vector<double> row = ScaleFeatureRow(
          x.row_indices(i), x.row_values(i), schema, s);
      ASSERT_EQ(row.size(), x.cols);
      for (size_t j = 0; j < x.cols; ++j) {
        EXPECT_EQ(row[j], whole.data[i * x.cols + j])
            << FeatureScalingName(s) << " row " << i << " column " << j;
      }
    }
  }
}

TEST(FeatureSchemaTest, ADeviceClampsAValueOutsideThePublishedRange) {
  FeatureSchema schema;
  schema.ranges = {{0, 10}};
  const std::vector<uint32_t> idx = {0};
  EXPECT_EQ(ScaleFeatureRow(idx, std::vector<float>{25}, schema,
                            FeatureScaling::kUnit)[0], 1.0);
  EXPECT_EQ(ScaleFeatureRow(idx, std::vector<float>{-3}, schema,
                            FeatureScaling::kSymmetric)[0], -1.0);
  EXPECT_EQ(ScaleFeatureRow(idx, std::vector<float>{5}, schema,
                            FeatureScaling::kSymmetric)[0], 0.0);
}

TEST(FeatureSchemaTest, DeclaresOneRangeOnlyWhenItScalesTheSame) {
  using R = std::pair<double, double>;
  DatasetMeta meta;
  // Binary columns, one never set (constant 0 = lo): one range serves.
  DeclareFeatureSchema({{R{0, 1}, R{0, 1}, R{0, 0}}}, "note", &meta);
  EXPECT_EQ(meta.feature_range, R(0, 1));
  EXPECT_TRUE(meta.feature_ranges.empty());
  EXPECT_EQ(meta.feature_schema, "note");
  // A constant column away from lo would scale differently under [0, 1].
  DeclareFeatureSchema({{R{0, 1}, R{1, 1}}}, "", &meta);
  EXPECT_FALSE(meta.feature_range.has_value());
  EXPECT_EQ(meta.feature_ranges, (std::vector<R>{{0, 1}, {1, 1}}));
  // Ranges that differ.
  DeclareFeatureSchema({{R{0, 1}, R{0, 0.5}}}, "", &meta);
  EXPECT_EQ(meta.feature_ranges.size(), 2u);
}

TEST(FeatureSchemaTest, AMissingSchemaNamesTheCommand) {
  DatasetMeta meta;
  meta.features = 3;
  auto schema = DeclaredFeatureSchema(meta, "/data/cora");
  ASSERT_EQ(schema.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(schema.status().message(),
              HasSubstr("ldpgraph prepare --dataset /data/cora"));
  meta.feature_range = {{-1, 1}};
  ASSERT_TRUE(DeclaredFeatureSchema(meta, "x").ok());
  EXPECT_EQ(DeclaredFeatureSchema(meta, "x")->ranges.size(), 3u);
}

// The declared ranges survive meta.json exactly (shortest round-trip
// decimals), so a prepared copy scales bit for bit as the central tools do.
TEST(FeatureSchemaTest, PerFeatureRangesRoundTripThroughMetaJson) {
  TempFolder tmp;
  Dataset d;
  d.meta.name = "t";
  d.meta.classes = 2;
  d.graph = *Graph::FromEdges(3, {{0, 1}});
  d.labels = {0, 1, -1};
  d.features.cols = 2;
  d.features.AppendRow(std::vector<uint32_t>{0}, std::vector<float>{0.1f});
  d.features.AppendRow(std::vector<uint32_t>{0, 1},
                       std::vector<float>{0.30000001f, 7.25f});
  d.features.AppendRow({}, {});
  const FeatureSchema schema = CentralFeatureSchema(d.features);
  DeclareFeatureSchema(schema, kCentralSchemaNote, &d.meta);
  ASSERT_EQ(d.meta.feature_ranges.size(), 2u);
  ASSERT_TRUE(WriteDataset(d, tmp.path()).ok());
  auto meta = LoadDatasetMeta(tmp.path());
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->feature_ranges, schema.ranges);
  EXPECT_EQ(meta->feature_schema, kCentralSchemaNote);
}

TEST(FeatureSchemaTest, MalformedRangesAreRejectedWithTheKey) {
  TempFolder tmp;
  auto meta_with = [&](const std::string& extra) {
    std::ofstream(tmp.File("meta.json"))
        << R"({"name": "t", "nodes": 1, "edges": 0, "features": 2, )"
        << R"("classes": 1)" << extra << "}";
    return LoadDatasetMeta(tmp.path()).status();
  };
  EXPECT_TRUE(meta_with(R"(, "feature_ranges": [[0, 1], [2, 2]])").ok());
  EXPECT_THAT(meta_with(R"(, "feature_ranges": [[0, 1]])").message(),
              HasSubstr("an array of 2 (features) pairs"));
  EXPECT_THAT(meta_with(R"(, "feature_ranges": [[0, 1], [3, 2]])").message(),
              HasSubstr("feature_ranges[1]"));
  EXPECT_THAT(meta_with(R"(, "feature_ranges": [[0, 1], [0, 1]], )"
                        R"("feature_range": [0, 1])")
                  .message(),
              HasSubstr("not both"));
}

// Binary features: the declared one-range schema scales cora exactly as the
// central per-column one did, so seeded results on it do not move.
TEST(FeatureSchemaTest, CoraScalesTheSameWithTheDeclaredSchema) {
  const std::string cora = SharedDatasetsDir() + "/cora";
  if (!std::filesystem::exists(cora + "/meta.json")) {
    GTEST_SKIP() << "cora not found under " << SharedDatasetsDir();
  }
  auto d = LoadDataset(cora);
  ASSERT_TRUE(d.ok()) << d.status();
  DatasetMeta declared = d->meta;
  DeclareFeatureSchema(CentralFeatureSchema(d->features), "", &declared);
  ASSERT_TRUE(declared.feature_range.has_value());
  EXPECT_EQ(*declared.feature_range, std::make_pair(0.0, 1.0));
  const FeatureSchema schema = *DeclaredFeatureSchema(declared, cora);
  for (FeatureScaling s : {FeatureScaling::kUnit, FeatureScaling::kSymmetric}) {
    const SparseRows a = ScaleFeatures(d->features, schema, s);
    const SparseRows b = Central(d->features, s);
    EXPECT_EQ(a.offsets, b.offsets);
    EXPECT_EQ(a.indices, b.indices);
    EXPECT_EQ(a.values, b.values);
  }
}

}  // namespace
}  // namespace ldpgraph

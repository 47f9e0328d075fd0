// Tests for a node's stored features: the dense row made on demand is
// ScaleFeatureRow's, value for value, for every scaling; validation; copies.
#include "client/node_features.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Bit-for-bit equality (EXPECT_EQ on doubles would let -0.0 equal 0.0).
void ExpectSameBits(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) {
    uint64_t x, y;
    std::memcpy(&x, &a[j], sizeof x);
    std::memcpy(&y, &b[j], sizeof y);
    EXPECT_EQ(x, y) << "feature " << j << ": " << a[j] << " vs " << b[j];
  }
}

// A schema of d features with varied ranges: some constant, some negative.
FeatureSchema VariedSchema(size_t d) {
  FeatureSchema schema;
  for (size_t j = 0; j < d; ++j) {
    if (j % 7 == 3) {
      schema.ranges.push_back({0.5, 0.5});  // constant
    } else {
      schema.ranges.push_back({-1.0 * (j % 3), 0.25 + j % 5});
    }
  }
  return schema;
}

TEST(NodeFeaturesTest, DenseIsScaleFeatureRowForEveryScaling) {
  constexpr size_t kDim = 64;
  SeededRandomForTesting rng(11);
  for (FeatureScaling scaling :
       {FeatureScaling::kNone, FeatureScaling::kUnit,
        FeatureScaling::kSymmetric}) {
    auto scale = FeatureScale::Create(VariedSchema(kDim), scaling);
    ASSERT_TRUE(scale.ok()) << scale.status();
    for (int row = 0; row < 50; ++row) {
      std::vector<uint32_t> indices;
      std::vector<float> values;
      for (uint32_t j = 0; j < kDim; ++j) {
        if (rng.UniformInt(4) != 0) continue;
        indices.push_back(j);
        // Values inside and outside the ranges (clamped when scaled).
        values.push_back(static_cast<float>(rng.UniformDouble() * 8 - 4));
      }
      const NodeFeatures f(indices, values, *scale);
      ASSERT_TRUE(f.Validate().ok()) << f.Validate();
      EXPECT_EQ(f.dimension(), kDim);
      ExpectSameBits(f.Dense(), ScaleFeatureRow(indices, values,
                                                (*scale)->schema, scaling));
    }
  }
}

TEST(NodeFeaturesTest, FromDenseKeepsTheNonZerosAsStored) {
  const NodeFeatures f = NodeFeatures::FromDense({0.0, 1.5, 0.0, -0.25});
  EXPECT_THAT(f.indices(), ElementsAre(1, 3));
  EXPECT_THAT(f.values(), ElementsAre(1.5f, -0.25f));
  EXPECT_EQ(f.dimension(), 4u);
  EXPECT_THAT(f.Dense(), ElementsAre(0.0, 1.5, 0.0, -0.25));
  // A zero row still has its dimension; a node without features has none.
  EXPECT_THAT(NodeFeatures::FromDense({0.0, 0.0}).Dense(), ElementsAre(0.0, 0.0));
  EXPECT_TRUE(NodeFeatures().empty());
  EXPECT_THAT(NodeFeatures().Dense(), IsEmpty());
  EXPECT_TRUE(NodeFeatures().Validate().ok());
}

TEST(NodeFeaturesTest, ValidateRejectsWhatNoDatasetStores) {
  const auto scale = FeatureScale::AsStored(4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const uint32_t i01[] = {0, 1}, i10[] = {1, 0}, i11[] = {1, 1}, i4[] = {4};
  const float two[] = {1, 2}, one[] = {1}, with_nan[] = {1, nan};
  EXPECT_TRUE(NodeFeatures(i01, two, scale).Validate().ok());
  EXPECT_THAT(NodeFeatures(i10, two, scale).Validate().message(),
              HasSubstr("strictly ascending"));
  EXPECT_THAT(NodeFeatures(i11, two, scale).Validate().message(),
              HasSubstr("strictly ascending"));
  EXPECT_THAT(NodeFeatures(i4, one, scale).Validate().message(),
              HasSubstr("features[4] is beyond the 4 features"));
  EXPECT_THAT(NodeFeatures(i01, with_nan, scale).Validate().message(),
              HasSubstr("features[1] is not finite"));
  EXPECT_THAT(NodeFeatures(i01, one, scale).Validate().message(),
              HasSubstr("more indices than values"));
  EXPECT_THAT(NodeFeatures(i01, two, nullptr).Validate().message(),
              HasSubstr("without a scale"));
}

TEST(FeatureScaleTest, ScaledRangesMustBeFinite) {
  FeatureSchema schema;
  schema.ranges = {{0.0, 1.0}, {0.0, std::numeric_limits<double>::infinity()}};
  EXPECT_THAT(FeatureScale::Create(schema, FeatureScaling::kUnit).status().message(),
              HasSubstr("range of feature 1"));
  schema.ranges[1] = {2.0, 1.0};
  EXPECT_FALSE(FeatureScale::Create(schema, FeatureScaling::kSymmetric).ok());
  // Unscaled values do not read the ranges.
  EXPECT_TRUE(FeatureScale::Create(schema, FeatureScaling::kNone).ok());
}

TEST(NodeFeaturesTest, CopiesAreEqualAndMovesEmptyTheSource) {
  NodeFeatures a = NodeFeatures::FromDense({0.5, 0.0, 2.0});
  NodeFeatures b = a;
  EXPECT_EQ(b.Dense(), a.Dense());
  EXPECT_NE(b.indices().data(), a.indices().data());  // its own copy
  NodeFeatures c;
  c = b;
  EXPECT_EQ(c.Dense(), a.Dense());
  NodeFeatures d = std::move(c);
  EXPECT_EQ(d.Dense(), a.Dense());
  EXPECT_TRUE(c.empty());  // NOLINT(bugprone-use-after-move): documented
  EXPECT_THAT(c.indices(), IsEmpty());
  NodeFeatures e;
  e = std::move(d);
  EXPECT_EQ(e.Dense(), a.Dense());
  EXPECT_THAT(d.values(), IsEmpty());  // NOLINT(bugprone-use-after-move)
}

}  // namespace
}  // namespace ldpgraph::agent

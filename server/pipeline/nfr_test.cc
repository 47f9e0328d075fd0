#include "server/pipeline/nfr.h"

#include <cmath>
#include <memory>

#include "common/dataset/generator.h"
#include "common/mechanisms/feature_mechanism.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/pipeline/feature_reports.h"

namespace ldpgraph::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(NfrTest, ShrinksTowardsZeroByTheThreshold) {
  // sign(x) max(|x| - t, 0).
  EXPECT_FLOAT_EQ(NfrShrink(5.0f, 2.0), 3.0f);
  EXPECT_FLOAT_EQ(NfrShrink(-5.0f, 2.0), -3.0f);
  EXPECT_FLOAT_EQ(NfrShrink(1.5f, 2.0), 0.0f);
  EXPECT_FLOAT_EQ(NfrShrink(-2.0f, 2.0), 0.0f);
  EXPECT_FLOAT_EQ(NfrShrink(0.25f, 0.0), 0.25f);
  EXPECT_FLOAT_EQ(NfrShrink(-0.25f, 0.0), -0.25f);
}

TEST(NfrTest, AppliesToStoredValuesAndTheFill) {
  SparseRows x;
  x.cols = 4;
  x.AppendRow({0, 2}, {10.0f, -10.0f});
  x.AppendRow({1}, {0.5f});
  float fill = 0.5f;
  ApplyNfr(9.0, &x, &fill);
  EXPECT_EQ(x.values, (std::vector<float>{1.0f, -1.0f, 0.0f}));
  EXPECT_EQ(x.indices, (std::vector<uint32_t>{0, 2, 1}));
  EXPECT_EQ(fill, 0.0f);  // Multi-bit's (alpha + beta)/2 goes to zero
  ApplyNfr(0.5, &x, nullptr);
  EXPECT_EQ(x.values, (std::vector<float>{0.5f, -0.5f, 0.0f}));
}

TEST(NfrTest, ThresholdIsTauTimesTheMechanismsBound) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 300;
  o.features = 20;
  const Dataset d = *GenerateDataset(o);
  PipelineConfig c = DefaultConfig(v1::PIPELINE_METHOD_UPGNET,
                                   v1::PIPELINE_TASK_NODE);
  c.epsilon = 1;
  auto m = BuildFeatureMechanism(c, d);
  ASSERT_TRUE(m.ok()) << m.status();
  auto t = NfrThreshold(c, d, 0.9);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(*t, 0.9 * (*m)->EstimateBound());
  // Multi-bit on [0, 1], m = 1 of 20 at eps 1: 0.5 + 10 (e + 1)/(e - 1).
  const double e = std::exp(1.0);
  EXPECT_NEAR(*t, 0.9 * (0.5 + 10 * (e + 1) / (e - 1)), 1e-9);
  c.mechanism = "laplace";
  auto lap = NfrThreshold(c, d, 0.5);
  ASSERT_FALSE(lap.ok());
  EXPECT_THAT(lap.status().message(), HasSubstr("laplace"));
  c.mechanism = "none";
  EXPECT_FALSE(NfrThreshold(c, d, 0.5).ok());
  c.mechanism = "multibit";
  EXPECT_FALSE(NfrThreshold(c, d, 1.0).ok());
  EXPECT_FALSE(NfrThreshold(c, d, -0.1).ok());
}

TEST(NfrTest, ConfigRefusesItWhereNoReportsAre) {
  PipelineConfig c = DefaultConfig(v1::PIPELINE_METHOD_UPGNET,
                                   v1::PIPELINE_TASK_NODE);
  EXPECT_TRUE(ValidateConfig(c).ok());
  EXPECT_EQ(c.aggregator, FeatureAggregator::kHoa);
  EXPECT_GT(c.nfr_tau, 0);
  c.mechanism = "none";
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.nfr_tau = 0;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.nfr_tau = 1.0;
  c.mechanism = "multibit";
  EXPECT_FALSE(ValidateConfig(c).ok());
  PipelineConfig privge = DefaultConfig(v1::PIPELINE_METHOD_PRIVGE,
                                        v1::PIPELINE_TASK_NODE);
  privge.nfr_tau = 0.5;
  EXPECT_FALSE(ValidateConfig(privge).ok());
  privge.nfr_tau = 0;
  privge.aggregator = FeatureAggregator::kHoa;
  EXPECT_FALSE(ValidateConfig(privge).ok());
  PipelineConfig link = DefaultConfig(v1::PIPELINE_METHOD_UPGNET,
                                      v1::PIPELINE_TASK_LINK);
  auto s = ValidateConfig(link);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("UPGNET"));
}

}  // namespace
}  // namespace ldpgraph::pipeline

// The estimates held against a fill (CollectFeatures, SimulateFeatureReports,
// UnbiasHdsForLpgnn): the same dense form as the rows stored against 0,
// with far fewer entries for Multi-bit's.
#include "server/pipeline/feature_reports.h"

#include <cmath>
#include <vector>

#include "common/dataset/feature_schema.h"
#include "common/mechanisms/hds.h"
#include "common/testing/generated_datasets.h"
#include "gtest/gtest.h"
#include "server/pipeline/internal/deferred_kprop.h"
#include "server/pipeline/internal/stages.h"

namespace ldpgraph::pipeline {
namespace {

using internal::DenseWithFill;

std::unique_ptr<FeatureMechanism> MultiBit(size_t d) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kMultiBit;
  spec.epsilon = 1;
  spec.dimension = static_cast<int>(d);
  spec.alpha = 0;
  spec.beta = 1;
  return *CreateFeatureMechanism(spec);
}

// Multi-bit's estimates held against the fill: the m reported dimensions a
// row, the same dense form.
TEST(SimulateFeatureReportsTest, HeldAgainstTheFillKeepTheReportedDims) {
  const Dataset d = testing_datasets::SmallDataset(150, 0.8, 4);
  auto mech = MultiBit(d.features.cols);
  SeededRandomForTesting a(3), b(3);
  auto all = SimulateFeatureReports(d.features, *mech, a);
  float fill = -1;
  auto held = SimulateFeatureReports(
      d.features, *mech, [&](size_t) -> RandomSource& { return b; }, nullptr,
      nullptr, &fill);
  ASSERT_TRUE(all.ok() && held.ok());
  EXPECT_EQ(fill, 0.5f);
  EXPECT_EQ(all->nnz(), d.features.rows * d.features.cols);
  EXPECT_EQ(held->nnz(), d.features.rows * size_t(mech->sampled()));
  EXPECT_EQ(DenseWithFill(*held, fill).data, all->ToDense().data);
}

struct Collection {
  float fill = -1;
  SparseRows x;
};

Collection Collect(const Dataset& d, const PipelineConfig& c,
                   const Collected* collected) {
  RunResult r;
  std::vector<uint32_t> untrusted;
  auto noise = internal::NoiseStreams::Create(
      c, 11, collected ? 0 : d.graph.num_nodes());
  EXPECT_TRUE(noise.ok());
  Collection out;
  auto x = internal::CollectFeatures(d, c, collected, nullptr, nullptr,
                                     *noise, &r, &untrusted, &out.fill);
  EXPECT_TRUE(x.ok()) << x.status();
  if (x.ok()) out.x = *std::move(x);
  return out;
}

// The curator's collected rows (every entry stored) come back held against
// Multi-bit's fill; a silent node's empty row stays a row of zeros.
TEST(CollectFeaturesTest, CollectedRowsHeldAgainstTheirFill) {
  const Dataset d = testing_datasets::SmallDataset(120, 0.8, 6);
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  auto mech = MultiBit(d.features.cols);
  SeededRandomForTesting rng(5);
  Collected collected;
  collected.features = *SimulateFeatureReports(d.features, *mech, rng);
  // Node 7 did not report.
  SparseRows with_silent;
  with_silent.cols = collected.features.cols;
  for (size_t v = 0; v < collected.features.rows; ++v) {
    if (v == 7) {
      with_silent.AppendRow({}, {});
    } else {
      with_silent.AppendRow(collected.features.row_indices(v),
                            collected.features.row_values(v));
    }
  }
  collected.features = with_silent;
  const Collection held = Collect(d, c, &collected);
  EXPECT_EQ(held.fill, 0.5f);
  EXPECT_EQ(DenseWithFill(held.x, held.fill).data,
            collected.features.ToDense().data);
  EXPECT_EQ(held.x.nnz(),
            119 * size_t(mech->sampled()) + d.features.cols);  // node 7: zeros
  // Mostly silent nodes: against 0 stores less, so the rows stay as given.
  Collected few;
  few.features.cols = collected.features.cols;
  for (size_t v = 0; v < collected.features.rows; ++v) {
    if (v % 4 == 0) {
      few.features.AppendRow(collected.features.row_indices(v),
                             collected.features.row_values(v));
    } else {
      few.features.AppendRow({}, {});
    }
  }
  const Collection as_given = Collect(d, c, &few);
  EXPECT_EQ(as_given.fill, 0.0f);
  EXPECT_EQ(as_given.x.nnz(), few.features.nnz());
}

// A simulated Multi-bit run keeps the m reported dimensions; raw features
// (mechanism none) keep fill 0.
TEST(CollectFeaturesTest, SimulatedMultiBitRowsKeepTheReportedDims) {
  const Dataset d = testing_datasets::SmallDataset(100, 0.8, 7);
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  const Collection held = Collect(d, c, nullptr);
  EXPECT_EQ(held.fill, 0.5f);
  EXPECT_EQ(held.x.nnz(), d.features.rows * size_t(MultiBit(16)->sampled()));
  c.mechanism = "none";
  const Collection raw = Collect(d, c, nullptr);
  EXPECT_EQ(raw.fill, 0.0f);
  EXPECT_EQ(raw.x.ToDense().data,
            ScaleDatasetFeatures(d, c.scaling).ToDense().data);
}

// LPGNN's unbiased HDS values: the entrywise map of the estimates, their
// absent entries (the fill) included, and as sparse as the reports.
TEST(UnbiasHdsForLpgnnTest, MapsEveryEntryAndTheFill) {
  const Dataset d = testing_datasets::SmallDataset(100, 0.8, 8);
  PipelineConfig c =
      DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.mechanism = "hds";
  Collection held = Collect(d, c, nullptr);
  EXPECT_EQ(held.fill, 0.0f);  // HDS estimates 0 off its k dimensions
  const DenseMatrix before = DenseWithFill(held.x, held.fill);
  const size_t nnz = held.x.nnz();
  ASSERT_TRUE(internal::UnbiasHdsForLpgnn(d, c, &held.x, &held.fill).ok());
  auto mech = *BuildFeatureMechanism(c, d);
  const double inv_c =
      1.0 / dynamic_cast<const HdsMechanism*>(mech.get())->c();
  const auto range = *ScaledRange(c.scaling, d.meta);
  const double lo = range.first, half = (range.second - range.first) / 2;
  EXPECT_EQ(held.fill, static_cast<float>(lo + half));
  const DenseMatrix after = DenseWithFill(held.x, held.fill);
  for (size_t i = 0; i < before.data.size(); ++i) {
    ASSERT_EQ(after.data[i], static_cast<float>(
                                 lo + half * (before.data[i] * inv_c + 1.0)))
        << "entry " << i;
  }
  EXPECT_LE(held.x.nnz(), nnz);
}

}  // namespace
}  // namespace ldpgraph::pipeline

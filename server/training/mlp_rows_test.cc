#include "server/training/mlp_rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ldpgraph::training {
namespace {

TEST(MlpSparseBoundTest, AShareOfTheEntriesOrDense) {
  NodeModelConfig c;
  ASSERT_EQ(c.kind, NodeModelKind::kMlp);
  ASSERT_EQ(c.sparse_input_density, 0.125);
  EXPECT_EQ(MlpSparseBound(c, 34493, 8415, false), 36282324u);  // n d / 8
  EXPECT_EQ(MlpSparseBound(c, 3, 3, false), 1u);                // floor
  c.sparse_input_density = 0.5;
  EXPECT_EQ(MlpSparseBound(c, 10, 10, false), 50u);
  // Dense whenever the MLP cannot take compressed rows, or is told not to.
  EXPECT_EQ(MlpSparseBound(c, 10, 10, true), 0u);
  NodeModelConfig dropout = c;
  dropout.input_dropout = 0.1;
  EXPECT_EQ(MlpSparseBound(dropout, 10, 10, false), 0u);
  NodeModelConfig off = c;
  off.sparse_input_density = 0;
  EXPECT_EQ(MlpSparseBound(off, 10, 10, false), 0u);
  NodeModelConfig gcn = c;
  gcn.kind = NodeModelKind::kGcn;
  EXPECT_EQ(MlpSparseBound(gcn, 10, 10, false), 0u);
}

// rows x cols with a few non-zeros per row (row 2 empty), as compressed
// rows and densely.
SparseRows FewPerRow(size_t rows, size_t cols, uint64_t seed) {
  PublicRandom rng(seed);
  SparseRows x;
  x.cols = cols;
  for (size_t v = 0; v < rows; ++v) {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (uint32_t j = static_cast<uint32_t>(v % 3); v != 2 && j < cols;
         j += 1 + static_cast<uint32_t>(rng.UniformInt(cols / 3 + 1))) {
      idx.push_back(j);
      val.push_back(static_cast<float>(rng.UniformDouble() - 0.3));
    }
    x.AppendRow(idx, val);
  }
  return x;
}

Mat<float> Dense(const SparseRows& x) {
  const DenseMatrix d = x.ToDense();
  return Eigen::Map<const Mat<float>>(d.data.data(), d.rows, d.cols);
}

TEST(MlpRowsTest, GatherTakesTheRowsAsked) {
  const SparseRows x = FewPerRow(30, 9, 3);
  const Mat<float> dense = Dense(x);
  const std::vector<double> none;
  const std::vector<double> mean(9, 0.5), scale(9, 2.0);
  const MlpRows sparse_rows(nullptr, &x, &none, &none);
  const MlpRows standardised(nullptr, &x, &mean, &scale);
  const MlpRows dense_rows(&dense, nullptr, &none, &none);
  const std::vector<uint32_t> ids = {7, 2, 29, 7, 0};
  MlpRows::Batch a, b, c;
  sparse_rows.Gather(ids.data(), ids.size(), &a);
  standardised.Gather(ids.data(), ids.size(), &b);
  dense_rows.Gather(ids.data(), ids.size(), &c);
  ASSERT_TRUE(a.sparse && b.sparse);
  ASSERT_FALSE(c.sparse);
  EXPECT_FALSE(a.sparse->propagation.has_value());
  ASSERT_TRUE(b.sparse->propagation.has_value());
  EXPECT_EQ(b.sparse->propagation->steps, 0);
  EXPECT_EQ(b.sparse->propagation->u_minus_one.size(), 5);
  EXPECT_DOUBLE_EQ(b.sparse->propagation->offset[4], -0.5);
  ASSERT_EQ(c.dense.rows(), 5);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(c.dense.row(i), dense.row(ids[i])) << i;
  }
  EXPECT_EQ(Mat<float>(a.sparse->x.toDense()), c.dense);
  EXPECT_EQ(Mat<float>(a.sparse->xt.toDense()), c.dense.transpose());
  EXPECT_EQ(Mat<float>(b.sparse->x.toDense()), c.dense);
}

// With a clip, each stored value is read clamped so that its standardised
// entry stays within +-clip, and the MLP's outputs are those of the dense
// standardised rows clamped entry by entry (absent entries, -mean * scale,
// inside the bound here, as on a sparse Z).
TEST(MlpRowsTest, ClipClampsTheStandardisedEntries) {
  const SparseRows x = FewPerRow(30, 9, 3);  // values in [-0.3, 0.7)
  const std::vector<double> mean(9, 0.2), scale(9, 10.0);
  const double clip = 2.0;  // stored values kept within [0.0, 0.4]
  const MlpRows clipped(nullptr, &x, &mean, &scale, clip);
  std::vector<uint32_t> ids(30);
  for (uint32_t i = 0; i < 30; ++i) ids[i] = i;
  MlpRows::Batch b;
  clipped.Gather(ids.data(), ids.size(), &b);
  ASSERT_TRUE(b.sparse);
  const float* stored = b.sparse->x.valuePtr();
  size_t inside = 0, clamped = 0;
  for (size_t p = 0; p < x.nnz(); ++p) {
    const float v = x.values[p];
    if (v >= 0.0f && v <= 0.4f) {
      EXPECT_EQ(stored[p], v) << p;
      ++inside;
    } else {
      EXPECT_FLOAT_EQ(stored[p], v < 0.0f ? 0.0f : 0.4f) << p;
      ++clamped;
    }
  }
  ASSERT_GT(inside, 0u);
  ASSERT_GT(clamped, 0u);  // the test exercises the clamp

  Mat<float> standardised = Dense(x);
  for (Eigen::Index i = 0; i < standardised.rows(); ++i) {
    for (Eigen::Index j = 0; j < standardised.cols(); ++j) {
      standardised(i, j) = std::clamp(
          static_cast<float>((standardised(i, j) - mean[j]) * scale[j]),
          -2.0f, 2.0f);
    }
  }
  PublicRandom init(1);
  Mlp<float> mlp({9, 4, 3, 2, 0.5, Activation::kRelu}, init);
  const Mat<float> got = clipped.Predict(mlp, ids);
  const Mat<float> want = mlp.Forward(standardised, false, nullptr);
  EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-4f);
  // Unclipped, the rows past the bound give other outputs.
  const MlpRows unclipped(nullptr, &x, &mean, &scale);
  EXPECT_GT((unclipped.Predict(mlp, ids) - want).cwiseAbs().maxCoeff(),
            1e-2f);
}

// Past one chunk (here 16 rows of 2^20 columns: kNodeFullBatchEntries
// entries) predictions are made chunk by chunk: the same outputs as one
// row at a time.
TEST(MlpRowsTest, PredictsChunkByChunk) {
  const size_t cols = size_t{1} << 20;
  const SparseRows x = FewPerRow(40, cols, 5);
  std::vector<double> mean(cols, 0.01), scale(cols, 3.0);
  const MlpRows rows(nullptr, &x, &mean, &scale);
  ASSERT_EQ(rows.ChunkRows(), 16u);
  PublicRandom init(1);
  Mlp<float> mlp({static_cast<int>(cols), 4, 3, 2, 0.5, Activation::kRelu},
                 init);
  std::vector<uint32_t> ids(40);
  for (uint32_t i = 0; i < 40; ++i) ids[i] = (i * 7) % 40;
  const Mat<float> all = rows.Predict(mlp, ids);
  ASSERT_EQ(all.rows(), 40);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Mat<float> one = rows.Predict(mlp, {ids[i]});
    EXPECT_EQ(Mat<float>(all.row(i)), one) << "row " << i;
  }
}

// A file of rows is read through the standardisation entry by entry, in
// Standardize's arithmetic (float((v - mean) * scale), clamped): the rows,
// batches and predictions of the matrix standardised in memory, bit for
// bit; without moments, the stored values.
TEST(MlpRowsTest, FileRowsAreTheStandardisedMatrix) {
  const size_t n = 50, d = 7;
  PublicRandom rng(9);
  Mat<float> raw(n, d);
  for (Eigen::Index i = 0; i < raw.size(); ++i) {
    raw.data()[i] = static_cast<float>(rng.UniformDouble() * 8 - 2);
  }
  raw(3, 2) = 400;  // far out: clamped
  std::vector<double> mean(d), scale(d);
  for (size_t j = 0; j < d; ++j) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) sum += raw(i, j);
    mean[j] = sum / n;
    for (size_t i = 0; i < n; ++i) sq += (raw(i, j) - mean[j]) * (raw(i, j) - mean[j]);
    scale[j] = static_cast<float>(1.0 / std::sqrt(sq / n));
  }
  const double clip = 2.5;
  Mat<float> standardised(n, d);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < d; ++j) {
      standardised(i, j) = std::clamp(
          static_cast<float>((raw(i, j) - mean[j]) * static_cast<float>(scale[j])),
          -2.5f, 2.5f);
    }
  }
  auto file = RowFile::Create("", n, d);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->WriteColumns(0, 3, Mat<float>(raw.leftCols(3)).data()).ok());
  ASSERT_TRUE((*file)->WriteColumns(3, 4, Mat<float>(raw.rightCols(4)).data()).ok());
  const std::vector<double> none;
  const MlpRows from_file(file->get(), &mean, &scale, clip);
  const MlpRows in_memory(&standardised, nullptr, &none, &none);
  const MlpRows stored(file->get(), &none, &none);
  const std::vector<uint32_t> ids = {3, 0, 49, 3, 17};
  MlpRows::Batch a, b, c;
  from_file.Gather(ids.data(), ids.size(), &a);
  in_memory.Gather(ids.data(), ids.size(), &b);
  stored.Gather(ids.data(), ids.size(), &c);
  ASSERT_FALSE(a.sparse);
  EXPECT_EQ(a.dense, b.dense);
  EXPECT_EQ(a.dense(0, 2), 2.5f);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(Mat<float>(c.dense.row(i)), Mat<float>(raw.row(ids[i])));
  }
  PublicRandom init(4);
  Mlp<float> mlp(MlpConfig{static_cast<int>(d), 8, 3, 2, 0.0,
                           Activation::kRelu, 0.0},
                 init);
  std::vector<uint32_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = static_cast<uint32_t>(i);
  EXPECT_EQ(from_file.Predict(mlp, all), in_memory.Predict(mlp, all));
  EXPECT_EQ(from_file.ChunkRows(), in_memory.ChunkRows());
}

}  // namespace
}  // namespace ldpgraph::training

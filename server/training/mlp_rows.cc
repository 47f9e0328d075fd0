#include "server/training/mlp_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ldpgraph::training {

uint64_t MlpSparseBound(const NodeModelConfig& c, size_t rows, size_t cols,
                        bool propagate_predictions) {
  if (c.kind != NodeModelKind::kMlp || c.input_dropout != 0.0 ||
      propagate_predictions || !(c.sparse_input_density > 0)) {
    return 0;
  }
  return static_cast<uint64_t>(std::floor(
      c.sparse_input_density * static_cast<double>(rows) *
      static_cast<double>(cols)));
}

MlpRows::MlpRows(const Mat<float>* dense, const SparseRows* sparse,
                 const std::vector<double>* mean,
                 const std::vector<double>* scale, double clip)
    : dense_(dense), sparse_(sparse), mean_(mean), scale_(scale) {
  if (sparse_ == nullptr || !(clip > 0) || mean_->empty()) return;
  const float inf = std::numeric_limits<float>::infinity();
  low_.assign(mean_->size(), -inf);
  high_.assign(mean_->size(), inf);
  for (size_t j = 0; j < mean_->size(); ++j) {
    // A constant column (scale 0) standardises to 0: nothing to clamp.
    if (!((*scale_)[j] > 0)) continue;
    const double reach = clip / (*scale_)[j];
    low_[j] = static_cast<float>((*mean_)[j] - reach);
    high_[j] = static_cast<float>((*mean_)[j] + reach);
  }
}

MlpRows::MlpRows(const RowFile* file, const std::vector<double>* mean,
                 const std::vector<double>* scale, double clip)
    : dense_(nullptr), sparse_(nullptr), file_(file),
      file_clip_(clip > 0 ? static_cast<float>(clip)
                          : std::numeric_limits<float>::infinity()),
      mean_(mean), scale_(scale) {}

void MlpRows::Gather(const uint32_t* rows, size_t count, Batch* out) const {
  if (file_ != nullptr) {
    const size_t d = file_->cols();
    out->dense.resize(static_cast<Eigen::Index>(count),
                      static_cast<Eigen::Index>(d));
    file_->ReadRows(rows, count, out->dense.data());
    if (mean_->empty()) return;
    const double* mean = mean_->data();
    const double* scale = scale_->data();
    const float bound = file_clip_;
    for (size_t i = 0; i < count; ++i) {
      float* row = out->dense.data() + i * d;
      for (size_t j = 0; j < d; ++j) {
        row[j] = std::clamp(static_cast<float>((row[j] - mean[j]) * scale[j]),
                            -bound, bound);
      }
    }
    return;
  }
  if (dense_ != nullptr) {
    out->dense.resize(static_cast<Eigen::Index>(count), dense_->cols());
    for (size_t i = 0; i < count; ++i) out->dense.row(i) = dense_->row(rows[i]);
    return;
  }
  const SparseRows& x = *sparse_;
  uint64_t nnz = 0;
  for (size_t i = 0; i < count; ++i) {
    nnz += x.offsets[rows[i] + 1] - x.offsets[rows[i]];
  }
  // Compressed rows written in place (a fresh SparseMatrix is compressed).
  SpMat<float> m(static_cast<Eigen::Index>(count),
                 static_cast<Eigen::Index>(x.cols));
  m.resizeNonZeros(static_cast<Eigen::Index>(nnz));
  int64_t* outer = m.outerIndexPtr();
  int64_t* inner = m.innerIndexPtr();
  float* values = m.valuePtr();
  outer[0] = 0;
  for (size_t i = 0; i < count; ++i) {
    const auto idx = x.row_indices(rows[i]);
    const auto val = x.row_values(rows[i]);
    std::copy(idx.begin(), idx.end(), inner + outer[i]);
    if (low_.empty()) {
      std::copy(val.begin(), val.end(), values + outer[i]);
    } else {
      for (size_t k = 0; k < idx.size(); ++k) {
        values[outer[i] + k] =
            std::clamp(val[k], low_[idx[k]], high_[idx[k]]);
      }
    }
    outer[i + 1] = outer[i] + static_cast<int64_t>(idx.size());
  }
  if (mean_->empty()) {
    out->sparse.emplace(std::move(m));
  } else {
    out->sparse.emplace(std::move(m),
                        ColumnStandardisation<float>(
                            static_cast<Eigen::Index>(count), *mean_, *scale_));
  }
}

const Mat<float>& MlpRows::Forward(Mlp<float>& mlp, const Batch& b,
                                   bool training, PublicRandom* rng) const {
  return b.sparse ? mlp.Forward(*b.sparse, training, rng)
                  : mlp.Forward(b.dense, training, rng);
}

size_t MlpRows::ChunkRows() const {
  const size_t cols = dense_ != nullptr  ? dense_->cols()
                      : file_ != nullptr ? file_->cols()
                                         : sparse_->cols;
  return std::max<size_t>(1, kNodeFullBatchEntries / std::max<size_t>(1, cols));
}

Mat<float> MlpRows::Predict(Mlp<float>& mlp,
                            const std::vector<uint32_t>& rows) const {
  const size_t chunk = ChunkRows();
  Batch b;
  if (rows.size() <= chunk) {
    Gather(rows.data(), rows.size(), &b);
    return Forward(mlp, b, false, nullptr);
  }
  Mat<float> out(static_cast<Eigen::Index>(rows.size()),
                 mlp.config().output_dim);
  for (size_t first = 0; first < rows.size(); first += chunk) {
    const size_t count = std::min(chunk, rows.size() - first);
    Gather(rows.data() + first, count, &b);
    out.middleRows(static_cast<Eigen::Index>(first),
                   static_cast<Eigen::Index>(count)) =
        Forward(mlp, b, false, nullptr);
  }
  return out;
}

}  // namespace ldpgraph::training

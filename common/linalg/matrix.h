// The two matrix shapes ldpgraph moves around: a dense row-major float
// matrix (features a node holds, embeddings the curator computes) and a
// sparse row matrix (a dataset's features as stored, or reports with k of d
// dimensions). Plain structs: the invariants are stated here and checked by
// the code that builds them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace ldpgraph {

// rows x cols, row-major: element (i, j) is data[i * cols + j].
struct DenseMatrix {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<float> data;

  DenseMatrix() = default;
  DenseMatrix(size_t r, size_t c) : rows(r), cols(c), data(r * c, 0.0f) {}

  float& at(size_t i, size_t j) { return data[i * cols + j]; }
  float at(size_t i, size_t j) const { return data[i * cols + j]; }
  absl::Span<float> row(size_t i) {
    return absl::Span<float>(data.data() + i * cols, cols);
  }
  absl::Span<const float> row(size_t i) const {
    return absl::Span<const float>(data.data() + i * cols, cols);
  }
};

// Compressed sparse rows: row i holds indices[offsets[i] .. offsets[i+1])
// (strictly ascending, each < cols) with the matching values. An entry that
// is absent is 0; a stored entry may also be 0.
struct SparseRows {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<uint64_t> offsets{0};  // rows + 1 entries
  std::vector<uint32_t> indices;
  std::vector<float> values;

  size_t nnz() const { return indices.size(); }
  absl::Span<const uint32_t> row_indices(size_t i) const {
    return absl::Span<const uint32_t>(indices.data() + offsets[i],
                                      offsets[i + 1] - offsets[i]);
  }
  absl::Span<const float> row_values(size_t i) const {
    return absl::Span<const float>(values.data() + offsets[i],
                                   offsets[i + 1] - offsets[i]);
  }
  // Appends a row; indices ascending and < cols (the caller's contract).
  void AppendRow(absl::Span<const uint32_t> idx, absl::Span<const float> val) {
    indices.insert(indices.end(), idx.begin(), idx.end());
    values.insert(values.end(), val.begin(), val.end());
    offsets.push_back(indices.size());
    ++rows;
  }
  // Appends a row holding the non-zero entries of dense (dense.size() ==
  // cols, the caller's contract), each stored as a float.
  void AppendDenseRow(absl::Span<const double> dense) {
    for (size_t j = 0; j < dense.size(); ++j) {
      if (dense[j] != 0.0) {
        indices.push_back(static_cast<uint32_t>(j));
        values.push_back(static_cast<float>(dense[j]));
      }
    }
    offsets.push_back(indices.size());
    ++rows;
  }
  // Writes row i into dense (cols entries): zeros, then its stored values.
  void RowToDense(size_t i, absl::Span<double> dense) const {
    std::fill(dense.begin(), dense.end(), 0.0);
    for (uint64_t p = offsets[i]; p < offsets[i + 1]; ++p) {
      dense[indices[p]] = values[p];
    }
  }
  // The dense form (rows x cols).
  DenseMatrix ToDense() const {
    DenseMatrix m(rows, cols);
    for (size_t i = 0; i < rows; ++i) {
      for (uint64_t p = offsets[i]; p < offsets[i + 1]; ++p) {
        m.data[i * cols + indices[p]] = values[p];
      }
    }
    return m;
  }
};

}  // namespace ldpgraph

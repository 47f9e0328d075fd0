// Backward push's input (ppr_push.cc), read in place a block of columns at
// a time: a sparse or a dense feature matrix seen through D^-r and push's
// relabelling of the nodes. Internal to propagation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/graph/graph.h"
#include "common/linalg/matrix.h"

namespace ldpgraph::propagation::internal {

// Input of push, read in place a block of columns at a time and multiplied
// by D^-r on the way. ForEachInBlock(j0, w, cursor, f) calls f(v, k, value)
// for every non-zero x(order[v], j0 + k), k < w, with value = that entry
// times deg^-r, v ascending. SparseInput: a sparse matrix, no column-major
// copy of it; cursor holds a position per node (from NewCursor) and a
// caller passes blocks in ascending j0 with the same cursor, so that each
// row is read once from left to right over all the blocks. DenseInput: a
// dense matrix (no cursor).
struct SparseInput {
  const SparseRows& x;
  const std::vector<double>& deg_neg_r;
  const std::vector<NodeId>& order;  // graph node id -> row of x
  size_t rows, cols;
  SparseInput(const SparseRows& m, const std::vector<double>& d,
              const std::vector<NodeId>& ord)
      : x(m), deg_neg_r(d), order(ord), rows(m.rows), cols(m.cols) {}
  // Where each node's row starts.
  std::vector<uint64_t> NewCursor() const {
    std::vector<uint64_t> cursor(rows);
    for (size_t v = 0; v < rows; ++v) cursor[v] = x.offsets[order[v]];
    return cursor;
  }
  template <typename F>
  void ForEachInBlock(size_t j0, size_t w, std::vector<uint64_t>& cursor,
                      F f) const {
    const uint32_t* indices = x.indices.data();
    const float* values = x.values.data();
    constexpr size_t kAhead = 8;  // rows: each one's block is a cache miss
    for (size_t v = 0; v < rows; ++v) {
      if (v + kAhead < rows) {
        __builtin_prefetch(indices + cursor[v + kAhead]);
        __builtin_prefetch(values + cursor[v + kAhead]);
      }
      const NodeId old = order[v];
      const uint64_t end = x.offsets[old + 1];
      uint64_t p = cursor[v];
      while (p != end && indices[p] < j0) ++p;
      for (; p != end && indices[p] < j0 + w; ++p) {
        if (values[p] != 0.0f) {
          f(static_cast<NodeId>(v), indices[p] - j0, values[p] * deg_neg_r[old]);
        }
      }
      cursor[v] = p;
    }
  }
};

struct DenseInput {
  const DenseMatrix& x;
  const std::vector<double>& deg_neg_r;
  const std::vector<NodeId>& order;  // graph node id -> row of x
  size_t rows, cols;
  DenseInput(const DenseMatrix& m, const std::vector<double>& d,
             const std::vector<NodeId>& ord)
      : x(m), deg_neg_r(d), order(ord), rows(m.rows), cols(m.cols) {}
  std::vector<uint64_t> NewCursor() const { return {}; }
  template <typename F>
  void ForEachInBlock(size_t j0, size_t w, std::vector<uint64_t>&, F f) const {
    for (size_t v = 0; v < rows; ++v) {
      const NodeId old = order[v];
      const float* row = x.data.data() + size_t{old} * cols + j0;
      for (size_t k = 0; k < w; ++k) {
        if (row[k] != 0.0f) f(static_cast<NodeId>(v), k, row[k] * deg_neg_r[old]);
      }
    }
  }
};

}  // namespace ldpgraph::propagation::internal

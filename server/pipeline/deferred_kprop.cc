#include "server/pipeline/internal/deferred_kprop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/pipeline/internal/stages.h"
#include "server/propagation/propagation.h"
#include "server/training/propagated_input.h"

namespace ldpgraph::pipeline::internal {
namespace {

// KProp's step as a compressed row-major matrix (KPropOperator's entries,
// each row's sorted by column), built in place: no triplet list.
training::SpMat<float> KPropMatrix(const Graph& graph, bool self_loops,
                                   KPropNorm norm) {
  const std::vector<KPropEntry> entries =
      KPropOperator(graph, self_loops, norm);
  const int64_t n = static_cast<int64_t>(graph.num_nodes());
  training::SpMat<float> op(n, n);
  op.resizeNonZeros(static_cast<Eigen::Index>(entries.size()));
  std::vector<std::pair<int64_t, float>> row;
  size_t p = 0;
  for (int64_t v = 0; v < n; ++v) {
    op.outerIndexPtr()[v] = static_cast<int64_t>(p);
    row.clear();
    for (size_t e = p; e < entries.size() && entries[e].row == v; ++e) {
      row.emplace_back(entries[e].col, static_cast<float>(entries[e].weight));
    }
    std::sort(row.begin(), row.end());
    for (const auto& [col, weight] : row) {
      op.innerIndexPtr()[p] = col;
      op.valuePtr()[p++] = weight;
    }
  }
  op.outerIndexPtr()[n] = static_cast<int64_t>(p);
  return op;
}

}  // namespace

bool DefersKProp(const PipelineConfig& c, size_t rows, size_t cols) {
  return c.node_model.kind != training::NodeModelKind::kMlp &&
         rows * cols > kDenseKPropEntries;
}

DenseMatrix DenseWithFill(const SparseRows& x, float fill) {
  if (fill == 0.0f) return x.ToDense();
  DenseMatrix m(x.rows, x.cols);
  std::fill(m.data.begin(), m.data.end(), fill);
  for (size_t i = 0; i < x.rows; ++i) {
    for (uint64_t p = x.offsets[i]; p < x.offsets[i + 1]; ++p) {
      m.data[i * x.cols + x.indices[p]] = x.values[p];
    }
  }
  return m;
}

SparseRows WithoutFill(const SparseRows& x, float fill) {
  if (fill == 0.0f) return x;
  SparseRows out;
  out.cols = x.cols;
  std::vector<double> row(x.cols);
  for (size_t i = 0; i < x.rows; ++i) {
    std::fill(row.begin(), row.end(), fill);
    for (uint64_t p = x.offsets[i]; p < x.offsets[i + 1]; ++p) {
      row[x.indices[p]] = x.values[p];
    }
    out.AppendDenseRow(row);
  }
  return out;
}

absl::StatusOr<ColumnStats> PropagatedColumnStats(
    const Graph& graph, const SparseRows& x, float fill, int steps,
    bool self_loops, int threads, KPropNorm norm, size_t block_columns) {
  const size_t n = x.rows, d = x.cols;
  if (n != graph.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "features have ", n, " rows for a graph of ", graph.num_nodes(),
        " nodes"));
  }
  const size_t block =
      block_columns > 0
          ? block_columns
          : std::clamp<size_t>(kStatsBlockEntries / std::max<size_t>(n, 1), 1,
                               kStatsBlockColumns);
  ColumnStats s;
  s.mean.resize(d);
  s.scale.resize(d);
  // Each row's next stored entry: its columns ascend, as the blocks do.
  std::vector<uint64_t> next(x.offsets.begin(), x.offsets.end() - 1);
  for (size_t first = 0; first < d; first += block) {
    const size_t width = std::min(block, d - first);
    DenseMatrix columns(n, width);
    std::fill(columns.data.begin(), columns.data.end(), fill);
    for (size_t i = 0; i < n; ++i) {
      uint64_t& p = next[i];
      for (; p < x.offsets[i + 1] && x.indices[p] < first + width; ++p) {
        columns.at(i, x.indices[p] - first) = x.values[p];
      }
    }
    ASSIGN_OR_RETURN(const DenseMatrix z,
                     KProp(graph, columns, steps, self_loops, threads, norm));
    for (size_t j = 0; j < width; ++j) {
      const ColumnMoments m = StandardizeMoments(z.data.data() + j, n, width);
      s.mean[first + j] = m.mean;
      s.scale[first + j] = m.scale;
    }
  }
  return s;
}

absl::StatusOr<training::SparseInput<float>> DeferKProp(
    const Graph& graph, const SparseRows& x, float fill,
    const PipelineConfig& c, int steps) {
  const size_t n = x.rows, d = x.cols;
  if (steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KProp steps must be >= 0, got ", steps));
  }
  if (n != graph.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "features have ", n, " rows for a graph of ", graph.num_nodes(),
        " nodes"));
  }
  if (c.standardize && c.standardize_clip > 0) {
    return absl::InvalidArgumentError(
        "a deferred KProp cannot clamp its standardised features (the first "
        "layer forms X' W without X'); use standardize_clip 0");
  }
  ColumnStats stats;
  if (c.standardize) {
    ASSIGN_OR_RETURN(stats, PropagatedColumnStats(graph, x, fill, steps,
                                                  c.feature_self_loops,
                                                  c.threads, c.kprop_norm));
  }
  // Delta in Eigen's compressed row-major form: x's rows, less the fill.
  training::SpMat<float> delta(static_cast<int64_t>(n),
                               static_cast<int64_t>(d));
  delta.resizeNonZeros(static_cast<Eigen::Index>(x.nnz()));
  for (size_t i = 0; i <= n; ++i) {
    delta.outerIndexPtr()[i] = static_cast<int64_t>(x.offsets[i]);
  }
  for (size_t p = 0; p < x.nnz(); ++p) {
    delta.innerIndexPtr()[p] = x.indices[p];
    delta.valuePtr()[p] = x.values[p] - fill;
  }
  return training::SparseInput<float>(
      std::move(delta),
      training::MakeInputPropagation<float>(
          KPropMatrix(graph, c.feature_self_loops, c.kprop_norm), steps, fill,
          static_cast<int>(d), stats.mean, stats.scale));
}

}  // namespace ldpgraph::pipeline::internal

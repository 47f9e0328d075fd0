// LPGNN's KProp over wide features, deferred into the graph model's first
// layer (node_propagation.cc's PropagateNode).
//
// The dense path propagates the n x d estimates (KProp on their dense
// form), standardises the columns when asked and hands the model the n x d
// result: at 34,493 nodes x 8,415 features 1.1 GiB a copy, and it held
// several (the estimates as all-d-stored rows, their dense form, KProp's
// two buffers, the Eigen copy). The deferred path hands the model the
// estimates as they are held, Delta = x - fill (sparse: Multi-bit's m
// reported dimensions of d per row), with P (KPropOperator), K and the
// column standardisation, and the first layer forms X' W right to left
// (server/training/propagated_input.h): n x hidden, never n x d. Same
// model; the products add up in float in another order than KProp's
// double accumulation, so results agree with the dense path's within
// rounding, not bit for bit.
//
// Which path: the dense one while n x d <= kDenseKPropEntries (cora,
// citeseer and pubmed then keep their results bit for bit) or when the
// classifier is an MLP (PrivGE's, which reads Z whole); the deferred one
// for a graph model beyond that. Input dropout then masks the stored
// values of Delta before P^K (Gnn::Forward over SparseInput), not entries
// of X'; LPGNN's own settings use none.
//
// The one bounded densification left: with a standardisation, mu and sigma
// of P^K X's columns come from KProp run on blocks of columns of X, each
// n x block dense (block = kStatsBlockEntries / n columns, at least 1, at
// most 256; KProp holds three such buffers). KProp treats every column on
// its own, so these are the very floats the dense path standardises with.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "server/pipeline/config.h"
#include "server/propagation/options.h"
#include "server/training/models.h"

namespace ldpgraph::pipeline::internal {

// n x d entries up to which the node task propagates densely: 2^24, 64 MiB
// a dense copy (pubmed's 19,717 x 500 is 9.9 M, citeseer's 3,327 x 3,703
// 12.3 M).
inline constexpr size_t kDenseKPropEntries = size_t{1} << 24;
// The column statistics' block: at most this many entries (16 MiB of
// floats) a buffer, and at most kStatsBlockColumns columns.
inline constexpr size_t kStatsBlockEntries = size_t{1} << 22;
inline constexpr size_t kStatsBlockColumns = 256;

// Whether the node task of c defers the KProp of rows x cols features into
// its model's first layer (above).
bool DefersKProp(const PipelineConfig& c, size_t rows, size_t cols);

// x's dense form when every absent entry holds `fill` and a stored one its
// own value (CollectFeatures' rows held against a fill).
DenseMatrix DenseWithFill(const SparseRows& x, float fill);
// The same rows in SparseRows' own form (absent entries 0): every entry
// that is not 0 stored. x itself when fill is 0.
SparseRows WithoutFill(const SparseRows& x, float fill);

// The column statistics Standardize takes of KProp(graph, X, steps,
// self_loops, threads, norm) for X = DenseWithFill(x, fill): mean and
// scale (as double; the scale is Standardize's float), per column, from
// KProp over blocks of block_columns columns (0: as the header says).
struct ColumnStats {
  std::vector<double> mean, scale;
};
absl::StatusOr<ColumnStats> PropagatedColumnStats(
    const Graph& graph, const SparseRows& x, float fill, int steps,
    bool self_loops, int threads, KPropNorm norm, size_t block_columns = 0);

// The first layer's input for K = steps KProp steps of c (kprop_norm,
// feature_self_loops) over graph, standardised when c.standardize: Delta
// = x - fill on x's stored entries, with its propagation. INVALID_ARGUMENT
// for steps < 0, x not graph.num_nodes() rows, or a standardize_clip.
absl::StatusOr<training::SparseInput<float>> DeferKProp(
    const Graph& graph, const SparseRows& x, float fill,
    const PipelineConfig& c, int steps);

}  // namespace ldpgraph::pipeline::internal

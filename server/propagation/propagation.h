// Graph propagation on the curator: personalised PageRank (PrivGE eq. 12)
// by backward push and by power iteration, GCN normalised aggregation, and
// LPGNN's K-step KProp. Propagation is post-processing of reports the
// curator already holds, so it spends no privacy budget.
//
// Degrees: deg(v) is the number of distinct neighbours (a self loop counts
// once). An isolated node has no neighbours; in D^r and D^-r its degree is
// taken as 1, which makes its personalised PageRank embedding alpha * x_v,
// the l = 0 term of the series (the only non-zero one).
//
// Weighted graphs (Graph::weighted): GcnAggregate and KProp replace A by
// the weight matrix A_w and every degree by the weighted degree (an added
// self loop weighing 1), as stated at each; on an unweighted graph, or one
// whose weights are all 1, they compute exactly the unweighted formulas.
// Personalised PageRank (PprPush, PprPower) reads structure only and
// returns UNIMPLEMENTED for a weighted graph.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "server/propagation/options.h"

namespace ldpgraph {

// PprOptions and ValidatePprOptions, KPropNorm and its names: options.h
// (ldpgraph::propagation_options), for callers that set or check them
// without propagating.

struct PropagationStats {
  uint64_t pushes = 0;          // push operations (node, column block)
  uint64_t residue_updates = 0; // neighbour residue updates x block width
  int iterations = 0;           // power iteration: terms evaluated
  // Power iteration: bound on the truncated tail, per entry.
  double tail_bound = 0;
  int block_columns = 0;        // push: the block width used
  uint64_t nonzeros = 0;        // push: non-zero entries of Z
  double seconds = 0;
};

// Backward push (PrivGE Algorithm 3), on a sparse input: x is n x d with
// n == graph.num_nodes(). Per column j: residue R = D^-r X(:, j), reserve
// Q = 0; while some |R(v, j)| > rmax: Q(v, j) += alpha R(v, j), each
// neighbour u of v gets R(u, j) += (1 - alpha) R(v, j) / deg(u), R(v, j) = 0.
// Z = D^r Q. Guarantee: |Z(v, j) - Z*(v, j)| <= deg(v)^r * rmax for the
// exact series Z*, up to floating-point rounding (residues are float, so
// each update rounds at 2^-24 relative; reserves are double).
//
// The order of pushes is free (the invariant Q + Pi R = Pi R0 holds after
// any push), and this implementation picks one for memory locality: nodes
// are relabelled in breadth-first order, columns go in consecutive blocks
// of block_columns (the last one narrower), and the nodes above threshold
// are pushed in sweeps of ascending id (a node activated ahead of the sweep
// is pushed in the same sweep). Each block is pushed by one thread, so Z is
// the same bits for any number of threads; and it is the same bits on any
// x86-64 CPU for a given build (its SSE2, AVX2 and AVX-512 code round
// alike).
// Pushes follow the input's mass: an all-zero column triggers none and a
// single non-zero only those of the neighbourhood its mass reaches; beyond
// the pushes, each block of columns costs O(n) to set up and read, plus a
// pass over x's rows. Memory: Z, the relabelled graph, and per thread
// 12 * n * block_columns bytes of scratch.
absl::StatusOr<DenseMatrix> PprPush(const Graph& graph, const SparseRows& x,
                                    const PprOptions& options,
                                    PropagationStats* stats = nullptr);
// The same on a dense input (zeros are skipped).
absl::StatusOr<DenseMatrix> PprPush(const Graph& graph, const DenseMatrix& x,
                                    const PprOptions& options,
                                    PropagationStats* stats = nullptr);

// PprPush laid out by what Z holds, without an n x d buffer unless Z is
// dense: compressed rows (rows in x's order, indices ascending, an entry
// stored where its float is non-zero) while Z has at most max_nonzeros
// non-zeros, else dense, written into the n * d floats (row-major, every
// entry, zeros too) that dense_out returns, called at most once. Returns
// the CSR, or nullopt once the output went to dense_out. max_nonzeros 0:
// always dense, written as the blocks finish. Entries are PprPush's bit for
// bit (a stored -0 reads back as +0), for any max_nonzeros and threads.
//
// Memory (blocks of up to 16 columns): until the layout is known each
// finished block is held as its non-zeros (4 bytes each) plus 6 bytes for
// every node with one in the block: 4.4 to 10 bytes per non-zero (4.4 when
// a node's are 16 to a block). Sparse, the CSR (8 bytes per non-zero) is
// then assembled from the blocks, freeing each as it is read: at most
// 18 * max_nonzeros bytes at that moment, 8 per non-zero once done. Dense:
// when the count passes max_nonzeros, the n x d buffer is requested,
// zeroed, the blocks held so far written into it and freed, and every
// later block written straight in: at most 4 * n * d + 10 * max_nonzeros
// bytes. Plus PprPush's relabelled graph and scratch.
absl::StatusOr<std::optional<SparseRows>> PprPushByDensity(
    const Graph& graph, const SparseRows& x, const PprOptions& options,
    uint64_t max_nonzeros, absl::FunctionRef<absl::Span<float>()> dense_out,
    PropagationStats* stats = nullptr);

// The width of push's column blocks on an n x d input (PprPush's
// "block_columns"): options.block_columns when set (at most 16 and d),
// else 16, or 8 past 1.4M nodes, at most d.
int PprPushBlockColumns(size_t n, size_t d, const PprOptions& options);

// options with relative_rmax resolved against x: rmax times
// max(1, largest |x|), relative_rmax off. Pushing slices of x's columns
// with it (each a whole number of PprPushBlockColumns blocks) gives the
// columns of pushing x with options, bit for bit.
PprOptions AbsoluteRmax(const PprOptions& options, const SparseRows& x);

// The reference: the series evaluated term by term in double precision,
// Y_0 = X, Y_{l+1} = (D^{r-1} A D^{-r}) Y_l, until the tail bound
// (1 - alpha)^{L+1} max_v deg(v)^r max_u |X(u, :)| deg(u)^-r <= tolerance.
absl::StatusOr<DenseMatrix> PprPower(const Graph& graph, const DenseMatrix& x,
                                     const PprOptions& options,
                                     PropagationStats* stats = nullptr);

// GCN normalised aggregation (Kipf & Welling), self loops added:
// out(v) = sum_{u in N(v) + v} x_u / sqrt(d~_u d~_v), d~ = degree with the
// self loop. One step; stack it for more. Weighted: x_u w_uv /
// sqrt(d~_u d~_v) with d~ the weighted degree plus the added loop's 1.
absl::StatusOr<DenseMatrix> GcnAggregate(const Graph& graph,
                                         const DenseMatrix& x);

// KProp (LPGNN): `steps` rounds of neighbourhood aggregation,
// h_k(v) = mean_{u in N(v)} h_{k-1}(u) (N(v) + v when self_loops), or with
// kSymmetric h_k(v) = sum_{u in N(v)} h_{k-1}(u) / sqrt(d_u d_v). A node
// with no neighbours keeps its value. On a weighted graph the mean is
// weighted, sum_u w_vu h(u) / sum_u w_vu, and kSymmetric sums
// w_vu h(u) / sqrt(d_u d_v) with d the weighted degree (the loop asked for
// weighing 1). steps >= 0 (0 returns x). threads:
// >= 1, or 0 for every core; rows are split between threads, each computed
// by one, so the result does not depend on it. Memory: x and one more
// n x d buffer; x is taken by value, so a caller that moves it in (or
// passes a temporary) holds no third copy.
absl::StatusOr<DenseMatrix> KProp(const Graph& graph, DenseMatrix x,
                                  int steps, bool self_loops, int threads = 0,
                                  KPropNorm norm = KPropNorm::kMean);

// HOA, UPGNET's high-order aggregator (He, Li, Tang and Su, "Going Deeper
// into Locally Differentially Private Graph Neural Networks", ICML 2025):
// H = (1/K) sum_{k=1..K} T^k x, T KProp's step (KPropOperator: D^-1/2 A
// D^-1/2 with kSymmetric and no self loops, as UPGNET), K = steps. Where
// KProp's K steps keep only the last scale, which on a graph of many
// components tends to each component's constant, HOA keeps every scale
// from one hop to K. steps >= 0 (0 returns x); a node with no neighbours
// keeps its value, as in KProp. threads as KProp's: the same bits for any
// number. Memory: x, KProp's buffer and the sum, three n x d floats.
// Post-processing: no privacy cost.
absl::StatusOr<DenseMatrix> HighOrderAggregate(
    const Graph& graph, DenseMatrix x, int steps, bool self_loops,
    int threads = 0, KPropNorm norm = KPropNorm::kSymmetric);

// One entry of KProp's step as a matrix: h_k(row) gets weight * h_{k-1}(col).
struct KPropEntry {
  NodeId row;
  NodeId col;
  double weight;
};

// KProp's step as a sparse matrix T (KProp(graph, x, 1, ...) = T x up to
// float rounding), the same weights KProp uses: w_vu / count_v (kMean) or
// w_vu / sqrt(count_u count_v) (kSymmetric), the added self loop weighing 1,
// and T_vv = 1 for a node with no neighbours. Entries row by row, each
// row's columns in neighbour order (the added loop last).
std::vector<KPropEntry> KPropOperator(const Graph& graph, bool self_loops,
                                      KPropNorm norm);

}  // namespace ldpgraph

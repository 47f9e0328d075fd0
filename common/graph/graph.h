// An undirected graph in compressed sparse row (CSR) form: the curator's
// view of the social graph, and the input of propagation and training.
//
// Each undirected edge {u, v} with u != v appears twice, as v in u's
// neighbour list and u in v's; a self loop {v, v} appears once, in v's list.
// Neighbour lists are sorted ascending and free of duplicates, so the degree
// of v is the number of distinct neighbours (its self loop counting once).
// Node ids are 0..num_nodes-1 and fit in 32 bits; offsets are 64-bit, so
// the number of edges is bounded by memory only (8 bytes per node and 8 per
// undirected edge).
//
// Optionally weighted (FromWeightedEdges): every adjacency entry then
// carries a weight, finite and > 0, the same in both directions of an edge,
// at weights(v)[i] for neighbors(v)[i]. An unweighted graph stores no
// weights (weighted() false, weights(v) empty); code that reads weights
// takes each edge's as 1 there. Weighted graphs add 8 bytes per adjacency
// entry.
//
// A Graph is immutable after construction and safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ldpgraph {

using NodeId = uint32_t;

// One undirected edge. Orientation carries no meaning: {u, v} == {v, u}.
struct Edge {
  NodeId u = 0;
  NodeId v = 0;
  friend bool operator==(const Edge& a, const Edge& b) {
    return a.u == b.u && a.v == b.v;
  }
};

class Graph {
 public:
  struct BuildOptions {
    // A self loop {v, v} in the input: kept when true, INVALID_ARGUMENT when
    // false (naming the edge's position).
    bool allow_self_loops = false;
    // The same undirected edge twice (in either orientation): merged when
    // true, INVALID_ARGUMENT when false.
    bool merge_duplicates = true;
  };

  // The empty graph on zero nodes.
  Graph();

  // Builds the graph on num_nodes nodes (< 2^32 - 1) from an edge list.
  // INVALID_ARGUMENT naming the position of the first edge with an endpoint
  // >= num_nodes, or a rejected self loop or duplicate. O(n + m log m) time
  // worst case, O(n + m) memory beyond the result.
  static absl::StatusOr<Graph> FromEdges(size_t num_nodes,
                                         absl::Span<const Edge> edges,
                                         BuildOptions options);
  static absl::StatusOr<Graph> FromEdges(size_t num_nodes,
                                         absl::Span<const Edge> edges) {
    return FromEdges(num_nodes, edges, BuildOptions());
  }

  // Builds a weighted graph: weights[i] is the weight of edges[i]
  // (weights.size() == edges.size(), INVALID_ARGUMENT otherwise), stored
  // for both of its adjacency entries. INVALID_ARGUMENT naming the position
  // of the first weight that is not finite and > 0, and, when duplicates
  // are merged, of a repeated edge whose weight differs from its first
  // occurrence's (equal repeats merge into one edge of that weight);
  // otherwise as FromEdges. A graph from all-one weights has the structure
  // of FromEdges' graph, and weighted() true.
  static absl::StatusOr<Graph> FromWeightedEdges(
      size_t num_nodes, absl::Span<const Edge> edges,
      absl::Span<const double> weights, BuildOptions options);
  static absl::StatusOr<Graph> FromWeightedEdges(
      size_t num_nodes, absl::Span<const Edge> edges,
      absl::Span<const double> weights) {
    return FromWeightedEdges(num_nodes, edges, weights, BuildOptions());
  }

  size_t num_nodes() const { return offsets_.size() - 1; }
  // Undirected edges, a self loop counting once.
  size_t num_edges() const { return num_edges_; }
  // Entries of all neighbour lists: 2 * (edges - self loops) + self loops.
  size_t num_adjacency_entries() const { return targets_.size(); }
  size_t num_self_loops() const { return num_self_loops_; }

  // Distinct neighbours of v, its self loop counting once. v < num_nodes().
  uint32_t degree(NodeId v) const {
    return static_cast<uint32_t>(offsets_[v + 1] - offsets_[v]);
  }
  uint32_t max_degree() const { return max_degree_; }
  // Neighbours of v, ascending.
  absl::Span<const NodeId> neighbors(NodeId v) const {
    return absl::Span<const NodeId>(targets_.data() + offsets_[v],
                                    offsets_[v + 1] - offsets_[v]);
  }
  // Whether the graph carries edge weights.
  bool weighted() const { return weighted_; }
  // Weights of v's adjacency entries, aligned with neighbors(v); empty when
  // the graph is unweighted.
  absl::Span<const double> weights(NodeId v) const {
    if (!weighted_) return {};
    return absl::Span<const double>(weights_.data() + offsets_[v],
                                    offsets_[v + 1] - offsets_[v]);
  }
  // The weight of v's i-th adjacency entry: 1 when unweighted.
  double weight(NodeId v, size_t i) const {
    return weighted_ ? weights_[offsets_[v] + i] : 1.0;
  }
  // Sum of v's adjacency weights (its self loop once); the degree when
  // unweighted (exactly, as a double).
  double weighted_degree(NodeId v) const;

  // Whether {u, v} is an edge: O(log degree(u)). Out-of-range ids are not.
  bool HasEdge(NodeId u, NodeId v) const;
  bool HasSelfLoop(NodeId v) const { return HasEdge(v, v); }

  // Every undirected edge once, as u <= v, sorted by (u, v).
  std::vector<Edge> Edges() const;
  // Their weights, aligned with Edges(); empty when unweighted.
  std::vector<double> EdgeWeights() const;

  // This graph with a self loop added to every node that lacks one (GCN's
  // A + I); an added loop weighs 1, a stored one keeps its weight. O(n + m).
  Graph WithSelfLoops() const;

  // A copy of this graph without the given edges (link prediction hides its
  // validation and test edges this way). Each edge may be given in either
  // orientation; NOT_FOUND naming the first one that is not an edge, and
  // INVALID_ARGUMENT if one is listed twice. O(n + m + r log r) for r
  // removed edges. The remaining edges keep their weights.
  absl::StatusOr<Graph> WithoutEdges(absl::Span<const Edge> removed) const;

  // Raw CSR arrays: neighbours of v are targets()[offsets()[v] ..
  // offsets()[v + 1]).
  absl::Span<const uint64_t> offsets() const { return offsets_; }
  absl::Span<const NodeId> targets() const { return targets_; }
  // Aligned with targets(); empty when unweighted.
  absl::Span<const double> all_weights() const { return weights_; }

  // Bytes held by the CSR arrays.
  size_t MemoryBytes() const {
    return offsets_.capacity() * sizeof(uint64_t) +
           targets_.capacity() * sizeof(NodeId) +
           weights_.capacity() * sizeof(double);
  }

 private:
  // weights: aligned with targets when weighted, else empty.
  Graph(std::vector<uint64_t> offsets, std::vector<NodeId> targets,
        std::vector<double> weights = {}, bool weighted = false);
  // FromEdges and FromWeightedEdges (weights empty for the former).
  static absl::StatusOr<Graph> Build(size_t num_nodes,
                                     absl::Span<const Edge> edges,
                                     absl::Span<const double> weights,
                                     bool weighted, BuildOptions options);

  std::vector<uint64_t> offsets_;  // num_nodes + 1 entries
  std::vector<NodeId> targets_;
  std::vector<double> weights_;  // empty when unweighted
  bool weighted_ = false;
  size_t num_edges_ = 0;
  size_t num_self_loops_ = 0;
  uint32_t max_degree_ = 0;
};

}  // namespace ldpgraph

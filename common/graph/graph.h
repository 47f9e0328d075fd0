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
  // Whether {u, v} is an edge: O(log degree(u)). Out-of-range ids are not.
  bool HasEdge(NodeId u, NodeId v) const;
  bool HasSelfLoop(NodeId v) const { return HasEdge(v, v); }

  // Every undirected edge once, as u <= v, sorted by (u, v).
  std::vector<Edge> Edges() const;

  // This graph with a self loop added to every node that lacks one (GCN's
  // A + I). O(n + m).
  Graph WithSelfLoops() const;

  // A copy of this graph without the given edges (link prediction hides its
  // validation and test edges this way). Each edge may be given in either
  // orientation; NOT_FOUND naming the first one that is not an edge, and
  // INVALID_ARGUMENT if one is listed twice. O(n + m + r log r) for r
  // removed edges.
  absl::StatusOr<Graph> WithoutEdges(absl::Span<const Edge> removed) const;

  // Raw CSR arrays: neighbours of v are targets()[offsets()[v] ..
  // offsets()[v + 1]).
  absl::Span<const uint64_t> offsets() const { return offsets_; }
  absl::Span<const NodeId> targets() const { return targets_; }

  // Bytes held by the CSR arrays.
  size_t MemoryBytes() const {
    return offsets_.capacity() * sizeof(uint64_t) +
           targets_.capacity() * sizeof(NodeId);
  }

 private:
  Graph(std::vector<uint64_t> offsets, std::vector<NodeId> targets);

  std::vector<uint64_t> offsets_;  // num_nodes + 1 entries
  std::vector<NodeId> targets_;
  size_t num_edges_ = 0;
  size_t num_self_loops_ = 0;
  uint32_t max_degree_ = 0;
};

}  // namespace ldpgraph

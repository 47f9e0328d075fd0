#include "common/graph/graph.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ldpgraph {
namespace {

// Position of the second occurrence of {a, b} in edges (error path only).
size_t SecondOccurrence(absl::Span<const Edge> edges, NodeId a, NodeId b) {
  bool seen = false;
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if ((e.u == a && e.v == b) || (e.u == b && e.v == a)) {
      if (seen) return i;
      seen = true;
    }
  }
  return edges.size();
}

}  // namespace

Graph::Graph() : offsets_(1, 0) {}

Graph::Graph(std::vector<uint64_t> offsets, std::vector<NodeId> targets)
    : offsets_(std::move(offsets)), targets_(std::move(targets)) {
  const size_t n = offsets_.size() - 1;
  for (NodeId v = 0; v < n; ++v) {
    max_degree_ = std::max(max_degree_, degree(v));
    if (HasSelfLoop(v)) ++num_self_loops_;
  }
  num_edges_ = (targets_.size() - num_self_loops_) / 2 + num_self_loops_;
}

absl::StatusOr<Graph> Graph::FromEdges(size_t num_nodes,
                                       absl::Span<const Edge> edges,
                                       BuildOptions options) {
  if (num_nodes >= std::numeric_limits<NodeId>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph has ", num_nodes, " nodes; at most ",
                     std::numeric_limits<NodeId>::max() - 1, " are supported"));
  }
  std::vector<uint64_t> offsets(num_nodes + 1, 0);
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (e.u >= num_nodes || e.v >= num_nodes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "edge ", i, " {", e.u, ", ", e.v, "}: node id ",
          std::max(e.u, e.v), " out of range (graph has ", num_nodes,
          " nodes)"));
    }
    if (e.u == e.v) {
      if (!options.allow_self_loops) {
        return absl::InvalidArgumentError(absl::StrCat(
            "edge ", i, " {", e.u, ", ", e.v, "}: self loop not allowed"));
      }
      ++offsets[e.u + 1];
    } else {
      ++offsets[e.u + 1];
      ++offsets[e.v + 1];
    }
  }
  for (size_t v = 0; v < num_nodes; ++v) offsets[v + 1] += offsets[v];
  std::vector<NodeId> targets(offsets[num_nodes]);
  {
    std::vector<uint64_t> fill(offsets.begin(), offsets.end() - 1);
    for (const Edge& e : edges) {
      targets[fill[e.u]++] = e.v;
      if (e.u != e.v) targets[fill[e.v]++] = e.u;
    }
  }
  // Sort each list, then drop repeats, compacting in place.
  uint64_t write = 0;
  for (size_t v = 0; v < num_nodes; ++v) {
    const uint64_t begin = offsets[v], end = offsets[v + 1];
    std::sort(targets.begin() + begin, targets.begin() + end);
    offsets[v] = write;
    for (uint64_t i = begin; i < end; ++i) {
      if (i > begin && targets[i] == targets[i - 1]) {
        if (!options.merge_duplicates) {
          const NodeId a = static_cast<NodeId>(v), b = targets[i];
          return absl::InvalidArgumentError(absl::StrCat(
              "edge ", SecondOccurrence(edges, a, b), " {", a, ", ", b,
              "}: duplicate edge"));
        }
        continue;
      }
      targets[write++] = targets[i];
    }
  }
  offsets[num_nodes] = write;
  targets.resize(write);
  targets.shrink_to_fit();
  return Graph(std::move(offsets), std::move(targets));
}

bool Graph::HasEdge(NodeId u, NodeId v) const {
  if (u >= num_nodes() || v >= num_nodes()) return false;
  auto list = neighbors(u);
  return std::binary_search(list.begin(), list.end(), v);
}

std::vector<Edge> Graph::Edges() const {
  std::vector<Edge> out;
  out.reserve(num_edges_);
  for (NodeId u = 0; u < num_nodes(); ++u) {
    for (NodeId v : neighbors(u)) {
      if (u <= v) out.push_back({u, v});
    }
  }
  return out;
}

Graph Graph::WithSelfLoops() const {
  const size_t n = num_nodes();
  std::vector<uint64_t> offsets(n + 1, 0);
  std::vector<NodeId> targets;
  targets.reserve(targets_.size() + n - num_self_loops_);
  for (NodeId v = 0; v < n; ++v) {
    auto list = neighbors(v);
    auto pos = std::lower_bound(list.begin(), list.end(), v);
    targets.insert(targets.end(), list.begin(), pos);
    targets.push_back(v);
    if (pos != list.end() && *pos == v) ++pos;
    targets.insert(targets.end(), pos, list.end());
    offsets[v + 1] = targets.size();
  }
  return Graph(std::move(offsets), std::move(targets));
}

absl::StatusOr<Graph> Graph::WithoutEdges(
    absl::Span<const Edge> removed) const {
  // Removed entries, both orientations, sorted so each list is a merge.
  std::vector<Edge> drop;
  drop.reserve(2 * removed.size());
  for (size_t i = 0; i < removed.size(); ++i) {
    const Edge& e = removed[i];
    if (!HasEdge(e.u, e.v)) {
      return absl::NotFoundError(absl::StrCat("removed edge ", i, " {", e.u,
                                              ", ", e.v, "} is not an edge"));
    }
    drop.push_back({e.u, e.v});
    if (e.u != e.v) drop.push_back({e.v, e.u});
  }
  auto less = [](const Edge& a, const Edge& b) {
    return a.u != b.u ? a.u < b.u : a.v < b.v;
  };
  std::sort(drop.begin(), drop.end(), less);
  for (size_t i = 1; i < drop.size(); ++i) {
    if (drop[i] == drop[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("edge {", drop[i].u, ", ", drop[i].v,
                       "} is listed more than once among removed edges"));
    }
  }
  const size_t n = num_nodes();
  std::vector<uint64_t> offsets(n + 1, 0);
  std::vector<NodeId> targets;
  targets.reserve(targets_.size() - drop.size());
  size_t d = 0;
  for (NodeId u = 0; u < n; ++u) {
    for (NodeId v : neighbors(u)) {
      if (d < drop.size() && drop[d].u == u && drop[d].v == v) {
        ++d;
        continue;
      }
      targets.push_back(v);
    }
    offsets[u + 1] = targets.size();
  }
  return Graph(std::move(offsets), std::move(targets));
}

}  // namespace ldpgraph

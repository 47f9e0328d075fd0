#include "common/graph/graph.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

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

// Checks every edge's ids (and self loop) and counts each node's list length
// into offsets[v + 1], repeats included.
absl::Status CountListLengths(size_t num_nodes, absl::Span<const Edge> edges,
                              const Graph::BuildOptions& options,
                              std::vector<uint64_t>& offsets) {
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
  return absl::OkStatus();
}

// Writes both ends' entries of every edge (one for a self loop), and their
// weights when weighted, into the lists that offsets delimit, in edge order.
void FillLists(absl::Span<const Edge> edges, absl::Span<const double> weights,
               bool weighted, const std::vector<uint64_t>& offsets,
               std::vector<NodeId>& targets, std::vector<double>& w) {
  std::vector<uint64_t> fill(offsets.begin(), offsets.end() - 1);
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (weighted) w[fill[e.u]] = weights[i];
    targets[fill[e.u]++] = e.v;
    if (e.u == e.v) continue;
    if (weighted) w[fill[e.v]] = weights[i];
    targets[fill[e.v]++] = e.u;
  }
}

// Sorts targets[begin, end), stably with its weights when weighted (which
// keeps repeats in input order); list is scratch space.
void SortList(uint64_t begin, uint64_t end, bool weighted,
              std::vector<NodeId>& targets, std::vector<double>& w,
              std::vector<std::pair<NodeId, double>>& list) {
  if (!weighted) {
    std::sort(targets.begin() + begin, targets.begin() + end);
    return;
  }
  list.clear();
  for (uint64_t i = begin; i < end; ++i) list.push_back({targets[i], w[i]});
  std::stable_sort(list.begin(), list.end(),
                   [](const auto& a, const auto& b) {
                     return a.first < b.first;
                   });
  for (uint64_t i = begin; i < end; ++i) {
    targets[i] = list[i - begin].first;
    w[i] = list[i - begin].second;
  }
}

// Sorts each list, then drops repeats, compacting in place: on return
// offsets delimit the merged lists (offsets[num_nodes] is their total).
// INVALID_ARGUMENT for a repeat unless merge_duplicates, and for a repeat
// whose weight differs.
absl::Status SortAndMergeLists(size_t num_nodes, absl::Span<const Edge> edges,
                               bool weighted, bool merge_duplicates,
                               std::vector<uint64_t>& offsets,
                               std::vector<NodeId>& targets,
                               std::vector<double>& w) {
  std::vector<std::pair<NodeId, double>> list;
  uint64_t write = 0;
  for (size_t v = 0; v < num_nodes; ++v) {
    const uint64_t begin = offsets[v], end = offsets[v + 1];
    SortList(begin, end, weighted, targets, w, list);
    offsets[v] = write;
    for (uint64_t i = begin; i < end; ++i) {
      if (i > begin && targets[i] == targets[i - 1]) {
        const NodeId a = static_cast<NodeId>(v), b = targets[i];
        if (!merge_duplicates) {
          return absl::InvalidArgumentError(absl::StrCat(
              "edge ", SecondOccurrence(edges, a, b), " {", a, ", ", b,
              "}: duplicate edge"));
        }
        if (weighted && w[i] != w[write - 1]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "edge ", SecondOccurrence(edges, a, b), " {", a, ", ", b,
              "}: weight ", w[i], " differs from the same edge's earlier ",
              w[write - 1]));
        }
        continue;
      }
      if (weighted) w[write] = w[i];
      targets[write++] = targets[i];
    }
  }
  offsets[num_nodes] = write;
  return absl::OkStatus();
}

}  // namespace

Graph::Graph() : offsets_(1, 0) {}

Graph::Graph(std::vector<uint64_t> offsets, std::vector<NodeId> targets,
             std::vector<double> weights, bool weighted)
    : offsets_(std::move(offsets)),
      targets_(std::move(targets)),
      weights_(std::move(weights)),
      weighted_(weighted) {
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
  return Build(num_nodes, edges, {}, false, options);
}

absl::StatusOr<Graph> Graph::FromWeightedEdges(
    size_t num_nodes, absl::Span<const Edge> edges,
    absl::Span<const double> weights, BuildOptions options) {
  if (weights.size() != edges.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", weights.size(), " weights for ", edges.size(),
                     " edges; there must be one per edge"));
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(std::isfinite(weights[i]) && weights[i] > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("edge ", i, " {", edges[i].u, ", ", edges[i].v,
                       "}: weight must be finite and > 0, got ", weights[i]));
    }
  }
  return Build(num_nodes, edges, weights, true, options);
}

absl::StatusOr<Graph> Graph::Build(size_t num_nodes,
                                   absl::Span<const Edge> edges,
                                   absl::Span<const double> weights,
                                   bool weighted, BuildOptions options) {
  if (num_nodes >= std::numeric_limits<NodeId>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph has ", num_nodes, " nodes; at most ",
                     std::numeric_limits<NodeId>::max() - 1, " are supported"));
  }
  std::vector<uint64_t> offsets(num_nodes + 1, 0);
  RETURN_IF_ERROR(CountListLengths(num_nodes, edges, options, offsets));
  for (size_t v = 0; v < num_nodes; ++v) offsets[v + 1] += offsets[v];
  std::vector<NodeId> targets(offsets[num_nodes]);
  std::vector<double> w(weighted ? targets.size() : 0);
  FillLists(edges, weights, weighted, offsets, targets, w);
  RETURN_IF_ERROR(SortAndMergeLists(num_nodes, edges, weighted,
                                    options.merge_duplicates, offsets,
                                    targets, w));
  const uint64_t write = offsets[num_nodes];
  targets.resize(write);
  targets.shrink_to_fit();
  w.resize(weighted ? write : 0);
  w.shrink_to_fit();
  return Graph(std::move(offsets), std::move(targets), std::move(w), weighted);
}

double Graph::weighted_degree(NodeId v) const {
  if (!weighted_) return static_cast<double>(degree(v));
  double sum = 0;
  for (double x : weights(v)) sum += x;
  return sum;
}

bool Graph::HasEdge(NodeId u, NodeId v) const {
  if (u >= num_nodes() || v >= num_nodes()) return false;
  auto list = neighbors(u);
  return std::binary_search(list.begin(), list.end(), v);
}

std::vector<double> Graph::EdgeWeights() const {
  std::vector<double> out;
  if (!weighted_) return out;
  out.reserve(num_edges_);
  for (NodeId u = 0; u < num_nodes(); ++u) {
    auto nb = neighbors(u);
    for (size_t i = 0; i < nb.size(); ++i) {
      if (u <= nb[i]) out.push_back(weight(u, i));
    }
  }
  return out;
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
  std::vector<double> w;
  targets.reserve(targets_.size() + n - num_self_loops_);
  if (weighted_) w.reserve(targets_.size() + n - num_self_loops_);
  for (NodeId v = 0; v < n; ++v) {
    auto list = neighbors(v);
    auto pos = std::lower_bound(list.begin(), list.end(), v);
    const size_t at = pos - list.begin();
    targets.insert(targets.end(), list.begin(), pos);
    targets.push_back(v);
    const bool had_loop = pos != list.end() && *pos == v;
    if (weighted_) {
      auto wv = weights(v);
      w.insert(w.end(), wv.begin(), wv.begin() + at);
      w.push_back(had_loop ? wv[at] : 1.0);
      w.insert(w.end(), wv.begin() + at + (had_loop ? 1 : 0), wv.end());
    }
    if (had_loop) ++pos;
    targets.insert(targets.end(), pos, list.end());
    offsets[v + 1] = targets.size();
  }
  return Graph(std::move(offsets), std::move(targets), std::move(w),
               weighted_);
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
  std::vector<double> w;
  if (weighted_) w.reserve(targets_.size() - drop.size());
  for (NodeId u = 0; u < n; ++u) {
    auto nb = neighbors(u);
    for (size_t i = 0; i < nb.size(); ++i) {
      const NodeId v = nb[i];
      if (d < drop.size() && drop[d].u == u && drop[d].v == v) {
        ++d;
        continue;
      }
      targets.push_back(v);
      if (weighted_) w.push_back(weight(u, i));
    }
    offsets[u + 1] = targets.size();
  }
  return Graph(std::move(offsets), std::move(targets), std::move(w),
               weighted_);
}

}  // namespace ldpgraph

#include "common/dataset/splits.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/random/random.h"
#include "common/status_macros.h"

namespace ldpgraph {
void DrawRandomNonEdges(const Graph& g, size_t count, PublicRandom& rng,
                        std::vector<Edge>* out) {
  const uint64_t n = g.num_nodes();
  absl::flat_hash_set<uint64_t> taken;
  taken.reserve(count);
  while (out->size() < count) {
    NodeId u = static_cast<NodeId>(rng.UniformInt(n));
    NodeId v = static_cast<NodeId>(rng.UniformInt(n));
    if (u == v) continue;
    if (u > v) std::swap(u, v);
    if (g.HasEdge(u, v)) continue;
    if (taken.insert((uint64_t{u} << 32) | v).second) out->push_back({u, v});
  }
}

namespace {

// Slack for fraction sums such as 0.7 + 0.3, which is 1 + 2^-52 in doubles.
constexpr double kSumTolerance = 1e-9;

absl::Status CheckFractions(absl::string_view name_a, double a,
                            absl::string_view name_b, double b) {
  for (const auto& [name, f] : {std::pair(name_a, a), std::pair(name_b, b)}) {
    if (!(f >= 0.0 && f <= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " = ", f, " must be in [0, 1]"));
    }
  }
  if (a + b > 1.0 + kSumTolerance) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_a, " + ", name_b, " = ", a + b,
                     " must be at most 1"));
  }
  return absl::OkStatus();
}

// round(f * total), half away from zero, at most total.
size_t RoundedCount(double f, size_t total) {
  const double x = std::round(f * static_cast<double>(total));
  return std::min(total, static_cast<size_t>(x));
}

bool EdgeLess(const Edge& a, const Edge& b) {
  return a.u != b.u ? a.u < b.u : a.v < b.v;
}

struct PlanetoidSpec {
  absl::string_view name;
  size_t nodes;
  NodeId train_end;   // train: [0, train_end)
  NodeId val_end;     // validation: [train_end, val_end)
  NodeId test_begin;  // test: [test_begin, nodes)
};

constexpr PlanetoidSpec kPlanetoid[] = {
    {"cora", 2708, 140, 640, 1708},
    {"citeseer", 3327, 120, 620, 2312},
    {"pubmed", 19717, 60, 560, 18717},
};

const PlanetoidSpec* FindPlanetoid(const Dataset& d) {
  for (const PlanetoidSpec& s : kPlanetoid) {
    if (d.meta.name == s.name && d.meta.nodes == s.nodes &&
        d.labels.size() == s.nodes) {
      return &s;
    }
  }
  return nullptr;
}

// `count` distinct non-edges {u < v} of g, uniformly at random without
// replacement, in random order. Requires count <= non_edges, the number of
// non-edges (pairs u < v that are not edges). Expected O(count + m) time:
// rejection sampling while non-edges are plentiful (a draw of two distinct
// nodes succeeds with probability >= 1/3, see below), else one pass over all
// pairs.
std::vector<Edge> SampleNonEdges(const Graph& g, uint64_t non_edges,
                                 uint64_t count, PublicRandom& rng) {
  const uint64_t n = g.num_nodes();
  std::vector<Edge> out;
  out.reserve(count);
  if (count == 0) return out;
  if (2 * count > non_edges) {
    // Dense case: all n(n-1)/2 pairs number at most m + non_edges
    // < 3 * count (count = m here), so visiting them is O(count). Selection
    // sampling (Knuth's Algorithm S) keeps each non-edge with probability
    // needed / remaining, then a shuffle makes the order random.
    uint64_t needed = count, remaining = non_edges;
    for (NodeId u = 0; u < n && needed > 0; ++u) {
      auto nbrs = g.neighbors(u);
      auto it = std::upper_bound(nbrs.begin(), nbrs.end(), u);
      for (NodeId v = u + 1; v < n && needed > 0; ++v) {
        if (it != nbrs.end() && *it == v) {
          ++it;
          continue;
        }
        if (rng.UniformInt(remaining) < needed) {
          out.push_back({u, v});
          --needed;
        }
        --remaining;
      }
    }
    Shuffle(out, rng);
    return out;
  }
  // Sparse case: at most half the non-edges get taken, so a uniform pair
  // is a free non-edge with probability >= (non_edges / 2) / (n(n-1)/2);
  // with count = m <= non_edges / 2 that is >= 1/3.
  DrawRandomNonEdges(g, count, rng, &out);
  return out;
}

}  // namespace

absl::StatusOr<NodeSplit> RandomNodeSplit(absl::Span<const int32_t> labels,
                                          double train_fraction,
                                          double validation_fraction,
                                          uint64_t seed) {
  RETURN_IF_ERROR(CheckFractions("train_fraction", train_fraction,
                                 "validation_fraction", validation_fraction));
  std::vector<NodeId> labelled;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= 0) labelled.push_back(static_cast<NodeId>(i));
  }
  const size_t total = labelled.size();
  const size_t n_train = RoundedCount(train_fraction, total);
  const size_t n_val =
      std::min(RoundedCount(validation_fraction, total), total - n_train);
  PublicRandom rng(seed);
  Shuffle(labelled, rng);
  NodeSplit split;
  auto first = labelled.begin();
  split.train.assign(first, first + n_train);
  split.validation.assign(first + n_train, first + n_train + n_val);
  split.test.assign(first + n_train + n_val, labelled.end());
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.validation.begin(), split.validation.end());
  std::sort(split.test.begin(), split.test.end());
  return split;
}

bool HasPlanetoidSplit(const Dataset& d) { return FindPlanetoid(d) != nullptr; }

absl::StatusOr<NodeSplit> PlanetoidSplit(const Dataset& d) {
  const PlanetoidSpec* s = FindPlanetoid(d);
  if (s == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset \"", d.meta.name, "\" with ", d.meta.nodes,
        " nodes has no Planetoid split (known: cora with 2708 nodes, "
        "citeseer with 3327, pubmed with 19717)"));
  }
  NodeSplit split;
  auto add = [&](std::vector<NodeId>& out, NodeId begin, NodeId end) {
    for (NodeId v = begin; v < end; ++v) {
      if (d.labels[v] >= 0) out.push_back(v);
    }
  };
  add(split.train, 0, s->train_end);
  add(split.validation, s->train_end, s->val_end);
  add(split.test, s->test_begin, static_cast<NodeId>(s->nodes));
  return split;
}

absl::StatusOr<EdgeSplit> RandomEdgeSplit(const Graph& graph,
                                          double validation_fraction,
                                          double test_fraction,
                                          uint64_t seed) {
  RETURN_IF_ERROR(CheckFractions("validation_fraction", validation_fraction,
                                 "test_fraction", test_fraction));
  std::vector<Edge> edges = graph.Edges();
  edges.erase(std::remove_if(edges.begin(), edges.end(),
                             [](const Edge& e) { return e.u == e.v; }),
              edges.end());
  const size_t m = edges.size();
  const size_t n_val = RoundedCount(validation_fraction, m);
  const size_t n_test = std::min(RoundedCount(test_fraction, m), m - n_val);
  const size_t n_train = m - n_val - n_test;

  const uint64_t n = graph.num_nodes();
  const uint64_t pairs = n < 2 ? 0 : n * (n - 1) / 2;
  const uint64_t non_edges = pairs - m;
  if (non_edges < m) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the graph (", n, " nodes, ", m, " edges besides self loops) has ",
        non_edges, " non-edges, fewer than the ", m,
        " negative samples the split needs (one per edge)"));
  }

  PublicRandom rng(seed);
  // Which edges leave training: a partial Fisher-Yates over edge positions
  // draws n_val + n_test of them; distributing in the original (sorted)
  // order keeps each part sorted.
  std::vector<uint8_t> part(m, 0);  // 0 train, 1 validation, 2 test
  {
    std::vector<size_t> pos(m);
    std::iota(pos.begin(), pos.end(), size_t{0});
    for (size_t i = 0; i < n_val + n_test; ++i) {
      const size_t j = i + static_cast<size_t>(rng.UniformInt(m - i));
      std::swap(pos[i], pos[j]);
      part[pos[i]] = i < n_val ? 1 : 2;
    }
  }
  EdgeSplit split;
  split.train.reserve(n_train);
  split.validation.reserve(n_val);
  split.test.reserve(n_test);
  for (size_t i = 0; i < m; ++i) {
    (part[i] == 0 ? split.train : part[i] == 1 ? split.validation : split.test)
        .push_back(edges[i]);
  }
  edges.clear();
  edges.shrink_to_fit();
  part.clear();
  part.shrink_to_fit();

  std::vector<Edge> negatives = SampleNonEdges(graph, non_edges, m, rng);
  auto first = negatives.begin();
  split.train_negative.assign(first, first + n_train);
  split.validation_negative.assign(first + n_train, first + n_train + n_val);
  split.test_negative.assign(first + n_train + n_val, negatives.end());
  for (auto* list : {&split.train_negative, &split.validation_negative,
                     &split.test_negative}) {
    std::sort(list->begin(), list->end(), EdgeLess);
  }
  return split;
}

}  // namespace ldpgraph

// Train/validation/test splits of nodes and edges, reproducible by seed
// (the same seed gives the same split on every platform: the shuffles are
// written out, not std::shuffle). Splits are public choices, not privacy
// noise: they use the seeded generator (common/random/random.h), never the secure
// one. Counts round half away from zero; fractions must lie in [0, 1] and
// sum to at most 1 (to within 1e-9, so 0.7 + 0.3 passes); when both counts
// round up past the total, the second part gets what is left.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dataset/dataset.h"
#include "common/graph/graph.h"
#include "common/random/random.h"

namespace ldpgraph {

struct NodeSplit {
  // Node ids, each ascending; disjoint; only labelled nodes (label >= 0).
  std::vector<NodeId> train, validation, test;
};

// A uniformly random split of the labelled nodes: round(train_fraction * L)
// for training, round(validation_fraction * L) for validation, the rest for
// testing (L labelled nodes). Fractions in [0, 1] with sum <= 1, else
// INVALID_ARGUMENT naming the fraction. The papers' default is 0.5 / 0.25
// (/ 0.25).
absl::StatusOr<NodeSplit> RandomNodeSplit(absl::Span<const int32_t> labels,
                                          double train_fraction,
                                          double validation_fraction,
                                          uint64_t seed);

// The fixed Planetoid split of cora, citeseer and pubmed (by meta.name and
// node count; see ../shared/datasets/README.md): cora 0-139 / 140-639 /
// 1708-2707, citeseer 0-119 / 120-619 / labelled nodes of 2312-3326 (1000:
// its 15 unlabelled nodes all lie in that range), pubmed 0-59 / 60-559 /
// 18717-19716. Unlabelled nodes are left out of every list. Recognised by
// meta.name ("cora", "citeseer", "pubmed") with the matching meta.nodes and
// label count; FAILED_PRECONDITION for any other dataset.
absl::StatusOr<NodeSplit> PlanetoidSplit(const Dataset& d);

// True for the datasets PlanetoidSplit knows.
bool HasPlanetoidSplit(const Dataset& d);

struct EdgeSplit {
  // Positive edges (u < v), disjoint, together every edge of the graph
  // except self loops. Every list, negatives included, is sorted by (u, v).
  std::vector<Edge> train, validation, test;
  // Non-edges (u < v, not an edge of the full graph, no self loops), as many
  // as the positives of each part, all distinct across the three parts.
  std::vector<Edge> train_negative, validation_negative, test_negative;
};

// Appends uniformly random non-edges of g to *out (empty on entry) until it
// holds `count`: pairs u < v, no self loop, no edge of g, none twice. Each
// try draws u then v from rng, so a seed fixes the list. Rejection
// sampling: the caller keeps count at most half the non-edges, where a try
// succeeds with probability >= 1/3 (else it may not end).
void DrawRandomNonEdges(const Graph& g, size_t count, PublicRandom& rng,
                        std::vector<Edge>* out);

// A uniformly random edge split: round(validation_fraction * m) validation
// edges, round(test_fraction * m) test edges, the rest for training (m
// edges, self loops excluded), with an equal number of sampled non-edges per
// part. The papers' default is 0.05 / 0.10 (85/5/10). INVALID_ARGUMENT for
// bad fractions; FAILED_PRECONDITION if the graph has too few non-edges.
// The training graph is graph.WithoutEdges(validation + test). Non-edges
// are drawn uniformly without replacement; expected O(n + m) time (about
// 2 s for 1M nodes and 5M edges).
absl::StatusOr<EdgeSplit> RandomEdgeSplit(const Graph& graph,
                                          double validation_fraction,
                                          double test_fraction,
                                          uint64_t seed);

}  // namespace ldpgraph

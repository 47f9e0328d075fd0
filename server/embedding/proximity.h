// Node proximities of a graph, sparse: what SE-PrivGEmb draws negatives by
// and what DPNE factorises. Nothing here builds an n x n dense matrix.
//
// P is the random-walk transition matrix, P(i, j) = 1 / d_i for every edge
// {i, j} (an isolated node has an all-zero row). The DeepWalk proximity of
// window 2 is M = (P + P^2) / 2 ("DPNE: Differentially Private Network
// Embedding", Eq. 3 with t = 2).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/graph/graph.h"
#include "common/matrix.h"
#include "common/names.h"

namespace ldpgraph::embedding {

enum class Proximity {
  kDegree,    // s(j) = d_j
  kDeepWalk,  // s(j) = sum_i M(i, j), M = (P + P^2) / 2
  kUniform,   // s(j) = 1: independent of the graph
};

// The names "degree", "deepwalk" and "uniform" (--proximity); Parse fails
// with INVALID_ARGUMENT "proximity must be one of degree, deepwalk,
// uniform, got '<name>'".
inline constexpr auto kProximityNames = MakeNameTable<Proximity>(
    "proximity", {{Proximity::kDegree, "degree"},
                  {Proximity::kDeepWalk, "deepwalk"},
                  {Proximity::kUniform, "uniform"}});
inline absl::StatusOr<Proximity> ParseProximity(absl::string_view name) {
  return kProximityNames.Parse(name);
}
inline absl::string_view ProximityName(Proximity p) {
  return kProximityNames.Name(p);
}

// The proximity mass of every node, s(j) = sum_i S(i, j): the negative
// sampling weights of SE-PrivGEmb ("Structure-Preference Enabled Graph
// Embedding Generation under Differential Privacy", Theorem 3). O(n + m)
// time and memory for every kind (the column sums of P and P^2 come from
// two passes over the adjacency, M is never formed).
std::vector<double> ProximityMass(const Graph& g, Proximity p);

// M = (P + P^2) / 2 in compressed sparse rows (n x n, row i ascending),
// only the non-zero entries: row i holds the nodes within two steps of i.
// O(sum_v d_v^2) time, memory proportional to the non-zeros. Self loops in
// g are treated as edges (the caller decides whether to keep them).
SparseRows WalkProximityMatrix(const Graph& g);

}  // namespace ldpgraph::embedding

// Node proximities of a graph, sparse: what SE-PrivGEmb draws negatives by
// and what DPNE factorises. Nothing here builds an n x n dense matrix.
//
// P is the random-walk transition matrix, P(i, j) = 1 / d_i for every edge
// {i, j} (an isolated node has an all-zero row). The DeepWalk proximity of
// window 2 is M = (P + P^2) / 2 ("DPNE: Differentially Private Network
// Embedding", Eq. 3 with t = 2).
#pragma once

#include <vector>

#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "server/embedding/release_config.h"

namespace ldpgraph::embedding {

// Proximity (the kinds below) and its names: release_config.h.

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

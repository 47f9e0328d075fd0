// Link-inference attacks on a released node classifier: an adversary who
// sees what the curator releases about a model trained over the graph tries
// to tell which node pairs are edges of the true graph. `ldpgraph edges`
// runs them on every cell of its grid, to measure what a graph released
// under edge LDP still gives away.
//
//  similarity  every node's class posteriors are released; a pair (u, v)
//              scores the cosine similarity of u's and v's posteriors
//              (homophily makes linked nodes' posteriors alike).
//  linkteller  LinkTeller's influence attack (Wu, Yang, Pan and Yuan, IEEE
//              S&P 2022; server/training/linkteller.h): the adversary
//              queries the released model, which answers over the graph it
//              was trained on, with input features of its choice, and
//              scores how far one node's input moves another's posteriors.
//
// Each attack scores the same pairs, every true edge against sampled true
// non-edges; its figure is the ROC-AUC of the edges' scores against the
// non-edges' (0.5: nothing revealed). The samples come from PublicRandom:
// public randomness, the same for every model attacked.
//
// These attacks need the trained model and the pipeline's run, hence a
// server library; the attackers among the agents (poisoning) live in
// common/attacks/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::link_inference {

// `count` distinct non-edges {u, v}, u < v, of g, uniform among all
// non-edges, from PublicRandom(seed) (public randomness); fewer if g has
// fewer non-edges.
std::vector<Edge> SampleNonEdges(const Graph& g, size_t count, uint64_t seed);

// The similarity attack: score(u, v) = cosine similarity of rows u and v of
// outputs; the ROC-AUC of the scores of every edge of truth against those
// of non_edges. INVALID_ARGUMENT if outputs has fewer rows than truth's
// nodes, or either list is empty.
absl::StatusOr<double> SimilarityAttackAuc(const Graph& truth,
                                           const DenseMatrix& outputs,
                                           const std::vector<Edge>& non_edges);

// LinkTeller's influence attack on a trained run: the adversary queries the
// released model (r.node_model over `graph`, after c.feature_steps KProp
// steps as c propagates) with the curator's estimated features
// (r.node_features), each source's row scaled in turn. Every direction
// (source s, other end t) of an evaluated pair whose source is in `sources`
// (every node when null) is one scored item, I(s -> t): the ROC-AUC of the
// items of the edges of truth against those of non_edges. INVALID_ARGUMENT
// if r kept no model or features (PipelineConfig::keep_node_model), if
// either side has no item, or as SimilarityAttackAuc. threads >= 1 (results
// do not depend on it).
absl::StatusOr<double> LinkTellerAttackAuc(const Graph& truth,
                                           const std::vector<Edge>& non_edges,
                                           const Graph& graph,
                                           const pipeline::PipelineConfig& c,
                                           const pipeline::RunResult& r,
                                           const std::vector<bool>* sources,
                                           int threads);

// The flags of LinkTeller's sources: `count` of n nodes drawn uniformly
// without replacement from PublicRandom(seed-derived), or every node when
// count is 0 or >= n.
std::vector<bool> LinkTellerSources(size_t n, uint32_t count, uint64_t seed);

}  // namespace ldpgraph::link_inference

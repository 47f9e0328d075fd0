// Synthetic datasets: a degree-corrected stochastic block model with planted
// classes and sparse class-correlated features. Deterministic by seed (the
// same options give byte-identical files on any machine and thread count).
// The quick start's default dataset comes from here.
//
// The model (GeneratorOptions names the knobs):
//
//  * Classes. A seeded shuffle of the nodes; the node at shuffled position p
//    gets class p mod classes, so class sizes differ by at most 1.
//
//  * Degree propensities. theta_v = min(sqrt(nodes), (1 - u)^(-1/(g - 1)))
//    (rounded to a multiple of 2^-16) with u uniform on [0, 1): a Pareto law with x_min = 1 and tail exponent
//    g = degree_exponent (P(theta > x) = x^-(g-1), so the degree tail decays
//    like k^-g), capped at sqrt(nodes) times the minimum so the largest
//    expected degree stays sane (about avg_degree * sqrt(nodes) / 3 at g =
//    2.5). degree_exponent = 0 switches the correction off (theta_v = 1: a
//    plain SBM). theta is then normalised to mean 1 within each class.
//
//  * Edges. m = round(nodes * avg_degree / 2) distinct undirected edges, no
//    self loops. Exactly m_in = round(m * homophily) of them join two nodes
//    of the same class (so the realised edge homophily is m_in / m, within
//    1 / (2m) of the option) and m - m_in join different classes. m_in is
//    split over the classes in proportion to their numbers of node pairs
//    (largest remainder). Inside class c an edge is drawn as two endpoints
//    chosen independently with probability proportional to theta within c;
//    an inter-class edge as u chosen by theta among all nodes and v by theta
//    among the nodes of other classes (by rejection). Self loops are
//    rejected; repeated edges are removed (sort + unique) and the missing
//    ones redrawn, in rounds, until each block holds exactly its quota. So
//    P({u, v}) is proportional to theta_u * theta_v within a block, and the
//    expected degree of v is proportional to theta_v.
//
//  * Features. features = d dimensions. A seeded permutation of the
//    dimensions is cut into topics of t = max(1, floor(d / classes))
//    consecutive entries: class c owns permutation positions
//    [c t, (c + 1) t) (modulo d, so topics overlap when d < classes; the
//    d - classes * t dimensions left over belong to no topic). Node v of
//    class c gets r_v distinct non-zero dimensions, r_v uniform on
//    [ceil(r / 2), floor(3 r / 2)] clipped to [1, d], r = features_per_node.
//    Each is drawn from c's topic (uniformly) with probability topic_weight,
//    else uniformly from all d dimensions; a draw that repeats a dimension
//    already taken is redrawn uniformly from all d. Each value is
//    k / 1000 with k uniform on 1..1000, so every stored value lies in
//    (0, 1] and meta.feature_range = [0, 1]. Indices are strictly ascending.
//
//  * Randomness. Three independent PublicRandom streams derived from seed
//    (classes, graph, features), so e.g. changing features_per_node leaves
//    the graph unchanged. Single-threaded, with only integer arithmetic and
//    correctly rounded IEEE-754 double operations (the build uses ISO C++,
//    so no FMA contraction), except std::pow for theta: its result is
//    rounded to a multiple of 2^-16, so a C library whose pow differs in
//    the last bit changes a node's theta with probability about 2^-36.
//
// Cost: O(nodes + m log m + nnz log r) time. One million nodes at average
// degree 10 with 128 features (5M edges, 20M non-zeros) take about 2 s and
// 230 MB on one core (Release build); writing the files about 1.2 s more.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset.h"

namespace ldpgraph {

// Bump when the model changes so that the same options give different data;
// recorded in meta.generator_json as "generator_version".
inline constexpr int kGeneratorVersion = 1;

struct GeneratorOptions {
  // Number of nodes: >= 2 * classes and < 2^31.
  size_t nodes = 0;
  // Number of planted classes (the labels 0..classes-1): >= 2.
  int classes = 0;
  // Feature dimension d: >= 1.
  int features = 0;
  // Target mean degree (2 * edges / nodes): finite, > 0, < nodes - 1, and
  // small enough that no block (one class's pairs, or all pairs across
  // classes) has to hold more than half of its possible edges.
  double avg_degree = 0;
  // Fraction of edges whose endpoints share a class: in [0, 1].
  double homophily = 0;
  uint64_t seed = 0;

  // Tail exponent g of the degree propensities: 0 (no degree correction) or
  // in (2, 100]. Real social and citation graphs have g around 2 to 3.
  double degree_exponent = 2.5;
  // Mean number of non-zero features per node, in [1, features]; unset
  // means min(features, max(1, round(features / 4))) capped at 20.
  std::optional<int> features_per_node;
  // Probability that a non-zero is drawn from the node's class topic rather
  // than from all dimensions: in [0, 1]. The strength of the feature signal.
  double topic_weight = 0.4;
};

// The defaults of `ldpgraph generate` (and of the quick start's dataset):
// 3000 nodes, 6 classes, 64 features, average degree 10, homophily 0.8,
// seed 1, degree exponent 2.5, features_per_node unset (16), topic weight
// 0.4. Chosen by experiment so that privacy visibly costs accuracy and
// propagation over the graph visibly recovers part of it. Softmax
// regression trained on a random half of the nodes and tested on the other
// half (5 splits, seeds 1-3) scored: raw features 0.74-0.76; features
// perturbed by HDS-like k = 1 reports at epsilon 1 (one uniformly chosen
// dimension of the [-1, 1]-scaled vector plus Laplace(2) noise, times d,
// zeros elsewhere) 0.16-0.17, i.e. chance (1/6); the same reports after 10
// steps of personalised-PageRank smoothing (sum_l a (1-a)^l P^l X, a = 0.1,
// P the row-normalised adjacency) 0.68-0.70. For reference: raw features
// smoothed 0.98; pure Gaussian noise smoothed (the graph alone) 0.53.
GeneratorOptions DefaultGeneratorOptions();

// features_per_node resolved (the auto rule applied when unset). Requires
// o.features >= 1.
int ResolvedFeaturesPerNode(const GeneratorOptions& o);

// OK, or INVALID_ARGUMENT whose message starts with the option's name
// ("nodes", "classes", "features", "avg_degree", "homophily",
// "degree_exponent", "features_per_node", "topic_weight") and states the
// rule that failed.
absl::Status ValidateGeneratorOptions(const GeneratorOptions& o);

// Called after each phase ("classes", "edges", "graph", "features") with
// the seconds it took.
using GeneratorProgress =
    std::function<void(absl::string_view phase, double seconds)>;

// Generates the dataset. meta.name is "generated", meta.source "ldpgraph
// generate", meta.feature_range [0, 1], and meta.generator_json records the
// options (features_per_node resolved) and kGeneratorVersion as one JSON
// object. Every node is labelled. Errors: those of ValidateGeneratorOptions;
// INTERNAL if edge placement fails to converge (not expected for valid
// options). progress, when set, is called after each phase.
absl::StatusOr<Dataset> GenerateDataset(const GeneratorOptions& o);
absl::StatusOr<Dataset> GenerateDataset(const GeneratorOptions& o,
                                        const GeneratorProgress& progress);

// The fraction of edges whose two endpoints have the same label (edge
// homophily); edges touching an unlabelled node (-1) count as different.
// 0 for a graph without edges. Requires labels.size() == graph.num_nodes().
double EdgeHomophily(const Graph& graph, absl::Span<const int32_t> labels);

}  // namespace ldpgraph

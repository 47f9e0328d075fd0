// Blink: link local differential privacy by Bayesian estimation (Zhu, Li,
// Hu, Chen and Xu, "Blink: Link Local Differential Privacy in Graph Neural
// Networks via Bayesian Estimation", CCS 2023). Each node reports its
// adjacency row by randomized response and its degree with Laplace noise;
// the curator fits a beta-model prior to the noisy degrees, combines it with
// both endpoints' reported bits into a posterior edge probability q_ij for
// every pair, and releases a graph estimated from the posteriors. No network
// code: `ldpgraph edges` drives it in memory (graph kind "blink"); the
// deployment carries it as MECHANISM_KIND_EDGE_BLINK (the wire codec checks
// specs and reports with BlinkClient, agents report through it, the
// curator's stages run EstimateBlinkGraph over the reporting nodes).
//
// The node's side, its budget split (eps_d = delta eps for the degree,
// eps_a = (1 - delta) eps for the bits) and its report are a mechanism like
// the others, below the wire codec: common/mechanisms/edge_blink.h
// (BlinkParams, BlinkReport, BlinkClient, also named here as edges::).
// This file is the curator's side.
//
// Curator (EstimateBlinkGraph):
//  1. d_i = noisy degree clipped to [1, n - 2].
//  2. Prior by the beta model (Chatterjee, Diaconis and Sly, "Random graphs
//     with a given degree sequence", 2011), maximum likelihood: the fixed
//     point of beta <- phi(beta),
//        phi(beta)_i = log d_i - log sum_{j != i} 1 / (e^-beta_j + e^beta_i),
//     from beta = 0 (FitBetaModel), which solves
//        d_i = sum_{j != i} sigmoid(beta_i + beta_j);
//     prior pi_ij = sigmoid(beta_i + beta_j).
//  3. Posterior from x = a_ij + a_ji in {0, 1, 2} (both reported bits):
//        P(x | edge)    = p^2, p(1-p), (1-p)^2   for x = 0, 1, 2
//        P(x | no edge) = (1-p)^2, p(1-p), p^2
//        q_ij = P(x|edge) pi / (P(x|edge) pi + P(x|no edge) (1 - pi)),
//     equivalently logit q_ij = beta_i + beta_j + 2 eps_a (x - 1).
//  4. The graph (BlinkVariant):
//        hard  every pair with q_ij > 1/2, i.e. logit > 0;
//        topk  the K pairs of largest q_ij, K = round(sum over all pairs of
//              q_ij), the expected number of edges: exactly the pairs whose
//              logit exceeds the (K+1)-th largest logit, so ties at the
//              boundary are left out (fewer than K edges then, never more).
//        hybrid  topk's pairs, each weighted by its posterior q_ij
//              (Graph::FromWeightedEdges; q_ij = sigmoid(logit) > 0), the
//              paper's hybrid graph, whose weights a GCN aggregates with
//              (BuildGraphOperators on a weighted graph).
//     hard and topk release unweighted graphs.
//
// Cost without any n x n matrix: pairs with x >= 1 are the union of the
// reports (sorted pair keys; a pair in both reports has x = 2). A pair with
// x = 0 has a logit that depends only on beta_i + beta_j, so the x = 0 pairs
// above a threshold are enumerated output-sensitively over the nodes sorted
// by beta (skipping reported pairs), their number is counted in O(n) by two
// pointers, and the topk threshold is found by bisection on that count over
// the ordered doubles (64 steps, each O(n + reported pairs)). The sum of q
// over x = 0 pairs is the sum over all pairs (PairSums, as in the prior)
// minus that over reported pairs. Memory O(n + reported entries + output).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/graph/graph.h"
#include "common/mechanisms/edge_blink.h"
#include "common/names.h"
#include "common/random/random.h"

namespace ldpgraph::edges {

// How the curator turns posteriors into a graph (see the file comment).
enum class BlinkVariant { kHard, kTopK, kHybrid };
inline constexpr auto kBlinkVariantNames = MakeNameTable<BlinkVariant>(
    "blink variant", {{BlinkVariant::kHard, "hard"},
                      {BlinkVariant::kTopK, "topk"},
                      {BlinkVariant::kHybrid, "hybrid"}});

// The node's side (common/mechanisms/edge_blink.h), under this namespace
// too.
using ::ldpgraph::BlinkClient;
using ::ldpgraph::BlinkParams;
using ::ldpgraph::BlinkReport;

// How sums over all other nodes are evaluated (PairSums, FitBetaModel).
struct PairSumOptions {
  // Exact O(n^2) sums up to this many nodes, the histogram above it.
  uint32_t exact_max_nodes = 8192;
  // Histogram bins over [min beta, max beta] (>= 1).
  int bins = 2048;
};

struct PairSumResult {
  std::vector<double> sums;
  bool exact = true;
  // Histogram only (0 when exact): with h the bin width in beta,
  //   epsilon_h = e^h (e^h - 1)^2 / 4,
  // and for every i
  //   |sums_i - exact_i| <= epsilon_h * (exact_i + 1 / (e^-beta_i + b_i)),
  // the approximation never exceeding the exact value.
  double relative_bound = 0;
};

// sums_i = sum_{j != i} 1 / (e^-beta_j + b_i) for every i (beta and b of
// equal length n >= 2, all finite, b > 0). Then b_i * sums_i is
// sum_{j != i} sigmoid(log b_i + beta_j). Exact when n <= exact_max_nodes,
// O(n^2); otherwise each bin's nodes are replaced by their count at the mean
// of e^-beta_j in the bin, O(n * bins): by convexity of 1 / (a + b) the error
// is at most sum_j (a_j - mean)^2 / (a_min + b)^3, which gives the bound
// above. The caller checks the inputs (an internal building block).
PairSumResult PairSums(absl::Span<const double> beta,
                       absl::Span<const double> b,
                       const PairSumOptions& options);

struct BetaFitOptions {
  int max_iterations = 200;  // >= 1
  // Stop when an iteration moves no beta_i by more than this (>= 0): when
  // max_i |phi(beta)_i - beta_i| <= tolerance.
  double tolerance = 1e-9;
  // Anderson acceleration of the fixed point with this many past steps, in
  // [0, 20]; 0 runs the plain iteration beta <- phi(beta). See FitBetaModel.
  int anderson_memory = 5;
  PairSumOptions sums;
  absl::Status Validate() const;
};

struct BetaFit {
  std::vector<double> beta;
  int iterations = 0;
  bool converged = false;  // stopped by the tolerance, not the cap
  bool exact_sums = true;
  double sum_relative_bound = 0;  // PairSumResult::relative_bound, last step
  // max_i |d_i - sum_{j != i} sigmoid(beta_i + beta_j)| at the result.
  double max_degree_residual = 0;
};

// The beta model's maximum-likelihood fit to degrees (each finite, in
// [1, n - 2], n >= 3; INVALID_ARGUMENT naming the first that is not) by the
// fixed-point iteration of the file comment, from beta = 0.
//
// The plain iteration contracts slowly when the degrees are skewed (hubs):
// about 1,100 iterations on cora's noisy degrees and 3,000 on pubmed's.
// With anderson_memory m > 0 each step is Anderson's (type II, Walker and
// Ni, "Anderson acceleration for fixed-point iterations", 2011): with
// f_k = phi(x_k) - x_k and the last m differences dF, dG of f and phi,
//   x_{k+1} = phi(x_k) - dG gamma,  gamma = argmin ||f_k - dF gamma||_2
// (an m x m least-squares solve, O(n m^2) per step beside the O(n^2) or
// O(n bins) of phi). A step whose residual max_i |f_i| exceeds twice the
// smallest seen forgets the history and takes the plain step, so the
// accelerated fit never does worse for long than the plain one. Either way
// the fit stops at the same fixed point and the same tolerance, and beta is
// the last phi(x_k). Every beta_i is
// kept in [-50, 50] so that a degree sequence no graph realises (noisy
// degrees can be one) cannot overflow; such a fit stops at the cap and says
// so (converged false, a large residual).
absl::StatusOr<BetaFit> FitBetaModel(absl::Span<const double> degrees,
                                     const BetaFitOptions& options);

// The posterior of one pair: q = P(x|edge) prior / (P(x|edge) prior +
// P(x|no edge) (1 - prior)) with flip probability p = 1 / (1 + e^eps_a).
// x in {0, 1, 2}, prior in [0, 1], eps_a > 0 (the caller's contract).
double BlinkPosterior(int x, double prior, double adjacency_epsilon);

// logit q_ij = (beta_i + beta_j) + 2 eps_a (x - 1), evaluated in exactly
// this order everywhere (the sparse and any brute-force construction agree
// bit for bit).
inline double BlinkLogit(double beta_i, double beta_j, int x,
                         double adjacency_epsilon) {
  return (beta_i + beta_j) + 2.0 * adjacency_epsilon * (x - 1);
}

struct BlinkEstimateOptions {
  BlinkVariant variant = BlinkVariant::kHard;
  BetaFitOptions beta;
};

struct BlinkEstimate {
  Graph graph;
  BetaFit prior;
  std::vector<double> degrees;  // the clipped noisy degrees d_i
  uint32_t clipped_low = 0;     // noisy degrees raised to 1
  uint32_t clipped_high = 0;    // noisy degrees lowered to n - 2
  uint64_t reported_pairs = 0;  // pairs with x >= 1
  uint64_t both_reported_pairs = 0;  // pairs with x = 2
  double expected_edges = 0;    // sum over all pairs of q_ij
  uint64_t target_edges = 0;    // topk and hybrid: K; hard: 0
  // The logit threshold: the graph is every pair with logit > threshold
  // (0 for hard).
  double threshold = 0;
  uint64_t graph_reported_edges = 0;  // edges of the graph with x >= 1
};

// The curator's estimate on n = nodes >= 3 from every node's report
// (reports.size() == n, report v from node v; each list strictly ascending,
// in [0, n), not the node itself; every noisy degree finite).
// INVALID_ARGUMENT naming the node and the fault, or the bad parameter.
absl::StatusOr<BlinkEstimate> EstimateBlinkGraph(
    const BlinkParams& params, uint32_t nodes,
    absl::Span<const BlinkReport> reports,
    const BlinkEstimateOptions& options);

}  // namespace ldpgraph::edges

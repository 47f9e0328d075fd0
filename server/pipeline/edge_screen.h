// The edge-consistency screen: a curator-side defence against nodes that
// poison their edge reports (Defences::edge_consistency, `--defence
// edge-consistency`), for randomized response on the neighbour bits
// (EdgeRandomizedResponse) and Blink (common/edges/blink.h).
//
// The attack it answers: the fake-edges attacker
// (common/attacks/edge_poisoning.h), whose nodes claim edges to victims
// and, under Blink, the largest noisy degree, so that the curator's graph
// wires the victims to them (a hub under Blink's beta model).
//
// What an honest report is. Node i reports every bit a_ij of its row (j != i)
// through randomized response: flipped with probability p = 1 / (1 + e^eps_a)
// (eps_a = eps_e for randomized response, (1 - delta) eps_e for Blink),
// independently of every other bit and node. Under Blink it also reports
// deg(i) + g Z, Z discrete Laplace with P(z) ~ e^{-g eps_d |z|} on the grid
// g (eps_d = delta eps_e). Two statistics then have laws the curator knows
// whatever the graph:
//
//  1. Degree against bits (Blink only; run first). b_i = |i's report|
//     counts ones over all n - 1 bits: b_i = (n-1)p + d_i(1 - 2p) + S_i,
//     S_i = sum_j s_j (F_j - p) with F_j ~ Bernoulli(p) the flips and
//     s_j = +-1 (+ for a non-edge). So deg_bits_i = (b_i - (n-1)p) /
//     (1 - 2p) = d_i + S_i / (1 - 2p), and noisy_i - deg_bits_i = g Z -
//     S_i / (1 - 2p). The bound is the sum of two tails at L/2 each:
//       bits (Bernstein, the terms bounded by 1 - p, variance
//       s2 = (n-1) p (1-p), whatever d_i):
//         P(|S| >= t) <= 2 exp(-t^2 / (2 s2 + 2 (1-p) t / 3)),
//         t_b = l (1-p)/3 + sqrt((l (1-p)/3)^2 + 2 l s2), l = ln(4 / L);
//       degree noise: P(|g Z| > t) = 2 r^(floor(t/g)+1) / (1 + r) with
//         r = e^{-g eps_d}, <= 2 e^{-eps_d t}; t_l = ln(4 / L) / eps_d.
//     Flag i when |noisy_i - deg_bits_i| > T_d = t_l + t_b / (1 - 2p):
//     P(false flag) <= L/2 + L/2 = L. Two-sided: a degree claimed too low is
//     as inconsistent as one too high. A node flagged here is no evidence
//     for check 2 (as a non-reporter).
//
//  2. One-sided claims. c_i = #{j : i reports j and j does not report i},
//     over the reporting nodes j not yet flagged. For each pair the two
//     bits are independent randomized responses of the same true bit e, so
//       P(a_ij = 1, a_ji = 0) = (1-p) p  if e = 1,   p (1-p)  if e = 0:
//     p(1-p) either way, and pairs are independent: among m' such nodes,
//       c_i ~ Binomial(m' - 1, p(1 - p)) exactly.
//     The test is T_c(m') = BinomialUpperQuantile(m' - 1, p(1-p), L) (the
//     tail summed exactly, common/dp/tails.h): P(c_i > T_c) <= L. It peels:
//     while some unflagged node has c_i > T_c(m'), the node with the largest
//     c_i (the lowest id on a tie) is flagged and leaves the m' nodes, the
//     counts of the nodes whose claims towards it it had denied drop by one,
//     and T_c is taken again at the smaller m'. Why peel: a fake-edges node
//     denies its true edges (its bits are noise of 0), so an honest node
//     with many malicious neighbours accumulates unconfirmed claims; once
//     its deniers are flagged they are no evidence against it. The first
//     flag is the one-shot test's, so with honest reports only the peeling
//     never starts with probability >= 1 - (sum of the levels).
//
// Levels: Bonferroni over the m reporting nodes and the K checks applied
// (K = 1 for randomized response, 2 for Blink): L = alpha / (K m), kept at
// the first m while peeling. With honest reports only, nothing is flagged
// with probability >= 1 - alpha.
//
// A node that did not report is no evidence: it is left out of every c_i
// (and of m), and is never flagged. The curator then treats a flagged node
// as one that did not report (private_edges.h): its edge report is dropped
// and it is isolated in the estimated graph.
//
// What it does not catch, or costs:
//  - randomized response: the fake-edges attacker's excess of one-sided
//    claims is about V (1 - p)^2 for V victims, against a spread of
//    sqrt((m-1) p (1-p)): at eps_e = 1 on cora (p = 0.27, sd 23) 50 victims
//    add 27 and go unseen; at eps_e = 8 (p = 3e-4) they stand out;
//  - Blink: an attacker that claims a degree consistent with its bits
//    (about V (1-p) / (1 - 2p)) passes check 1, and then gains only what its
//    bits give it (the beta model no longer makes it a hub);
//  - an honest node whose true neighbours include attackers that check 1
//    did not catch and the peeling did not remove carries their denials in
//    c_i, beyond the bound (which holds when every reporting node is
//    honest): collateral, rare unless it has many such neighbours at a
//    large eps_e.
// Cost: O(total reported entries * log(row length)) time for the counts,
// O(flagged * n) for the peeling, and the reports' transposed lists
// (another entry per reported entry) in memory. Nothing of size n x n.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dp/tails.h"
#include "server/pipeline/edges_config.h"

namespace ldpgraph::pipeline {

// The screen's public parameters.
struct EdgeScreenParams {
  uint32_t nodes = 0;             // n >= 2
  double flip_probability = 0;    // p = 1 / (1 + e^eps_a), in (0, 1/2)
  // Blink: eps_d, finite and > 0 (the degree check); unset for randomized
  // response (no degree is reported).
  std::optional<double> degree_epsilon;
  double alpha = kDefaultEdgeScreenAlpha;  // in (0, 1)

  // INVALID_ARGUMENT naming the parameter and its rule.
  absl::Status Validate() const;
};

// Every node's edge report as the curator holds it.
struct EdgeReports {
  // neighbours[v]: v's reported list (strictly ascending, each < n, never
  // v), size n. A node that did not report holds an empty list.
  std::vector<std::vector<uint32_t>> neighbours;
  // reported[v]: whether v reported; empty means every node did.
  std::vector<bool> reported;
  // Blink: every node's noisy degree (size n, finite for reporters);
  // empty for randomized response.
  std::vector<double> noisy_degrees;
};

struct EdgeScreenResult {
  double alpha = kDefaultEdgeScreenAlpha;
  uint32_t nodes = 0;      // n
  uint32_t reporters = 0;  // m
  double flip_probability = 0;
  int checks = 1;          // K: 1 (randomized response) or 2 (Blink)
  // Check 1 (Blink): |noisy_i - deg_bits_i| > degree_threshold flags i.
  bool degree_check = false;
  double degree_epsilon = 0;
  double degree_level = 0;      // per node, split half and half below
  double bits_bound = 0;        // t_b (in bits)
  double noise_bound = 0;       // t_l (in degrees)
  double degree_threshold = 0;  // t_l + t_b / (1 - 2p)
  // noisy_i - deg_bits_i of every node (0 for non-reporters), and the
  // largest absolute value.
  std::vector<double> degree_gap;
  double max_degree_gap = 0;
  std::vector<uint32_t> degree_flagged;  // ascending
  // Check 2, at one_sided_level per node: T_c over the nodes left after
  // check 1 (one_sided_threshold, the largest) and at the end of the
  // peeling (one_sided_last_threshold).
  double one_sided_level = 0;
  uint64_t one_sided_threshold = 0;
  uint64_t one_sided_last_threshold = 0;
  double one_sided_mean = 0;  // (m' - 1) p (1 - p) before the peeling
  // c_i of every node: at the time it was flagged for the nodes check 2
  // flagged, at the end of the peeling for the others (0 for non-reporters
  // and the nodes check 1 flagged); the largest of the unflagged nodes.
  std::vector<uint32_t> one_sided;
  uint32_t max_one_sided = 0;
  std::vector<uint32_t> one_sided_flagged;  // ascending
  // Flagged by either check, ascending.
  std::vector<uint32_t> flagged;
};

// Runs the checks (the degree check first, when params.degree_epsilon is
// set) at level params.alpha. INVALID_ARGUMENT for bad params, reports of
// the wrong size (neighbours, reported, or noisy_degrees: size n when the
// degree check runs), a list that is not strictly ascending below n without
// the node itself, or a reporter's noisy degree that is not finite (naming
// the node). Fewer than 2 reporters: nothing to compare, nothing flagged.
absl::StatusOr<EdgeScreenResult> ScreenEdgeReports(
    const EdgeScreenParams& params, const EdgeReports& reports);

// t_b of the file comment: the smallest t with 2 exp(-t^2 / (2 s2 +
// 2 (1-p) t / 3)) <= level, s2 = bits p (1 - p) (Bernstein's two-sided
// bound for a sum of `bits` independent centred Bernoulli(p) terms, each
// signed +-1). p in (0, 1), level in (0, 1).
double BitsDeviationBound(uint64_t bits, double p, double level);

// t_l of the file comment: ln(2 / level) / eps_d, beyond which the
// discrete Laplace degree noise lies with probability <= level.
double DegreeNoiseBound(double degree_epsilon, double level);

// {"screen": "applied", "alpha", "nodes", "reporters", "flip_probability",
//  "checks", "degree" (Blink only): {"epsilon", "level", "bits_bound",
//  "noise_bound", "threshold", "max_gap", "flagged_nodes"}, "one_sided":
//  {"threshold", "last_threshold", "level", "mean", "max",
//  "flagged_nodes"}, "flagged_nodes" (count), "flagged" (the node ids)}.
nlohmann::json EdgeScreenToJson(const EdgeScreenResult& s);

}  // namespace ldpgraph::pipeline

// Poisoning of the edge reports: the fake-edges attacker (AttackKind::
// kFakeEdges, `--attack fake-edges`), in the manner of He et al., "Devil's
// Hand" (2025): malicious nodes under edge LDP claim edges to victims, so
// that the curator's graph wires the victims to nodes whose features and
// labels the attacker chose (their feature and label reports are input's:
// common/attacks/poisoning.h). A SIMULATION of malicious agents, for
// measuring what an attacker gains and what the edge-consistency defence
// (server/pipeline/edge_screen.h) catches; an honest agent never uses it.
//
// Threat model. An attacker controls a set M of the n nodes (their agents
// run its code, colluding) and knows M, n and the public configuration of
// the edges campaign (randomized response at eps_e, or Blink at eps_e with
// its split delta). It does not know the honest nodes' edges or reports,
// the curator's split or its model. Its agents send well-formed reports:
// the mechanism's wire format and domain (every neighbour id < n, never the
// node itself, strictly ascending; Blink's noisy degree finite and on the
// mechanism's grid), so the curator cannot reject them by format
// (EdgeRandomizedResponse::ValidateReport, wire::ValidateEdgeReport); LDP
// hides every honest row, so only their statistics differ.
//
// The crafted reports. Malicious node v draws V victims (--attack-edges,
// default 50; min(V, n - |M|) when fewer nodes are honest) uniformly without
// replacement from the nodes it does not control, from v's own
// RandomSource. Then:
//  - edge randomized response: its reported list is the victims, plus, for
//    every other node, the randomized response of bit 0 (reported with
//    probability p = 1 / (1 + e^eps_e)): the noise an honest row of a node
//    with no edges carries, so its length looks honest (about V + (n-1) p);
//  - Blink (edges::BlinkClient): the same bits at eps_a = (1 - delta) eps_e,
//    and the noisy degree n - 2, the largest the curator accepts (its
//    estimate clips noisy degrees to [1, n - 2], EstimateBlinkGraph). n - 2
//    is an integer, hence on the degree grid (a power of two <= 1). The beta
//    model then gives v the largest beta, a hub: its prior towards every
//    node is high, towards the victims (whose pair carries v's bit)
//    higher still.
// The victims, the coins and the order of the draws: Victims first, then
// the n - 1 randomized-response bits (EdgeRandomizedResponse::Perturb of
// the empty row); a seeded simulation replays them exactly.
//
// What gives it away (edge_screen.h): under Blink the claimed degree n - 2
// disagrees with the ~V(1 - p)/(1 - 2p) edges its bits imply; under either
// mechanism it claims about V(1 - p)^2 more edges than an honest node whose
// other ends deny them, which a one-sided-claims test sees only when that
// excess stands out of the Binomial(n - 1, p(1 - p)) noise (large eps_e, or
// large V).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/edges/blink.h"
#include "common/mechanisms/edge_rr.h"
#include "common/random/random.h"

namespace ldpgraph::poisoning {

// V, the victims each malicious node claims (--attack-edges).
inline constexpr int kDefaultAttackEdges = 50;

// What the fake-edges attacker's agents send in place of honest edge
// reports. Immutable after Create and thread-safe; randomness is supplied
// per call (each node's own source).
class EdgeAdversary {
 public:
  // nodes: n >= 3. malicious: the attacker's nodes, strictly ascending, each
  // < n, fewer than n (at least one honest node to claim). victims: V >= 1.
  // INVALID_ARGUMENT naming the setting and the rule otherwise.
  static absl::StatusOr<std::unique_ptr<EdgeAdversary>> Create(
      uint32_t nodes, std::vector<uint32_t> malicious, int victims);

  uint32_t nodes() const { return nodes_; }
  const std::vector<uint32_t>& malicious() const { return malicious_; }
  // Whether the attacker controls v (v < n).
  bool Controls(uint32_t v) const { return v < nodes_ && controls_[v]; }
  // The number of victims each node draws: min(V, n - |M|).
  uint32_t victims_per_node() const { return victims_; }
  // The noisy degree a crafted Blink report claims: n - 2.
  double claimed_degree() const { return static_cast<double>(nodes_) - 2.0; }

  // The victims of malicious node v: victims_per_node() distinct nodes the
  // attacker does not control, uniformly without replacement, ascending.
  // INVALID_ARGUMENT if the attacker does not control v.
  absl::StatusOr<std::vector<uint32_t>> Victims(uint32_t v,
                                                RandomSource& rng) const;

  // v's crafted randomized-response report under rr (rr.nodes() == n):
  // Victims(v) united with rr.Perturb(v, {}, rng). Valid under
  // rr.ValidateReport. INVALID_ARGUMENT for a node the attacker does not
  // control or an rr over another n.
  absl::StatusOr<std::vector<uint32_t>> CraftRrReport(
      const EdgeRandomizedResponse& rr, uint32_t v, RandomSource& rng) const;

  // v's crafted Blink report for a client of this n (params taken from
  // client): the same bits as CraftRrReport at eps_a, and noisy degree
  // claimed_degree(). Valid as the wire codec checks a Blink report (list
  // as above; degree finite, on client.degree_granularity()'s grid).
  // INVALID_ARGUMENT for a node the attacker does not control.
  absl::StatusOr<edges::BlinkReport> CraftBlinkReport(
      const edges::BlinkClient& client, uint32_t v, RandomSource& rng) const;

 private:
  EdgeAdversary(uint32_t nodes, std::vector<uint32_t> malicious,
                uint32_t victims);

  // The victims joined with v's randomized response of the empty row.
  absl::StatusOr<std::vector<uint32_t>> CraftBits(
      const EdgeRandomizedResponse& rr, uint32_t v, RandomSource& rng) const;

  uint32_t nodes_;
  std::vector<uint32_t> malicious_;
  std::vector<bool> controls_;
  std::vector<uint32_t> honest_;  // the nodes not controlled, ascending
  uint32_t victims_;
};

}  // namespace ldpgraph::poisoning

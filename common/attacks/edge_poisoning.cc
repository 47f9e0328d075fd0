#include "common/attacks/edge_poisoning.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::poisoning {

absl::StatusOr<std::unique_ptr<EdgeAdversary>> EdgeAdversary::Create(
    uint32_t nodes, std::vector<uint32_t> malicious, int victims) {
  if (nodes < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("the fake-edges attack needs n >= 3 nodes, got ", nodes));
  }
  if (victims < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the fake-edges attack needs victims >= 1 per node, got ", victims));
  }
  for (size_t i = 0; i < malicious.size(); ++i) {
    if (malicious[i] >= nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("malicious[", i, "] = ", malicious[i],
                       " out of range [0, ", nodes, ")"));
    }
    if (i > 0 && malicious[i] <= malicious[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "malicious nodes must be strictly ascending: malicious[", i,
          "] = ", malicious[i], " after ", malicious[i - 1]));
    }
  }
  if (malicious.size() >= nodes) {
    return absl::InvalidArgumentError(
        "the fake-edges attack needs an honest node to claim: the attacker "
        "controls every node");
  }
  const uint32_t honest = nodes - static_cast<uint32_t>(malicious.size());
  return std::unique_ptr<EdgeAdversary>(new EdgeAdversary(
      nodes, std::move(malicious),
      std::min<uint32_t>(honest, static_cast<uint32_t>(victims))));
}

EdgeAdversary::EdgeAdversary(uint32_t nodes, std::vector<uint32_t> malicious,
                             uint32_t victims)
    : nodes_(nodes),
      malicious_(std::move(malicious)),
      controls_(nodes, false),
      victims_(victims) {
  for (uint32_t v : malicious_) controls_[v] = true;
  honest_.reserve(nodes_ - malicious_.size());
  for (uint32_t v = 0; v < nodes_; ++v) {
    if (!controls_[v]) honest_.push_back(v);
  }
}

absl::StatusOr<std::vector<uint32_t>> EdgeAdversary::Victims(
    uint32_t v, RandomSource& rng) const {
  if (!Controls(v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", v, " is not the attacker's: it sends an honest report"));
  }
  std::vector<uint32_t> out = rng.SampleWithoutReplacement(
      static_cast<uint32_t>(honest_.size()), victims_);
  // Ascending indices into the ascending honest list: ascending nodes.
  for (uint32_t& i : out) i = honest_[i];
  return out;
}

absl::StatusOr<std::vector<uint32_t>> EdgeAdversary::CraftBits(
    const EdgeRandomizedResponse& rr, uint32_t v, RandomSource& rng) const {
  if (rr.nodes() != nodes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("randomized response over ", rr.nodes(),
                     " nodes; the attacker's graph has ", nodes_));
  }
  ASSIGN_OR_RETURN(std::vector<uint32_t> victims, Victims(v, rng));
  ASSIGN_OR_RETURN(std::vector<uint32_t> noise, rr.Perturb(v, {}, rng));
  std::vector<uint32_t> out;
  out.reserve(victims.size() + noise.size());
  std::set_union(victims.begin(), victims.end(), noise.begin(), noise.end(),
                 std::back_inserter(out));
  // What the curator checks: a crafted report that fails it is a bug here.
  RETURN_IF_ERROR(rr.ValidateReport(v, out));
  return out;
}

absl::StatusOr<std::vector<uint32_t>> EdgeAdversary::CraftRrReport(
    const EdgeRandomizedResponse& rr, uint32_t v, RandomSource& rng) const {
  return CraftBits(rr, v, rng);
}

absl::StatusOr<edges::BlinkReport> EdgeAdversary::CraftBlinkReport(
    const edges::BlinkClient& client, uint32_t v, RandomSource& rng) const {
  // The client's bits: randomized response at eps_a over the n - 1 others
  // (BlinkClient's own EdgeRandomizedResponse, rebuilt for this n).
  ASSIGN_OR_RETURN(auto rr, EdgeRandomizedResponse::Create(
                                client.params().adjacency_epsilon(), nodes_));
  edges::BlinkReport out;
  ASSIGN_OR_RETURN(out.neighbours, CraftBits(*rr, v, rng));
  out.noisy_degree = claimed_degree();
  // On the grid: g is a power of two <= 1, so the integer n - 2 is a
  // multiple of it (and degree / g is exact).
  const double steps = out.noisy_degree / client.degree_granularity();
  if (steps != std::floor(steps)) {
    return absl::InternalError(absl::StrCat(
        "the claimed degree ", out.noisy_degree, " is off the grid of ",
        client.degree_granularity()));
  }
  return out;
}

}  // namespace ldpgraph::poisoning

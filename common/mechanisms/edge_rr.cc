#include "common/mechanisms/edge_rr.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

absl::Status CheckNodeList(const char* what, uint32_t v, uint32_t n,
                           absl::Span<const uint32_t> list) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "[", i, "] = ", list[i], " is out of range [0, ", n, ")"));
    }
    if (list[i] == v) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "[", i, "] is the node itself (", v, ")"));
    }
    if (i > 0 && list[i] <= list[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " must be strictly ascending: position ", i, " has ", list[i],
          " after ", list[i - 1]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<EdgeRandomizedResponse>>
EdgeRandomizedResponse::Create(double epsilon, uint32_t nodes) {
  RETURN_IF_ERROR(ValidateEpsilon(epsilon));
  if (nodes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge randomized response needs n >= 2 nodes, got ", nodes));
  }
  return std::unique_ptr<EdgeRandomizedResponse>(
      new EdgeRandomizedResponse(epsilon, nodes));
}

EdgeRandomizedResponse::EdgeRandomizedResponse(double epsilon, uint32_t nodes)
    : epsilon_(epsilon), nodes_(nodes) {
  const double inv = std::exp(-epsilon);
  q_ = inv / (1.0 + inv);
  p_ = 1.0 / (1.0 + inv);
  log1m_q_ = std::log1p(-q_);
}

absl::Status EdgeRandomizedResponse::ValidateReport(
    uint32_t v, absl::Span<const uint32_t> reported) const {
  if (v >= nodes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", v, " is out of range [0, ", nodes_, ")"));
  }
  return CheckNodeList("report", v, nodes_, reported);
}

absl::StatusOr<std::vector<uint32_t>> EdgeRandomizedResponse::Perturb(
    uint32_t v, absl::Span<const uint32_t> neighbours,
    RandomSource& rng) const {
  if (v >= nodes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", v, " is out of range [0, ", nodes_, ")"));
  }
  RETURN_IF_ERROR(CheckNodeList("neighbours", v, nodes_, neighbours));
  std::vector<uint32_t> out;
  out.reserve(static_cast<size_t>(neighbours.size() * p_ + q_ * nodes_ + 16));
  // Walk positions 0..n-1 by geometric gaps: each position is hit
  // independently with probability q. A hit on a true neighbour or on v is
  // ignored (those bits are decided separately or do not exist); true
  // neighbours are kept with probability p as the walk passes them.
  size_t next_neighbour = 0;
  auto emit_neighbours_below = [&](uint64_t limit) {
    while (next_neighbour < neighbours.size() &&
           neighbours[next_neighbour] < limit) {
      if (rng.Bernoulli(p_)) out.push_back(neighbours[next_neighbour]);
      ++next_neighbour;
    }
  };
  uint64_t pos = 0;
  while (true) {
    // Gap G >= 0 with P(G = g) = (1 - q)^g q: positions skipped before a hit.
    const double u = 1.0 - rng.UniformDouble();  // (0, 1]
    const double gap = std::floor(std::log(u) / log1m_q_);
    if (!(gap < static_cast<double>(nodes_) - static_cast<double>(pos))) break;
    pos += static_cast<uint64_t>(gap);
    emit_neighbours_below(pos);
    const bool is_neighbour = next_neighbour < neighbours.size() &&
                              neighbours[next_neighbour] == pos;
    if (pos != v && !is_neighbour) out.push_back(static_cast<uint32_t>(pos));
    ++pos;
  }
  emit_neighbours_below(nodes_);
  return out;
}

double EdgeRandomizedResponse::UnbiasedBit(bool reported) const {
  return ((reported ? 1.0 : 0.0) - q_) / (p_ - q_);
}

double EdgeRandomizedResponse::EstimateDegree(size_t reported_count) const {
  return (static_cast<double>(reported_count) - q_ * (nodes_ - 1.0)) /
         (p_ - q_);
}

}  // namespace ldpgraph

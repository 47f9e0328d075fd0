#include "common/mechanisms/edge_blink.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/mechanisms/internal/discrete_sampling.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::Status BlinkParams::Validate() const {
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Blink epsilon must be finite and > 0, got ", epsilon));
  }
  if (!(delta > 0 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Blink delta (the degree's share of epsilon) must be in (0, 1), got ",
        delta));
  }
  return absl::OkStatus();
}

double BlinkParams::degree_granularity() const {
  const double lambda = 1.0 / degree_epsilon();
  return std::min(1.0, internal::PowerOfTwoAtLeast(lambda * 0x1.0p-30));
}

absl::StatusOr<std::unique_ptr<BlinkClient>> BlinkClient::Create(
    const BlinkParams& params, uint32_t nodes) {
  RETURN_IF_ERROR(params.Validate());
  if (nodes < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("Blink needs n >= 3 nodes, got ", nodes));
  }
  ASSIGN_OR_RETURN(auto rr, EdgeRandomizedResponse::Create(
                                params.adjacency_epsilon(), nodes));
  return std::unique_ptr<BlinkClient>(new BlinkClient(params, std::move(rr)));
}

BlinkClient::BlinkClient(const BlinkParams& params,
                         std::unique_ptr<EdgeRandomizedResponse> rr)
    : params_(params),
      rr_(std::move(rr)),
      granularity_(params.degree_granularity()) {}

absl::StatusOr<BlinkReport> BlinkClient::Report(
    uint32_t v, absl::Span<const uint32_t> neighbours,
    RandomSource& rng) const {
  BlinkReport out;
  ASSIGN_OR_RETURN(out.neighbours, rr_->Perturb(v, neighbours, rng));
  // deg + g * Z, Z discrete Laplace with P(z) ~ e^{-(g eps_d) |z|}: one edge
  // moves the degree 1/g grid steps, so the loss is eps_d.
  const double noise = static_cast<double>(internal::SampleTwoSidedGeometric(
      granularity_ * params_.degree_epsilon(), rng));
  out.noisy_degree = static_cast<double>(neighbours.size()) + noise * granularity_;
  return out;
}

}  // namespace ldpgraph

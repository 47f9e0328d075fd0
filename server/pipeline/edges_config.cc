#include "server/pipeline/edges_config.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::pipeline {

absl::Status PrivateEdgesConfig::Validate() const {
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge epsilon must be finite and > 0, got ", epsilon));
  }
  if (kind == EdgeMechanism::kBlink) {
    RETURN_IF_ERROR(
        (edges::BlinkParams{.epsilon = epsilon, .delta = blink_delta}
             .Validate()));
    if (blink_iterations < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blink iterations must be >= 1, got ", blink_iterations));
    }
  }
  if (edge_consistency && !(screen_alpha > 0 && screen_alpha < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge screen alpha must be in (0, 1), got ", screen_alpha));
  }
  return absl::OkStatus();
}

double PrivateEdgesConfig::adjacency_epsilon() const {
  return kind == EdgeMechanism::kRr ? epsilon : (1.0 - blink_delta) * epsilon;
}

double PrivateEdgesConfig::flip_probability() const {
  return 1.0 / (1.0 + std::exp(adjacency_epsilon()));
}

nlohmann::json PrivateEdgesConfigToJson(const PrivateEdgesConfig& c) {
  nlohmann::json j;
  j["mechanism"] = std::string(kEdgeMechanismNames.Name(c.kind));
  j["epsilon"] = c.epsilon;
  if (c.kind == EdgeMechanism::kBlink) {
    j["blink_delta"] = c.blink_delta;
    j["blink_variant"] =
        std::string(edges::kBlinkVariantNames.Name(c.blink_variant));
    j["blink_iterations"] = c.blink_iterations;
  }
  j["edge_consistency"] = c.edge_consistency;
  if (c.edge_consistency) j["screen_alpha"] = c.screen_alpha;
  j["max_reported_pairs"] = c.max_reported_pairs;
  return j;
}

}  // namespace ldpgraph::pipeline

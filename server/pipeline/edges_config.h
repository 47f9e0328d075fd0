// The settings of an edges campaign under edge LDP (randomized response or
// Blink) and its edge-consistency screen, as a typed value: what
// `ldpgraph eval --edges`, `ldpgraph edges`, `ldpctl simulate --edges` and
// the curator's graph stage (its screen's public p and eps_d) share. The
// campaign itself is private_edges.h's; this file holds no mechanism code,
// so that a tool that only records the settings (ldpctl) links the
// settings library alone.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "common/edges/blink.h"
#include "common/names.h"

namespace ldpgraph::pipeline {

// The default level alpha of the edge-consistency screen (edge_screen.h).
inline constexpr double kDefaultEdgeScreenAlpha = 1e-3;

// The edge mechanisms of the offline campaign.
enum class EdgeMechanism { kRr, kBlink };
// "rr", "blink" (--edges).
inline constexpr auto kEdgeMechanismNames = MakeNameTable<EdgeMechanism>(
    "edges", {{EdgeMechanism::kRr, "rr"}, {EdgeMechanism::kBlink, "blink"}});

struct PrivateEdgesConfig {
  EdgeMechanism kind = EdgeMechanism::kBlink;
  double epsilon = 1.0;  // eps_e per node, finite and > 0
  // Blink: the degree's share of eps_e in (0, 1), the graph variant, and
  // the cap on the beta model's iterations (>= 1).
  double blink_delta = 0.1;
  edges::BlinkVariant blink_variant = edges::BlinkVariant::kHard;
  int blink_iterations = edges::BetaFitOptions().max_iterations;
  // Defences::edge_consistency: screen the reports at level screen_alpha
  // in (0, 1) before estimating.
  bool edge_consistency = false;
  double screen_alpha = kDefaultEdgeScreenAlpha;
  // The cap on n (n - 1) / 2 * p, the expected number of reported pairs
  // (`ldpgraph edges --max-rr-edges`' default).
  uint64_t max_reported_pairs = 20'000'000;

  // INVALID_ARGUMENT naming the setting and its rule.
  absl::Status Validate() const;
  // eps_a: epsilon for rr, (1 - delta) epsilon for Blink.
  double adjacency_epsilon() const;
  // p = 1 / (1 + e^eps_a).
  double flip_probability() const;
};

// The settings: {"mechanism", "epsilon", and for Blink "blink_delta",
// "blink_variant", "blink_iterations"; "edge_consistency", "screen_alpha"
// (with the screen), "max_reported_pairs"}.
nlohmann::json PrivateEdgesConfigToJson(const PrivateEdgesConfig& c);

}  // namespace ldpgraph::pipeline

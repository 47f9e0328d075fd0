// One call from "release a structure embedding of this graph under central
// DP" to the matrix and what its release costs: what the curator's release
// stage (server/curator/stages.h) and the pipeline (`ldpgraph eval --method
// se-privgemb|dpne`) both run.
//
// The cost is kept as an RDP curve (common/dp/rdp_accountant.h) so that the
// curator's ledger can compose every release made from one graph:
// SE-PrivGEmb's accountant after the steps it took; DPNE's pure epsilon as
// the curve min(eps, alpha eps^2 / 2). Both labels say whose analysis the
// figure is (server/embedding/README.md, "What the guarantee covers").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dp/rdp_accountant.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "common/random/random.h"
#include "server/embedding/dpne.h"
#include "server/embedding/release_config.h"
#include "server/embedding/se_privgemb.h"

namespace ldpgraph::embedding {

// The release methods and their names, ReleaseConfig and
// ValidateReleaseConfig: release_config.h.

struct Release {
  DenseMatrix embedding;  // n x dim, row v = node v
  // Private releases: the cost as an RDP curve on the default grid, and the
  // (epsilon, delta) the method reports for itself.
  std::optional<dp::RdpAccountant> cost;
  double epsilon = 0;
  double delta = 0;
  // Every setting and figure (method, dim, steps, epochs, omega, seconds,
  // noise source, guarantee), as recorded by the curator and printed by
  // `ldpgraph eval --format json`.
  nlohmann::json details;
  double seconds = 0;
};

// Trains c.method on g and returns the released matrix (SE-PrivGEmb: the
// centre vectors W; DPNE: W). noise is the privacy noise (and SE-PrivGEmb's
// secret sampling); init_seed the public initialisation. progress, if
// given, receives one line per epoch or stage.
absl::StatusOr<Release> ReleaseEmbedding(
    const Graph& g, const ReleaseConfig& c, RandomSource& noise,
    uint64_t init_seed,
    std::function<void(absl::string_view)> progress = nullptr);

}  // namespace ldpgraph::embedding

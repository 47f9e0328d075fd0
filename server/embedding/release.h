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
#include "common/matrix.h"
#include "common/names.h"
#include "common/random.h"
#include "common/wire/names.h"
#include "ldpgraph/v1/pipeline.pb.h"
#include "server/embedding/dpne.h"
#include "server/embedding/se_privgemb.h"

namespace ldpgraph::embedding {

// The central-DP release methods: two of the pipeline's methods (the admin
// API's PipelineMethod, proto/ldpgraph/v1/pipeline.proto), numbered as
// there, so that each converts to the other without a table of its own.
enum class ReleaseMethod {
  kSePrivGemb = v1::PIPELINE_METHOD_SE_PRIVGEMB,
  kDpne = v1::PIPELINE_METHOD_DPNE,
};

// The pipeline method of a release method.
constexpr v1::PipelineMethod ToPipelineMethod(ReleaseMethod m) {
  return static_cast<v1::PipelineMethod>(m);
}
// The release method of a pipeline method; nullopt for a method that is
// not a release (privge, lpgnn, UNSPECIFIED, a number the proto lacks).
constexpr std::optional<ReleaseMethod> ReleaseMethodOf(v1::PipelineMethod m) {
  switch (m) {
    case v1::PIPELINE_METHOD_SE_PRIVGEMB:
      return ReleaseMethod::kSePrivGemb;
    case v1::PIPELINE_METHOD_DPNE:
      return ReleaseMethod::kDpne;
    default:
      return std::nullopt;
  }
}

// The names "se-privgemb" and "dpne": the pipeline methods' own
// (wire::kPipelineMethodNames, the one table of the methods' names). Parse
// fails with INVALID_ARGUMENT "release method must be one of se-privgemb,
// dpne, got '<name>'".
inline constexpr auto kReleaseMethodNames = MakeNameTable<ReleaseMethod>(
    "release method",
    {{ReleaseMethod::kSePrivGemb,
      wire::kPipelineMethodNames.Name(
          ToPipelineMethod(ReleaseMethod::kSePrivGemb))},
     {ReleaseMethod::kDpne,
      wire::kPipelineMethodNames.Name(
          ToPipelineMethod(ReleaseMethod::kDpne))}});
inline absl::StatusOr<ReleaseMethod> ParseReleaseMethod(absl::string_view name) {
  return kReleaseMethodNames.Parse(name);
}
inline absl::string_view ReleaseMethodName(ReleaseMethod m) {
  return kReleaseMethodNames.Name(m);
}

struct ReleaseConfig {
  ReleaseMethod method = ReleaseMethod::kSePrivGemb;
  // false: the non-private version (no clipping, no noise), for baselines;
  // epsilon and delta are then ignored.
  bool private_release = true;
  double epsilon = 1.0;
  // SE-PrivGEmb's delta (DPNE is pure epsilon-DP by its paper's analysis).
  double delta = 1e-5;
  // Method settings; their own budget fields are overwritten by epsilon,
  // delta and private_release above.
  SePrivGEmbConfig se_privgemb;
  DpneConfig dpne;
};

// INVALID_ARGUMENT naming the bad setting.
absl::Status ValidateReleaseConfig(const ReleaseConfig& c);

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

// The settings of graph propagation (propagation.h), apart from the
// algorithms: personalised PageRank's options and their validator, and how a
// KProp step weighs neighbours with its names. Their library,
// ldpgraph::propagation_options, is what a caller links to name, check or
// print these settings without propagating (the pipeline's configuration,
// ldpctl); ldpgraph::propagation links it publicly and propagation.h
// includes this header. PPR's settings are read from a command line or an
// admin request (PprOverrides), applied and checked (ApplyPprOverrides) and
// written as JSON (PprOptionsToJson) here alone: `ldpgraph propagate`,
// `ldpgraph eval` and the curator's stages all go through these.
#pragma once

#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cli_args.h"
#include "common/names.h"

namespace ldpgraph {

// Z = sum_{l >= 0} alpha (1 - alpha)^l (D^{r-1} A D^{-r})^l X.
struct PprOptions {
  double alpha = 0.1;   // decay factor, in (0, 1]
  double r = 0.5;       // convolution coefficient, in [0, 1]
  double rmax = 1e-4;   // push threshold on |residue|, > 0 (push only)
  // Push only: multiply rmax by max(1, largest |x|), so that inputs of any
  // magnitude get the same relative accuracy (the bound becomes
  // deg(v)^r * rmax * max(1, max|x|)). Unbiased estimates such as Laplace's
  // reach thousands, where an absolute 1e-4 costs billions of pushes.
  bool relative_rmax = false;
  // Evaluation tolerance of power iteration: it stops once the remaining
  // tail of the series is provably <= tolerance in every entry. > 0.
  double tolerance = 1e-6;
  // Power iteration stops after this many terms even if the tolerance is
  // not reached (PropagationStats::tail_bound then says how far it is).
  int max_iterations = 100000;
  // Worker threads: >= 1, or 0 (the default) for every core
  // (ResolveThreads, common/parallel.h). Results do not depend on it: push
  // hands out whole column blocks, each pushed by one thread in a fixed
  // order; power iteration splits rows, each computed by one thread.
  int threads = 0;
  // Push only: how many feature columns one push moves at once, 1..16
  // (larger values are taken as 16); 0 (default) picks 16 while the scratch
  // space (12 bytes per node and column: float residue, double reserve)
  // stays within 256 MiB per thread, 8 past it (1.4M nodes: 96 bytes a node
  // per thread), or d when smaller. A node is pushed when any of the
  // block's residues exceeds rmax, so wider blocks push more often per
  // column but walk each neighbour list once for all of them. Results
  // depend on it (the push order changes), not on threads.
  int block_columns = 0;
};

// INVALID_ARGUMENT naming the parameter and its rule.
absl::Status ValidatePprOptions(const PprOptions& o);

// The PPR settings a caller gave, each unset unless given: the flags
// --alpha, --r, --rmax and --tolerance, or an admin request's fields.
struct PprOverrides {
  std::optional<double> alpha, r, rmax, tolerance;
  bool any() const { return alpha || r || rmax || tolerance; }
};

// --alpha, --r, --rmax and --tolerance from a command line (unchecked:
// ApplyPprOverrides checks them); INVALID_ARGUMENT for a value that is not
// a number (CliArgs::GetDouble's message).
absl::StatusOr<PprOverrides> ReadPprFlags(const CliArgs& a);

// base with the given settings in place of its own, checked by
// ValidatePprOptions (its INVALID_ARGUMENT, naming the parameter).
absl::StatusOr<PprOptions> ApplyPprOverrides(PprOptions base,
                                             const PprOverrides& given);

// The settings of PPR by push as a JSON object: alpha, r, rmax and
// rmax_scaled_by_max_abs_input (relative_rmax). Threads and the block width
// are how the work is done, not what is computed: left out.
nlohmann::json PprOptionsToJson(const PprOptions& o);

// How a KProp step weighs neighbours: the mean, D^-1 A (LPGNN's paper), or
// the symmetric D^-1/2 A D^-1/2 of LPGNN's published code (no self loops
// unless asked; degrees then count the loop).
enum class KPropNorm { kMean, kSymmetric };

// The names "mean" and "symmetric" (--kprop-norm); Parse fails with
// INVALID_ARGUMENT "KProp normalisation must be one of mean, symmetric,
// got '<name>'".
inline constexpr auto kKPropNormNames = MakeNameTable<KPropNorm>(
    "KProp normalisation",
    {{KPropNorm::kMean, "mean"}, {KPropNorm::kSymmetric, "symmetric"}});
inline absl::StatusOr<KPropNorm> ParseKPropNorm(absl::string_view name) {
  return kKPropNormNames.Parse(name);
}
inline absl::string_view KPropNormName(KPropNorm n) {
  return kKPropNormNames.Name(n);
}

}  // namespace ldpgraph

#include "server/propagation/options.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::Status ValidatePprOptions(const PprOptions& o) {
  if (!(o.alpha > 0.0 && o.alpha <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha must be in (0, 1], got ", o.alpha));
  }
  if (!(o.r >= 0.0 && o.r <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("r must be in [0, 1], got ", o.r));
  }
  if (!(o.rmax > 0.0) || !std::isfinite(o.rmax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rmax must be finite and > 0, got ", o.rmax));
  }
  if (!(o.tolerance > 0.0) || !std::isfinite(o.tolerance)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tolerance must be finite and > 0, got ", o.tolerance));
  }
  if (o.max_iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_iterations must be >= 1, got ", o.max_iterations));
  }
  if (o.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads must be >= 0 (0 = every core), got ", o.threads));
  }
  if (o.block_columns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block_columns must be >= 0 (0 = automatic), got ", o.block_columns));
  }
  return absl::OkStatus();
}

absl::StatusOr<PprOverrides> ReadPprFlags(const CliArgs& a) {
  PprOverrides given;
  ASSIGN_OR_RETURN(given.alpha, a.GetDouble("alpha"));
  ASSIGN_OR_RETURN(given.r, a.GetDouble("r"));
  ASSIGN_OR_RETURN(given.rmax, a.GetDouble("rmax"));
  ASSIGN_OR_RETURN(given.tolerance, a.GetDouble("tolerance"));
  return given;
}

absl::StatusOr<PprOptions> ApplyPprOverrides(PprOptions base,
                                             const PprOverrides& given) {
  if (given.alpha) base.alpha = *given.alpha;
  if (given.r) base.r = *given.r;
  if (given.rmax) base.rmax = *given.rmax;
  if (given.tolerance) base.tolerance = *given.tolerance;
  RETURN_IF_ERROR(ValidatePprOptions(base));
  return base;
}

nlohmann::json PprOptionsToJson(const PprOptions& o) {
  return {{"alpha", o.alpha},
          {"r", o.r},
          {"rmax", o.rmax},
          {"rmax_scaled_by_max_abs_input", o.relative_rmax}};
}

}  // namespace ldpgraph

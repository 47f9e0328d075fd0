#include "server/pipeline/nfr.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/status_macros.h"
#include "server/pipeline/feature_reports.h"

namespace ldpgraph::pipeline {

absl::StatusOr<double> NfrThreshold(const PipelineConfig& c, const Dataset& d,
                                    double tau) {
  if (!(tau >= 0 && tau < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NFR's tau must be in [0, 1), got ", tau));
  }
  if (c.mechanism == "none") {
    return absl::InvalidArgumentError(
        "NFR regularises a mechanism's reports; mechanism none has none");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<FeatureMechanism> m,
                   BuildFeatureMechanism(c, d));
  const double bound = m->EstimateBound();
  if (!std::isfinite(bound)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NFR needs a mechanism whose estimates are bounded (multibit, "
        "onebit, piecewise); ",
        c.mechanism, "'s are not"));
  }
  return bound * tau;
}

void ApplyNfr(double threshold, SparseRows* x, float* fill) {
  for (float& v : x->values) v = NfrShrink(v, threshold);
  if (fill != nullptr) *fill = NfrShrink(*fill, threshold);
}

}  // namespace ldpgraph::pipeline

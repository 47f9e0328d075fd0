// Internal to the curator's stages (stages.cc and the stages_*.cc files it
// was split into): the request checks that more than one stage makes. Not
// for use outside server/curator/.
#pragma once

#include <initializer_list>

#include "absl/status/statusor.h"
#include "ldpgraph/v1/admin.pb.h"
#include "server/pipeline/config.h"

namespace ldpgraph::curator::stages_internal {

// A request's pipeline_method, which must be one of `among`:
// INVALID_ARGUMENT "pipeline_method is unspecified; ..." when unset, and
// "pipeline_method must be one of <among>, got '<name>'" otherwise.
absl::StatusOr<pipeline::Method> RequestMethod(
    v1::PipelineMethod m, std::initializer_list<pipeline::Method> among);

}  // namespace ldpgraph::curator::stages_internal

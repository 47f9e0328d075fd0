// What propagation's files share (ppr_push.cc, ppr_power.cc,
// aggregation.cc): degree powers, the checks of their inputs and the size
// past which the hot loops prefetch. Internal to propagation.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "common/graph/graph.h"

namespace ldpgraph::propagation::internal {

// deg(v)^power, with an isolated node's degree taken as 1.
std::vector<double> DegreePowers(const Graph& g, double power);

// INVALID_ARGUMENT unless the feature matrix has one row per node of g.
absl::Status CheckShape(const Graph& g, size_t rows);

// Personalised PageRank reads structure only: a weighted graph is refused
// (UNIMPLEMENTED) rather than silently propagated as unweighted.
absl::Status CheckUnweighted(const Graph& g);

// Residue buffers (push's sweep, push_sweep.h), and KProp's features, above
// this size prefetch.
inline constexpr size_t kPrefetchAboveBytes = size_t{4} << 20;

}  // namespace ldpgraph::propagation::internal

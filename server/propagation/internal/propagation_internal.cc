// Degree powers and the input checks shared by propagation's files
// (propagation_internal.h).
#include "server/propagation/internal/propagation_internal.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ldpgraph::propagation::internal {

std::vector<double> DegreePowers(const Graph& g, double power) {
  std::vector<double> out(g.num_nodes());
  for (NodeId v = 0; v < g.num_nodes(); ++v) {
    const uint32_t d = g.degree(v);
    out[v] = d == 0 ? 1.0 : std::pow(static_cast<double>(d), power);
  }
  return out;
}

absl::Status CheckShape(const Graph& g, size_t rows) {
  if (rows != g.num_nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature matrix has ", rows, " rows but the graph has ",
                     g.num_nodes(), " nodes"));
  }
  return absl::OkStatus();
}

absl::Status CheckUnweighted(const Graph& g) {
  if (g.weighted()) {
    return absl::UnimplementedError(
        "personalised PageRank propagation does not support weighted graphs");
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::propagation::internal

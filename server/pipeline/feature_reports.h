// The feature collection a run simulates: the mechanism every simulated
// agent perturbs with, each node's report perturbed (or crafted by a
// simulated poisoning attacker) and estimated as the curator estimates it,
// and that attacker prepared from the configuration. RunPipeline's
// estimation stage; research tools call it to replay exactly the reports a
// run draws (`ldpgraph edges`).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/attacks/poisoning.h"
#include "common/dataset/dataset.h"
#include "common/linalg/matrix.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/random/random.h"
#include "server/pipeline/config.h"
#include "server/pipeline/report_screen.h"

namespace ldpgraph::pipeline {

// The feature mechanism a run of c builds for dataset d's features (the one
// every simulated agent perturbs with): c.mechanism, c.epsilon, c.sampled,
// on the range of c.scaling. INVALID_ARGUMENT for mechanism "none", an
// unknown mechanism, or scaling none without a declared feature range.
absl::StatusOr<std::unique_ptr<FeatureMechanism>> BuildFeatureMechanism(
    const PipelineConfig& c, const Dataset& d);

// The curator's estimate of every node's row, as each agent would report it:
// Perturb on the agent's side, Estimate on the curator's. Rows of x must lie
// in the mechanism's range (the agent clips otherwise).
// The first form draws every row from rng; the second draws row v from
// rng_of_row(v), and with poisoning, the rows of its malicious nodes are the
// adversary's crafted reports (from the same rng_of_row(v)) instead; given
// dims, it adds each report's sampled dimensions there (node v for row v),
// as the curator decodes them, crafted reports included.
// Given fill, the rows are held against it instead of 0: *fill is set to
// the estimate of the first row's first unreported dimension (0 when it
// reports every one, or with no rows), and a row stores only the entries
// whose float differs from it (Multi-bit: the m reported of d dimensions,
// the others (alpha + beta) / 2). The dense form is the same either way.
absl::StatusOr<SparseRows> SimulateFeatureReports(const SparseRows& x,
                                                  const FeatureMechanism& mech,
                                                  RandomSource& rng);
// The attacker of a simulated poisoning: its adversary and which nodes it
// controls (malicious[v], one entry per row).
struct Poisoning {
  std::unique_ptr<poisoning::Adversary> adversary;
  std::vector<bool> malicious;
};
absl::StatusOr<SparseRows> SimulateFeatureReports(
    const SparseRows& x, const FeatureMechanism& mech,
    absl::FunctionRef<RandomSource&(size_t row)> rng_of_row,
    const Poisoning* poisoning = nullptr, ReportedDims* dims = nullptr,
    float* fill = nullptr);
// The same over rows handed out one at a time (rows x cols): row_of(v,
// out) writes row v into out (cols entries). CollectFeatures scales each
// node's row so, as its agent does: the scaled matrix, dense once [0, 1]
// maps to [-1, 1] (8 bytes an entry stored), never exists whole.
absl::StatusOr<SparseRows> SimulateFeatureReports(
    size_t rows, size_t cols,
    absl::FunctionRef<void(size_t row, absl::Span<double> out)> row_of,
    const FeatureMechanism& mech,
    absl::FunctionRef<RandomSource&(size_t row)> rng_of_row,
    const Poisoning* poisoning = nullptr, ReportedDims* dims = nullptr,
    float* fill = nullptr);

// The attacker of c for dataset d and seed (PipelineConfig::attack_*):
// nullptr when c.attack_fraction is 0. INVALID_ARGUMENT for an attack
// class that is not one of d's classes; UNIMPLEMENTED (at report time) for
// a mechanism the attack has no form for.
absl::StatusOr<std::unique_ptr<Poisoning>> PreparePoisoning(
    const Dataset& d, const PipelineConfig& c, uint64_t seed);

}  // namespace ldpgraph::pipeline

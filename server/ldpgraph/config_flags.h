// The learning pipeline's settings from a command line: `ldpgraph eval`'s
// flags (EvalHelp lists them), read into a pipeline::PipelineConfig one
// option group at a time. Each group's flags are read, checked against the
// method and task they apply to, and set by one function here; the whole
// configuration is then checked once by pipeline::ValidateConfig and written
// as JSON by pipeline::ConfigToJson. PPR's flags go through
// ReadPprFlags/ApplyPprOverrides (server/propagation/options.h), the
// defences' through pipeline::ParseDefenceFlags, as every other reader of
// those settings does.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "server/pipeline/config.h"

namespace ldpgraph::tool {

// Every group below, in this order, onto pipeline::DefaultConfig(--method,
// --task) (privge and node by default), then UPGNET's own k for Piecewise,
// pipeline::ValidateConfig, the settings given explicitly
// (PipelineConfig::fixed_settings) and --lpgnn-settings. INVALID_ARGUMENT
// naming the first flag that is wrong, or does not apply.
absl::StatusOr<pipeline::PipelineConfig> ParsePipelineFlags(const CliArgs& a);

// The groups, each onto *config as it stands (the method and task set):
// --mechanism and --epsilon.
absl::Status ParseMechanismFlags(const CliArgs& a,
                                 pipeline::PipelineConfig* config);
// SE-PrivGEmb's and DPNE's release (--dim ... --mu).
absl::Status ParseReleaseFlags(const CliArgs& a, pipeline::Method method,
                               pipeline::PipelineConfig* config);
// --k/--m, --label-epsilon and --label-steps.
absl::Status ParseSampledAndLabelFlags(const CliArgs& a,
                                       pipeline::PipelineConfig* config);
// LPGNN's and UPGNET's aggregation: --aggregator, --nfr, --inputs,
// --positional-features.
absl::Status ParseAggregationFlags(const CliArgs& a,
                                   pipeline::PipelineConfig* config);
// Propagation: --propagation, KProp's steps and weights, the
// standardisation, Z's storage, label denoising, the tuning grids, --scale
// and PPR's --alpha, --r and --rmax.
absl::Status ParsePropagationFlags(const CliArgs& a,
                                   pipeline::PipelineConfig* config);
// The task's model (--model ... --activation) and its training (--lr ...
// --split).
absl::Status ParseModelFlags(const CliArgs& a,
                             pipeline::PipelineConfig* config);
absl::Status ParseTrainingFlags(const CliArgs& a,
                                pipeline::PipelineConfig* config);
// --threads and --secure.
absl::Status ParseExecutionFlags(const CliArgs& a,
                                 pipeline::PipelineConfig* config);
// The simulated poisoning attack (--malicious, --attack, ...).
absl::Status ParseAttackFlags(const CliArgs& a,
                              pipeline::PipelineConfig* config);

}  // namespace ldpgraph::tool

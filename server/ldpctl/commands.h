// ldpctl's commands: the operator's view of a running curator (status,
// campaigns, budgets, pipeline, results, export, audit), credential
// provisioning, and `simulate` (simulate.h). main.cc only dispatches.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli_args.h"
#include "ldpgraph/v1/mechanism.pb.h"

namespace ldpgraph::ldpctl {

// "hds", "multibit", ... "label-rr", "edge-rr", "edge-substitution",
// "edge-blink" -> the wire kind; INVALID_ARGUMENT listing the names
// otherwise.
absl::StatusOr<v1::MechanismKind> ParseMechanismKind(absl::string_view name);

// The request field blink_variant from --blink-variant: "" when not given;
// INVALID_ARGUMENT when given without --graph-campaign or not hard, topk
// or hybrid. (Whether the campaign is a Blink one, the curator checks.)
absl::StatusOr<std::string> BlinkVariantFromFlags(const CliArgs& a);

// spec->substitution from `ldpctl campaign create`'s edge-substitution
// flags (--approach, --similarity, --top-k, --max-dummies, --dummy-mean,
// --dummy-std, --round-timeout-ms, --feature-*); a flag not given keeps
// edges::DefaultSubstitutionSpec()'s value. INVALID_ARGUMENT for a flag
// that does not parse, a missing --feature-epsilon or --feature-dimension,
// an unknown --feature-mechanism or a --feature-range that is not LO,HI.
absl::Status SubstitutionFromFlags(const CliArgs& a, v1::MechanismSpec* spec);

// Runs `ldpctl <args...>` (args without the program name); returns the exit
// code (connection.h). Output goes to out, progress and errors to err.
// self_path: ldpctl's own executable, for simulate to find its siblings.
int RunLdpctl(const std::vector<std::string>& args, const std::string& self_path,
              std::ostream& out, std::ostream& err);

// The overview (command empty) or one command's help with examples;
// "" for an unknown command.
std::string LdpctlHelp(const std::string& command);

}  // namespace ldpgraph::ldpctl

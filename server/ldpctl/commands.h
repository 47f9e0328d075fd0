// ldpctl's commands: the operator's view of a running curator (status,
// campaigns, budgets, pipeline, results, export, audit), credential
// provisioning, and `simulate` (simulate.h). main.cc only dispatches.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ldpgraph/v1/mechanism.pb.h"

namespace ldpgraph::ldpctl {

// "hds", "multibit", ... "label-rr", "edge-rr", "edge-substitution" -> the
// wire kind; INVALID_ARGUMENT listing the names otherwise.
absl::StatusOr<v1::MechanismKind> ParseMechanismKind(absl::string_view name);

// The parameters `ldpctl campaign create --mechanism edge-substitution`
// gives a substitution campaign when no flag says otherwise: approach 1,
// cosine, top_k 10, max_dummies 5, dummies N(0.5, 0.5^2), round timeout
// 30 s (features unset: the caller's).
v1::SubstitutionSpec DefaultSubstitutionSpec();

// Runs `ldpctl <args...>` (args without the program name); returns the exit
// code (connection.h). Output goes to out, progress and errors to err.
// self_path: ldpctl's own executable, for simulate to find its siblings.
int RunLdpctl(const std::vector<std::string>& args, const std::string& self_path,
              std::ostream& out, std::ostream& err);

// The overview (command empty) or one command's help with examples;
// "" for an unknown command.
std::string LdpctlHelp(const std::string& command);

}  // namespace ldpgraph::ldpctl

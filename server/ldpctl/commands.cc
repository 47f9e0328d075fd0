// `ldpctl` itself (commands.h): the command line (connection flags before
// the command, subcommand and id, the flags and --format), help requests,
// and the dispatch to simulate and run (simulate.h) or to the command
// groups (internal/commands.h).
#include "server/ldpctl/commands.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/commands.h"
#include "server/ldpctl/simulate.h"

namespace ldpgraph::ldpctl {
namespace {

using internal::Audit;
using internal::BudgetShow;
using internal::Campaign;
using internal::CheckPipelineUsage;
using internal::Credentials;
using internal::Export;
using internal::Output;
using internal::Pipeline;
using internal::Release;
using internal::Results;
using internal::Secrets;
using internal::Status;

// The value flags of the commands (connection flags added by the parser).
const std::set<std::string>& CommandValueFlags() {
  static const auto* flags = new std::set<std::string>{
      "attribute", "mechanism", "epsilon", "dimension", "sampled", "range",
      "nodes", "quorum", "deadline", "name", "timeout", "method", "alpha",
      "steps", "task", "labels", "seed", "out", "ids", "after", "limit",
      "node-key", "dataset", "tls-names", "approach", "similarity", "top-k",
      "max-dummies", "dummy-mean", "dummy-std", "feature-mechanism",
      "feature-epsilon", "feature-dimension", "feature-sampled",
      "feature-range", "round-timeout-ms", "graph-campaign", "dim",
      "noise-multiplier", "max-epochs", "proximity", "batch", "blink-delta",
      "blink-variant", "defence", "screen-alpha", "list", "baselines",
      "listen", "frontends", "tls-pem", "threads", "frontends-from-dns",
      "max-frontends", "max-connections"};
  return *flags;
}

// One connected or offline admin command, args already split.
absl::Status RunAdmin(const std::string& command, const std::string& sub,
                      const std::string& id, const CliArgs& a, const Output& o) {
  if (command == "credentials") return Credentials(a, o);
  if (command == "secrets") return Secrets(a, o);
  if (command == "edge-config") return EdgeConfigCommand(a, o);
  // Usage errors before any connection setting is looked at.
  RETURN_IF_ERROR(CheckPipelineUsage(command, sub, id, a));
  ASSIGN_OR_RETURN(ConnectionSettings settings, ResolveConnection(a));
  const Connection c = Connect(settings);
  if (command == "status") return Status(c, o);
  if (command == "campaign") return Campaign(sub, id, a, c, o);
  if (command == "budget") {
    if (sub != "show") {
      return absl::InvalidArgumentError(
          absl::StrCat("budget: unknown subcommand '", sub, "' (show)"));
    }
    return BudgetShow(a, c, o);
  }
  if (command == "pipeline") return Pipeline(sub, id, a, c, o);
  if (command == "results") return Results(id, a, c, o);
  if (command == "export") return Export(id, a, c, o);
  if (command == "release") return Release(sub, a, c, o);
  if (command == "audit") return Audit(a, c, o);
  return absl::InvalidArgumentError(absl::StrCat("unknown command '", command, "'"));
}

const std::set<std::string>& CommandsWithSub() {
  static const auto* s = new std::set<std::string>{"campaign", "budget", "pipeline",
                                                   "release"};
  return *s;
}

const std::set<std::string>& KnownCommands() {
  static const auto* s = new std::set<std::string>{
      "simulate", "run", "secrets", "status", "campaign", "budget", "pipeline", "release", "results",
      "export", "audit", "credentials", "edge-config"};
  return *s;
}

}  // namespace

int RunLdpctl(const std::vector<std::string>& all_args,
              const std::string& self_path, std::ostream& out,
              std::ostream& err) {
  std::vector<std::string> args = all_args;
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (args.size() >= 2 && !LdpctlHelp(args[1]).empty()) {
      out << LdpctlHelp(args[1]);
      return kExitOk;
    }
    out << LdpctlHelp("");
    return args.empty() ? kExitUsage : kExitOk;
  }
  // Connection flags may come before the command (ldpctl --config F status):
  // they move behind it.
  std::vector<std::string> leading;
  while (!args.empty() && args[0].rfind("--", 0) == 0 && args[0] != "--help") {
    const std::string flag = args[0].substr(2);
    const bool takes_value =
        flag.find('=') == std::string::npos &&
        std::any_of(std::begin(kConnectionValueFlags), std::end(kConnectionValueFlags),
                    [&](const char* f) { return flag == f; });
    const size_t n = takes_value && args.size() >= 2 ? 2 : 1;
    leading.insert(leading.end(), args.begin(), args.begin() + n);
    args.erase(args.begin(), args.begin() + n);
  }
  if (args.empty()) {
    err << "ldpctl: no command after the flags. Run ldpctl --help for the commands.\n";
    return kExitUsage;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  args.insert(args.end(), leading.begin(), leading.end());
  if (KnownCommands().count(command) == 0) {
    err << "ldpctl: unknown command '" << command
        << "'. Run ldpctl --help for the commands.\n";
    return kExitUsage;
  }
  if (WantsHelp(args)) {
    out << LdpctlHelp(command);
    return kExitOk;
  }
  if (command == "simulate") return RunSimulate(args, self_path, out, err);
  if (command == "run") return RunAttached(args, out, err);
  std::string sub, id;
  if (CommandsWithSub().count(command) > 0) {
    if (args.empty() || args[0].rfind("--", 0) == 0) {
      err << "ldpctl: " << command << " needs a subcommand. Run ldpctl "
          << command << " --help.\n";
      return kExitUsage;
    }
    sub = args[0];
    args.erase(args.begin());
  }
  if (!args.empty() && args[0].rfind("--", 0) != 0) {
    id = args[0];
    args.erase(args.begin());
  }
  std::set<std::string> value_flags = CommandValueFlags();
  for (const char* f : kConnectionValueFlags) value_flags.insert(f);
  auto parsed = CliArgs::Parse(args, value_flags,
                               {"insecure", "json", "per-node", "keep-existing", "plaintext-frontends", "resolve"});
  const std::string name = absl::StrCat(command, sub.empty() ? "" : " ", sub);
  if (!parsed.ok()) {
    err << "ldpctl " << name << ": " << parsed.status().message()
        << "\nRun ldpctl " << command << " --help for its flags.\n";
    return kExitUsage;
  }
  Output o{out, err};
  const std::string format = parsed->Get("format").value_or(
      parsed->Flag("json") ? "json" : "table");
  if (format != "table" && format != "json") {
    err << "ldpctl " << name << ": --format must be table or json, got '"
        << format << "'\n";
    return kExitUsage;
  }
  o.json = format == "json";
  absl::Status s = RunAdmin(command, sub, id, *parsed, o);
  if (!s.ok()) {
    err << "ldpctl " << name << ": " << absl::StatusCodeToString(s.code())
        << ": " << s.message() << "\n";
  }
  return ExitCodeOf(s);
}

}  // namespace ldpgraph::ldpctl

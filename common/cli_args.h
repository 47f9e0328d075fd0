// A small command-line parser for ldpgraph's tools: `--name value`,
// `--name=value` and boolean `--flag`, with errors that name the flag.
// Each subcommand declares the flags it accepts; anything else is an error,
// so a typo never silently falls back to a default.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/files.h"  // ReadFileToString, for the flags that name files
#include "absl/strings/string_view.h"

namespace ldpgraph {

// StartBinary's parts (below).
void PrepareLongRunningProcess();
void PrintText(absl::string_view text, bool to_stderr);
void PrintFlagError(absl::string_view program, const absl::Status& error);

class CliArgs {
 public:
  // Parses args (without the program and subcommand names). value_flags
  // take a value, bool_flags do not. INVALID_ARGUMENT for an unknown flag, a
  // missing value, a flag given twice, or a positional argument.
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  bool Flag(const std::string& name) const { return flags_.count(name) > 0; }

  // The raw value of a flag, if given.
  std::optional<std::string> Get(const std::string& name) const;
  // Typed accessors: nullopt if absent; INVALID_ARGUMENT naming the flag if
  // the value does not parse (or, for doubles, is not finite).
  absl::StatusOr<std::optional<double>> GetDouble(const std::string& name) const;
  absl::StatusOr<std::optional<int64_t>> GetInt(const std::string& name) const;
  absl::StatusOr<std::optional<uint64_t>> GetUint(const std::string& name) const;
  // A comma-separated list of finite doubles.
  absl::StatusOr<std::optional<std::vector<double>>> GetDoubleList(
      const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
};

// True if args ask for help (--help or -h anywhere).
bool WantsHelp(const std::vector<std::string>& args);

// What a long-running binary (the curator, an agent host) does first: in an
// optimised build, turns off absl::Mutex's deadlock detector (see
// cli_args.cc); prints `usage` to stdout for --help; else parses the flags
// with `parse`. Returns the flags, or nullopt with *exit_code set: 0 after
// the help, 2 after "<program>: <error>\nRun <program> --help for the
// flags." on stderr.
template <class Parse>
auto StartBinary(absl::string_view program, absl::string_view usage, int argc,
                 char** argv, Parse parse, int* exit_code)
    -> std::optional<typename decltype(parse(
        std::vector<std::string>()))::value_type> {
  PrepareLongRunningProcess();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (WantsHelp(args)) {
    PrintText(usage, /*to_stderr=*/false);
    *exit_code = 0;
    return std::nullopt;
  }
  auto flags = parse(args);
  if (!flags.ok()) {
    PrintFlagError(program, flags.status());
    *exit_code = 2;
    return std::nullopt;
  }
  return *std::move(flags);
}

// "host:port" split at the last ':' (so "[::1]:7443" keeps its brackets).
// INVALID_ARGUMENT "expected HOST:PORT, got '<address>'" without a ':' or
// an integer port.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(
    const std::string& address);

// "A-B": the node ids A..B-1, with A < B. INVALID_ARGUMENT
// "--<flag> must be A-B with A < B (nodes A..B-1), got '<text>'" otherwise.
absl::StatusOr<std::pair<uint32_t, uint32_t>> ParseNodeRange(
    absl::string_view text, absl::string_view flag);


}  // namespace ldpgraph

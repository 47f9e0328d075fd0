// Pieces every `ldpgraph` subcommand shares: the prologue of every command
// (--help, parsing, usage errors), flag values (ints, choices, lists of
// privacy budgets), the randomness source chosen from --seed, exit codes,
// and resource figures for --json reports.
#pragma once

#include <chrono>
#include <initializer_list>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cli_args.h"
#include "common/random/random.h"
#include "common/stopwatch.h"  // SecondsSince, for progress and --json

namespace ldpgraph::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

// The secure generator, or with a seed the reproducible one, after printing
// kSeededWarning to err (a seeded run is never private and must say so).
absl::StatusOr<std::unique_ptr<RandomSource>> MakeRandomSource(
    std::optional<uint64_t> seed, std::ostream& err);

// v as an int for the flag --<flag>: INVALID_ARGUMENT "--<flag> out of
// range: <v>" outside int, "--<flag> must be an integer >= <lo>, got <v>"
// below lo.
absl::StatusOr<int> FlagToInt(int64_t v, absl::string_view flag,
                              int64_t lo = std::numeric_limits<int>::min());

// The position of value among choices, for the flag --<flag>; otherwise
// INVALID_ARGUMENT "--<flag> must be a, b or c, got '<value>'".
absl::StatusOr<int> ParseChoice(
    absl::string_view flag, absl::string_view value,
    std::initializer_list<absl::string_view> choices);

// How ParseBudgetList reads a list of privacy budgets.
struct BudgetListRules {
  bool allow_inf = true;   // "inf": no privacy (+infinity)
  bool unique = false;     // a budget listed twice is an error
  absl::string_view note;  // appended to the message for a bad budget
};

// The comma-separated privacy budgets of --<flag>: each a finite number
// > 0, or with rules.allow_inf "inf". INVALID_ARGUMENT for the first item
// that is neither, "--<flag> takes budgets > 0[ or inf], comma separated;
// got '<item>'<note>", or with rules.unique for the first repeat, "--<flag>
// lists <FormatBudget(budget)> twice".
absl::StatusOr<std::vector<double>> ParseBudgetList(
    absl::string_view flag, absl::string_view list,
    const BudgetListRules& rules);

// A budget as the tools' tables and progress print it: "inf", or %g.
std::string FormatBudget(double e);

// True if args ask for help (--help or -h anywhere): common/cli_args.h.
using ::ldpgraph::WantsHelp;

// Prints "ldpgraph <command>: <message>" and the pointer to --help to err;
// returns kExitUsageError.
int UsageError(absl::string_view command, const absl::Status& s,
               std::ostream& err);

// The outcome of a command's prologue (ParseCommand): the options to run
// with, or the exit code the command returns at once.
template <typename Options>
class ParsedCommand {
 public:
  static ParsedCommand Run(Options options) {
    ParsedCommand out;
    out.options_.emplace(std::move(options));
    return out;
  }
  static ParsedCommand Exit(int exit_code) {
    ParsedCommand out;
    out.exit_code_ = exit_code;
    return out;
  }

  // True when the command goes on with the options; else it returns
  // exit_code().
  bool ok() const { return options_.has_value(); }
  int exit_code() const { return exit_code_; }
  // The options; only when ok().
  Options& operator*() { return *options_; }
  Options* operator->() { return &*options_; }

 private:
  ParsedCommand() = default;

  std::optional<Options> options_;
  int exit_code_ = kExitOk;
};

// The prologue every `ldpgraph <command>` shares. With --help (or -h)
// anywhere in args (WantsHelp): prints help() to out; exit code kExitOk.
// Otherwise parse(args) (absl::StatusOr<Options>), and on an error prints
// UsageError(command, ...) to err; exit code kExitUsageError. Else the
// parsed options.
template <typename Parse>
auto ParseCommand(absl::string_view command,
                  const std::vector<std::string>& args,
                  absl::FunctionRef<std::string()> help, Parse parse,
                  std::ostream& out, std::ostream& err)
    -> ParsedCommand<typename std::invoke_result_t<
        Parse&, const std::vector<std::string>&>::value_type> {
  using Options = typename std::invoke_result_t<
      Parse&, const std::vector<std::string>&>::value_type;
  if (WantsHelp(args)) {
    out << help();
    return ParsedCommand<Options>::Exit(kExitOk);
  }
  auto parsed = parse(args);
  if (!parsed.ok()) {
    return ParsedCommand<Options>::Exit(
        UsageError(command, parsed.status(), err));
  }
  return ParsedCommand<Options>::Run(std::move(*parsed));
}

// Peak resident set size of this process so far, in bytes (getrusage).
uint64_t PeakRssBytes();

// For --out of a command that writes a dataset folder: OK if dir does not
// exist or is an empty folder, or (with force) any folder.
// FAILED_PRECONDITION otherwise, saying why.
absl::Status CheckOutFolder(const std::string& dir, bool force);

}  // namespace ldpgraph::tool

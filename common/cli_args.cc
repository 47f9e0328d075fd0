#include "common/cli_args.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace ldpgraph {

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags) {
  CliArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!absl::ConsumePrefix(&arg, "--") || arg.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument '", args[i], "' (flags start with --)"));
    }
    std::string name(arg);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " takes no value"));
      }
      out.flags_.insert(name);
      continue;
    }
    if (!value_flags.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (!out.values_.emplace(name, *value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " given more than once"));
    }
  }
  return out;
}

std::optional<std::string> CliArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::optional<double>> CliArgs::GetDouble(
    const std::string& name) const {
  auto raw = Get(name);
  if (!raw) return std::optional<double>();
  double v;
  if (!absl::SimpleAtod(*raw, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be a finite number, got '", *raw, "'"));
  }
  return std::optional<double>(v);
}

absl::StatusOr<std::optional<int64_t>> CliArgs::GetInt(
    const std::string& name) const {
  auto raw = Get(name);
  if (!raw) return std::optional<int64_t>();
  int64_t v;
  if (!absl::SimpleAtoi(*raw, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be an integer, got '", *raw, "'"));
  }
  return std::optional<int64_t>(v);
}

absl::StatusOr<std::optional<uint64_t>> CliArgs::GetUint(
    const std::string& name) const {
  auto raw = Get(name);
  if (!raw) return std::optional<uint64_t>();
  uint64_t v;
  if (!absl::SimpleAtoi(*raw, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " must be a non-negative integer, got '", *raw, "'"));
  }
  return std::optional<uint64_t>(v);
}

absl::StatusOr<std::optional<std::vector<double>>> CliArgs::GetDoubleList(
    const std::string& name) const {
  auto raw = Get(name);
  if (!raw) return std::optional<std::vector<double>>();
  std::vector<double> out;
  int position = 0;
  for (absl::string_view part : absl::StrSplit(*raw, ',')) {
    double v;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(part), &v) ||
        !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": value ", position + 1, " ('", part,
                       "') is not a finite number"));
    }
    out.push_back(v);
    ++position;
  }
  return std::optional<std::vector<double>>(std::move(out));
}

void PrepareLongRunningProcess() {
#ifdef NDEBUG
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex taken
  // while another is held goes through its deadlock detector, a global
  // graph with a node per mutex: an agent host takes one per node under its
  // shard's lock (a quarter of its CPU at 250,000 nodes). Tests and debug
  // builds keep the detector.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

void PrintText(absl::string_view text, bool to_stderr) {
  (to_stderr ? std::cerr : std::cout) << text << std::flush;
}

void PrintFlagError(absl::string_view program, const absl::Status& error) {
  std::cerr << program << ": " << error.message() << "\nRun " << program
            << " --help for the flags.\n";
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(
    const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected HOST:PORT, got '", address, "'"));
  }
  return std::make_pair(address.substr(0, colon), port);
}

absl::StatusOr<std::pair<uint32_t, uint32_t>> ParseNodeRange(
    absl::string_view text, absl::string_view flag) {
  std::vector<absl::string_view> p = absl::StrSplit(text, '-');
  uint32_t a = 0, b = 0;
  if (p.size() != 2 || !absl::SimpleAtoi(p[0], &a) ||
      !absl::SimpleAtoi(p[1], &b) || b <= a) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " must be A-B with A < B (nodes A..B-1), got '", text, "'"));
  }
  return std::make_pair(a, b);
}

}  // namespace ldpgraph

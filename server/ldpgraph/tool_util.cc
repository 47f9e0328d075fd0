#include "server/ldpgraph/tool_util.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ldpgraph::tool {

absl::StatusOr<std::unique_ptr<RandomSource>> MakeRandomSource(
    std::optional<uint64_t> seed, std::ostream& err) {
  if (seed) {
    err << kSeededWarning << "\n";
    return std::unique_ptr<RandomSource>(
        std::make_unique<SeededRandomForTesting>(*seed));
  }
  auto secure = SecureRandom::Create();
  if (!secure.ok()) return secure.status();
  return std::unique_ptr<RandomSource>(std::move(*secure));
}

absl::StatusOr<int> FlagToInt(int64_t v, absl::string_view flag, int64_t lo) {
  if (v < std::numeric_limits<int>::min() ||
      v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " out of range: ", v));
  }
  if (v < lo) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be an integer >= ", lo, ", got ", v));
  }
  return static_cast<int>(v);
}

uint64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

absl::StatusOr<int> ParseChoice(
    absl::string_view flag, absl::string_view value,
    std::initializer_list<absl::string_view> choices) {
  std::string list;
  int i = 0;
  for (absl::string_view c : choices) {
    if (c == value) return i;
    if (i > 0) list += i + 1 == static_cast<int>(choices.size()) ? " or " : ", ";
    list += std::string(c);
    ++i;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be ", list, ", got '", value, "'"));
}

absl::StatusOr<std::vector<double>> ParseBudgetList(
    absl::string_view flag, absl::string_view list,
    const BudgetListRules& rules) {
  std::vector<double> out;
  for (absl::string_view s : absl::StrSplit(list, ',')) {
    double v;
    if (s == "inf" && rules.allow_inf) {
      v = std::numeric_limits<double>::infinity();
    } else if (!absl::SimpleAtod(s, &v) || !(v > 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " takes budgets > 0", rules.allow_inf ? " or inf" : "",
          ", comma separated; got '", s, "'", rules.note));
    }
    if (rules.unique && std::find(out.begin(), out.end(), v) != out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " lists ", FormatBudget(v), " twice"));
    }
    out.push_back(v);
  }
  return out;
}

std::string FormatBudget(double e) {
  return std::isinf(e) ? "inf" : absl::StrFormat("%g", e);
}

int UsageError(absl::string_view command, const absl::Status& s,
               std::ostream& err) {
  err << "ldpgraph " << command << ": " << s.message()
      << "\n(run `ldpgraph " << command << " --help` for usage)\n";
  return kExitUsageError;
}

absl::Status CheckOutFolder(const std::string& dir, bool force) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return absl::OkStatus();
  if (!fs::is_directory(st)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--out ", dir, " exists and is not a folder"));
  }
  const bool empty = fs::is_empty(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--out ", dir, ": cannot read the folder: ",
                     ec.message()));
  }
  if (!empty && !force) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--out ", dir,
        " is not empty; refusing to overwrite it (give --force to replace "
        "its meta.json, edges.txt and nodes.svm)"));
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::tool

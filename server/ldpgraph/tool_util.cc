#include "server/ldpgraph/tool_util.h"

#include <sys/resource.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

int UsageError(absl::string_view command, const absl::Status& s,
               std::ostream& err) {
  err << "ldpgraph " << command << ": " << s.message()
      << "\n(run `ldpgraph " << command << " --help` for usage)\n";
  return kExitUsageError;
}

}  // namespace ldpgraph::tool

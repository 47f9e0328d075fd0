// The file names and error wording shared by the dataset folder's readers
// and writer (dataset_internal.h).
#include "common/dataset/dataset_internal.h"

#include <charconv>
#include <filesystem>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace ldpgraph::dataset_internal {

std::string JoinPath(const std::string& dir, absl::string_view name) {
  return (std::filesystem::path(dir) / std::string(name)).string();
}

std::string Quote(absl::string_view token) {
  constexpr size_t kMax = 40;
  if (token.size() <= kMax) return absl::StrCat("'", token, "'");
  return absl::StrCat("'", token.substr(0, kMax), "...'");
}

absl::Status LineError(const std::string& path, size_t line,
                       absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
}

std::string FormatDouble(double x) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), x);
  return std::string(buf, r.ptr);
}

std::pair<float, float> FloatRange(const std::pair<double, double>& r) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return {r.first < -kMax ? -kInf : static_cast<float>(r.first),
          r.second > kMax ? kInf : static_cast<float>(r.second)};
}

}  // namespace ldpgraph::dataset_internal

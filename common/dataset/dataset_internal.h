// Internal to the dataset folder's reader and writer (dataset.h,
// dataset_meta.h, node_line.h, device_index.h): the folder's file names, the
// text scanning and error wording their parsers share, and the steps one of
// their .cc files implements for another. Not for use outside
// common/dataset.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset_meta.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"

namespace ldpgraph::dataset_internal {

inline constexpr absl::string_view kMetaFile = "meta.json";
inline constexpr absl::string_view kEdgesFile = "edges.txt";
inline constexpr absl::string_view kNodesFile = "nodes.svm";

// Largest node count a Graph supports (NodeId is 32-bit, with one spare).
inline constexpr uint64_t kMaxNodes = std::numeric_limits<NodeId>::max() - 1;

// dir/name.
std::string JoinPath(const std::string& dir, absl::string_view name);

// ------------------------------------------------------------ text scanning

inline bool IsBlank(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Newline-separated lines of a text; a final '\n' does not start a line.
class LineReader {
 public:
  explicit LineReader(absl::string_view text)
      : p_(text.data()), end_(text.data() + text.size()) {}

  // The next line without its '\n'; false at the end of the text.
  bool Next(absl::string_view* line) {
    if (p_ == end_) return false;
    const char* nl =
        static_cast<const char*>(std::memchr(p_, '\n', end_ - p_));
    const char* stop = nl != nullptr ? nl : end_;
    *line = absl::string_view(p_, stop - p_);
    p_ = nl != nullptr ? nl + 1 : end_;
    ++number_;
    return true;
  }
  // 1-based number of the line Next() returned last.
  size_t number() const { return number_; }
  // Lines not yet returned.
  size_t Remaining() const {
    if (p_ == end_) return 0;
    const size_t newlines = std::count(p_, end_, '\n');
    return end_[-1] == '\n' ? newlines : newlines + 1;
  }

 private:
  const char* p_;
  const char* end_;
  size_t number_ = 0;
};

// Blank-separated tokens of one line.
class Tokenizer {
 public:
  explicit Tokenizer(absl::string_view line)
      : p_(line.data()), end_(line.data() + line.size()) {}
  bool Next(absl::string_view* token) {
    while (p_ < end_ && IsBlank(*p_)) ++p_;
    if (p_ == end_) return false;
    const char* start = p_;
    while (p_ < end_ && !IsBlank(*p_)) ++p_;
    *token = absl::string_view(start, p_ - start);
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

// The whole token as a decimal integer of Int's range (no sign for an
// unsigned Int).
template <typename Int>
bool ParseInteger(absl::string_view token, Int* value) {
  const char* end = token.data() + token.size();
  auto [ptr, ec] = std::from_chars(token.data(), end, *value);
  return ec == std::errc() && ptr == end && !token.empty();
}

// Whether every character of s is a decimal digit (true for an empty s).
inline bool IsDigits(absl::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// ------------------------------------------------------------ error wording

// A token for an error message: quoted, long ones cut.
std::string Quote(absl::string_view token);

// INVALID_ARGUMENT "<path>:<line>: <what>".
absl::Status LineError(const std::string& path, size_t line,
                       absl::string_view what);

// The shortest text that reads back as x.
std::string FormatDouble(double x);

// Float bounds a stored value must lie in: the feature range rounded to
// float, so a value computed in double inside [lo, hi] and stored as the
// nearest float always passes.
// Bounds beyond the float range become infinite (every finite float is in).
std::pair<float, float> FloatRange(const std::pair<double, double>& r);

// --------------------------------------- steps shared between the .cc files

// meta.json's text for what WriteDataset writes (dataset_meta.cc): d.meta
// with the given counts, keys in the documented order.
std::string MetaText(const DatasetMeta& meta, uint64_t nodes, uint64_t edges,
                     uint64_t features);

// The whole of nodes.svm (node_line.cc): one line per node of meta, into
// *labels and *features (meta.nodes x meta.features, as stored).
absl::Status ParseNodes(const std::string& path, absl::string_view text,
                        const DatasetMeta& meta, std::vector<int32_t>* labels,
                        SparseRows* features);

// The whole of edges.txt (edge_list.cc): meta.edges lines, as a graph of
// meta.nodes nodes.
absl::StatusOr<Graph> ParseEdges(const std::string& path,
                                 absl::string_view text,
                                 const DatasetMeta& meta);

}  // namespace ldpgraph::dataset_internal

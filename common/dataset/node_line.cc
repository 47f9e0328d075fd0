// nodes.svm: one node's line (ParseNodeLine) and the whole file, with the
// errors that say what is wrong with a line.
#include "common/dataset/node_line.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dataset/dataset_internal.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace dataset_internal {
namespace {

// Describes why the pair token of a node line is wrong (slow path only).
absl::Status PairError(const std::string& path, size_t line,
                       absl::string_view token, const DatasetMeta& meta,
                       int64_t previous_index) {
  const size_t colon = token.find(':');
  if (colon == absl::string_view::npos || colon == 0 ||
      colon + 1 == token.size()) {
    return LineError(path, line,
                     absl::StrCat("malformed feature ", Quote(token),
                                  " (expected index:value)"));
  }
  const absl::string_view index_text = token.substr(0, colon);
  const absl::string_view value_text = token.substr(colon + 1);
  uint64_t index;
  if (!ParseInteger(index_text, &index)) {
    if (IsDigits(index_text)) {
      return LineError(path, line,
                       absl::StrCat("feature index ", Quote(index_text),
                                    " > features = ", meta.features,
                                    " (meta.json)"));
    }
    return LineError(path, line,
                     absl::StrCat("malformed feature ", Quote(token),
                                  ": index ", Quote(index_text),
                                  " is not a positive integer"));
  }
  if (index == 0) {
    return LineError(path, line,
                     absl::StrCat("feature index 0 in ", Quote(token),
                                  " (indices are 1-based)"));
  }
  if (index > meta.features) {
    return LineError(path, line,
                     absl::StrCat("feature index ", index, " > features = ",
                                  meta.features, " (meta.json)"));
  }
  if (static_cast<int64_t>(index) == previous_index) {
    return LineError(path, line,
                     absl::StrCat("duplicate feature index ", index));
  }
  if (static_cast<int64_t>(index) < previous_index) {
    return LineError(path, line,
                     absl::StrCat("feature index ", index, " after index ",
                                  previous_index,
                                  ": indices must be strictly ascending"));
  }
  float value;
  const char* end = value_text.data() + value_text.size();
  auto [ptr, ec] = std::from_chars(value_text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    return LineError(path, line,
                     absl::StrCat("feature index ", index, ": value ",
                                  Quote(value_text), " out of float range"));
  }
  if (ec != std::errc() || ptr != end) {
    return LineError(path, line,
                     absl::StrCat("feature index ", index, ": value ",
                                  Quote(value_text), " is not a number"));
  }
  if (!std::isfinite(value)) {
    return LineError(path, line,
                     absl::StrCat("feature index ", index,
                                  ": non-finite value ", Quote(value_text)));
  }
  if (meta.feature_range.has_value()) {
    const auto [lo, hi] = FloatRange(*meta.feature_range);
    if (!(value >= lo && value <= hi)) {
      return LineError(
          path, line,
          absl::StrCat("feature index ", index, ": value ", Quote(value_text),
                       " outside feature_range [",
                       FormatDouble(meta.feature_range->first), ", ",
                       FormatDouble(meta.feature_range->second),
                       "] (meta.json)"));
    }
  }
  return absl::InternalError(absl::StrCat(path, ":", line, ": feature ",
                                          Quote(token),
                                          " rejected for no known reason"));
}

absl::Status LabelError(const std::string& path, size_t line,
                        absl::string_view token, int classes) {
  int64_t label;
  if (!ParseInteger(token, &label)) {
    const bool integer = !token.empty() && token != "-" &&
                         IsDigits(token.substr(token[0] == '-' ? 1 : 0));
    if (!integer) {
      return LineError(path, line, absl::StrCat("label ", Quote(token),
                                                " is not an integer"));
    }
  }
  return LineError(path, line,
                   absl::StrCat("label ", Quote(token),
                                " out of range: expected -1 (no label) or 0.."
                                , classes - 1, " (meta.json classes = ",
                                classes, ")"));
}

// What a node line is checked against, worked out once per file.
struct NodeLineRules {
  explicit NodeLineRules(const DatasetMeta& m)
      : meta(m),
        check_range(m.feature_range.has_value()),
        range(check_range ? FloatRange(*m.feature_range)
                          : std::pair<float, float>(0.0f, 0.0f)),
        num_features(m.features),
        max_label(static_cast<int64_t>(m.classes) - 1) {}
  const DatasetMeta& meta;
  const bool check_range;
  const std::pair<float, float> range;
  const uint64_t num_features;
  const int64_t max_label;
};

// One node line: its label, and its non-zeros appended to indices/values.
absl::Status ParseNodeLineWith(const std::string& path, size_t number,
                               absl::string_view line,
                               const NodeLineRules& rules, int32_t* label,
                               std::vector<uint32_t>* indices,
                               std::vector<float>* values) {
  Tokenizer tokens(line);
  absl::string_view token;
  if (!tokens.Next(&token)) {
    return LineError(path, number,
                     "missing label (each line starts with the node's "
                     "label)");
  }
  int64_t parsed_label;
  if (!ParseInteger(token, &parsed_label) || parsed_label < -1 ||
      parsed_label > rules.max_label) {
    return LabelError(path, number, token, rules.meta.classes);
  }
  *label = static_cast<int32_t>(parsed_label);
  int64_t previous = 0;  // last index, 1-based; 0 before the first
  while (tokens.Next(&token)) {
    const char* begin = token.data();
    const char* end = begin + token.size();
    uint64_t index;
    auto [colon, ec] = std::from_chars(begin, end, index);
    bool ok = ec == std::errc() && colon != begin && colon < end &&
              *colon == ':' && index > static_cast<uint64_t>(previous) &&
              index <= rules.num_features;
    float value = 0.0f;
    if (ok) {
      auto [vend, vec] = std::from_chars(colon + 1, end, value);
      ok = vec == std::errc() && vend == end && colon + 1 < end &&
           std::isfinite(value) &&
           (!rules.check_range ||
            (value >= rules.range.first && value <= rules.range.second));
    }
    if (!ok) return PairError(path, number, token, rules.meta, previous);
    previous = static_cast<int64_t>(index);
    if (value != 0.0f) {
      indices->push_back(static_cast<uint32_t>(index - 1));
      values->push_back(value);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseNodes(const std::string& path, absl::string_view text,
                        const DatasetMeta& meta, std::vector<int32_t>* labels,
                        SparseRows* features) {
  LineReader lines(text);
  const size_t total_lines = lines.Remaining();
  labels->clear();
  labels->reserve(std::min(meta.nodes, total_lines));
  features->rows = 0;
  features->cols = meta.features;
  features->offsets.assign(1, 0);
  features->offsets.reserve(std::min(meta.nodes, total_lines) + 1);
  const size_t max_pairs = std::count(text.begin(), text.end(), ':');
  features->indices.clear();
  features->values.clear();
  features->indices.reserve(max_pairs);
  features->values.reserve(max_pairs);

  const NodeLineRules rules(meta);
  absl::string_view line;
  while (lines.Next(&line)) {
    const size_t number = lines.number();
    if (number > meta.nodes) {
      return LineError(
          path, number,
          absl::StrCat("extra node line: meta.json has nodes = ", meta.nodes,
                       " but the file has ", number + lines.Remaining(),
                       " lines"));
    }
    int32_t label;
    RETURN_IF_ERROR(ParseNodeLineWith(path, number, line, rules, &label,
                                      &features->indices, &features->values));
    labels->push_back(label);
    features->offsets.push_back(features->indices.size());
    ++features->rows;
  }
  if (labels->size() < meta.nodes) {
    return LineError(path, labels->size() + 1,
                     absl::StrCat("file ends after ", labels->size(),
                                  " node lines but meta.json has nodes = ",
                                  meta.nodes));
  }
  features->indices.shrink_to_fit();
  features->values.shrink_to_fit();
  return absl::OkStatus();
}

}  // namespace dataset_internal

absl::Status ParseNodeLine(const std::string& path, size_t line_number,
                           absl::string_view line, const DatasetMeta& meta,
                           int32_t* label, std::vector<uint32_t>* indices,
                           std::vector<float>* values) {
  return dataset_internal::ParseNodeLineWith(
      path, line_number, line, dataset_internal::NodeLineRules(meta), label,
      indices, values);
}

}  // namespace ldpgraph

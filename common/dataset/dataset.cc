#include "common/dataset/dataset.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/device_index.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

// ordered_json keeps the key order of what it reads (the generator object)
// and of what it writes (meta.json's documented key order).
using Json = nlohmann::ordered_json;

constexpr absl::string_view kMetaFile = "meta.json";
constexpr absl::string_view kEdgesFile = "edges.txt";
constexpr absl::string_view kNodesFile = "nodes.svm";

// Largest node count a Graph supports (NodeId is 32-bit, with one spare).
constexpr uint64_t kMaxNodes = std::numeric_limits<NodeId>::max() - 1;

std::string JoinPath(const std::string& dir, absl::string_view name) {
  return (std::filesystem::path(dir) / std::string(name)).string();
}

// ------------------------------------------------------------------ reading

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

// A token for an error message: quoted, long ones cut.
std::string Quote(absl::string_view token) {
  constexpr size_t kMax = 40;
  if (token.size() <= kMax) return absl::StrCat("'", token, "'");
  return absl::StrCat("'", token.substr(0, kMax), "...'");
}

// The whole token as an unsigned decimal integer (no sign).
bool ParseUnsigned(absl::string_view token, uint64_t* value) {
  const char* end = token.data() + token.size();
  auto [ptr, ec] = std::from_chars(token.data(), end, *value);
  return ec == std::errc() && ptr == end && !token.empty();
}

bool ParseSigned(absl::string_view token, int64_t* value) {
  const char* end = token.data() + token.size();
  auto [ptr, ec] = std::from_chars(token.data(), end, *value);
  return ec == std::errc() && ptr == end && !token.empty();
}

absl::Status LineError(const std::string& path, size_t line,
                       absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
}

// A node id token of an edge line: INVALID_ARGUMENT describing it, or OK
// with *id < limit.
absl::Status ParseNodeIdToken(absl::string_view token, uint64_t limit,
                              absl::string_view limit_what,
                              const std::string& path, size_t line,
                              uint64_t* id) {
  if (ParseUnsigned(token, id)) {
    if (*id >= limit) {
      return LineError(path, line,
                       absl::StrCat("node id ", *id, " out of range (",
                                    limit_what, ")"));
    }
    return absl::OkStatus();
  }
  int64_t negative;
  if (ParseSigned(token, &negative) && negative < 0) {
    return LineError(path, line,
                     absl::StrCat("negative node id ", Quote(token)));
  }
  bool digits = !token.empty() &&
                std::all_of(token.begin(), token.end(),
                            [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    return LineError(path, line, absl::StrCat("node id ", Quote(token),
                                              " out of range (",
                                              limit_what, ")"));
  }
  return LineError(path, line,
                   absl::StrCat("node id ", Quote(token),
                                " is not a non-negative integer"));
}

std::string FormatDouble(double x) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), x);
  return std::string(buf, r.ptr);
}

// ----------------------------------------------------------- meta.json

absl::Status KeyError(const std::string& path, absl::string_view key,
                      absl::string_view expected, const Json* found) {
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": missing required key \"", key, "\" (expected ",
                     expected, ")"));
  }
  std::string shown = found->dump(-1, ' ', false,
                                  Json::error_handler_t::replace);
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": key \"", key, "\": expected ", expected,
                   ", found ", found->type_name(), " ", shown));
}

const Json* Find(const Json& object, absl::string_view key) {
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

absl::Status ReadUnsigned(const std::string& path, const Json& object,
                          absl::string_view key, uint64_t max,
                          uint64_t* value) {
  const Json* j = Find(object, key);
  if (j == nullptr || !j->is_number_unsigned()) {
    return KeyError(path, key, "a non-negative integer", j);
  }
  *value = j->get<uint64_t>();
  if (*value > max) {
    return KeyError(path, key, absl::StrCat("a non-negative integer <= ", max),
                    j);
  }
  return absl::OkStatus();
}

absl::Status ReadOptionalString(const std::string& path, const Json& object,
                                absl::string_view key, std::string* value) {
  const Json* j = Find(object, key);
  if (j == nullptr) return absl::OkStatus();
  if (!j->is_string()) return KeyError(path, key, "a string", j);
  *value = j->get<std::string>();
  return absl::OkStatus();
}

absl::StatusOr<DatasetMeta> ParseMeta(const std::string& path,
                                      const std::string& text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": malformed JSON at byte ", e.byte, ": ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected a JSON object, found ", root.type_name()));
  }
  DatasetMeta meta;
  const Json* name = Find(root, "name");
  if (name == nullptr || !name->is_string()) {
    return KeyError(path, "name", "a string", name);
  }
  meta.name = name->get<std::string>();
  uint64_t value;
  RETURN_IF_ERROR(ReadUnsigned(path, root, "nodes", kMaxNodes, &value));
  meta.nodes = value;
  RETURN_IF_ERROR(ReadUnsigned(
      path, root, "edges", std::numeric_limits<int64_t>::max(), &value));
  meta.edges = value;
  RETURN_IF_ERROR(ReadUnsigned(path, root, "features",
                               std::numeric_limits<uint32_t>::max(), &value));
  meta.features = value;
  RETURN_IF_ERROR(ReadUnsigned(path, root, "classes",
                               std::numeric_limits<int32_t>::max(), &value));
  meta.classes = static_cast<int>(value);
  RETURN_IF_ERROR(ReadOptionalString(path, root, "source", &meta.source));
  RETURN_IF_ERROR(ReadOptionalString(path, root, "license", &meta.license));
  RETURN_IF_ERROR(ReadOptionalString(path, root, "notes", &meta.notes));
  if (const Json* range = Find(root, "feature_range"); range != nullptr) {
    constexpr absl::string_view kExpected =
        "[lo, hi] with finite numbers lo < hi";
    if (!range->is_array() || range->size() != 2 ||
        !(*range)[0].is_number() || !(*range)[1].is_number()) {
      return KeyError(path, "feature_range", kExpected, range);
    }
    const double lo = (*range)[0].get<double>();
    const double hi = (*range)[1].get<double>();
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) {
      return KeyError(path, "feature_range", kExpected, range);
    }
    meta.feature_range = std::make_pair(lo, hi);
  }
  if (const Json* ranges = Find(root, "feature_ranges"); ranges != nullptr) {
    const std::string expected = absl::StrCat(
        "an array of ", meta.features,
        " (features) pairs [lo, hi] of finite numbers with lo <= hi");
    if (meta.feature_range.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": both \"feature_range\" and \"feature_ranges\": give one "
          "range for all features or one per feature, not both"));
    }
    if (!ranges->is_array() || ranges->size() != meta.features) {
      return KeyError(path, "feature_ranges", expected, ranges);
    }
    meta.feature_ranges.reserve(meta.features);
    for (size_t j = 0; j < ranges->size(); ++j) {
      const Json& r = (*ranges)[j];
      const bool ok = r.is_array() && r.size() == 2 && r[0].is_number() &&
                      r[1].is_number() && std::isfinite(r[0].get<double>()) &&
                      std::isfinite(r[1].get<double>()) &&
                      r[0].get<double>() <= r[1].get<double>();
      if (!ok) {
        return KeyError(path, absl::StrCat("feature_ranges[", j, "]"),
                        "[lo, hi] with finite numbers lo <= hi", &r);
      }
      meta.feature_ranges.emplace_back(r[0].get<double>(), r[1].get<double>());
    }
  }
  RETURN_IF_ERROR(
      ReadOptionalString(path, root, "feature_schema", &meta.feature_schema));
  if (const Json* gen = Find(root, "generator"); gen != nullptr) {
    if (!gen->is_object()) {
      return KeyError(path, "generator", "a JSON object", gen);
    }
    meta.generator_json =
        gen->dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  return meta;
}

// Float bounds a stored value must lie in: the feature range rounded to
// float, so a value computed in double inside [lo, hi] and stored as the
// nearest float always passes.
// Bounds beyond the float range become infinite (every finite float is in).
std::pair<float, float> FloatRange(const std::pair<double, double>& r) {
  constexpr double kMax = std::numeric_limits<float>::max();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return {r.first < -kMax ? -kInf : static_cast<float>(r.first),
          r.second > kMax ? kInf : static_cast<float>(r.second)};
}

// ----------------------------------------------------------- nodes.svm

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
  if (!ParseUnsigned(index_text, &index)) {
    const bool digits = std::all_of(index_text.begin(), index_text.end(),
                                    [](char c) { return c >= '0' && c <= '9'; });
    if (digits) {
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
  if (!ParseSigned(token, &label)) {
    const bool integer =
        !token.empty() &&
        std::all_of(token.begin() + (token[0] == '-' ? 1 : 0), token.end(),
                    [](char c) { return c >= '0' && c <= '9'; }) &&
        token != "-";
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
  if (!ParseSigned(token, &parsed_label) || parsed_label < -1 ||
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

// ----------------------------------------------------------- edges.txt

struct EdgeLineOptions {
  uint64_t limit;               // ids must be < limit
  std::string limit_what;       // how to explain the limit
  bool skip_comments = false;   // blank lines, '#' and '%' lines
  bool allow_self_loops = false;
  bool self_loop_note = false;  // say the dataset format forbids them
};

// Parses one "u v" line into *e. OK or INVALID_ARGUMENT naming path:line.
absl::Status ParseEdgeLine(const std::string& path, size_t number,
                           absl::string_view line,
                           const EdgeLineOptions& options, Edge* e) {
  Tokenizer tokens(line);
  absl::string_view first, second, extra;
  const bool has_first = tokens.Next(&first);
  const bool has_second = has_first && tokens.Next(&second);
  if (!has_second) {
    return LineError(path, number,
                     absl::StrCat("expected two node ids \"u v\", found ",
                                  has_first ? "one" : "none"));
  }
  uint64_t u, v;
  RETURN_IF_ERROR(ParseNodeIdToken(first, options.limit, options.limit_what,
                                   path, number, &u));
  RETURN_IF_ERROR(ParseNodeIdToken(second, options.limit, options.limit_what,
                                   path, number, &v));
  if (tokens.Next(&extra)) {
    return LineError(path, number,
                     absl::StrCat("extra token ", Quote(extra),
                                  " after the edge (one edge \"u v\" per "
                                  "line)"));
  }
  if (u == v && !options.allow_self_loops) {
    return LineError(path, number,
                     absl::StrCat("self loop ", u, " ", v,
                                  options.self_loop_note
                                      ? " (the format forbids self loops)"
                                      : " (self loops are not allowed)"));
  }
  e->u = static_cast<NodeId>(u);
  e->v = static_cast<NodeId>(v);
  return absl::OkStatus();
}

// The first line (1-based, edge i on line i + 1) that repeats an earlier
// edge in either orientation, as an error naming both lines. Only called
// when a repeat is known to exist: O(m log m).
absl::Status DuplicateEdgeError(const std::string& path,
                                const std::vector<Edge>& edges) {
  struct Keyed {
    uint64_t key;
    uint64_t index;
  };
  std::vector<Keyed> keyed(edges.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    const NodeId a = std::min(edges[i].u, edges[i].v);
    const NodeId b = std::max(edges[i].u, edges[i].v);
    keyed[i] = {(uint64_t{a} << 32) | b, i};
  }
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& x, const Keyed& y) {
    return x.key != y.key ? x.key < y.key : x.index < y.index;
  });
  uint64_t best_later = edges.size(), best_earlier = 0;
  for (size_t i = 1; i < keyed.size(); ++i) {
    if (keyed[i].key == keyed[i - 1].key &&
        (i < 2 || keyed[i - 2].key != keyed[i].key) &&
        keyed[i].index < best_later) {
      best_later = keyed[i].index;
      best_earlier = keyed[i - 1].index;
    }
  }
  if (best_later == edges.size()) {
    return absl::InternalError(
        absl::StrCat(path, ": duplicate edge expected but not found"));
  }
  const Edge& later = edges[best_later];
  const Edge& earlier = edges[best_earlier];
  return LineError(path, best_later + 1,
                   absl::StrCat("duplicate edge ", later.u, " ", later.v,
                                " (already on line ", best_earlier + 1,
                                " as ", earlier.u, " ", earlier.v, ")"));
}

absl::StatusOr<Graph> ParseEdges(const std::string& path,
                                 absl::string_view text,
                                 const DatasetMeta& meta) {
  LineReader lines(text);
  const size_t total_lines = lines.Remaining();
  std::vector<Edge> edges;
  edges.reserve(std::min(meta.edges, total_lines));
  EdgeLineOptions options;
  options.limit = meta.nodes;
  options.limit_what = absl::StrCat("meta.json has nodes = ", meta.nodes);
  options.self_loop_note = true;
  absl::string_view line;
  while (lines.Next(&line)) {
    const size_t number = lines.number();
    if (number > meta.edges) {
      return LineError(path, number,
                       absl::StrCat("extra edge line: meta.json has edges = ",
                                    meta.edges, " but the file has ",
                                    number + lines.Remaining(), " lines"));
    }
    Edge e;
    RETURN_IF_ERROR(ParseEdgeLine(path, number, line, options, &e));
    edges.push_back(e);
  }
  if (edges.size() < meta.edges) {
    return LineError(path, edges.size() + 1,
                     absl::StrCat("file ends after ", edges.size(),
                                  " edge lines but meta.json has edges = ",
                                  meta.edges));
  }
  Graph::BuildOptions build;
  build.allow_self_loops = false;
  build.merge_duplicates = true;
  auto graph = Graph::FromEdges(meta.nodes, edges, build);
  if (!graph.ok()) {
    return absl::Status(graph.status().code(),
                        absl::StrCat(path, ": ", graph.status().message()));
  }
  if (graph->num_edges() != edges.size()) {
    return DuplicateEdgeError(path, edges);
  }
  return graph;
}

// ------------------------------------------------------------------ writing


absl::Status ValidateForWrite(const Dataset& d) {
  const size_t n = d.graph.num_nodes();
  if (d.graph.num_self_loops() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph has ", d.graph.num_self_loops(),
        " self loop(s); the dataset format forbids them"));
  }
  if (d.labels.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset has ", d.labels.size(), " labels for ", n, " nodes"));
  }
  if (d.meta.classes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("meta.classes = ", d.meta.classes, " is negative"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (d.labels[i] < -1 || d.labels[i] >= d.meta.classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", i, ": label ", d.labels[i],
                       " out of range: expected -1 or 0..",
                       d.meta.classes - 1));
    }
  }
  const SparseRows& x = d.features;
  if (x.rows != n || x.offsets.size() != n + 1 || x.offsets[0] != 0 ||
      x.offsets[n] != x.indices.size() || x.values.size() != x.indices.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "features have ", x.rows, " rows (", x.offsets.size(),
        " offsets, ", x.indices.size(), " indices, ", x.values.size(),
        " values) for ", n, " nodes"));
  }
  if (x.cols > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("features have ", x.cols, " columns; at most ",
                     std::numeric_limits<uint32_t>::max(), " are supported"));
  }
  std::optional<std::pair<float, float>> range;
  if (d.meta.feature_range.has_value()) {
    const auto [lo, hi] = *d.meta.feature_range;
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat("meta.feature_range [", FormatDouble(lo), ", ",
                       FormatDouble(hi), "] is not finite with lo < hi"));
    }
    range = FloatRange(*d.meta.feature_range);
  }
  if (!d.meta.feature_ranges.empty()) {
    if (range.has_value() || d.meta.feature_ranges.size() != x.cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "meta.feature_ranges has ", d.meta.feature_ranges.size(),
          " ranges for ", x.cols, " features",
          range.has_value() ? " and meta.feature_range is set too" : ""));
    }
    for (size_t j = 0; j < x.cols; ++j) {
      const auto [lo, hi] = d.meta.feature_ranges[j];
      if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo <= hi)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "meta.feature_ranges[", j, "] = [", FormatDouble(lo), ", ",
            FormatDouble(hi), "] is not finite with lo <= hi"));
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (x.offsets[i + 1] < x.offsets[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("features row ", i, ": offsets decrease"));
    }
    int64_t previous = -1;
    for (uint64_t p = x.offsets[i]; p < x.offsets[i + 1]; ++p) {
      const uint32_t j = x.indices[p];
      const float v = x.values[p];
      if (j >= x.cols || static_cast<int64_t>(j) <= previous) {
        return absl::InvalidArgumentError(absl::StrCat(
            "features row ", i, ": index ", j,
            " not strictly ascending or >= cols = ", x.cols));
      }
      previous = j;
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "features row ", i, ", column ", j, ": non-finite value"));
      }
      if (range.has_value() && !(v >= range->first && v <= range->second)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "features row ", i, ", column ", j, ": value ", v,
            " outside meta.feature_range"));
      }
    }
  }
  if (!d.meta.generator_json.empty()) {
    Json gen = Json::parse(d.meta.generator_json, nullptr,
                           /*allow_exceptions=*/false);
    if (!gen.is_object()) {
      return absl::InvalidArgumentError(
          "meta.generator_json is not the text of a JSON object");
    }
  }
  return absl::OkStatus();
}

void WriteNodes(const Dataset& d, AtomicFileWriter& out) {
  const SparseRows& x = d.features;
  for (size_t i = 0; i < d.labels.size(); ++i) {
    char* p = out.Reserve(16);
    p = std::to_chars(p, p + 16, d.labels[i]).ptr;
    out.Advance(p);
    for (uint64_t k = x.offsets[i]; k < x.offsets[i + 1]; ++k) {
      const float v = x.values[k];
      if (v == 0.0f) continue;  // only non-zeros are written
      // ' ' + 10 digits + ':' + at most 15 characters of shortest float.
      p = out.Reserve(48);
      *p++ = ' ';
      p = std::to_chars(p, p + 11, uint64_t{x.indices[k]} + 1).ptr;
      *p++ = ':';
      p = std::to_chars(p, p + 32, v).ptr;
      out.Advance(p);
    }
    p = out.Reserve(1);
    *p++ = '\n';
    out.Advance(p);
  }
}

void WriteEdges(const Graph& g, AtomicFileWriter& out) {
  const size_t n = g.num_nodes();
  for (NodeId u = 0; u < n; ++u) {
    for (NodeId v : g.neighbors(u)) {
      if (v <= u) continue;
      char* p = out.Reserve(24);
      p = std::to_chars(p, p + 10, u).ptr;
      *p++ = ' ';
      p = std::to_chars(p, p + 10, v).ptr;
      *p++ = '\n';
      out.Advance(p);
    }
  }
}

std::string MetaText(const Dataset& d) {
  Json j;
  j["name"] = d.meta.name;
  j["nodes"] = static_cast<uint64_t>(d.graph.num_nodes());
  j["edges"] = static_cast<uint64_t>(d.graph.num_edges());
  j["features"] = static_cast<uint64_t>(d.features.cols);
  j["classes"] = d.meta.classes;
  if (d.meta.feature_range.has_value()) {
    j["feature_range"] =
        Json::array({d.meta.feature_range->first, d.meta.feature_range->second});
  }
  if (!d.meta.feature_ranges.empty()) {
    Json ranges = Json::array();
    for (const auto& [lo, hi] : d.meta.feature_ranges) {
      ranges.push_back(Json::array({lo, hi}));
    }
    j["feature_ranges"] = std::move(ranges);
  }
  if (!d.meta.feature_schema.empty()) j["feature_schema"] = d.meta.feature_schema;
  j["source"] = d.meta.source;
  j["license"] = d.meta.license;
  j["notes"] = d.meta.notes;
  if (!d.meta.generator_json.empty()) {
    j["generator"] = Json::parse(d.meta.generator_json, nullptr,
                                 /*allow_exceptions=*/false);
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace) +
         "\n";
}

}  // namespace

// ------------------------------------------------------------------ public

absl::StatusOr<DatasetMeta> LoadDatasetMeta(const std::string& dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (!std::filesystem::exists(status)) {
    return absl::NotFoundError(
        absl::StrCat("dataset folder ", dir, " not found"));
  }
  if (!std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset path ", dir, " is not a folder"));
  }
  const std::string meta_path = JoinPath(dir, kMetaFile);
  ASSIGN_OR_RETURN(std::string meta_text, ReadFileToString(meta_path));
  return ParseMeta(meta_path, meta_text);
}

absl::Status ParseNodeLine(const std::string& path, size_t line_number,
                           absl::string_view line, const DatasetMeta& meta,
                           int32_t* label, std::vector<uint32_t>* indices,
                           std::vector<float>* values) {
  return ParseNodeLineWith(path, line_number, line, NodeLineRules(meta), label,
                           indices, values);
}

absl::StatusOr<Dataset> LoadDataset(const std::string& dir) {
  Dataset d;
  ASSIGN_OR_RETURN(d.meta, LoadDatasetMeta(dir));
  {
    const std::string path = JoinPath(dir, kNodesFile);
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    RETURN_IF_ERROR(ParseNodes(path, text, d.meta, &d.labels, &d.features));
  }
  {
    const std::string path = JoinPath(dir, kEdgesFile);
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    ASSIGN_OR_RETURN(d.graph, ParseEdges(path, text, d.meta));
  }
  return d;
}

absl::Status WriteDataset(const Dataset& d, const std::string& dir) {
  RETURN_IF_ERROR(ValidateForWrite(d));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::ErrnoToStatus(
        ec.value(), absl::StrCat("cannot create dataset folder ", dir));
  }
  AtomicFileWriter nodes(JoinPath(dir, kNodesFile));
  AtomicFileWriter edges(JoinPath(dir, kEdgesFile));
  AtomicFileWriter meta(JoinPath(dir, kMetaFile));
  RETURN_IF_ERROR(nodes.Open());
  WriteNodes(d, nodes);
  RETURN_IF_ERROR(nodes.Close());
  RETURN_IF_ERROR(edges.Open());
  WriteEdges(d.graph, edges);
  RETURN_IF_ERROR(edges.Close());
  RETURN_IF_ERROR(meta.Open());
  meta.Append(MetaText(d));
  RETURN_IF_ERROR(meta.Close());
  // meta.json last: a reader never sees new counts beside old data files.
  RETURN_IF_ERROR(nodes.Commit());
  RETURN_IF_ERROR(edges.Commit());
  RETURN_IF_ERROR(meta.Commit());
  return WriteDeviceIndex(dir, d.graph);
}

absl::StatusOr<Graph> LoadEdgeList(const std::string& path,
                                   const EdgeListOptions& options) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  EdgeLineOptions line_options;
  if (options.num_nodes.has_value()) {
    if (*options.num_nodes > kMaxNodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_nodes = ", *options.num_nodes, " exceeds ",
                       kMaxNodes, ", the most a graph supports"));
    }
    line_options.limit = *options.num_nodes;
    line_options.limit_what =
        absl::StrCat("num_nodes = ", *options.num_nodes);
  } else {
    line_options.limit = kMaxNodes;
    line_options.limit_what =
        absl::StrCat("a graph supports at most ", kMaxNodes, " nodes");
  }
  line_options.allow_self_loops = options.allow_self_loops;
  std::vector<Edge> edges;
  LineReader lines(text);
  edges.reserve(lines.Remaining());
  absl::string_view line;
  size_t max_id_plus_one = 0;
  while (lines.Next(&line)) {
    size_t first = 0;
    while (first < line.size() && IsBlank(line[first])) ++first;
    if (first == line.size() || line[first] == '#' || line[first] == '%') {
      continue;
    }
    Edge e;
    RETURN_IF_ERROR(
        ParseEdgeLine(path, lines.number(), line, line_options, &e));
    max_id_plus_one =
        std::max<size_t>(max_id_plus_one, size_t{std::max(e.u, e.v)} + 1);
    edges.push_back(e);
  }
  const size_t n = options.num_nodes.value_or(max_id_plus_one);
  Graph::BuildOptions build;
  build.allow_self_loops = options.allow_self_loops;
  build.merge_duplicates = true;
  auto graph = Graph::FromEdges(n, edges, build);
  if (!graph.ok()) {
    return absl::Status(graph.status().code(),
                        absl::StrCat(path, ": ", graph.status().message()));
  }
  return graph;
}

absl::StatusOr<FeatureScaling> ParseFeatureScaling(absl::string_view text) {
  if (text == "none") return FeatureScaling::kNone;
  if (text == "unit" || text == "0,1") return FeatureScaling::kUnit;
  if (text == "symmetric" || text == "-1,1") return FeatureScaling::kSymmetric;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown feature scaling ", Quote(text),
                   ": expected none, unit (or 0,1), symmetric (or -1,1)"));
}

absl::string_view FeatureScalingName(FeatureScaling s) {
  switch (s) {
    case FeatureScaling::kNone:
      return "none";
    case FeatureScaling::kUnit:
      return "unit";
    case FeatureScaling::kSymmetric:
      return "symmetric";
  }
  return "unknown";
}

std::optional<std::pair<double, double>> ScaledRange(FeatureScaling s,
                                                     const DatasetMeta& meta) {
  switch (s) {
    case FeatureScaling::kNone:
      return meta.feature_range;
    case FeatureScaling::kUnit:
      return std::make_pair(0.0, 1.0);
    case FeatureScaling::kSymmetric:
      return std::make_pair(-1.0, 1.0);
  }
  return std::nullopt;
}

}  // namespace ldpgraph

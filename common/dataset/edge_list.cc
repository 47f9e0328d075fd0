// edges.txt and plain edge lists (LoadEdgeList): one edge a line, with the
// errors that say what is wrong with a line.
#include "common/dataset/dataset.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/dataset/dataset_internal.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace dataset_internal {
namespace {

// A node id token of an edge line: INVALID_ARGUMENT describing it, or OK
// with *id < limit.
absl::Status ParseNodeIdToken(absl::string_view token, uint64_t limit,
                              absl::string_view limit_what,
                              const std::string& path, size_t line,
                              uint64_t* id) {
  if (ParseInteger(token, id)) {
    if (*id >= limit) {
      return LineError(path, line,
                       absl::StrCat("node id ", *id, " out of range (",
                                    limit_what, ")"));
    }
    return absl::OkStatus();
  }
  int64_t negative;
  if (ParseInteger(token, &negative) && negative < 0) {
    return LineError(path, line,
                     absl::StrCat("negative node id ", Quote(token)));
  }
  if (!token.empty() && IsDigits(token)) {
    return LineError(path, line, absl::StrCat("node id ", Quote(token),
                                              " out of range (",
                                              limit_what, ")"));
  }
  return LineError(path, line,
                   absl::StrCat("node id ", Quote(token),
                                " is not a non-negative integer"));
}

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

// What LoadEdgeList checks every line against: ids below num_nodes, or
// below the most a graph supports when num_nodes is unset.
absl::StatusOr<EdgeLineOptions> EdgeListLineOptions(
    const EdgeListOptions& options) {
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
  return line_options;
}

// The edges of a plain edge list's text, skipping blank and comment lines;
// *max_id_plus_one is the largest id seen + 1 (0 for no edge).
absl::StatusOr<std::vector<Edge>> ParseEdgeList(
    const std::string& path, absl::string_view text,
    const EdgeLineOptions& line_options, size_t* max_id_plus_one) {
  std::vector<Edge> edges;
  LineReader lines(text);
  edges.reserve(lines.Remaining());
  absl::string_view line;
  while (lines.Next(&line)) {
    size_t first = 0;
    while (first < line.size() && IsBlank(line[first])) ++first;
    if (first == line.size() || line[first] == '#' || line[first] == '%') {
      continue;
    }
    Edge e;
    RETURN_IF_ERROR(
        ParseEdgeLine(path, lines.number(), line, line_options, &e));
    *max_id_plus_one =
        std::max<size_t>(*max_id_plus_one, size_t{std::max(e.u, e.v)} + 1);
    edges.push_back(e);
  }
  return edges;
}

}  // namespace

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

}  // namespace dataset_internal

absl::StatusOr<Graph> LoadEdgeList(const std::string& path,
                                   const EdgeListOptions& options) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  ASSIGN_OR_RETURN(const dataset_internal::EdgeLineOptions line_options,
                   dataset_internal::EdgeListLineOptions(options));
  size_t max_id_plus_one = 0;
  ASSIGN_OR_RETURN(const std::vector<Edge> edges,
                   dataset_internal::ParseEdgeList(path, text, line_options,
                                                   &max_id_plus_one));
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

}  // namespace ldpgraph

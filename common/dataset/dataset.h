// Datasets on disk and in memory.
//
// A dataset folder holds three files (the format of ../shared/datasets):
//   meta.json  {"name", "nodes", "edges", "features", "classes", "source",
//               "license", "notes"}, plus optional keys ldpgraph writes:
//               "feature_range": [lo, hi] (every stored value lies in it),
//               or "feature_ranges": [[lo, hi], ...] (one per feature): the
//               public feature schema (common/dataset/feature_schema.h);
//               "feature_schema": where the schema comes from (text);
//               "generator": {...} (the parameters that generated it).
//   devices.idx optional: the device index (common/dataset/device_index.h)
//               an agent host reads its own nodes' records through.
//   edges.txt  one undirected edge "u v" per line, 0-based, u < v, sorted,
//               no repeats and no self loops. The writer produces exactly
//               that; the reader also accepts any line order and either
//               orientation (a repeat in either orientation is an error).
//   nodes.svm  line i is node i: its label (0..classes-1, or -1 for none),
//               then "index:value" pairs, 1-based indices strictly ascending
//               and <= features, finite values, only non-zeros written. The
//               reader accepts explicit zero values and drops them.
// Tokens are separated by spaces or tabs (our files use one space); a '\r'
// before the '\n' is ignored; every line, the last included, is data (a
// blank line is an error). Every malformed input is an error that names the
// file and the 1-based line (and, within a line, the token) that is wrong;
// nothing is half-loaded.
//
// meta.json's in-memory form and reader are in dataset_meta.h, the parser of
// one nodes.svm line in node_line.h; this header includes both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset_meta.h"
#include "common/dataset/node_line.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"

namespace ldpgraph {

struct Dataset {
  DatasetMeta meta;
  Graph graph;                  // meta.nodes nodes, meta.edges edges
  std::vector<int32_t> labels;  // per node: 0..classes-1, or -1 (unlabelled)
  SparseRows features;          // meta.nodes x meta.features, as stored
};

// Reads a dataset folder. NOT_FOUND naming a missing folder or file;
// INVALID_ARGUMENT "<path> is a directory, not a file" where one of the three
// files should be;
// INVALID_ARGUMENT "<path>:<line>: <what>" for malformed content and for
// counts that disagree with meta.json (node lines, edge lines, feature
// indices, labels); INVALID_ARGUMENT "<path>: ..." for malformed meta.json
// (naming nlohmann's byte position) and for a missing or wrongly typed key.
// meta.json: name, nodes, edges, features, classes are required (a string
// and non-negative integers; nodes < 2^32 - 1); source, license, notes are
// optional strings; unknown keys are ignored. Stored 0-based in features.
// Parses the whole file in memory: pubmed (13 MB) takes well under 0.1 s.
absl::StatusOr<Dataset> LoadDataset(const std::string& dir);

// Writes the three files of d into dir (created if missing). Each file is
// written to "<name>.tmp" and renamed (nodes.svm, edges.txt, then meta.json),
// so a failure (a full disk) leaves no half-written file under the final
// name and no temporary file; the error names the path and strerror.
// meta.json's nodes, edges and features come from d.graph and d.features,
// not from d.meta; keys in the order name, nodes, edges, features, classes,
// feature_range or feature_ranges (if set), feature_schema (if set),
// source, license, notes, generator (if set). Also writes devices.idx
// (WriteDeviceIndex) after the three files.
// Feature values are written as the shortest text that reads back as the
// same float; stored zeros are not written. INVALID_ARGUMENT, before any
// file is touched, for a dataset the format cannot hold: self loops, a
// label count other than the node count or a label outside -1..classes-1,
// features of the wrong shape or not strictly ascending, non-finite values
// or values outside meta.feature_range, generator_json not a JSON object.
absl::Status WriteDataset(const Dataset& d, const std::string& dir);

// A plain edge list: one edge per line as two non-negative integer ids
// separated by whitespace, in either orientation; blank lines and lines
// whose first non-blank character is '#' or '%' are skipped; repeated edges
// are merged. A third token on a line (a weight, say) is an error. Self
// loops are an error unless allow_self_loops. Errors name path and line;
// NOT_FOUND for a missing file, INVALID_ARGUMENT "<path> is a directory, not
// a file" for a directory.
struct EdgeListOptions {
  // Number of nodes; unset means the largest id + 1. An id >= num_nodes is
  // an error.
  std::optional<size_t> num_nodes;
  bool allow_self_loops = false;
};
absl::StatusOr<Graph> LoadEdgeList(const std::string& path,
                                   const EdgeListOptions& options);

// Feature scaling: maps each feature from its public range (the dataset's
// feature schema, common/dataset/feature_schema.h) onto a common one, so
// that every agent's input lies in the range its mechanism expects. kUnit is
// [0, 1] (LPGNN, one-bit), kSymmetric [-1, 1] (PrivGE); kNone keeps values as
// stored.
enum class FeatureScaling { kNone, kUnit, kSymmetric };

// "none", "unit" or "0,1", "symmetric" or "-1,1"; INVALID_ARGUMENT otherwise.
absl::StatusOr<FeatureScaling> ParseFeatureScaling(absl::string_view text);
absl::string_view FeatureScalingName(FeatureScaling s);  // "none", "unit", ...
// The range [lo, hi] a scaling produces; for kNone, meta.feature_range if
// set, else nullopt (the caller must configure one).
std::optional<std::pair<double, double>> ScaledRange(FeatureScaling s,
                                                     const DatasetMeta& meta);

}  // namespace ldpgraph

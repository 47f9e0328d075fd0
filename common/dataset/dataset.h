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
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/graph/graph.h"
#include "common/matrix.h"

namespace ldpgraph {

struct DatasetMeta {
  std::string name;
  size_t nodes = 0;
  size_t edges = 0;      // lines of edges.txt
  size_t features = 0;   // feature dimension d
  int classes = 0;
  std::string source;
  std::string license;
  std::string notes;
  // When set, every stored feature value lies in [lo, hi]: a public range
  // fixed by how the data were made, so no scaling step is needed. Reader
  // and writer enforce it (against the bounds rounded to float, so a value
  // computed in double inside [lo, hi] and stored as float always passes).
  std::optional<std::pair<double, double>> feature_range;
  // Or one public range per feature (feature_ranges), lo <= hi each: values
  // outside a feature's range are clamped into it when scaled. At most one
  // of feature_range and feature_ranges is set.
  std::vector<std::pair<double, double>> feature_ranges;
  // Where the declared schema comes from ("generator", or "central: ..."
  // for one computed from every node's values by ldpgraph prepare).
  std::string feature_schema;
  // The generator's parameters as a JSON object text, for generated data.
  std::string generator_json;
};

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

// meta.json alone, with LoadDataset's checks and errors for it: the public
// description (sizes, classes, feature range) an operator configures a
// campaign from, without reading any node's record.
absl::StatusOr<DatasetMeta> LoadDatasetMeta(const std::string& dir);

// One line of nodes.svm (without its '\n'; a trailing '\r' is ignored), with
// LoadDataset's checks and errors ("<path>:<line_number>: ..."): the node's
// label (-1 for none) and its stored non-zeros (0-based indices, ascending)
// appended to *indices and *values. What an agent host parses of its own
// nodes' lines (common/dataset/device_index.h).
absl::Status ParseNodeLine(const std::string& path, size_t line_number,
                           absl::string_view line, const DatasetMeta& meta,
                           int32_t* label, std::vector<uint32_t>* indices,
                           std::vector<float>* values);

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

// WriteDataset: checking that a dataset fits the folder format, and writing
// its three files and its device index.
#include "common/dataset/dataset.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/dataset_internal.h"
#include "common/dataset/device_index.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace dataset_internal {
namespace {

// No self loops; one label per node, each -1 or 0..classes-1.
absl::Status ValidateGraphAndLabels(const Dataset& d) {
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
  return absl::OkStatus();
}

// The features' arrays agree with each other and with the node count.
absl::Status ValidateFeatureShape(const SparseRows& x, size_t n) {
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
  return absl::OkStatus();
}

// meta.feature_range (finite, lo < hi) or meta.feature_ranges (one finite
// [lo, hi], lo <= hi, per column), not both. *range: the float bounds every
// stored value must lie in, when feature_range is set.
absl::Status ValidateFeatureSchema(
    const DatasetMeta& meta, size_t cols,
    std::optional<std::pair<float, float>>* range) {
  if (meta.feature_range.has_value()) {
    const auto [lo, hi] = *meta.feature_range;
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat("meta.feature_range [", FormatDouble(lo), ", ",
                       FormatDouble(hi), "] is not finite with lo < hi"));
    }
    *range = FloatRange(*meta.feature_range);
  }
  if (meta.feature_ranges.empty()) return absl::OkStatus();
  if (range->has_value() || meta.feature_ranges.size() != cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "meta.feature_ranges has ", meta.feature_ranges.size(),
        " ranges for ", cols, " features",
        range->has_value() ? " and meta.feature_range is set too" : ""));
  }
  for (size_t j = 0; j < cols; ++j) {
    const auto [lo, hi] = meta.feature_ranges[j];
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo <= hi)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "meta.feature_ranges[", j, "] = [", FormatDouble(lo), ", ",
          FormatDouble(hi), "] is not finite with lo <= hi"));
    }
  }
  return absl::OkStatus();
}

// Every row's indices strictly ascending and < cols, its values finite and
// within range when one is given.
absl::Status ValidateFeatureValues(
    const SparseRows& x, size_t n,
    const std::optional<std::pair<float, float>>& range) {
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
  return absl::OkStatus();
}

// WriteDataset's INVALID_ARGUMENT, before any file is touched, for a
// dataset the format cannot hold.
absl::Status ValidateForWrite(const Dataset& d) {
  const size_t n = d.graph.num_nodes();
  RETURN_IF_ERROR(ValidateGraphAndLabels(d));
  RETURN_IF_ERROR(ValidateFeatureShape(d.features, n));
  std::optional<std::pair<float, float>> range;
  RETURN_IF_ERROR(ValidateFeatureSchema(d.meta, d.features.cols, &range));
  RETURN_IF_ERROR(ValidateFeatureValues(d.features, n, range));
  if (!d.meta.generator_json.empty()) {
    nlohmann::ordered_json gen =
        nlohmann::ordered_json::parse(d.meta.generator_json, nullptr,
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

}  // namespace
}  // namespace dataset_internal

absl::Status WriteDataset(const Dataset& d, const std::string& dir) {
  using dataset_internal::JoinPath;
  using dataset_internal::WriteEdges;
  using dataset_internal::WriteNodes;
  RETURN_IF_ERROR(dataset_internal::ValidateForWrite(d));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::ErrnoToStatus(
        ec.value(), absl::StrCat("cannot create dataset folder ", dir));
  }
  AtomicFileWriter nodes(JoinPath(dir, dataset_internal::kNodesFile));
  AtomicFileWriter edges(JoinPath(dir, dataset_internal::kEdgesFile));
  AtomicFileWriter meta(JoinPath(dir, dataset_internal::kMetaFile));
  RETURN_IF_ERROR(nodes.Open());
  WriteNodes(d, nodes);
  RETURN_IF_ERROR(nodes.Close());
  RETURN_IF_ERROR(edges.Open());
  WriteEdges(d.graph, edges);
  RETURN_IF_ERROR(edges.Close());
  RETURN_IF_ERROR(meta.Open());
  meta.Append(dataset_internal::MetaText(
      d.meta, d.graph.num_nodes(), d.graph.num_edges(), d.features.cols));
  RETURN_IF_ERROR(meta.Close());
  // meta.json last: a reader never sees new counts beside old data files.
  RETURN_IF_ERROR(nodes.Commit());
  RETURN_IF_ERROR(edges.Commit());
  RETURN_IF_ERROR(meta.Commit());
  return WriteDeviceIndex(dir, d.graph);
}

}  // namespace ldpgraph

// A dataset folder's meta.json (the format of common/dataset/dataset.h): its
// in-memory form and its reader. Below the dataset and the device index
// (common/dataset/device_index.h), which both read it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

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

// meta.json alone, with LoadDataset's checks and errors for it: the public
// description (sizes, classes, feature range) an operator configures a
// campaign from, without reading any node's record.
absl::StatusOr<DatasetMeta> LoadDatasetMeta(const std::string& dir);

}  // namespace ldpgraph

// Readying a dataset folder for agent hosts (`ldpgraph prepare`).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"

namespace ldpgraph {

struct PreparedDataset {
  DatasetMeta meta;             // as written to out/meta.json
  bool schema_computed = false; // false: the folder declared one, kept
};

// Loads the dataset folder `dir` (LoadDataset's checks and errors) and
// writes it to `out` (dir itself, or a new or empty folder) with what an
// agent host needs: a public feature schema in meta.json and the device
// index (common/dataset/device_index.h). A schema the folder declares is
// kept; otherwise the central one (CentralFeatureSchema) is computed from
// every node's values and labelled kCentralSchemaNote: the papers'
// preprocessing, which a real deployment replaces by a published schema.
// The data files are rewritten in WriteDataset's canonical form (values
// unchanged). WriteDataset's errors.
absl::StatusOr<PreparedDataset> PrepareDataset(const std::string& dir,
                                               const std::string& out);

// Whether dir has what an agent host with `needs_schema` reads: a declared
// schema (if needed) and a device index.
bool DatasetPrepared(const std::string& dir, const DatasetMeta& meta,
                     bool needs_schema);

}  // namespace ldpgraph

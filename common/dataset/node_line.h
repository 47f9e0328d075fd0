// One line of a dataset folder's nodes.svm (the format of
// common/dataset/dataset.h): what LoadDataset parses of every node and an
// agent host of its own nodes (common/dataset/device_index.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset_meta.h"

namespace ldpgraph {

// One line of nodes.svm (without its '\n'; a trailing '\r' is ignored), with
// LoadDataset's checks and errors ("<path>:<line_number>: ..."): the node's
// label (-1 for none) and its stored non-zeros (0-based indices, ascending)
// appended to *indices and *values. What an agent host parses of its own
// nodes' lines (common/dataset/device_index.h).
absl::Status ParseNodeLine(const std::string& path, size_t line_number,
                           absl::string_view line, const DatasetMeta& meta,
                           int32_t* label, std::vector<uint32_t>* indices,
                           std::vector<float>* values);

}  // namespace ldpgraph

// The device index: how an agent host reads its own nodes' records, and
// nothing else, from a dataset folder.
//
// A real device holds one record; a simulated agent host holds a shard of a
// dataset folder. It must not need the rest of the folder: not to scale
// (common/dataset/feature_schema.h), not to find its lines, not to learn
// its neighbours. devices.idx, written beside the three dataset files by
// WriteDataset and by `ldpgraph prepare`, lets it read only its nodes'
// lines of nodes.svm and their neighbour lists, in time and memory that
// grow with the shard and not with the dataset.
//
// Layout (little-endian):
//   char[8]  "LDPGDIX1"
//   u64      nodes (n)
//   u64      byte size of nodes.svm when indexed
//   u64      adjacency entries (2 x edges)
//   u64      line_offset[n + 1]   node i's line of nodes.svm is
//                                 [line_offset[i], line_offset[i + 1]),
//                                 its '\n' included
//   u64      adjacency_offset[n + 1]
//   u32      adjacency[entries]   node i's neighbours, ascending, are
//                                 adjacency[adjacency_offset[i] ..
//                                 adjacency_offset[i + 1])
// The neighbour lists are edges.txt's graph, so edges.txt is never read by
// a device. The index is derived data: rewritten whenever the files change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "common/graph/graph.h"

namespace ldpgraph {

inline constexpr char kDeviceIndexFile[] = "devices.idx";

// Writes dir/devices.idx for dir/nodes.svm (its line offsets, read in
// chunks) and g (the graph edges.txt holds), atomically. INVALID_ARGUMENT
// when nodes.svm's line count is not g's node count; file errors name the
// path.
absl::Status WriteDeviceIndex(const std::string& dir, const Graph& g);

// One node's record as stored: what its device holds.
struct DeviceRecord {
  uint32_t node = 0;
  int32_t label = -1;              // -1: none
  std::vector<uint32_t> indices;   // stored non-zeros, 0-based, ascending
  std::vector<float> values;
  std::vector<uint32_t> neighbours;  // ascending
};

// The records of nodes [begin, end) of the dataset folder dir, whose
// meta.json says `meta`: reads only the header of devices.idx, the shard's
// slices of it, and the shard's lines of nodes.svm. INVALID_ARGUMENT for an
// empty range or one beyond meta.nodes; FAILED_PRECONDITION naming
// `ldpgraph prepare` for a missing index or one that does not match the
// folder (another node count, a nodes.svm of another size, offsets that do
// not fall on the shard's line boundaries); a shard line's parse error as
// LoadDataset gives it ("<dir>/nodes.svm:<line>: ...").
absl::StatusOr<std::vector<DeviceRecord>> ReadDeviceRecords(
    const std::string& dir, const DatasetMeta& meta, uint32_t begin,
    uint32_t end);

}  // namespace ldpgraph

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
//   char[8]  "LDPGDIX2"
//   u64      nodes (n)
//   u64      byte size of nodes.svm when indexed
//   u8[32]   SHA-256 of nodes.svm when indexed
//   u64      byte size of edges.txt when indexed
//   u8[32]   SHA-256 of edges.txt when indexed
//   u64      adjacency entries (2 x edges)
//   u64      line_offset[n + 1]   node i's line of nodes.svm is
//                                 [line_offset[i], line_offset[i + 1]),
//                                 its '\n' included
//   u64      adjacency_offset[n + 1]
//   u32      adjacency[entries]   node i's neighbours, ascending, are
//                                 adjacency[adjacency_offset[i] ..
//                                 adjacency_offset[i + 1])
// The neighbour lists are edges.txt's graph, so a device never parses
// edges.txt. The index is derived data: rewritten whenever the files
// change, and refused, naming the file and `ldpgraph prepare`, when it was
// made from other files (sizes always; the SHA-256 of both files too when
// they are small enough to hash at every start, see
// kDeviceIndexChecksumBytes). An index of the older format (LDPGDIX1,
// which recorded nodes.svm's size only) is refused the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dataset/dataset_meta.h"
#include "common/graph/graph.h"

namespace ldpgraph {

inline constexpr char kDeviceIndexFile[] = "devices.idx";

// ReadDeviceRecords hashes nodes.svm and edges.txt whole, against the
// SHA-256 the index recorded, when the two together are at most this many
// bytes (cora 0.4 MB, pubmed 14 MB; 64 MiB hash in about 50 ms where the
// processor has SHA instructions, `openssl dgst -sha256`). Past it a host
// checks their sizes only, so that its start stays in time with its shard
// and not with the dataset: a removed or added line changes a size; an
// edit of the same length in a larger folder is not seen (re-run `ldpgraph
// prepare` after editing one).
inline constexpr uint64_t kDeviceIndexChecksumBytes = uint64_t{64} << 20;

// Writes dir/devices.idx for dir/nodes.svm (its line offsets, read in
// chunks) and g (the graph dir/edges.txt holds), atomically, recording the
// size and SHA-256 of both files. INVALID_ARGUMENT when nodes.svm's line
// count is not g's node count; file errors name the path.
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
// folder (an older format, another node count, a nodes.svm or edges.txt of
// another size, or of another SHA-256 when the two files together are at
// most `checksum_bytes`; offsets that do not fall on the shard's line
// boundaries); a shard line's parse error as LoadDataset gives it
// ("<dir>/nodes.svm:<line>: ..."). With checksum_bytes = 0 it reads nothing
// but the index's header and slices and the shard's lines.
absl::StatusOr<std::vector<DeviceRecord>> ReadDeviceRecords(
    const std::string& dir, const DatasetMeta& meta, uint32_t begin,
    uint32_t end, uint64_t checksum_bytes = kDeviceIndexChecksumBytes);

}  // namespace ldpgraph

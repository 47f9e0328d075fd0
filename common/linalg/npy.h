// NumPy .npy files (format version 1.0): the interchange format for
// embeddings and feature matrices, read by numpy.load. ldpgraph writes
// float32 ('<f4'), C order, 2-D; and int64 ('<i8') 1-D for node ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/linalg/matrix.h"

namespace ldpgraph {

// Writes m as a 2-D little-endian float32 array in C order. The file is
// written under a temporary name and renamed, so a failure (a full disk)
// leaves no partial file at path; the error names the path.
absl::Status WriteNpy(const std::string& path, const DenseMatrix& m);

// Writes values as a 1-D little-endian int64 array ('<i8'), the same way
// (node ids beside an exported embedding).
absl::Status WriteNpyInt64(const std::string& path,
                           const std::vector<int64_t>& values);

// Reads a 2-D float32 C-order .npy file (version 1.0, 2.0 or 3.0).
// INVALID_ARGUMENT naming the path and what is unsupported or malformed.
absl::StatusOr<DenseMatrix> ReadNpy(const std::string& path);

}  // namespace ldpgraph

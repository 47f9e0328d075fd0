// Where backward push's output goes, block of columns by block
// (ppr_push.cc's RunPush): straight into a dense n x d buffer, or held
// sparse until the layout is known (PprPushByDensity, propagation.h, states
// the contract and the memory). Not part of the library's interface.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"

namespace ldpgraph::propagation::internal {

// One finished block of Z held sparse: the nodes (relabelled ids,
// ascending) with a non-zero among columns [j0, j0 + w), each one's mask
// (bit k: column j0 + k) and its non-zeros, k ascending.
struct BlockEntries {
  size_t j0 = 0;
  std::vector<NodeId> nodes;
  std::vector<uint16_t> masks;
  std::vector<float> values;
};

// Where push's blocks of Z go: straight into a dense n x d row-major
// buffer, or, while Z may still be laid out sparse, held as BlockEntries
// until they total more than max_nonzeros non-zeros, when the sink turns
// dense (PprPushByDensity's contract). Workers call Write concurrently,
// each for its own columns; Finish runs once they are done.
class OutputSink {
 public:
  // order: relabelled node id -> row of Z (outlives the sink). max_nonzeros
  // 0: dense from the start, dense_out() called here; dense_out must
  // return n * d floats (the process aborts otherwise: a caller's bug).
  OutputSink(size_t n, size_t d, const std::vector<NodeId>& order,
             uint64_t max_nonzeros,
             absl::FunctionRef<absl::Span<float>()> dense_out);

  // Columns [j0, j0 + w) of Z from the block's reserves (kw doubles per
  // relabelled node v): z(order[v], j0 + k) = deg_r[v] * reserve[v * kw + k]
  // as a float. Zeroes the reserves for the next block.
  void Write(size_t j0, size_t w, size_t kw, const std::vector<double>& deg_r,
             double* reserve);

  // Z's non-zeros written so far.
  uint64_t nonzeros() const {
    return nonzeros_.load(std::memory_order_relaxed);
  }

  // After the last Write: Z as compressed rows, or nullopt once dense.
  std::optional<SparseRows> Finish();

 private:
  float* Request();
  void Scatter(const BlockEntries& b, float* dense) const;
  void Add(BlockEntries b);

  const size_t n_, d_;
  const std::vector<NodeId>& order_;  // relabelled id -> row of Z
  const uint64_t max_nonzeros_;
  const absl::FunctionRef<absl::Span<float>()> dense_out_;
  std::atomic<float*> dense_{nullptr};
  std::atomic<uint64_t> nonzeros_{0};
  std::mutex mu_;
  std::vector<BlockEntries> blocks_;  // guarded by mu_ until Finish
};

}  // namespace ldpgraph::propagation::internal

#include "server/propagation/internal/push_output.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <utility>

namespace ldpgraph::propagation::internal {

OutputSink::OutputSink(size_t n, size_t d, const std::vector<NodeId>& order,
                       uint64_t max_nonzeros,
                       absl::FunctionRef<absl::Span<float>()> dense_out)
    : n_(n), d_(d), order_(order), max_nonzeros_(max_nonzeros),
      dense_out_(dense_out) {
  if (max_nonzeros == 0) dense_.store(Request(), std::memory_order_release);
}

void OutputSink::Write(size_t j0, size_t w, size_t kw,
                       const std::vector<double>& deg_r, double* reserve) {
  auto value = [&](NodeId v, size_t k) {
    return static_cast<float>(deg_r[v] * reserve[size_t{v} * kw + k]);
  };
  if (float* dense = dense_.load(std::memory_order_acquire)) {
    uint64_t count = 0;
    for (NodeId v = 0; v < n_; ++v) {
      float* out = dense + size_t{order_[v]} * d_ + j0;
      for (size_t k = 0; k < w; ++k) {
        out[k] = value(v, k);
        count += out[k] != 0.0f;
      }
      std::fill_n(reserve + size_t{v} * kw, kw, 0.0);
    }
    nonzeros_.fetch_add(count, std::memory_order_relaxed);
    return;
  }
  // Counted first, so that the block's vectors are allocated exactly.
  size_t nodes = 0, values = 0;
  for (NodeId v = 0; v < n_; ++v) {
    size_t here = 0;
    for (size_t k = 0; k < w; ++k) here += value(v, k) != 0.0f;
    nodes += here != 0;
    values += here;
  }
  BlockEntries b;
  b.j0 = j0;
  b.nodes.reserve(nodes);
  b.masks.reserve(nodes);
  b.values.reserve(values);
  for (NodeId v = 0; v < n_; ++v) {
    uint16_t mask = 0;
    for (size_t k = 0; k < w; ++k) {
      const float f = value(v, k);
      if (f != 0.0f) {
        mask |= static_cast<uint16_t>(1u << k);
        b.values.push_back(f);
      }
    }
    if (mask != 0) {
      b.nodes.push_back(v);
      b.masks.push_back(mask);
    }
    std::fill_n(reserve + size_t{v} * kw, kw, 0.0);
  }
  Add(std::move(b));
}

std::optional<SparseRows> OutputSink::Finish() {
  if (dense_.load(std::memory_order_acquire) != nullptr) return std::nullopt;
  std::sort(blocks_.begin(), blocks_.end(),
            [](const BlockEntries& a, const BlockEntries& b) {
              return a.j0 < b.j0;
            });
  SparseRows z;
  z.rows = n_;
  z.cols = d_;
  z.offsets.assign(n_ + 1, 0);
  for (const BlockEntries& b : blocks_) {
    for (size_t i = 0; i < b.nodes.size(); ++i) {
      z.offsets[order_[b.nodes[i]] + 1] += std::popcount(b.masks[i]);
    }
  }
  for (size_t v = 0; v < n_; ++v) z.offsets[v + 1] += z.offsets[v];
  z.indices.resize(z.offsets[n_]);
  z.values.resize(z.offsets[n_]);
  // Blocks in column order: each row's indices come out ascending.
  std::vector<uint64_t> cursor(z.offsets.begin(), z.offsets.end() - 1);
  for (BlockEntries& b : blocks_) {
    size_t p = 0;
    for (size_t i = 0; i < b.nodes.size(); ++i) {
      uint64_t& c = cursor[order_[b.nodes[i]]];
      for (uint32_t m = b.masks[i]; m != 0; m &= m - 1) {
        z.indices[c] = static_cast<uint32_t>(b.j0 + std::countr_zero(m));
        z.values[c++] = b.values[p++];
      }
    }
    b = BlockEntries();  // freed as soon as it is read
  }
  blocks_.clear();
  return z;
}

// The caller's dense buffer (n * d floats, its contract).
float* OutputSink::Request() {
  const absl::Span<float> out = dense_out_();
  if (out.size() != n_ * d_) std::abort();  // the caller broke its contract
  return out.data();
}

// The block's non-zeros into the dense buffer (already zeroed).
void OutputSink::Scatter(const BlockEntries& b, float* dense) const {
  size_t p = 0;
  for (size_t i = 0; i < b.nodes.size(); ++i) {
    float* out = dense + size_t{order_[b.nodes[i]]} * d_ + b.j0;
    for (uint32_t m = b.masks[i]; m != 0; m &= m - 1) {
      out[std::countr_zero(m)] = b.values[p++];
    }
  }
}

void OutputSink::Add(BlockEntries b) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t total =
      nonzeros_.fetch_add(b.values.size(), std::memory_order_relaxed) +
      b.values.size();
  if (float* dense = dense_.load(std::memory_order_relaxed)) {
    Scatter(b, dense);  // the sink turned dense while b was pushed
    return;
  }
  blocks_.push_back(std::move(b));
  if (total <= max_nonzeros_) return;
  // Too many for the sparse layout: every block so far goes dense, and
  // the buffer is published only once it holds them (a worker that sees
  // it writes its own columns straight in).
  float* dense = Request();
  std::fill_n(dense, n_ * d_, 0.0f);
  for (const BlockEntries& held : blocks_) Scatter(held, dense);
  std::vector<BlockEntries>().swap(blocks_);
  dense_.store(dense, std::memory_order_release);
}

}  // namespace ldpgraph::propagation::internal

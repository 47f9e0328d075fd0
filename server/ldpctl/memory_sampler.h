// The memory a process tree holds at once: a thread that, every interval,
// adds up the resident set (VmRSS) of this process and of every process
// descended from it (ldpctl simulate's curator, frontends and agent hosts),
// and keeps the largest sum seen. What "peak memory over all processes
// together" means; the sum of each process's own peak (VmHWM) is only an
// upper bound, since the peaks need not coincide.
//
// Linux only (reads /proc). A process that starts and ends between two
// samples is missed, and a peak shorter than the interval may be; the
// interval bounds that error in time, not in bytes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace ldpgraph::ldpctl {

// The resident bytes of `root` and its descendants now (0 for a process
// that is gone). Reads /proc/<pid>/stat of every process to find the tree.
uint64_t TreeResidentBytes(int root);

class MemorySampler {
 public:
  // Starts sampling the tree of this process at once.
  explicit MemorySampler(
      std::chrono::milliseconds interval = std::chrono::milliseconds(100));
  ~MemorySampler();  // stops the thread
  MemorySampler(const MemorySampler&) = delete;
  MemorySampler& operator=(const MemorySampler&) = delete;

  // The largest sum sampled so far, in bytes (at least one sample: the one
  // taken at construction).
  uint64_t PeakBytes() const { return peak_.load(); }
  // Samples now (also updating the peak) and returns the sum.
  uint64_t SampleNow() const;
  // How many samples have been completed so far (the one taken at
  // construction included). A sample counted after a moment T began after
  // T once the count has grown by two: one that was under way at T is
  // counted once at most.
  uint64_t Samples() const { return samples_.load(); }

 private:
  std::chrono::milliseconds interval_;
  mutable std::atomic<uint64_t> peak_{0};
  mutable std::atomic<uint64_t> samples_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ldpgraph::ldpctl

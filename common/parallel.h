// Fork-join parallelism for the curator's numerical work: one ParallelFor
// over a fixed list of tasks, and the default worker count.
//
// Determinism is the caller's to keep, and the rule is simple: split the
// work into tasks whose boundaries do not depend on the thread count, let
// each task write only its own outputs, and combine per-task partial results
// in task order. Then the result is the same bit for bit with 1 or 64
// threads, because the threads only decide who runs a task, not what it
// computes.
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace ldpgraph {

// The number of CPUs this process may run on (its affinity mask, which
// honours taskset and container cpusets), at least 1.
inline int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// threads if >= 1, else (0, "every core") AvailableCpus().
inline int ResolveThreads(int threads) {
  return threads >= 1 ? threads : AvailableCpus();
}

// Runs body(worker, task) for every task in [0, tasks), each exactly once,
// on min(threads, tasks) workers (the calling thread is worker 0); worker is
// in [0, threads) and indexes per-worker scratch space. Tasks are handed out
// in ascending order as workers free up. Returns when all are done.
template <typename Body>
void ParallelFor(size_t tasks, int threads, Body&& body) {
  const int workers =
      static_cast<int>(std::min<size_t>(std::max(threads, 1), tasks));
  if (workers <= 1) {
    for (size_t t = 0; t < tasks; ++t) body(0, t);
    return;
  }
  std::atomic<size_t> next{0};
  auto run = [&](int w) {
    for (size_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks;)
      body(w, t);
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (int w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (auto& t : pool) t.join();
}

}  // namespace ldpgraph

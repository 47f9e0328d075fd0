// Thread counts as the tools and the pipeline take them: a positive count
// as given, 0 for every core of the machine.
#pragma once

#include <algorithm>
#include <thread>

namespace ldpgraph {

// threads > 0: threads. 0 (or less): std::thread::hardware_concurrency(),
// at least 1 (the standard allows it to report 0 when it cannot tell).
inline int ResolveThreads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace ldpgraph

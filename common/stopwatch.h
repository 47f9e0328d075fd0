// Wall-clock seconds for progress lines and reported figures.
#pragma once

#include <chrono>

namespace ldpgraph {

// Seconds elapsed since t (steady clock).
inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace ldpgraph

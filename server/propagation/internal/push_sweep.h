// Backward push's inner loop (push_sweep.cc): one block of columns pushed
// until no residue exceeds rmax, compiled for several x86 targets and
// picked at run time by what the CPU supports. Internal to propagation
// (ppr_push.cc's PushWorker calls it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/graph/graph.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::propagation::internal {

// What one block's sweeps read and write. Residue rows are kW floats
// (residue[v * kW + k]), reserve rows kW doubles; active has a bit per node.
struct BlockSpace {
  float* residue;
  double* reserve;
  uint64_t* active;
  size_t words;              // of active
  const uint64_t* offsets;   // the relabelled graph's CSR
  const NodeId* targets;
  uint64_t num_targets;      // entries of targets
  const float* push_coef;    // (1 - alpha) / deg(u), as the float it is used as
  float rmax;
  double alpha;
  size_t columns;            // the block's real width (<= the lanes)
};

// Pushes the block in s until no residue exceeds rmax (push_sweep.cc's
// SweepBlock states the order of pushes), adding to stats' pushes and
// residue_updates.
using SweepFn = void (*)(const BlockSpace&, PropagationStats&);

// The sweep for kw lanes (1, 2, 4, 8 or 16) over n nodes: prefetching when
// the residues pass kPrefetchAboveBytes, compiled for the best target the
// CPU supports (every target gives the same bits).
SweepFn SweepFor(size_t kw, size_t n);

}  // namespace ldpgraph::propagation::internal

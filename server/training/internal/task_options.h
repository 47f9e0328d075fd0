// Internal to the node and link tasks (server/training/node_task.cc,
// link_task.cc, node_task_validation.cc): the training options both derive
// for mini-batches, and the check of the epoch counts both take.
#pragma once

#include "absl/status/status.h"
#include "server/training/options.h"

namespace ldpgraph::training::internal {

// The training options with mini-batches: the config's batched epochs,
// patience and learning rate in place of train's (no minimum epochs).
template <typename Config>
TrainOptions BatchedOptions(const Config& c) {
  TrainOptions o = c.train;
  o.max_epochs = c.batched_max_epochs;
  o.patience = c.batched_patience;
  o.min_epochs = 0;
  o.adam.learning_rate = c.batched_learning_rate;
  return o;
}

// INVALID_ARGUMENT unless c.train's and the mini-batches' epochs and
// patience are all >= 1.
template <typename Config>
absl::Status ValidateEpochs(const Config& c) {
  if (c.train.max_epochs < 1 || c.train.patience < 1 ||
      c.batched_max_epochs < 1 || c.batched_patience < 1) {
    return absl::InvalidArgumentError("epochs and patience must be >= 1");
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::training::internal

// Internal to node classification (server/training/node_task.cc and
// node_task_validation.cc): the shape of a task's features, whichever way
// they are given, and the validation of a task's data and settings.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "server/training/node_task.h"

namespace ldpgraph::training::internal {

// The features' shape, dense or sparse (one is set).
size_t InputRows(const NodeTaskData& d);
size_t InputCols(const NodeTaskData& d);

// INVALID_ARGUMENT naming what is wrong with d or c (TrainNodeClassifier's
// contract, node_task.h), OK otherwise.
absl::Status ValidateNodeData(const NodeTaskData& d, const NodeModelConfig& c);

}  // namespace ldpgraph::training::internal

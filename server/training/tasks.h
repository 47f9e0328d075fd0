// The two learning tasks on features the curator holds (estimated,
// propagated): node classification (MLP, GCN or GraphSAGE; clean labels or
// labels seen through randomized response) and link prediction (the
// Hadamard product of two node vectors into logistic regression or an MLP).
// Each trains with early stopping on its validation set and scores the best
// checkpoint on the test set.
//
// The settings: NodeModelKind, NodeModelConfig, LinkLossKind,
// LinkModelConfig and the automatic batching rules' constants
// (kNodeFullBatchEntries, kNodeAutoBatchRows, kLinkFullBatchEntries,
// kLinkAutoBatchPairs): options.h. Each task's API: node_task.h and
// link_task.h, both included here.
#pragma once

#include "server/training/link_task.h"
#include "server/training/node_task.h"

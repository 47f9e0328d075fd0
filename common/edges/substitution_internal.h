// Internal to the neighbour substitution (substitution.h): what the node's
// protocol (substitution_node.cc) and the in-memory driver (substitution.cc)
// share. Not for use outside common/edges.
#pragma once

#include <vector>

#include "ldpgraph/v1/edge_exchange.pb.h"
#include "ldpgraph/v1/mechanism.pb.h"

namespace ldpgraph::edges::substitution_internal {

// Every feature vector a message carries.
std::vector<const v1::FeatureReport*> VectorsOf(const v1::EdgeExchange& m);

}  // namespace ldpgraph::edges::substitution_internal

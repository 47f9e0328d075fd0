// `ldpgraph edges`: private edges, the edge LDP thesis's grid ("Structural
// Differential Privacy in Graph Neural Networks", Chapter 4) reproduced,
// with a link-inference attack on the released model outputs.
//
// For each run, each feature budget eps_x and each graph (degree-preserving
// neighbour substitution, approach 1 or 2; randomized response on the
// neighbour bit vector; Blink; the true graph) at each edge budget eps_e,
// the curator learns with LPGNN's pipeline (server/pipeline: Multi-bit
// features, KProp, label randomized response, GCN or GraphSAGE) on the
// private graph, for each label budget eps_y and model; an MLP without any
// graph is the baseline. Each cell reports test accuracy and the AUC of two
// attacks on the released model, scored on every true-graph edge against as
// many true-graph non-edges: a similarity attack (the cosine similarity of
// two nodes' class posteriors) and LinkTeller's influence attack, which
// queries the model (server/attacks/link_inference.h).
//
// The command's pieces: its flags and help (edges_options.h), the grid's
// run (edges_grid.h) on the pipeline's private graphs (server/pipeline/
// private_graph.h: one Multi-bit report per node serves both the neighbours
// and the curator, as in a deployment), and its reports (edges_report.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "server/ldpgraph/edges_grid.h"
#include "server/ldpgraph/edges_options.h"
#include "server/ldpgraph/edges_report.h"

namespace ldpgraph::tool {

// The command: args without the subcommand name; the table or JSON to out,
// progress and errors to err. Exit codes: kExitOk; kExitUsageError for a
// bad flag (before any work), or a grid that cannot run (no edge or no
// non-edge, a bad setting); kExitRuntimeError for a dataset that cannot be
// loaded, a file that cannot be written, or another failure.
int RunEdges(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err);

}  // namespace ldpgraph::tool

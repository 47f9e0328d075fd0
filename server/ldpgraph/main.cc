// ldpgraph: the offline research tool. Subcommands run ldpgraph's libraries
// directly, without a curator or agents.
#include <iostream>
#include <string>
#include <vector>

#include "server/ldpgraph/edges_command.h"
#include "server/ldpgraph/eval_command.h"
#include "server/ldpgraph/generate_command.h"
#include "server/ldpgraph/plot_command.h"
#include "server/ldpgraph/prepare_command.h"
#include "server/ldpgraph/propagate_command.h"
#include "server/ldpgraph/sample_command.h"
#include "server/ldpgraph/sweep_command.h"

namespace {

constexpr char kUsage[] = R"(ldpgraph: graph learning under local differential privacy, offline.

Usage: ldpgraph <command> [flags]

Commands:
  sample     perturb a value or vector with one LDP mechanism; estimate;
             summarise moments against the formulas
  generate   write a synthetic dataset folder (planted classes, heavy-tailed
             degrees, class-correlated sparse features), deterministic by seed
  prepare    ready a dataset folder for agent hosts: its public feature
             schema (computed centrally if it declares none) and the device
             index each host reads its own nodes' records through
  propagate  perturb each node's features (optional), then propagate them:
             personalised PageRank by push or power iteration, GCN, KProp;
             writes a .npy file
  eval       train and evaluate on perturbed data (node classification or
             link prediction), R runs; mean, spread, every setting used
  repro      run a paper's grid (mechanisms by budgets) and print it beside
             the paper's numbers
  sweep      accuracy against the feature budget for LPGNN, PrivGE, UPGNET
             and a combined pipeline, beside the baselines that use no
             private feature (table, JSON, SVG chart)
  edges      private edges: neighbour substitution and randomized response
             by edge budget, learning on the private graph, and a
             link-inference attack on the released outputs (the edge LDP
             thesis, "Structural Differential Privacy in Graph Neural Networks")
  plot       draw a line chart (JSON: series of x, y, error bars) as SVG
  help       this text

Run `ldpgraph <command> --help` for a command's flags.
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" ||
      args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "sample") {
    return ldpgraph::tool::RunSample(args, std::cout, std::cerr);
  }
  if (command == "generate") {
    return ldpgraph::tool::RunGenerate(args, std::cout, std::cerr);
  }
  if (command == "prepare") {
    return ldpgraph::tool::RunPrepare(args, std::cout, std::cerr);
  }
  if (command == "propagate") {
    return ldpgraph::tool::RunPropagate(args, std::cout, std::cerr);
  }
  if (command == "eval") {
    return ldpgraph::tool::RunEval(args, std::cout, std::cerr);
  }
  if (command == "repro") {
    return ldpgraph::tool::RunRepro(args, std::cout, std::cerr);
  }
  if (command == "sweep") {
    return ldpgraph::tool::RunSweep(args, std::cout, std::cerr);
  }
  if (command == "edges") {
    return ldpgraph::tool::RunEdges(args, std::cout, std::cerr);
  }
  if (command == "plot") {
    return ldpgraph::tool::RunPlot(args, std::cout, std::cerr);
  }
  std::cerr << "ldpgraph: unknown command '" << command
            << "'\n(run `ldpgraph help` for the list)\n";
  return 2;
}

// The flags of `ldpgraph edges` (edges_command.h): the graphs of the grid,
// every option with its default, the parser and the --help text.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/names.h"
#include "server/training/tasks.h"

namespace ldpgraph::tool {

// The graphs the curator can learn on.
enum class EdgeGraph {
  kNs1,   // neighbour substitution, approach 1 (candidate relay)
  kNs2,   // neighbour substitution, approach 2 (similarity queries)
  kRr,    // randomized response on the neighbour bit vector, kLowerId
  kTrue,  // the true graph (no edge privacy; independent of eps_e)
  kBlink,  // Blink (common/edges/blink.h): eps_e is its total budget
  // No graph: an MLP on the features (K_x = K_y = 0, no edges), the
  // graph-free baseline; independent of eps_e and of --models.
  kMlp,
};
// The graphs' names, "ns1", "ns2", "rr", "true", "blink", "mlp" (--graphs).
inline constexpr auto kEdgeGraphNames = MakeNameTable<EdgeGraph>(
    "graph", {{EdgeGraph::kNs1, "ns1"},
              {EdgeGraph::kNs2, "ns2"},
              {EdgeGraph::kRr, "rr"},
              {EdgeGraph::kTrue, "true"},
              {EdgeGraph::kBlink, "blink"},
              {EdgeGraph::kMlp, "mlp"}});
inline absl::string_view EdgeGraphName(EdgeGraph g) {
  return kEdgeGraphNames.Name(g);
}

inline constexpr double kNoPrivacy = std::numeric_limits<double>::infinity();

// Every flag of `ldpgraph edges`, defaults as documented in EdgesHelp().
struct EdgesOptions {
  std::string dataset;
  std::vector<double> edge_epsilons{0.1, 1, 2, 8};  // finite, > 0
  std::vector<double> feature_epsilons{1, 2, 3, kNoPrivacy};  // inf: raw
  std::vector<double> label_epsilons{1, 3, kNoPrivacy};  // inf: clean labels
  std::vector<training::NodeModelKind> models{training::NodeModelKind::kGcn,
                                              training::NodeModelKind::kSage};
  std::vector<EdgeGraph> graphs{EdgeGraph::kNs1, EdgeGraph::kNs2,
                                EdgeGraph::kRr, EdgeGraph::kTrue};
  int runs = 2;
  uint64_t seed = 1;
  // Substitution parameters (eps_e set per cell); public configuration.
  // Defaults: the library's (edges::SubstitutionParams).
  edges::Similarity similarity = edges::SubstitutionParams().similarity;
  int top_k = edges::SubstitutionParams().top_k;
  int max_dummies = edges::SubstitutionParams().max_dummies;
  double dummy_mean = edges::SubstitutionParams().dummy_mean;
  double dummy_std = edges::SubstitutionParams().dummy_std;
  // KProp steps; unset: the thesis's values for the dataset (K_x = 16;
  // K_y = 2, or 0 for pubmed and lastfm).
  std::optional<int> feature_steps;
  std::optional<int> label_steps;
  std::optional<int> epochs;    // the pipeline's max_epochs when set
  std::optional<int> patience;  // the pipeline's patience when set
  // Blink: the degree's share of eps_e, in (0, 1), and the graph variant.
  double blink_delta = 0.1;
  edges::BlinkVariant blink_variant = edges::BlinkVariant::kHard;
  // The cap on the beta model's fixed-point iterations (the library's
  // default, 200).
  int blink_iterations = edges::BetaFitOptions().max_iterations;
  // An RR graph whose expected edge count n(n-1)/2 * q exceeds this is not
  // built; its cells say so. So is a Blink graph whose reports hold more
  // than this many pairs in expectation, n(n-1)/2 * p at eps_a.
  uint64_t max_rr_edges = 20'000'000;
  // The attacks on every cell's released model (--attacks): the
  // similarity attack on its posteriors, and LinkTeller's influence attack
  // (server/training/linkteller.h) querying it. At least one.
  bool similarity_attack = true;
  bool linkteller_attack = true;
  // LinkTeller's sources: this many nodes drawn uniformly once from --seed
  // (public; the same for every cell), each queried for its influence on
  // the other end of every evaluated pair it is in; 0: every node.
  uint32_t linkteller_sources = 100;
  int threads = 1;
  bool secure = false;
  bool json = false;
  std::string save_json;  // also write the JSON here when not empty
  // When not empty, the charts of EdgesCharts (server/ldpgraph/charts.h)
  // go to this file and its siblings, after the table or JSON.
  std::string plot;
};

// Parses the flags (without the subcommand name). INVALID_ARGUMENT naming
// the flag and the rule for anything wrong.
absl::StatusOr<EdgesOptions> ParseEdgesOptions(
    const std::vector<std::string>& args);

// The --help text.
std::string EdgesHelp();

// A model's name as the grid prints it: "mlp", "gcn", "sage".
absl::string_view EdgesModelName(training::NodeModelKind k);

}  // namespace ldpgraph::tool

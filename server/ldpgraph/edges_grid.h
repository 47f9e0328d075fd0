// The grid `ldpgraph edges` runs (edges_command.h): for each run, feature
// budget eps_x and graph row (a private graph at an edge budget eps_e, the
// true graph, or none), the pipeline trains each (eps_y, model) cell on
// that graph and the link-inference attacks (server/attacks/
// link_inference.h) score its released model. The private graphs are the
// pipeline's (server/pipeline/private_graph.h), built from the same feature
// reports the cells train on.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "server/ldpgraph/edges_options.h"
#include "server/pipeline/config.h"
#include "server/pipeline/private_graph.h"
#include "server/training/tasks.h"

namespace ldpgraph::tool {

// The pipeline configuration of one cell: LPGNN (DefaultConfig), Multi-bit
// at eps_x on [0, 1] (mechanism "none" for eps_x = inf), label RR at eps_y
// (unset for inf), K_x and K_y as in o (or the thesis's for d's name), the
// model, node outputs kept. Model kMlp is the graph-free baseline: K_x =
// K_y = 0.
pipeline::PipelineConfig CellConfig(const EdgesOptions& o,
                                    const DatasetMeta& meta, double eps_x,
                                    double eps_y,
                                    training::NodeModelKind model);

// The private graph of row g at edge budget eps_e under o: the
// substitution's parameters and threads, Blink's delta, variant and
// iterations, and the cap o.max_rr_edges. INVALID_ARGUMENT for kTrue and
// kMlp, which build none.
absl::StatusOr<pipeline::PrivateGraphConfig> GraphConfig(
    EdgeGraph g, double eps_e, const EdgesOptions& o);

// One row of a model's table: a graph, and its edge budget (none for the
// true graph and mlp).
struct GridRow {
  EdgeGraph graph;
  std::optional<double> eps_e;
  std::optional<std::string> skipped;  // "RR graph of ~N edges"
};

// What one cell collects over the runs (one value per run).
struct GridCell {
  std::vector<double> accuracy, attack_auc, linkteller_auc, seconds;
  std::vector<double> linkteller_seconds;
  std::vector<double> graph_edges, graph_seconds;
  std::vector<double> graph_homophily, true_edges_kept;
  // Per run: SubstitutionStatsJson and BlinkJson (edges_report.h), with
  // "run".
  nlohmann::json substitution_runs = nlohmann::json::array();
  nlohmann::json blink_runs = nlohmann::json::array();
};

// What a grid's run collected, for its report (edges_report.h).
struct GridResults {
  std::vector<GridRow> rows;
  // One per (model, row, eps_x, eps_y) of the options, in that order.
  std::vector<GridCell> cells;
  size_t negatives = 0;  // the attacks' sampled non-edges
  size_t linkteller_sources_drawn = 0;
  std::string noise_source;  // "seeded-not-private" or "secure"

  const GridCell& cell(const EdgesOptions& o, size_t model, size_t row,
                       size_t eps_x, size_t eps_y) const {
    return cells[((model * rows.size() + row) * o.feature_epsilons.size() +
                  eps_x) *
                     o.label_epsilons.size() +
                 eps_y];
  }
};

// The whole grid of o on d: the JSON object `--format json` prints
// (documented in EdgesHelp(), built by GridJson). Progress lines go to
// progress when set.
absl::StatusOr<nlohmann::json> RunEdgesGrid(const Dataset& d,
                                            const EdgesOptions& o,
                                            std::ostream* progress);

}  // namespace ldpgraph::tool

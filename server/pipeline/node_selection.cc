// The node task's choices among candidates, each trained on this run's
// split and reports and judged by its validation accuracy: LPGNN's tuning
// of its steps, NFR and model settings (TuneSteps), PrivGE's propagation
// (ChoosePropagation), and the inputs (TrainOnInputs).
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/pipeline/baselines.h"
#include "server/pipeline/internal/deferred_kprop.h"
#include "server/pipeline/internal/node_task.h"
#include "server/pipeline/nfr.h"

namespace ldpgraph::pipeline::internal {
namespace {

// The values LPGNN's tuning tries of each setting: c's grid, or c's own
// value alone when the grid is empty (K_y's too without a label budget).
struct TuningGrids {
  std::vector<int> feature_steps, label_steps;
  std::vector<double> nfr_tau, learning_rate, weight_decay, dropout;
};

TuningGrids TuningGridsOf(const PipelineConfig& c) {
  auto grid_or = [](const std::vector<double>& grid, double value) {
    return grid.empty() ? std::vector<double>{value} : grid;
  };
  TuningGrids g;
  g.feature_steps = c.tune_feature_steps.empty()
                        ? std::vector<int>{c.feature_steps}
                        : c.tune_feature_steps;
  g.label_steps = c.label_epsilon && !c.tune_label_steps.empty()
                      ? c.tune_label_steps
                      : std::vector<int>{c.label_steps};
  g.nfr_tau = grid_or(c.tune_nfr, c.nfr_tau);
  g.learning_rate =
      grid_or(c.tune_learning_rate, c.node_model.train.adam.learning_rate);
  g.weight_decay =
      grid_or(c.tune_weight_decay, c.node_model.train.adam.weight_decay);
  g.dropout = grid_or(c.tune_dropout, c.node_model.dropout);
  return g;
}

// The tuning's candidates on `features` (candidate's estimates with NFR's
// tau, propagated by kx steps): every K_y and model setting of g trained,
// its row added to s->candidates, and s set to it when its validation beats
// *best (which it then becomes).
absl::Status TuneOnFeatures(const NodeRunInputs& candidate,
                            const PipelineConfig& c, const TuningGrids& g,
                            const NodeFeatures& features, double tau, int kx,
                            uint64_t model_seed, double* best,
                            StepTuning* s) {
  for (int ky : g.label_steps) {
    for (double lr : g.learning_rate) {
      for (double wd : g.weight_decay) {
        for (double dropout : g.dropout) {
          PipelineConfig cc = c;
          cc.node_model.train.adam.learning_rate = lr;
          cc.node_model.train.adam.weight_decay = wd;
          cc.node_model.dropout = dropout;
          ASSIGN_OR_RETURN(RunResult t,
                           TrainNodeOnce(candidate, cc, features, ky, true,
                                         model_seed));
          nlohmann::json row = {{"feature_steps", kx},
                                {"label_steps", ky},
                                {"validation", t.training.best_validation},
                                {"epochs", t.training.epochs}};
          if (!c.tune_nfr.empty()) row["nfr_tau"] = tau;
          if (s->tune_model) {
            row["learning_rate"] = lr;
            row["weight_decay"] = wd;
            row["dropout"] = dropout;
          }
          s->candidates.push_back(std::move(row));
          if (t.training.best_validation > *best) {
            *best = t.training.best_validation;
            s->feature_steps = kx;
            s->label_steps = ky;
            s->nfr_tau = tau;
            s->model = cc.node_model;
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// x (held against fill) and z side by side: z's columns after x's.
SparseRows AppendColumns(const SparseRows& x, float fill,
                         const SparseRows& z) {
  const SparseRows full = WithoutFill(x, fill);
  SparseRows out;
  out.cols = full.cols + z.cols;
  out.indices.reserve(full.nnz() + z.nnz());
  out.values.reserve(full.nnz() + z.nnz());
  for (size_t v = 0; v < full.rows; ++v) {
    const auto idx = full.row_indices(v);
    const auto val = full.row_values(v);
    out.indices.insert(out.indices.end(), idx.begin(), idx.end());
    out.values.insert(out.values.end(), val.begin(), val.end());
    for (uint32_t j : z.row_indices(v)) {
      out.indices.push_back(static_cast<uint32_t>(full.cols + j));
    }
    const auto zv = z.row_values(v);
    out.values.insert(out.values.end(), zv.begin(), zv.end());
    out.offsets.push_back(out.indices.size());
  }
  out.rows = full.rows;
  return out;
}

}  // namespace

absl::StatusOr<StepTuning> TuneSteps(const NodeRunInputs& in,
                                     const SparseRows& x,
                                     const PipelineConfig& c,
                                     uint64_t model_seed) {
  StepTuning s;
  s.feature_steps = c.feature_steps;
  s.label_steps = c.label_steps;
  s.nfr_tau = c.nfr_tau;
  s.model = c.node_model;
  s.tune_model = !c.tune_learning_rate.empty() ||
                 !c.tune_weight_decay.empty() || !c.tune_dropout.empty();
  const bool tuned =
      IsGnnMethod(c.method) &&
      (!c.tune_feature_steps.empty() || !c.tune_nfr.empty() || s.tune_model);
  if (!tuned) return s;
  const TuningGrids g = TuningGridsOf(c);
  double best = -1;
  s.candidates = nlohmann::json::array();
  for (double tau : g.nfr_tau) {
    SparseRows regularised;
    NodeRunInputs candidate = in;
    if (tau > 0) {
      ASSIGN_OR_RETURN(const double threshold, NfrThreshold(c, *in.d, tau));
      regularised = x;
      ApplyNfr(threshold, &regularised, &candidate.x_fill);
      candidate.x = &regularised;
    }
    for (int kx : g.feature_steps) {
      ASSIGN_OR_RETURN(const NodeFeatures features,
                       PropagateNode(candidate, c, kx));
      RETURN_IF_ERROR(TuneOnFeatures(candidate, c, g, features, tau, kx,
                                     model_seed, &best, &s));
    }
  }
  return s;
}

absl::StatusOr<RunResult> ChoosePropagation(
    const NodeRunInputs& in, const PipelineConfig& c, int feature_steps,
    int label_steps, uint64_t model_seed, PipelineConfig* chosen,
    std::optional<NodeFeatures>* kept_features, nlohmann::json* tuning) {
  RunResult t;
  double best = -1, propagate_seconds = 0, train_seconds = 0;
  NodePropagation kept = NodePropagation::kPpr;
  nlohmann::json rows = nlohmann::json::array();
  // Past the bound PPR is at chance (config.h): KProp alone.
  const bool ppr_candidate = in.graph->num_nodes() <= c.auto_ppr_max_nodes;
  std::vector<NodePropagation> candidates;
  if (ppr_candidate) candidates.push_back(NodePropagation::kPpr);
  candidates.push_back(NodePropagation::kKProp);
  for (NodePropagation p : candidates) {
    PipelineConfig candidate = *chosen;
    candidate.propagation = p;
    ASSIGN_OR_RETURN(NodeFeatures features,
                     PropagateNode(in, candidate, feature_steps));
    ASSIGN_OR_RETURN(RunResult run_p,
                     TrainNodeOnce(in, candidate, features, label_steps,
                                   false, model_seed));
    rows.push_back({{"propagation", NodePropagationName(p)},
                    {"validation", run_p.training.best_validation},
                    {"epochs", run_p.training.epochs}});
    propagate_seconds += run_p.propagate_seconds;
    train_seconds += run_p.train_seconds;
    if (run_p.training.best_validation > best) {
      best = run_p.training.best_validation;
      kept = p;
      t = std::move(run_p);
      if (c.defences.robust) *kept_features = std::move(features);
    }
  }
  chosen->propagation = kept;
  // The run's cost is both candidates'.
  t.propagate_seconds = propagate_seconds;
  t.train_seconds = train_seconds;
  *tuning = {{"candidates", std::move(rows)},
             {"propagation", NodePropagationName(kept)},
             {"feature_steps", feature_steps}};
  if (!ppr_candidate) {
    (*tuning)["ppr_skipped"] = absl::StrCat(
        "the graph's ", in.graph->num_nodes(), " nodes pass auto's ",
        c.auto_ppr_max_nodes, ", past which PPR scores at chance");
  }
  return t;
}

absl::StatusOr<RunResult> TrainOnInputs(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        int feature_steps, int label_steps,
                                        uint64_t model_seed,
                                        uint64_t positional_seed,
                                        nlohmann::json* tuning) {
  const SparseRows positional = FeatureFreeFeatures(
      in.x->rows, static_cast<size_t>(c.positional_features),
      positional_seed);
  std::vector<NodeInputs> candidates;
  if (c.inputs == NodeInputs::kAuto) {
    candidates = {NodeInputs::kReports, NodeInputs::kPositional,
                  NodeInputs::kBoth};
  } else {
    candidates = {c.inputs};
  }
  RunResult best;
  double best_validation = -1, propagate_seconds = 0, train_seconds = 0;
  NodeInputs kept = candidates.front();
  nlohmann::json rows = nlohmann::json::array();
  for (NodeInputs inputs : candidates) {
    NodeRunInputs candidate = in;
    PipelineConfig cc = c;
    SparseRows both;
    if (inputs == NodeInputs::kPositional) {
      candidate.x = &positional;
      candidate.x_fill = 0;
    } else if (inputs == NodeInputs::kBoth) {
      both = AppendColumns(*in.x, in.x_fill, positional);
      candidate.x = &both;
      candidate.x_fill = 0;
    }
    if (inputs != NodeInputs::kReports) cc.standardize = true;
    ASSIGN_OR_RETURN(const NodeFeatures features,
                     PropagateNode(candidate, cc, feature_steps));
    ASSIGN_OR_RETURN(RunResult r, TrainNodeOnce(candidate, cc, features,
                                                label_steps, false,
                                                model_seed));
    rows.push_back({{"inputs", kNodeInputsNames.Name(inputs)},
                    {"validation", r.training.best_validation},
                    {"epochs", r.training.epochs}});
    propagate_seconds += r.propagate_seconds;
    train_seconds += r.train_seconds;
    if (r.training.best_validation > best_validation) {
      best_validation = r.training.best_validation;
      kept = inputs;
      best = std::move(r);
    }
  }
  best.propagate_seconds = propagate_seconds;
  best.train_seconds = train_seconds;
  *tuning = {{"candidates", std::move(rows)},
             {"inputs", kNodeInputsNames.Name(kept)},
             {"feature_steps", feature_steps},
             {"positional_features", c.positional_features}};
  return best;
}

}  // namespace ldpgraph::pipeline::internal

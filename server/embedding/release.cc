#include "server/embedding/release.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ldpgraph::embedding {


absl::StatusOr<Release> ReleaseEmbedding(
    const Graph& g, const ReleaseConfig& c, RandomSource& noise,
    uint64_t init_seed, std::function<void(absl::string_view)> progress) {
  RETURN_IF_ERROR(ValidateReleaseConfig(c));
  Release out;
  nlohmann::json& d = out.details;
  d["method"] = ReleaseMethodName(c.method);
  d["private"] = c.private_release;
  d["nodes"] = g.num_nodes();
  d["edges"] = g.num_edges();
  if (c.method == ReleaseMethod::kSePrivGemb) {
    const SePrivGEmbConfig s = SePrivGEmbConfigOf(c);
    int64_t last_epoch = -1;
    const int64_t per_epoch =
        (static_cast<int64_t>(g.num_edges()) + s.batch_size - 1) /
        std::max(1, s.batch_size);
    auto on_step = [&](int64_t done, int64_t planned) {
      if (!progress || per_epoch == 0) return;
      const int64_t epoch = done / per_epoch;
      if (epoch != last_epoch && (done % per_epoch == 0 || done == planned)) {
        last_epoch = epoch;
        progress(absl::StrFormat("%s: step %d/%d", ReleaseMethodName(c.method),
                                 done, planned));
      }
    };
    ASSIGN_OR_RETURN(SePrivGEmbResult r,
                     TrainSePrivGEmb(g, s, noise, init_seed, on_step));
    out.embedding = std::move(r.centre);
    out.seconds = r.seconds;
    d["dim"] = s.dim;
    d["negatives"] = s.negatives;
    d["batch_size"] = s.batch_size;
    d["optimizer"] = OptimizerName(s.optimizer);
    d["learning_rate"] = s.learning_rate;
    d["proximity"] = ProximityName(s.proximity);
    d["steps"] = r.steps;
    d["epochs"] = r.epochs;
    d["max_epochs"] = s.max_epochs;
    d["max_steps"] = s.max_steps ? nlohmann::json(*s.max_steps) : nullptr;
    d["step_cap"] = r.step_cap;
    d["final_loss"] = r.epoch_loss.empty() ? 0.0 : r.epoch_loss.back();
    if (c.private_release) {
      d["clip"] = s.clip;
      d["noise_multiplier"] = s.noise_multiplier;
      d["noised_rows"] =
          s.noised_rows == NoisedRows::kTouched ? "touched" : "all";
      d["stopped_by_budget"] = r.stopped_by_budget;
      out.cost = std::move(r.accountant);
      out.epsilon = r.guarantee->epsilon;
      out.delta = r.guarantee->delta;
      nlohmann::json caveats = nlohmann::json::array();
      caveats.push_back(
          "edge-level (one example replaced), not node-level");
      if (s.proximity != Proximity::kUniform) {
        caveats.push_back(
            "negatives drawn by a proximity of the private graph");
      }
      if (s.noised_rows == NoisedRows::kTouched) {
        caveats.push_back(
            "noise on touched rows only: a row never touched is released "
            "exactly");
      }
      d["guarantee"] = {{"epsilon", out.epsilon},
                        {"delta", out.delta},
                        {"order", r.guarantee->order},
                        {"neighbouring", "one edge's example replaced"},
                        {"analysis", "RDP, sampling without replacement"},
                        {"caveats", caveats},
                        {"see", "server/embedding/README.md"}};
    }
    d["noise_source"] = r.noise_source;
  } else {
    const DpneConfig dc = DpneConfigOf(c);
    if (progress) {
      progress(absl::StrCat(ReleaseMethodName(c.method),
                            ": factorising (P + P^2) / 2"));
    }
    ASSIGN_OR_RETURN(DpneResult r, TrainDpne(g, dc, noise, init_seed));
    out.embedding = std::move(r.embedding);
    out.seconds = r.seconds;
    d["dim"] = dc.dim;
    d["lambda"] = dc.lambda;
    d["mu"] = dc.mu;
    d["sweeps"] = dc.sweeps;
    d["omega"] = r.omega;
    d["matrix_bytes"] = r.matrix_bytes;
    d["objective"] = r.objective;
    if (c.private_release) {
      d["sensitivity"] = dc.sensitivity;
      dp::RdpAccountant cost;
      RETURN_IF_ERROR(cost.ComposePureDp(c.epsilon));
      out.cost = std::move(cost);
      out.epsilon = c.epsilon;
      out.delta = 0;
      d["guarantee"] = {{"epsilon", out.epsilon},
                        {"delta", 0.0},
                        {"neighbouring", "one edge added or removed"},
                        {"analysis",
                         "the DPNE paper's Theorem 1 (see "
                         "server/embedding/README.md for its gaps)"},
                        {"caveats",
                         {"the sensitivity sqrt 2 does not bound the change "
                          "of (P + P^2)/2, nor of its log",
                          "H is learnt from the same graph"}}};
    }
    d["noise_source"] = r.noise_source;
  }
  d["seconds"] = out.seconds;
  return out;
}

}  // namespace ldpgraph::embedding

// ReleaseEmbedding (release.h): the release method's training, and the
// record of its settings, its figures and, for a private release, its cost
// and guarantee.
#include "server/embedding/release.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ldpgraph::embedding {
namespace {

using Progress = std::function<void(absl::string_view)>;

// A private SE-PrivGEmb release's record: the privacy settings, r's
// accountant as the cost, and the guarantee it reports with its caveats.
void RecordSePrivGEmbGuarantee(const SePrivGEmbConfig& s, SePrivGEmbResult& r,
                               Release* out) {
  nlohmann::json& d = out->details;
  d["clip"] = s.clip;
  d["noise_multiplier"] = s.noise_multiplier;
  d["noised_rows"] =
      s.noised_rows == NoisedRows::kTouched ? "touched" : "all";
  d["stopped_by_budget"] = r.stopped_by_budget;
  out->cost = std::move(r.accountant);
  out->epsilon = r.guarantee->epsilon;
  out->delta = r.guarantee->delta;
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
  d["guarantee"] = {{"epsilon", out->epsilon},
                    {"delta", out->delta},
                    {"order", r.guarantee->order},
                    {"neighbouring", "one edge's example replaced"},
                    {"analysis", "RDP, sampling without replacement"},
                    {"caveats", caveats},
                    {"see", "server/embedding/README.md"}};
}

// Trains SE-PrivGEmb with c's settings into out: the centre vectors, the
// settings and figures, and the privacy record of a private release.
// progress, if set, gets one line per epoch.
absl::Status ReleaseSePrivGEmb(const Graph& g, const ReleaseConfig& c,
                               RandomSource& noise, uint64_t init_seed,
                               const Progress& progress, Release* out) {
  nlohmann::json& d = out->details;
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
  out->embedding = std::move(r.centre);
  out->seconds = r.seconds;
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
  if (c.private_release) RecordSePrivGEmbGuarantee(s, r, out);
  d["noise_source"] = r.noise_source;
  return absl::OkStatus();
}

// A private DPNE release's record: the sensitivity, c.epsilon as a pure-DP
// cost, and the guarantee the DPNE paper reports with its caveats.
absl::Status RecordDpneGuarantee(const ReleaseConfig& c, const DpneConfig& dc,
                                 Release* out) {
  nlohmann::json& d = out->details;
  d["sensitivity"] = dc.sensitivity;
  dp::RdpAccountant cost;
  RETURN_IF_ERROR(cost.ComposePureDp(c.epsilon));
  out->cost = std::move(cost);
  out->epsilon = c.epsilon;
  out->delta = 0;
  d["guarantee"] = {{"epsilon", out->epsilon},
                    {"delta", 0.0},
                    {"neighbouring", "one edge added or removed"},
                    {"analysis",
                     "the DPNE paper's Theorem 1 (see "
                     "server/embedding/README.md for its gaps)"},
                    {"caveats",
                     {"the sensitivity sqrt 2 does not bound the change "
                      "of (P + P^2)/2, nor of its log",
                      "H is learnt from the same graph"}}};
  return absl::OkStatus();
}

// Trains DPNE with c's settings into out: W, the settings and figures, and
// the privacy record of a private release. progress, if set, gets one line.
absl::Status ReleaseDpne(const Graph& g, const ReleaseConfig& c,
                         RandomSource& noise, uint64_t init_seed,
                         const Progress& progress, Release* out) {
  nlohmann::json& d = out->details;
  const DpneConfig dc = DpneConfigOf(c);
  if (progress) {
    progress(absl::StrCat(ReleaseMethodName(c.method),
                          ": factorising (P + P^2) / 2"));
  }
  ASSIGN_OR_RETURN(DpneResult r, TrainDpne(g, dc, noise, init_seed));
  out->embedding = std::move(r.embedding);
  out->seconds = r.seconds;
  d["dim"] = dc.dim;
  d["lambda"] = dc.lambda;
  d["mu"] = dc.mu;
  d["sweeps"] = dc.sweeps;
  d["omega"] = r.omega;
  d["matrix_bytes"] = r.matrix_bytes;
  d["objective"] = r.objective;
  if (c.private_release) RETURN_IF_ERROR(RecordDpneGuarantee(c, dc, out));
  d["noise_source"] = r.noise_source;
  return absl::OkStatus();
}

}  // namespace

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
  RETURN_IF_ERROR(
      c.method == ReleaseMethod::kSePrivGemb
          ? ReleaseSePrivGEmb(g, c, noise, init_seed, progress, &out)
          : ReleaseDpne(g, c, noise, init_seed, progress, &out));
  d["seconds"] = out.seconds;
  return out;
}

}  // namespace ldpgraph::embedding

// The release stage (Stages::Release) and the release ledgers of the
// curator's graphs (Stages::Ledger): central-DP embeddings, each graph's
// releases composed and capped (stages.h's file comment).
#include "server/curator/stages.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/edges/blink.h"
#include "common/random/random.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/curator/internal/stage_requests.h"
#include "server/embedding/release.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::curator {
namespace {

// The ledger key of a release's graph.
std::string GraphKey(const std::string& campaign_id) {
  return campaign_id.empty() ? std::string("curator")
                             : absl::StrCat("campaign:", campaign_id);
}

// The plain sum of releases' epsilons, or of their deltas, in order.
double SumOf(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum;
}

// The composed epsilon of releases at delta: the RDP composition of their
// curves, or the plain sum of their epsilons when their deltas sum to at
// most delta (basic composition; tighter for a few pure-DP releases, whose
// RDP conversion always costs a little more than epsilon), whichever is
// smaller. Both are valid (epsilon, delta) statements.
absl::StatusOr<double> ComposedEpsilon(const dp::RdpAccountant& curve,
                                       const std::vector<double>& epsilons,
                                       const std::vector<double>& deltas,
                                       double delta) {
  ASSIGN_OR_RETURN(dp::DpGuarantee g, curve.Guarantee(delta));
  const double es = SumOf(epsilons), ds = SumOf(deltas);
  return ds <= delta ? std::min(g.epsilon, es) : g.epsilon;
}

// A release request's settings, checked: INVALID_ARGUMENT for a bad
// request (naming pipeline_method when it is unspecified or not se-privgemb
// or dpne), RESOURCE_EXHAUSTED for an epsilon over the cap on its own.
absl::StatusOr<embedding::ReleaseConfig> ReleaseConfigOf(
    const v1::ReleaseRequest& q, const ReleaseBudget& budget) {
  embedding::ReleaseConfig c;
  ASSIGN_OR_RETURN(const pipeline::Method method,
                   stages_internal::RequestMethod(
                       q.pipeline_method(), {v1::PIPELINE_METHOD_SE_PRIVGEMB,
                                             v1::PIPELINE_METHOD_DPNE}));
  c.method = *embedding::ReleaseMethodOf(method);  // one of the two above
  c.private_release = true;
  c.epsilon = q.epsilon();
  c.delta = budget.delta;
  if (q.dim() > 0) {
    c.se_privgemb.dim = static_cast<int>(q.dim());
    c.dpne.dim = static_cast<int>(q.dim());
  }
  const bool se = c.method == embedding::ReleaseMethod::kSePrivGemb;
  if (!se && (q.noise_multiplier() != 0 || q.max_epochs() != 0 ||
              !q.proximity().empty() || q.batch_size() != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise_multiplier, max_epochs, proximity and batch_size apply to ",
        embedding::ReleaseMethodName(embedding::ReleaseMethod::kSePrivGemb)));
  }
  if (q.noise_multiplier() != 0) c.se_privgemb.noise_multiplier = q.noise_multiplier();
  if (q.max_epochs() > 0) c.se_privgemb.max_epochs = static_cast<int>(q.max_epochs());
  if (q.batch_size() > 0) c.se_privgemb.batch_size = static_cast<int>(q.batch_size());
  if (!q.proximity().empty()) {
    ASSIGN_OR_RETURN(c.se_privgemb.proximity,
                     embedding::ParseProximity(q.proximity()));
  }
  RETURN_IF_ERROR(embedding::ValidateReleaseConfig(c));
  if (c.epsilon > budget.epsilon_cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a release of epsilon ", c.epsilon, " exceeds the cap of ",
        budget.epsilon_cap, " per graph on its own"));
  }
  return c;
}

}  // namespace

absl::StatusOr<std::map<std::string, Stages::GraphLedger>> Stages::Ledgers()
    const {
  std::map<std::string, GraphLedger> out;
  ASSIGN_OR_RETURN(auto rows, curator_->store().ListResults());
  for (const store::ResultRow& row : rows) {
    v1::StageResult r;
    if (!r.ParseFromString(row.record) || r.stage() != "release") continue;
    const auto details =
        nlohmann::json::parse(r.details_json(), nullptr, /*allow_exceptions=*/false);
    if (details.is_discarded() || !details.contains("rdp") ||
        !details["rdp"].is_string()) {
      return absl::DataLossError(absl::StrCat(
          "release ", r.id(), " has no readable RDP curve in its details"));
    }
    ASSIGN_OR_RETURN(dp::RdpAccountant curve,
                     dp::RdpAccountant::FromJson(details["rdp"].get<std::string>()));
    GraphLedger& g = out[r.input()];
    g.ids.push_back(r.id());
    g.epsilons.push_back(details.value("epsilon", 0.0));
    g.deltas.push_back(details.value("delta", 0.0));
    RETURN_IF_ERROR(g.spent.Compose(curve));
  }
  return out;
}

absl::StatusOr<v1::ReleaseLedger> Stages::Ledger() const {
  ASSIGN_OR_RETURN(auto ledgers, Ledgers());
  v1::ReleaseLedger out;
  out.set_epsilon_cap(release_budget_.epsilon_cap);
  out.set_delta(release_budget_.delta);
  for (const auto& [key, g] : ledgers) {
    v1::GraphReleases* gr = out.add_graphs();
    gr->set_graph(key);
    gr->set_releases(static_cast<uint32_t>(g.ids.size()));
    const size_t listed = std::min<size_t>(g.ids.size(), kLedgerResultIds);
    for (size_t i = g.ids.size() - listed; i < g.ids.size(); ++i) {
      gr->add_result_ids(g.ids[i]);
    }
    ASSIGN_OR_RETURN(double total,
                     ComposedEpsilon(g.spent, g.epsilons, g.deltas,
                                     release_budget_.delta));
    gr->set_epsilon(total);
    gr->set_epsilon_sum(SumOf(g.epsilons));
    gr->set_delta_sum(SumOf(g.deltas));
  }
  return out;
}

absl::StatusOr<v1::StageResult> Stages::Release(const v1::ReleaseRequest& q) {
  const auto t = std::chrono::steady_clock::now();
  if (q.blink_variant() == edges::kBlinkVariantNames.Name(
                               edges::BlinkVariant::kHybrid)) {
    return absl::InvalidArgumentError(
        "blink_variant 'hybrid' weights the graph by its posteriors, which "
        "a release ignores (it embeds the structure): use topk or hard");
  }
  absl::MutexLock lock(&release_mu_);
  ASSIGN_OR_RETURN(const embedding::ReleaseConfig c,
                   ReleaseConfigOf(q, release_budget_));
  const std::string key = GraphKey(q.graph_campaign_id());
  ASSIGN_OR_RETURN(auto ledgers, Ledgers());
  GraphLedger ledger = ledgers[key];
  ASSIGN_OR_RETURN(double before,
                   ComposedEpsilon(ledger.spent, ledger.epsilons,
                                   ledger.deltas, release_budget_.delta));
  if (before >= release_budget_.epsilon_cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "graph ", key, " has spent its release budget: epsilon ", before,
        " of ", release_budget_.epsilon_cap, " at delta ",
        release_budget_.delta));
  }
  nlohmann::json details;
  ASSIGN_OR_RETURN(StageGraph sg, GraphFor(q.graph_campaign_id(),
                                           q.blink_variant(), &details));
  ASSIGN_OR_RETURN(auto noise, SecureRandom::Create());
  ASSIGN_OR_RETURN(embedding::Release release,
                   embedding::ReleaseEmbedding(sg.get(), c, *noise, q.seed()));
  RETURN_IF_ERROR(ledger.spent.Compose(*release.cost));
  ledger.epsilons.push_back(release.epsilon);
  ledger.deltas.push_back(release.delta);
  ASSIGN_OR_RETURN(double total,
                   ComposedEpsilon(ledger.spent, ledger.epsilons,
                                   ledger.deltas, release_budget_.delta));
  if (total > release_budget_.epsilon_cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "graph ", key, ": this release (epsilon ", release.epsilon,
        ") with the earlier ones (epsilon ", before,
        ") composes to epsilon ", total, " at delta ",
        release_budget_.delta, ", over the cap of ",
        release_budget_.epsilon_cap, "; the release was discarded"));
  }
  details.update(release.details);
  details["epsilon"] = release.epsilon;
  details["delta"] = release.delta;
  details["rdp"] = release.cost->ToJson();
  details["ledger"] = {{"graph", key},
                       {"epsilon_before", before},
                       {"epsilon_after", total},
                       {"delta", release_budget_.delta},
                       {"cap", release_budget_.epsilon_cap}};
  details["seed"] = q.seed();
  v1::StageResult r;
  r.set_stage("release");
  r.set_input(key);
  r.set_seconds(SecondsSince(t));
  return Record(std::move(r), std::move(details), &release.embedding);
}

}  // namespace ldpgraph::curator

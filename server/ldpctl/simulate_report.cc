// The Simulation's results (internal/simulation.h): the ledger's spending,
// and the results as `ldpgraph eval --format json` prints them with the
// deployment's figures under "deployment" (campaigns, graph, scenarios,
// defence, bytes, memory, stage seconds). The table printed instead
// without --format json is simulate_table.cc's.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/attacks/poisoning.h"
#include "common/status_macros.h"
#include "common/wire/names.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/commands.h"
#include "server/ldpctl/internal/simulation.h"
#include "server/ldpctl/process.h"
#include "server/pipeline/config.h"
#include "server/pipeline/edges_config.h"

namespace ldpgraph::ldpctl::internal {
namespace {

// Adds to figures (a screen's or the robust defence's) how many of the
// attacker's nodes (ascending) its node list `list_key` holds, under
// "malicious" and `caught_key`: ldpctl knows them, the curator does not.
void CountMalicious(const std::vector<uint32_t>& malicious,
                    const char* list_key, const char* caught_key,
                    json* figures) {
  if (!figures->contains(list_key)) return;
  uint32_t caught = 0;
  for (const json& v : (*figures)[list_key]) {
    caught += std::binary_search(malicious.begin(), malicious.end(),
                                 v.get<uint32_t>());
  }
  (*figures)["malicious"] = malicious.size();
  (*figures)[caught_key] = caught;
}

// The paths of the id lists the curator cut in details ("<key>_truncated":
// true beside them; admin.proto, StageResult.details_json), dotted.
void TruncatedLists(const json& object, const std::string& prefix,
                    std::vector<std::string>* paths) {
  if (!object.is_object()) return;
  constexpr absl::string_view kSuffix = "_truncated";
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string path =
        prefix.empty() ? it.key() : absl::StrCat(prefix, ".", it.key());
    absl::string_view key = it.key();
    if (absl::ConsumeSuffix(&key, kSuffix) && it.value().is_boolean() &&
        it.value().get<bool>()) {
      paths->push_back(prefix.empty() ? std::string(key)
                                      : absl::StrCat(prefix, ".", key));
    } else if (it.value().is_object()) {
      TruncatedLists(it.value(), path, paths);
    }
  }
}

// deployment.scenario.defence: the defences, what the estimate stage's
// screen found (its details: "screen", "overreported_dims",
// "flagged_nodes", "flagged"), and under "robust" what the evaluate
// stage's robust retraining left out (its details' "robust": "dropped",
// "dropped_nodes", ...), and under "edge_consistency" what its graph's
// screen flagged (its details' "graph_screen"). With an attacker (malicious: its nodes,
// ascending; empty without), how many of its nodes each caught.
json DefenceJson(const Options& o, const v1::StageResult& estimate,
                 const v1::StageResult& evaluate,
                 const std::vector<uint32_t>& malicious) {
  json d = {{"kind", pipeline::DefencesName(o.defences)}};
  if (o.defences.screen) {
    d["alpha"] = o.screen_alpha;
    const json e = json::parse(estimate.details_json(), nullptr, false);
    if (e.is_object()) {
      for (const char* k : {"screen", "overreported_dims", "overreported",
                            "flagged_nodes", "flagged"}) {
        if (e.contains(k)) d[k] = e[k];
      }
    }
    if (o.malicious) CountMalicious(malicious, "flagged", "malicious_flagged", &d);
  }
  // The evaluate stage's figures: its graph screen ("graph_screen") and
  // its robust retraining ("robust"), each with the attacker's nodes it
  // caught among its node list.
  const json ev = json::parse(evaluate.details_json(), nullptr, false);
  auto from_evaluate = [&](bool applied, const char* source, const char* key,
                           const char* list_key, const char* caught_key) {
    if (!applied || !ev.is_object() || !ev.contains(source)) return;
    d[key] = ev[source];
    if (o.malicious) CountMalicious(malicious, list_key, caught_key, &d[key]);
  };
  from_evaluate(o.defences.edge_consistency, "graph_screen", "edge_consistency",
                "flagged", "malicious_flagged");
  from_evaluate(o.defences.robust, "robust", "robust", "dropped_nodes",
                "malicious_dropped");
  return d;
}

// The evaluate stage's baselines (details' "baselines", an object), as
// ldpgraph eval --baselines lays them out for one run, each beside the
// result's metric.
json BaselinesJson(const json& details, double metric) {
  json b = json::object();
  for (const auto& [key, v] : details["baselines"].items()) {
    const double value = v.value("value", 0.0);
    const double diff = metric - value;
    b[key] = {{"label", v.value("label", key)},
              {"mean", value},
              {"std", 0.0},
              {"values", json::array({value})},
              {"difference", {{"mean", diff},
                              {"std", 0.0},
                              {"values", json::array({diff})}}},
              {"seconds", v.value("seconds", 0.0)}};
  }
  return b;
}

}  // namespace

absl::StatusOr<std::vector<double>> Simulation::LedgerSpent() {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  std::vector<double> spent(n, 0.0);
  v1::GetBudgetsRequest req;
  req.set_page_size(100000);
  RETURN_IF_ERROR(admin_->ForEachPage(
      &v1::AdminService::Stub::GetBudgets, req,
      [&](const v1::GetBudgetsResponse& page) {
        for (const v1::NodeBudget& b : page.budgets()) {
          if (b.node_id() < n) spent[b.node_id()] = b.total_spent();
        }
        return absl::OkStatus();
      }));
  return spent;
}

absl::StatusOr<v1::StageResult> Simulation::WithWholeIdLists(
    const v1::StageResult& r) const {
  json details = json::parse(r.details_json(), nullptr, false);
  std::vector<std::string> paths;
  TruncatedLists(details, "", &paths);
  if (paths.empty()) return r;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(const std::vector<uint32_t> ids,
                     ResultIdList(*admin_, r.id(), path));
    json* holder = &details;
    std::string key = path;
    const size_t dot = path.rfind('.');
    if (dot != std::string::npos) {
      holder = &details[json::json_pointer(
          "/" + absl::StrReplaceAll(path.substr(0, dot), {{".", "/"}}))];
      key = path.substr(dot + 1);
    }
    (*holder)[key] = ids;
    holder->erase(key + "_truncated");
  }
  v1::StageResult whole = r;
  whole.set_details_json(details.dump());
  return whole;
}

absl::StatusOr<json> Simulation::Spending(v1::CuratorStatus* status) {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  // What the ledger and the curator's counters say (a node the ledger
  // does not list spent nothing).
  ASSIGN_OR_RETURN(const std::vector<double> spent, LedgerSpent());
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    RETURN_IF_ERROR(FromGrpc(
        admin_->stub->GetStatus(&ctx, v1::GetStatusRequest(), status),
        admin_->address));
  }
  double lo = 0, hi = 0, sum = 0;
  for (uint32_t v = 0; v < n; ++v) {
    lo = v == 0 ? spent[v] : std::min(lo, spent[v]);
    hi = std::max(hi, spent[v]);
    sum += spent[v];
  }
  return json{{"min", lo}, {"mean", n ? sum / n : 0.0}, {"max", hi}};
}

void Simulation::AddTargetRate(const json& details, json* run) const {
  if (!o_.malicious || !details.contains("confusion")) return;
  (*run)["confusion"] = details["confusion"];
  auto rate = pipeline::TargetRate(
      details["confusion"].get<std::vector<std::vector<uint32_t>>>(),
      o_.attack_class);
  if (rate.ok()) (*run)["target_rate"] = *rate;
}

absl::Status Simulation::GatherScenarioFigures(const Campaigns& c) {
  if (o_.churn_on) {
    ASSIGN_OR_RETURN(churn_figures_, ChurnFigures(c));
  }
  if (o_.frontend_kills > 0) {
    ASSIGN_OR_RETURN(frontend_figures_, FrontendFigures(c));
  }
  if (o_.database_restarts > 0) {
    ASSIGN_OR_RETURN(database_figures_,
                     FaultFigures(c, database_restarts_, false));
  }
  if (o_.operator_kills > 0) {
    ASSIGN_OR_RETURN(operator_figures_, FaultFigures(c, operator_kills_, true));
  }
  return absl::OkStatus();
}

json Simulation::RunJson(const v1::StageResult& evaluate,
                         const json& details) const {
  const bool node = o_.task == v1::PIPELINE_TASK_NODE;
  json run = {{"run", 0},
              {"metric", evaluate.metric()},
              {"epochs", details.value("epochs", 0)},
              {"best_epoch", details.value("best_epoch", 0)},
              {"validation", details.value("validation", 0.0)},
              {"seconds_per_epoch", details.value("seconds_per_epoch", 0.0)},
              {"propagate_seconds", details.value("propagate_seconds", 0.0)},
              {"train_seconds", details.value("train_seconds", 0.0)}};
  if (node) {
    run["micro_f1"] = details.value("micro_f1", 0.0);
    run["macro_f1"] = details.value("macro_f1", 0.0);
  }
  if (details.contains("label_agreement")) {
    run["label_agreement"] = details["label_agreement"];
    run["label_agreement_raw"] = details.value("label_agreement_raw", 0.0);
  }
  // PrivGE's node task: the propagations tried and the one kept.
  if (details.contains("tuning")) run["tuning"] = details["tuning"];
  AddTargetRate(details, &run);
  return run;
}

json Simulation::ParametersJson() const {
  json parameters = pipeline::ConfigToJson(config_);
  if (o_.edges == "rr" || o_.edges == "blink") {
    // The edges campaign's settings, as ldpgraph eval --edges records them.
    pipeline::PrivateEdgesConfig pc;
    pc.kind = o_.edges == "rr" ? pipeline::EdgeMechanism::kRr
                               : pipeline::EdgeMechanism::kBlink;
    pc.epsilon = o_.edge_epsilon;
    pc.blink_delta = o_.blink_delta;
    pc.blink_variant = o_.blink_variant;
    pc.edge_consistency = o_.defences.edge_consistency;
    json e = pipeline::PrivateEdgesConfigToJson(pc);
    if (o_.attack_kind == poisoning::AttackKind::kFakeEdges) {
      e["attack_edges"] = o_.attack_edges;
    }
    parameters["edges"] = std::move(e);
  }
  return parameters;
}

absl::StatusOr<json> Simulation::Results(
    const Campaigns& c, const v1::StageResult& estimate_cut,
    const v1::StageResult& evaluate_cut,
    std::chrono::steady_clock::time_point t0) {
  // The results' id lists whole, as the library prints them (the curator's
  // details hold their first ids only).
  ASSIGN_OR_RETURN(const v1::StageResult estimate,
                   WithWholeIdLists(estimate_cut));
  ASSIGN_OR_RETURN(const v1::StageResult evaluate,
                   WithWholeIdLists(evaluate_cut));
  v1::CuratorStatus status;
  ASSIGN_OR_RETURN(const json spent, Spending(&status));
  RETURN_IF_ERROR(GatherScenarioFigures(c));
  const uint64_t eval_seed = o_.seed.value_or(1);
  json details = json::parse(evaluate.details_json(), nullptr, false);
  if (details.is_discarded()) details = json::object();
  const bool node = o_.task == v1::PIPELINE_TASK_NODE;
  const json run = RunJson(evaluate, details);
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  json j;
  j["task"] = pipeline::TaskName(o_.task);
  j["metric"] = node ? "accuracy" : "roc_auc";
  j["mean"] = evaluate.metric();
  j["std"] = 0.0;
  j["runs"] = 1;
  j["values"] = json::array({evaluate.metric()});
  j["seconds"] = total;
  j["dataset"] = data_.meta.name;
  j["seed"] = eval_seed;
  j["parameters"] = ParametersJson();
  j["noise_source"] = o_.seed ? "seeded-not-private" : "secure";
  j["per_run"] = json::array({run});
  // The evaluate stage's baselines (--baselines), as ldpgraph eval
  // --baselines lays them out for one run.
  if (details.contains("baselines") && details["baselines"].is_object()) {
    j["baselines"] = BaselinesJson(details, evaluate.metric());
  }
  j["deployment"] =
      Deployment(c, details, status, spent, estimate, evaluate, total);
  return j;
}

json Simulation::CampaignsJson(const std::vector<v1::Campaign>& campaigns,
                               CampaignTotals* totals) const {
  json jc = json::array();
  for (const v1::Campaign& c : campaigns) {
    totals->reports += c.progress().reported();
    totals->refusals += c.progress().refused();
    totals->rejected += c.progress().rejected();
    jc.push_back({{"id", c.id()},
                  {"attribute",
                   std::string(wire::kAttributeNames.Name(c.attribute()))},
                  {"epsilon", c.spec().epsilon()},
                  {"targeted", c.progress().targeted()},
                  {"reported", c.progress().reported()},
                  {"refused", c.progress().refused()},
                  {"close_reason", c.close_reason()},
                  {"rejected", c.progress().rejected()}});
    if (auto it = all_online_seconds_.find(c.id()); it != all_online_seconds_.end()) {
      jc.back()["all_online_answered_seconds"] = it->second;
    }
  }
  return jc;
}

json Simulation::GraphJson(const std::optional<v1::Campaign>& graph_campaign,
                           const json& details) const {
  json graph = {{"source", o_.edges == "none" ? "curator" : o_.edges}};
  if (graph_campaign) {
    graph["campaign"] = graph_campaign->id();
    graph["mechanism"] = details.value("graph_mechanism", "");
    graph["epsilon"] = o_.edge_epsilon;
    if (o_.edges == "blink") {
      // The estimate's own figures, from the evaluate stage's details.
      graph["delta"] = o_.blink_delta;
      graph["variant"] = details.value("graph_variant", "");
      for (const char* k :
           {"reports", "nonreporters", "prior_iterations", "prior_converged",
            "max_degree_residual", "reported_pairs", "target_edges",
            "expected_edges", "clipped_low", "clipped_high"}) {
        const std::string key = absl::StrCat("graph_", k);
        if (details.contains(key)) graph[k] = details[key];
      }
    } else {
      graph["rule"] = details.value("graph_rule", "");
    }
  }
  graph["edges"] = details.value("graph_edges", uint64_t{0});
  return graph;
}

json Simulation::ScenarioJson(const v1::StageResult& estimate,
                              const v1::StageResult& evaluate) const {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  json scenario = {{"dropout", o_.dropout},
                   {"offline_nodes", n - online_nodes_},
                   {"quorum", o_.quorum},
                   {"campaign_deadline_seconds", o_.deadline_s}};
  if (!o_.attach) scenario["network"] = NetworkJson();
  if (!churn_figures_.is_null()) scenario["churn"] = churn_figures_;
  if (!frontend_figures_.is_null()) {
    scenario["frontend_kills"] = frontend_figures_;
  }
  if (!database_figures_.is_null()) {
    scenario["database_restarts"] = database_figures_;
  }
  if (!operator_figures_.is_null()) {
    scenario["operator_kills"] = operator_figures_;
  }
  // The attacker's nodes, drawn once for the poisoning and defence figures.
  const std::vector<uint32_t> malicious =
      o_.malicious ? MaliciousNodes() : std::vector<uint32_t>();
  if (o_.malicious) {
    scenario["malicious"] = {
        {"fraction", *o_.malicious},
        {"nodes", malicious.size()},
        {"attack", std::string(poisoning::kAttackNames.Name(o_.attack_kind))},
        {"attack_class", o_.attack_class},
        {"attack_dims", o_.attack_dims}};
    if (o_.attack_kind == poisoning::AttackKind::kFakeEdges) {
      scenario["malicious"]["attack_edges"] = o_.attack_edges;
    }
  }
  if (o_.defences.any()) {
    scenario["defence"] = DefenceJson(o_, estimate, evaluate, malicious);
  }
  return scenario;
}

json Simulation::PeakRssJson() const {
  uint64_t agents_max = 0, agents_total = 0;
  for (const auto& a : agents_) {
    if (!a) continue;
    agents_max = std::max(agents_max, a->PeakRssBytes());
    agents_total += a->PeakRssBytes();
  }
  constexpr double kMiB = 1 << 20;
  uint64_t curator = curator_->PeakRssBytes();
  uint64_t frontends = 0;
  for (const auto& f : frontends_) {
    if (f) frontends += f->PeakRssBytes();
  }
  curator += frontends;
  const uint64_t self = SelfPeakRssBytes();
  // Each process's own peak, summed: an upper bound on what the
  // deployment held at any one moment (the peaks need not coincide);
  // "together": the largest sum of every process's resident memory at
  // one moment, sampled every 100 ms (memory_sampler.h).
  memory_.SampleNow();
  json peak = {{"curator", curator / kMiB},
               {"frontends", frontends / kMiB},
               {"agent_host_max", agents_max / kMiB},
               {"agent_hosts_total", agents_total / kMiB},
               {"ldpctl", self / kMiB},
               {"all_processes", (curator + agents_total + self) / kMiB},
               {"together", memory_.PeakBytes() / kMiB}};
  return peak;
}

json Simulation::EvaluateSecondsJson(const json& details) const {
  const double prop = details.value("propagate_seconds", 0.0);
  const double train = details.value("train_seconds", 0.0);
  double whole = 0;
  for (const auto& [k, v] : stage_seconds_) {
    if (k == "evaluate") whole = v;
  }
  double baselines = 0;
  if (details.contains("baselines") && details["baselines"].is_object()) {
    for (const auto& [k, v] : details["baselines"].items()) {
      baselines += v.value("seconds", 0.0);
    }
  }
  json seconds = {{"propagate", prop},
                  {"train", train},
                  {"baselines", baselines},
                  {"rest", std::max(0.0, whole - prop - train - baselines)}};
  return seconds;
}

json Simulation::Deployment(const Campaigns& c, const json& details,
                            const v1::CuratorStatus& status,
                            const json& spent,
                            const v1::StageResult& estimate,
                            const v1::StageResult& evaluate,
                            double total) const {
  CampaignTotals totals;
  json d;
  // Which graph the pipeline ran on (the evaluate stage's record of it).
  d["graph"] = GraphJson(c.graph, details);
  d["hosts"] = hosts_;
  d["nodes"] = static_cast<uint32_t>(data_.meta.nodes);
  d["edges"] = data_.meta.edges;
  d["tls"] = !status.insecure();
  d["campaigns"] = CampaignsJson(c.all, &totals);
  d["scenario"] = ScenarioJson(estimate, evaluate);
  d["store"] = {{"kind", o_.store}, {"frontends", o_.frontends}};
  if (edge_) {
    d["edge"] = {{"kind", "haproxy"},
                 {"peak_rss_mib", static_cast<double>(edge_->PeakRssBytes()) /
                                      (1024.0 * 1024.0)}};
  }
  d["reports"] = totals.reports;
  d["refusals"] = totals.refusals;
  d["rejected"] = totals.rejected;
  // An operator's status adds up its frontends' (a restarted one counts
  // since its restart).
  const uint64_t report_bytes = status.report_bytes_received();
  d["report_bytes"] = report_bytes;
  d["report_bytes_per_report"] =
      totals.reports ? double(report_bytes) / totals.reports : 0.0;
  d["epsilon_spent_per_node"] = spent;
  // ldpctl run cannot see another machine's processes.
  if (!o_.attach) d["peak_rss_mib"] = PeakRssJson();
  json stages = json::object();
  for (const auto& [k, v] : stage_seconds_) stages[k] = v;
  d["stage_seconds"] = stages;
  // Where the evaluate stage's time went: the curator's propagation and
  // training, and the rest (reading the estimate, splits, conversions,
  // recording the result, the call itself).
  d["evaluate_seconds"] = EvaluateSecondsJson(details);
  d["total_seconds"] = total;
  d["results"] = {{"estimate", estimate.id()}, {"evaluate", evaluate.id()}};
  if (!o_.attach && (o_.keep || o_.keep_running || !created_work_)) {
    d["work_dir"] = work_;
  }
  if (o_.attach) d["curator"] = admin_->address;
  return d;
}

}  // namespace ldpgraph::ldpctl::internal

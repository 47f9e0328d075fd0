// The Simulation's results (internal/simulation.h): the ledger's spending,
// the results as `ldpgraph eval --format json` prints them with the
// deployment's figures under "deployment" (campaigns, graph, scenarios,
// defence, bytes, memory, stage seconds), and the table printed instead
// without --format json.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

// The table's defence line.
std::string DefenceRow(const json& d) {
  std::vector<std::string> parts;
  if (d.contains("alpha")) {  // the screen
    if (d.value("screen", "") != "applied") {
      parts.push_back(
          "report screen: not applicable (the mechanism samples no "
          "dimensions)");
    } else {
      std::string row = absl::StrFormat(
          "report screen (alpha %g): %u nodes flagged, %u dimensions "
          "over-reported",
          d["alpha"].get<double>(), d["flagged_nodes"].get<uint32_t>(),
          d["overreported_dims"].get<uint32_t>());
      if (d.contains("malicious_flagged")) {
        absl::StrAppendFormat(&row, ", %u of the %u malicious nodes caught",
                              d["malicious_flagged"].get<uint32_t>(),
                              d["malicious"].get<uint32_t>());
      }
      parts.push_back(row);
    }
  }
  if (d.contains("edge_consistency")) {
    const json& e = d["edge_consistency"];
    std::string row = absl::StrFormat(
        "edge consistency (alpha %g): %u nodes isolated",
        e.value("alpha", 0.0), e.value("flagged_nodes", 0u));
    if (e.contains("malicious_flagged")) {
      absl::StrAppendFormat(&row, ", %u of the %u malicious nodes caught",
                            e["malicious_flagged"].get<uint32_t>(),
                            e["malicious"].get<uint32_t>());
    }
    parts.push_back(row);
  }
  if (d.contains("robust")) {
    const json& r = d["robust"];
    std::string row = absl::StrFormat(
        "robust: %u nodes dropped (%u training, %u validation)",
        r.value("dropped", 0u), r.value("dropped_train", 0u),
        r.value("dropped_validation", 0u));
    if (r.contains("malicious_dropped")) {
      absl::StrAppendFormat(&row, ", %u of the %u malicious nodes among them",
                            r["malicious_dropped"].get<uint32_t>(),
                            r["malicious"].get<uint32_t>());
    }
    absl::StrAppend(&row, r.value("retrained", true) ? ", retrained"
                                                     : ", not retrained");
    parts.push_back(row);
  }
  if (parts.empty()) return d["kind"].get<std::string>();
  return absl::StrJoin(parts, "; ");
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
  const uint64_t eval_seed = o_.seed.value_or(1);
  json details = json::parse(evaluate.details_json(), nullptr, false);
  if (details.is_discarded()) details = json::object();
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
  j["parameters"] = pipeline::ConfigToJson(config_);
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
    j["parameters"]["edges"] = std::move(e);
  }
  j["noise_source"] = o_.seed ? "seeded-not-private" : "secure";
  j["per_run"] = json::array({run});
  // The evaluate stage's baselines (--baselines), as ldpgraph eval
  // --baselines lays them out for one run.
  if (details.contains("baselines") && details["baselines"].is_object()) {
    json b = json::object();
    for (const auto& [key, v] : details["baselines"].items()) {
      const double value = v.value("value", 0.0);
      const double diff = evaluate.metric() - value;
      b[key] = {{"label", v.value("label", key)},
                {"mean", value},
                {"std", 0.0},
                {"values", json::array({value})},
                {"difference", {{"mean", diff},
                                {"std", 0.0},
                                {"values", json::array({diff})}}},
                {"seconds", v.value("seconds", 0.0)}};
    }
    j["baselines"] = std::move(b);
  }
  j["deployment"] =
      Deployment(c, details, status, spent, estimate, evaluate, total);
  return j;
}

json Simulation::Deployment(const Campaigns& c, const json& details,
                            const v1::CuratorStatus& status,
                            const json& spent,
                            const v1::StageResult& estimate,
                            const v1::StageResult& evaluate,
                            double total) const {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  const std::vector<v1::Campaign>& campaigns = c.all;
  const std::optional<v1::Campaign>& graph_campaign = c.graph;
  uint64_t reports = 0, refusals = 0, rejected = 0;
  json jc = json::array();
  for (const v1::Campaign& c : campaigns) {
    reports += c.progress().reported();
    refusals += c.progress().refused();
    rejected += c.progress().rejected();
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
  json d;
  // Which graph the pipeline ran on (the evaluate stage's record of it).
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
  d["graph"] = graph;
  d["hosts"] = hosts_;
  d["nodes"] = n;
  d["edges"] = data_.meta.edges;
  d["tls"] = !status.insecure();
  d["campaigns"] = jc;
  d["scenario"] = {{"dropout", o_.dropout},
                   {"offline_nodes", n - online_nodes_},
                   {"quorum", o_.quorum},
                   {"campaign_deadline_seconds", o_.deadline_s}};
  if (!o_.attach) d["scenario"]["network"] = NetworkJson();
  if (!churn_figures_.is_null()) d["scenario"]["churn"] = churn_figures_;
  if (!frontend_figures_.is_null()) {
    d["scenario"]["frontend_kills"] = frontend_figures_;
  }
  if (!database_figures_.is_null()) {
    d["scenario"]["database_restarts"] = database_figures_;
  }
  if (!operator_figures_.is_null()) {
    d["scenario"]["operator_kills"] = operator_figures_;
  }
  d["store"] = {{"kind", o_.store}, {"frontends", o_.frontends}};
  if (edge_) {
    d["edge"] = {{"kind", "haproxy"},
                 {"peak_rss_mib", static_cast<double>(edge_->PeakRssBytes()) /
                                      (1024.0 * 1024.0)}};
  }
  // The attacker's nodes, drawn once for the poisoning and defence figures.
  const std::vector<uint32_t> malicious =
      o_.malicious ? MaliciousNodes() : std::vector<uint32_t>();
  if (o_.malicious) {
    d["scenario"]["malicious"] = {
        {"fraction", *o_.malicious},
        {"nodes", malicious.size()},
        {"attack", std::string(poisoning::kAttackNames.Name(o_.attack_kind))},
        {"attack_class", o_.attack_class},
        {"attack_dims", o_.attack_dims}};
    if (o_.attack_kind == poisoning::AttackKind::kFakeEdges) {
      d["scenario"]["malicious"]["attack_edges"] = o_.attack_edges;
    }
  }
  if (o_.defences.any()) {
    d["scenario"]["defence"] = DefenceJson(o_, estimate, evaluate, malicious);
  }
  d["reports"] = reports;
  d["refusals"] = refusals;
  d["rejected"] = rejected;
  // An operator's status adds up its frontends' (a restarted one counts
  // since its restart).
  const uint64_t report_bytes = status.report_bytes_received();
  d["report_bytes"] = report_bytes;
  d["report_bytes_per_report"] = reports ? double(report_bytes) / reports : 0.0;
  d["epsilon_spent_per_node"] = spent;
  if (!o_.attach) {  // ldpctl run cannot see another machine's processes
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
    d["peak_rss_mib"] = {{"curator", curator / kMiB},
                         {"frontends", frontends / kMiB},
                         {"agent_host_max", agents_max / kMiB},
                         {"agent_hosts_total", agents_total / kMiB},
                         {"ldpctl", self / kMiB},
                         {"all_processes", (curator + agents_total + self) / kMiB},
                         {"together", memory_.PeakBytes() / kMiB}};
  }
  json stages = json::object();
  for (const auto& [k, v] : stage_seconds_) stages[k] = v;
  d["stage_seconds"] = stages;
  // Where the evaluate stage's time went: the curator's propagation and
  // training, and the rest (reading the estimate, splits, conversions,
  // recording the result, the call itself).
  {
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
    d["evaluate_seconds"] = {
        {"propagate", prop},
        {"train", train},
        {"baselines", baselines},
        {"rest", std::max(0.0, whole - prop - train - baselines)}};
  }
  d["total_seconds"] = total;
  d["results"] = {{"estimate", estimate.id()}, {"evaluate", evaluate.id()}};
  if (!o_.attach && (o_.keep || o_.keep_running || !created_work_)) {
    d["work_dir"] = work_;
  }
  if (o_.attach) d["curator"] = admin_->address;
  return d;
}

void Simulation::ScenarioRows(const json& d, const TableRow& row) const {
  const json& sc = d["scenario"];
  if (sc["dropout"].get<double>() > 0 || o_.quorum < 1 || o_.deadline_s > 0) {
    std::string closing = absl::StrCat("quorum ", o_.quorum);
    if (o_.deadline_s > 0) {
      absl::StrAppend(&closing, ", deadline ", o_.deadline_s, " s");
    }
    row("scenario",
        absl::StrFormat("dropout %g (%u nodes offline); campaigns close at %s",
                        sc["dropout"].get<double>(),
                        sc["offline_nodes"].get<uint32_t>(), closing));
    for (const json& c : d["campaigns"]) {
      row(absl::StrCat("  ", c["attribute"].get<std::string>(), " ",
                       c["id"].get<std::string>()),
          absl::StrCat(
              absl::StrFormat("%u of %u answered, closed on %s",
                              c["reported"].get<uint32_t>() +
                                  c["refused"].get<uint32_t>(),
                              c["targeted"].get<uint32_t>(),
                              c["close_reason"].get<std::string>()),
              c.contains("all_online_answered_seconds")
                  ? absl::StrFormat(
                        "; every online node in %.2f s",
                        c["all_online_answered_seconds"].get<double>())
                  : ""));
    }
  }
  if (sc.contains("network") && sc["network"]["enabled"].get<bool>()) {
    row("network", NetworkText(sc["network"]));
  }
  if (sc.contains("frontend_kills")) {
    const json& fk = sc["frontend_kills"];
    row("frontend kills",
        absl::StrFormat("%d of %d frontends' SIGKILLs; %u acknowledged "
                        "reports lost (of %u checked); extra epsilon %g "
                        "(ledger), %g (agents' memos)",
                        fk["kills"].get<int>(), o_.frontends,
                        fk["acknowledged_reports_lost"].get<uint64_t>(),
                        fk["acknowledged_reports_checked"].get<uint64_t>(),
                        fk["curator_extra_epsilon_max"].get<double>(),
                        fk["agent_extra_epsilon_max"].get<double>()));
  }
  if (sc.contains("database_restarts")) {
    const json& dr = sc["database_restarts"];
    row("database restarts",
        absl::StrFormat("%d SIGKILLs of PostgreSQL; reports flowed again "
                        "within %.2f s of its return; %u acknowledged reports "
                        "lost (of %u checked); extra epsilon %g (ledger), %g "
                        "(agents' memos)",
                        dr["restarts"].get<int>(),
                        dr["flowing_seconds_max"].get<double>(),
                        dr["acknowledged_reports_lost"].get<uint64_t>(),
                        dr["acknowledged_reports_checked"].get<uint64_t>(),
                        dr["curator_extra_epsilon_max"].get<double>(),
                        dr["agent_extra_epsilon_max"].get<double>()));
  }
  if (sc.contains("operator_kills")) {
    const json& ok = sc["operator_kills"];
    row("operator kills",
        absl::StrFormat("%d SIGKILLs of the active operator; the standby "
                        "served within %.2f s; %u acknowledged reports lost "
                        "(of %u checked); extra epsilon %g (ledger), %g "
                        "(agents' memos)",
                        ok["kills"].get<int>(),
                        ok["serving_seconds_max"].get<double>(),
                        ok["acknowledged_reports_lost"].get<uint64_t>(),
                        ok["acknowledged_reports_checked"].get<uint64_t>(),
                        ok["curator_extra_epsilon_max"].get<double>(),
                        ok["agent_extra_epsilon_max"].get<double>()));
  }
  if (sc.contains("churn")) {
    const json& ch = sc["churn"];
    row("churn",
        absl::StrFormat("%g of the hosts: %d kills, %d restarts; %u "
                        "acknowledged reports lost (of %u checked); extra "
                        "epsilon %g (ledger), %g (agents' memos)",
                        ch["fraction"].get<double>(), ch["kills"].get<int>(),
                        ch["restarts"].get<int>(),
                        ch["acknowledged_reports_lost"].get<uint64_t>(),
                        ch["acknowledged_reports_checked"].get<uint64_t>(),
                        ch["curator_extra_epsilon_max"].get<double>(),
                        ch["agent_extra_epsilon_max"].get<double>()));
    if (const double unsent = ch["charged_not_received_epsilon_max"].get<double>();
        unsent > 0) {
      row("", absl::StrFormat("a host charged up to %g epsilon for answers the "
                              "curator never received (closed first)",
                              unsent));
    }
    for (const json& c : ch["campaigns"]) {
      row(absl::StrCat("  ", c["id"].get<std::string>()),
          absl::StrFormat("%u kills, complete in %.2f s",
                          c["kills"].size(), c["seconds"].get<double>()));
    }
  }
  if (sc.contains("malicious")) {
    const json& m = sc["malicious"];
    row("poisoning",
        absl::StrFormat("malicious %g (%u nodes, simulated), %s attack on "
                        "class %d, %d target dimensions",
                        m["fraction"].get<double>(), m["nodes"].get<uint32_t>(),
                        m.value("attack", "maximal-gain"),
                        m["attack_class"].get<int>(), m["attack_dims"].get<int>()));
  }
  if (sc.contains("defence")) row("defence", DefenceRow(sc["defence"]));
}

// Report's table, in parts: the setup (what ran), the scenario's rows,
// the results beside their baselines, and the seconds of each stage.
void Simulation::Report(const json& j) {
  if (o_.json) {
    out_ << j.dump(2) << "\n" << std::flush;
    return;
  }
  const TableRow row = [&](const std::string& k, const std::string& v) {
    out_ << absl::StrFormat("  %-26s %s\n", k, v);
  };
  out_ << (o_.attach ? "\n== ldpctl run: results ==\n"
                      : "\n== ldpctl simulate: results ==\n");
  SetupRows(j, row);
  ScenarioRows(j["deployment"], row);
  out_ << "\n";
  ResultRows(j, row);
  StageTable(j);
  out_ << std::flush;
}

// The dataset, the deployment, the pipeline, the propagation chosen, the
// graph and the noise.
void Simulation::SetupRows(const json& j, const TableRow& row) const {
  const json& d = j["deployment"];
  row("dataset", absl::StrCat(j["dataset"].get<std::string>(), " (",
                              d["nodes"].get<uint32_t>(), " nodes, ",
                              d["edges"].get<size_t>(), " edges)"));
  std::string deployment =
      o_.attach ? absl::StrCat("curator ", d["curator"].get<std::string>(), " + ",
                               hosts_, " agent hosts, gRPC over ",
                               d["tls"].get<bool>() ? "TLS" : "PLAINTEXT")
                : o_.store == "postgres"
                      ? absl::StrCat(o_.frontends > 0
                                         ? absl::StrCat("operator + ", o_.frontends,
                                                        " frontends")
                                         : std::string("1 curator"),
                                     " on PostgreSQL + ", o_.hosts,
                                     " agent hosts, gRPC over TLS on 127.0.0.1")
                      : absl::StrCat("1 curator + ", o_.hosts,
                                     " agent hosts, gRPC over TLS on 127.0.0.1");
  if (!o_.attach && o_.edge) {
    deployment += "; the agents' TLS ends at an HAProxy edge";
  }
  row("deployment", deployment);
  std::string pipeline_text =
      absl::StrCat(o_.method == v1::PIPELINE_METHOD_LPGNN    ? "LPGNN"
                   : o_.method == v1::PIPELINE_METHOD_UPGNET ? "UPGNET"
                                                             : "PrivGE",
                   ", ",
                   o_.task == v1::PIPELINE_TASK_NODE ? "node classification"
                                                     : "link prediction",
                   ", ", config_.mechanism, " epsilon_x ",
                   absl::StrFormat("%g", config_.epsilon));
  if (config_.label_epsilon) {
    absl::StrAppend(&pipeline_text, ", label RR epsilon_y ",
                    absl::StrFormat("%g", *config_.label_epsilon));
  }
  row("pipeline", pipeline_text);
  if (const json& r = j["per_run"][0]; r.contains("tuning") &&
                                       r["tuning"].contains("candidates")) {
    // PrivGE's node task: which propagation the validation nodes chose.
    std::string tried;
    for (const json& c : r["tuning"]["candidates"]) {
      absl::StrAppend(&tried, tried.empty() ? "" : ", ",
                      c["propagation"].get<std::string>(), " ",
                      absl::StrFormat("%.3f", c["validation"].get<double>()));
    }
    row("propagation",
        absl::StrCat(r["tuning"]["propagation"].get<std::string>(),
                     " (kept by validation accuracy: ", tried, ")"));
  }
  GraphRow(d["graph"], row);
  row("noise", o_.seed ? absl::StrCat("seeded (", *o_.seed,
                                      "): reproducible, NOT private")
                       : "secure (OpenSSL)");
}

// Where the graph came from: the curator's, or assembled from an edge
// campaign.
void Simulation::GraphRow(const json& g, const TableRow& row) {
  if (g["source"] == "curator") {
    row("graph", absl::StrFormat("the curator's (true edges, %u)",
                                 g["edges"].get<uint64_t>()));
  } else if (g["source"] == "blink") {
    row("graph",
        absl::StrFormat(
            "assembled from %s: Blink, epsilon %g (delta %g), %s over %u "
            "reporters, %u non-reporters isolated (%u edges)",
            g["campaign"].get<std::string>(), g["epsilon"].get<double>(),
            g["delta"].get<double>(), g["variant"].get<std::string>(),
            g.value("reports", uint64_t{0}),
            g.value("nonreporters", uint64_t{0}),
            g["edges"].get<uint64_t>()));
  } else {
    row("graph",
        absl::StrFormat(
            "assembled from %s: %s, epsilon_e %g, %s (%u edges)",
            g["campaign"].get<std::string>(),
            g["source"] == "rr" ? "edge randomized response"
                                : absl::StrCat("neighbour substitution, approach ",
                                               g["source"] == "ns1" ? "1" : "2"),
            g["epsilon"].get<double>(), g["rule"].get<std::string>(),
            g["edges"].get<uint64_t>()));
  }
}

// The metric, beside its baselines, and what the deployment cost.
void Simulation::ResultRows(const json& j, const TableRow& row) const {
  const json& d = j["deployment"];
  row(j["metric"].get<std::string>() + " (test)",
      absl::StrFormat("%.4f", j["mean"].get<double>()));
  if (j.contains("baselines")) {
    // What the campaign's reports bought over what the curator holds anyway.
    for (const auto& [key, b] : j["baselines"].items()) {
      const double diff = 100 * b["difference"]["mean"].get<double>();
      // no_graph holds the reports without the graph: the difference is
      // the graph's.
      const bool graph = key == "no_graph";
      const char* gain = graph ? "the graph adds" : "the reports add";
      const char* ahead = graph ? "the result with the graph" : "the reports";
      row(b["label"].get<std::string>(),
          absl::StrFormat(
              "%.4f (%s)", b["mean"].get<double>(),
              diff >= 0
                  ? absl::StrFormat("%s %.1f points", gain, diff)
                  : absl::StrFormat("ahead of %s by %.1f points", ahead,
                                    -diff)));
    }
  }
  if (j["per_run"][0].contains("target_rate")) {
    row(absl::StrCat("target rate (class ", o_.attack_class, ")"),
        absl::StrFormat("%.4f", j["per_run"][0]["target_rate"].get<double>()));
  }
  const json& e = d["epsilon_spent_per_node"];
  row("epsilon spent per node",
      absl::StrFormat("mean %g (min %g, max %g)", e["mean"].get<double>(),
                      e["min"].get<double>(), e["max"].get<double>()));
  row("reports", absl::StrFormat("%u (%u refused, %u rejected)",
                                 d["reports"].get<uint64_t>(),
                                 d["refusals"].get<uint64_t>(),
                                 d["rejected"].get<uint64_t>()));
  row("bytes on the wire", absl::StrFormat(
                               "%.1f KiB of reports (%.1f B per report)",
                               d["report_bytes"].get<uint64_t>() / 1024.0,
                               d["report_bytes_per_report"].get<double>()));
  if (d.contains("peak_rss_mib")) {
    const json& mem = d["peak_rss_mib"];
    row("peak memory", absl::StrFormat(
                           "%.0f MiB at once (each process's own peak: "
                           "%.0f MiB in all, curator %.0f MiB%s, agent hosts "
                           "%.0f MiB (largest %.0f), ldpctl %.0f MiB)",
                           mem["together"].get<double>(),
                           mem["all_processes"].get<double>(),
                           mem["curator"].get<double>(),
                           o_.frontends > 0
                               ? absl::StrFormat(" (frontends %.0f)",
                                                 mem["frontends"].get<double>())
                               : std::string(),
                           mem["agent_hosts_total"].get<double>(),
                           mem["agent_host_max"].get<double>(),
                           mem["ldpctl"].get<double>()));
  }
}

// The seconds of each stage, and of the evaluation's parts.
void Simulation::StageTable(const json& j) {
  const json& d = j["deployment"];
  out_ << "\n  " << absl::StrFormat("%-26s %9s\n", "stage", "seconds");
  for (const auto& [k, v] : stage_seconds_) {
    out_ << absl::StrFormat("  %-26s %9.2f\n", k, v);
  }
  const json& r = j["per_run"][0];
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which propagate",
                          r["propagate_seconds"].get<double>());
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which train",
                          r["train_seconds"].get<double>());
  if (d["evaluate_seconds"]["baselines"].get<double>() > 0) {
    out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which baselines",
                            d["evaluate_seconds"]["baselines"].get<double>());
  }
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which the rest",
                          d["evaluate_seconds"]["rest"].get<double>());
  out_ << absl::StrFormat("  %-26s %9.2f\n", "total", d["total_seconds"].get<double>());
}

}  // namespace ldpgraph::ldpctl::internal

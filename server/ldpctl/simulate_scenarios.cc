// The Simulation's scenarios (internal/simulation.h): the network between
// agent hosts and curator (--latency, --jitter, --loss: one FaultProxy per
// host, and its figures), --churn (killing and restarting agent hosts, and
// what was lost), --frontend-kills (the same for the frontends), the
// attacker's flags the agent hosts get (--malicious), and the spending
// checks both kinds of kill report.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/attacks/poisoning.h"
#include "common/net/fault_proxy.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/churn.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/simulation.h"
#include "server/ldpctl/process.h"
#include "server/store/store.h"

namespace ldpgraph::ldpctl::internal {

absl::StatusOr<ChurnDriver> Simulation::ChurnFor(const std::string& campaign_id,
                                                 bool exchange) {
  ASSIGN_OR_RETURN(std::vector<ChurnKill> plan,
                   PlanChurn(o_.seed.value_or(1), static_cast<int>(churned_.size()),
                             o_.hosts, o_.churn, exchange));
  churned_.push_back({campaign_id, {}, {}, {}});
  const size_t index = churned_.size() - 1;
  ChurnDriver::Hooks hooks;
  hooks.before_kill = [this, index](int) -> absl::Status {
    ChurnedCampaign& cc = churned_[index];
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::GetCampaignRequest get;
    get.set_campaign_id(cc.id);
    v1::Campaign c;
    RETURN_IF_ERROR(FromGrpc(admin_->stub->GetCampaign(&ctx, get, &c),
                             admin_->address));
    cc.acked_before_kill.push_back(c.progress().reported());
    ASSIGN_OR_RETURN(auto stored, Reporters(cc.id));
    cc.stored_before_kill.push_back(std::move(stored));
    return absl::OkStatus();
  };
  hooks.kill = [this, index](int h) {
    const std::string how = agents_[h]->Kill();
    agents_[h].reset();
    progress_.Note(absl::StrFormat("churn: agent host %d %s during %s (%u acknowledged reports)",
                                   h, how, churned_[index].id,
                                   churned_[index].acked_before_kill.back()));
    return absl::OkStatus();
  };
  hooks.restart = [this](int h) {
    ++restarts_[h];
    RETURN_IF_ERROR(StartAgent(h));
    progress_.Note(absl::StrFormat("churn: agent host %d restarted (restart %d)",
                                   h, restarts_[h]));
    return absl::OkStatus();
  };
  return ChurnDriver(std::move(plan), absl::Seconds(o_.churn_down_s),
                     std::move(hooks));
}

absl::StatusOr<json> Simulation::ChurnFigures(const Campaigns& c) {
  // Every campaign's final reporters, from the curator's store.
  std::vector<CampaignAnswers> answers;
  std::map<std::string, std::vector<uint32_t>> final_of;
  for (const v1::Campaign& campaign : c.all) {
    ASSIGN_OR_RETURN(auto reporters, Reporters(campaign.id()));
    if (reporters.size() != campaign.progress().reported()) {
      return absl::InternalError(absl::StrCat(
          campaign.id(), ": the curator counts ", campaign.progress().reported(),
          " reports but its store holds ", reporters.size()));
    }
    final_of[campaign.id()] = reporters;
    answers.push_back({campaign.attribute(), campaign.spec(), std::move(reporters)});
  }
  ASSIGN_OR_RETURN(json spending, SpendingChecks(answers));
  uint64_t checked = 0, lost = 0;
  int kills = 0, restarts = 0;
  json campaigns = json::array();
  for (const ChurnedCampaign& cc : churned_) {
    const std::vector<uint32_t>& final_set = final_of[cc.id];
    json jk = json::array();
    for (size_t i = 0; i < cc.kills.size(); ++i) {
      const ChurnKill& k = cc.kills[i];
      if (!k.killed) continue;
      const uint64_t missing = MissingFrom(cc.stored_before_kill[i], final_set);
      checked += cc.stored_before_kill[i].size();
      lost += missing;
      ++kills;
      restarts += k.restarted;
      jk.push_back({{"host", k.host},
                    {"after_seconds", k.killed_after_s},
                    {"answered_at_kill", k.answered_at_kill},
                    {"acknowledged_before_kill", cc.acked_before_kill[i]},
                    {"stored_before_kill", cc.stored_before_kill[i].size()},
                    {"lost", missing},
                    {"down_seconds", k.down_s}});
    }
    double secs = 0;
    for (const v1::Campaign& campaign : c.all) {
      if (campaign.id() != cc.id) continue;
      const std::string attr = campaign.attribute() == v1::ATTRIBUTE_LABEL   ? "labels"
                               : campaign.attribute() == v1::ATTRIBUTE_EDGES ? "edges"
                                                                             : "features";
      for (const auto& [stage, v] : stage_seconds_) {
        if (stage == "collect " + attr) secs = v;
      }
    }
    campaigns.push_back({{"id", cc.id}, {"seconds", secs}, {"kills", jk}});
  }
  json figures{
      {"fraction", o_.churn},
      {"down_seconds", o_.churn_down_s},
      {"batch", o_.churn_batch},
      {"kills", kills},
      {"restarts", restarts},
      {"campaigns", campaigns},
      {"acknowledged_reports_checked", checked},
      {"acknowledged_reports_lost", lost},
      {"lost_definition",
       "nodes the curator's store held for the campaign just before a kill "
       "(a superset of those acknowledged) missing from its final reporters"},
  };
  figures.update(spending);
  return figures;
}

absl::StatusOr<json> Simulation::SpendingChecks(
    const std::vector<CampaignAnswers>& answers) {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  // The ledger charges what the curator received: the questions of the
  // campaigns a node reported to. A host charges what it answered, which
  // can include an answer the curator never received (drawn and memoized,
  // then the campaign closed at its deadline before the host, restarted,
  // sent it): the questions of the campaigns that asked the node (every
  // node: simulate's campaigns target all).
  ASSIGN_OR_RETURN(const std::vector<double> expected, ExpectedSpending(answers, n));
  std::vector<uint32_t> all(n);
  for (uint32_t v = 0; v < n; ++v) all[v] = v;
  std::vector<CampaignAnswers> asked = answers;
  for (CampaignAnswers& a : asked) a.reporters = all;
  ASSIGN_OR_RETURN(const std::vector<double> asked_of, ExpectedSpending(asked, n));
  // The ledger's spend per node.
  ASSIGN_OR_RETURN(const std::vector<double> ledger, LedgerSpent());
  // The hosts' own memos (committed before a report leaves the host).
  std::vector<double> memo(n, 0.0);
  uint64_t memo_rows = 0;
  for (int h = 0; h < o_.hosts; ++h) {
    RETURN_IF_ERROR(AddMemoSpending(absl::StrCat(work_, "/agent-", h), n, &memo,
                                    &memo_rows));
  }
  return json{
      {"curator_extra_epsilon_max", MaxExtraEpsilon(ledger, expected)},
      {"agent_extra_epsilon_max", MaxExtraEpsilon(memo, asked_of)},
      {"agent_memo_rows", memo_rows},
      {"extra_definition",
       "max over nodes of the epsilon spent beyond the sum over the distinct "
       "questions asked of it: by the curator's ledger, of the campaigns the "
       "node reported to; by the hosts' memo rows, of the campaigns that "
       "asked it"},
      {"charged_not_received_epsilon_max", MaxExtraEpsilon(memo, ledger)},
      {"charged_not_received_definition",
       "max over nodes of the epsilon its host charged (memo rows) for "
       "answers the curator never received: drawn and kept, not revealed "
       "(a later identical question gets them again at no cost)"}};
}

uint64_t Simulation::MissingFrom(const std::vector<uint32_t>& stored,
                                 const std::vector<uint32_t>& final_set) {
  uint64_t missing = 0;
  for (uint32_t v : stored) {
    missing += !std::binary_search(final_set.begin(), final_set.end(), v);
  }
  return missing;
}

std::vector<std::string> Simulation::AttackArgs() const {
  if (!o_.malicious || *o_.malicious == 0) return {};
  std::vector<std::string> args = {
      "--malicious",      absl::StrCat(*o_.malicious),
      "--malicious-seed", absl::StrCat(DropoutSeed()),
      "--attack",         std::string(poisoning::kAttackNames.Name(o_.attack_kind)),
      "--attack-class",   absl::StrCat(o_.attack_class),
      "--attack-dims",    absl::StrCat(o_.attack_dims)};
  if (o_.attack_kind == poisoning::AttackKind::kAdaptive) {
    // The screen's public level, as ldpgraph eval's adaptive attacker
    // assumes it (PipelineConfig::screen_alpha, its default without the
    // screen). %.17g: the agents must parse the very same double.
    args.insert(args.end(), {"--attack-alpha",
                             absl::StrFormat("%.17g", o_.screen_alpha)});
  }
  if (o_.attack_kind == poisoning::AttackKind::kFakeEdges) {
    args.insert(args.end(), {"--attack-edges", absl::StrCat(o_.attack_edges)});
  }
  return args;
}

absl::Status Simulation::StartNetwork() {
  if (!o_.network()) return absl::OkStatus();
  // Network simulation, not privacy noise: seeded even without --seed.
  const uint64_t seed = SeedMix(o_.seed.value_or(1) ^ 0x6e6574776f726b21ULL);
  for (int h = 0; h < o_.hosts; ++h) {
    net::FaultProxy::Options p;
    p.upstream = absl::StrCat("127.0.0.1:", port_);
    p.latency = absl::Microseconds(std::llround(o_.latency_ms * 1000));
    p.jitter = absl::Microseconds(std::llround(o_.jitter_ms * 1000));
    p.loss = o_.loss;
    p.seed = SeedFinalise(seed + static_cast<uint64_t>(h));
    auto proxy = net::FaultProxy::Create(std::move(p));
    if (!proxy.ok()) {
      return absl::Status(proxy.status().code(),
                          absl::StrCat("the network proxy of agent host ", h,
                                       ": ", proxy.status().message()));
    }
    proxies_.push_back(std::move(*proxy));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> Simulation::Reporters(
    const std::string& id) {
  if (observer_ == nullptr) return StoredReporters(work_ + "/curator", id);
  return StoredReporters(*observer_, id);
}

absl::Status Simulation::KillFrontends(const v1::Campaign& c,
                                       absl::Duration since_open) {
  const int k = static_cast<int>(frontend_kills_.size());
  if (k >= o_.frontend_kills) return absl::OkStatus();
  uint32_t answered = c.progress().reported() + c.progress().refused();
  if (observer_ != nullptr) {
    // The store's count now: the operator's lags by its sync interval, in
    // which a small campaign can finish.
    answered = std::max(answered, StoredCount(c.id()));
  }
  // Kill k is due when the answers pass (k + 1) / (K + 1) of the targets.
  if (static_cast<uint64_t>(answered) * (o_.frontend_kills + 1) <
      static_cast<uint64_t>(c.progress().targeted()) * (k + 1)) {
    return absl::OkStatus();
  }
  killed_campaign_ = c.id();
  FrontendKill kill;
  kill.frontend = k % o_.frontends;
  kill.after_seconds = absl::ToDoubleSeconds(since_open);
  kill.answered_at_kill = answered;
  kill.acked_before_kill = c.progress().reported();
  ASSIGN_OR_RETURN(kill.stored_before_kill, Reporters(c.id()));
  const int i = kill.frontend;
  const std::string how = frontends_[i]->Kill();
  frontends_[i].reset();
  progress_.Note(absl::StrFormat(
      "frontend kill %d: frontend %d %s during %s (%u reports stored)", k + 1,
      i, how, c.id(), kill.stored_before_kill.size()));
  const absl::Time t = absl::Now();
  ++frontend_restarts_[i];
  RETURN_IF_ERROR(StartFrontend(i, frontend_ports_[i]));
  kill.restart_seconds = absl::ToDoubleSeconds(absl::Now() - t);
  frontend_kills_.push_back(std::move(kill));
  return absl::OkStatus();
}

absl::Status Simulation::FinalAnswers(const Campaigns& c,
                                      const std::string& campaign_id,
                                      std::vector<CampaignAnswers>* answers,
                                      std::vector<uint32_t>* final_set) {
  for (const v1::Campaign& campaign : c.all) {
    ASSIGN_OR_RETURN(auto reporters, Reporters(campaign.id()));
    if (campaign.id() == campaign_id) *final_set = reporters;
    answers->push_back({campaign.attribute(), campaign.spec(), std::move(reporters)});
  }
  return absl::OkStatus();
}

absl::StatusOr<json> Simulation::FrontendFigures(const Campaigns& c) {
  std::vector<CampaignAnswers> answers;
  std::vector<uint32_t> final_set;
  RETURN_IF_ERROR(FinalAnswers(c, killed_campaign_, &answers, &final_set));
  ASSIGN_OR_RETURN(json spending, SpendingChecks(answers));
  uint64_t checked = 0, lost = 0;
  json kills = json::array();
  for (const FrontendKill& k : frontend_kills_) {
    const uint64_t missing = MissingFrom(k.stored_before_kill, final_set);
    checked += k.stored_before_kill.size();
    lost += missing;
    kills.push_back({{"frontend", k.frontend},
                     {"after_seconds", k.after_seconds},
                     {"answered_at_kill", k.answered_at_kill},
                     {"acknowledged_before_kill", k.acked_before_kill},
                     {"stored_before_kill", k.stored_before_kill.size()},
                     {"lost", missing},
                     {"restart_seconds", k.restart_seconds}});
  }
  json figures{
      {"frontends", o_.frontends},
      {"campaign", killed_campaign_},
      {"kills", static_cast<int>(frontend_kills_.size())},
      {"each", kills},
      {"acknowledged_reports_checked", checked},
      {"acknowledged_reports_lost", lost},
      {"lost_definition",
       "nodes the store held for the campaign just before a kill (a superset "
       "of those acknowledged) missing from its final reporters"}};
  figures.update(spending);
  return figures;
}

std::string Simulation::AgentCuratorAddress(int h) const {
  if (edge_port_ > 0) return absl::StrCat("127.0.0.1:", edge_port_);
  if (!frontend_ports_.empty()) {
    // Every frontend, starting at a different one per host: each host keeps
    // to the first live one of its list.
    std::vector<std::string> list;
    const int n = static_cast<int>(frontend_ports_.size());
    for (int k = 0; k < n; ++k) {
      list.push_back(absl::StrCat("127.0.0.1:", frontend_ports_[(h + k) % n]));
    }
    return absl::StrJoin(list, ",");
  }
  return absl::StrCat("127.0.0.1:", proxies_.empty() ? port_
                                                      : proxies_[h]->port());
}

json Simulation::NetworkJson() const {
  uint64_t connections = 0, chunks = 0, losses = 0, to_curator = 0,
           to_agents = 0;
  absl::Duration max_delay;
  double cpu = 0;
  for (const auto& p : proxies_) {
    const net::FaultProxy::Stats s = p->stats();
    connections += s.connections;
    chunks += s.chunks;
    losses += s.injected_losses;
    to_curator += s.bytes_to_upstream;
    to_agents += s.bytes_to_client;
    max_delay = std::max(max_delay, s.max_delay);
    cpu += s.cpu_seconds;
  }
  return {{"enabled", o_.network()},
          {"latency_ms", o_.latency_ms},
          {"jitter_ms", o_.jitter_ms},
          {"loss", o_.loss},
          {"rto_ms", absl::ToDoubleMilliseconds(net::FaultProxy::RetransmissionTimeout(
                         absl::Milliseconds(o_.latency_ms),
                         absl::Milliseconds(o_.jitter_ms)))},
          {"proxies", proxies_.size()},
          {"connections", connections},
          {"chunks", chunks},
          {"injected_losses", losses},
          {"bytes_to_curator", to_curator},
          {"bytes_to_agents", to_agents},
          {"max_delay_ms", absl::ToDoubleMilliseconds(max_delay)},
          {"proxy_cpu_seconds", cpu}};
}

std::string Simulation::NetworkText(const json& n) const {
  return absl::StrFormat(
      "latency %g ms +- %g ms each way, loss %g per chunk through %u proxies: "
      "%u of %u chunks stalled one RTO (%g ms), longest hold %.0f ms",
      n["latency_ms"].get<double>(), n["jitter_ms"].get<double>(),
      n["loss"].get<double>(), n["proxies"].get<uint32_t>(),
      n["injected_losses"].get<uint64_t>(), n["chunks"].get<uint64_t>(),
      n["rto_ms"].get<double>(), n["max_delay_ms"].get<double>());
}

}  // namespace ldpgraph::ldpctl::internal

// The Simulation's faults of the server side beyond a frontend
// (internal/simulation.h): --database-restarts (SIGKILL of every PostgreSQL
// process, restarted at once) and --operator-kills (SIGKILL of the active
// operator; the standby takes over and the killed one comes back as the
// next standby), during the features campaign, with what the store held
// before each fault, how long the deployment took to serve again, and the
// spending checks --frontend-kills reports.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/simulation.h"
#include "server/ldpctl/process.h"
#include "server/store/local_postgres.h"
#include "server/store/store.h"

namespace ldpgraph::ldpctl::internal {

uint32_t Simulation::StoredCount(const std::string& id) {
  if (observer_ == nullptr) return 0;
  const absl::StatusOr<int64_t> parsed = store::ParseCampaignName(id);
  if (!parsed.ok()) return 0;
  const int64_t campaign = *parsed;
  uint32_t stored = 0;
  observer_
      ->ForEachAnswerKey(
          [&](int64_t c, uint32_t, bool) { stored += c == campaign; })
      .IgnoreError();
  return stored;
}

absl::Status Simulation::ServerFaults(const v1::Campaign& c,
                                      absl::Duration since_open) {
  const uint32_t answered = std::max(
      c.progress().reported() + c.progress().refused(), StoredCount(c.id()));
  const double targeted = c.progress().targeted();
  // Fault k of K is due when the answers pass (k + phase) / (K + 1) of the
  // targets: database restarts a third of a step before the frontend kills'
  // points, operator kills two thirds, so that no two kinds coincide.
  auto due = [&](size_t done, int total, double phase) {
    return done < static_cast<size_t>(total) &&
           answered * (total + 1.0) >= targeted * (done + phase);
  };
  if (due(database_restarts_.size(), o_.database_restarts, 1.0 / 3)) {
    RETURN_IF_ERROR(RestartDatabase(c, since_open));
  }
  if (due(operator_kills_.size(), o_.operator_kills, 2.0 / 3)) {
    RETURN_IF_ERROR(KillOperator(c, since_open));
  }
  return absl::OkStatus();
}

absl::StatusOr<Simulation::ServerFault> Simulation::FaultAt(
    const v1::Campaign& c, absl::Duration since_open) {
  fault_campaign_ = c.id();
  ServerFault f;
  f.after_seconds = absl::ToDoubleSeconds(since_open);
  ASSIGN_OR_RETURN(f.stored_before, Reporters(c.id()));
  f.answered_at_fault = std::max<uint32_t>(
      c.progress().reported() + c.progress().refused(),
      static_cast<uint32_t>(f.stored_before.size()));
  return f;
}

absl::Status Simulation::RestartDatabase(const v1::Campaign& c,
                                         absl::Duration since_open) {
  ASSIGN_OR_RETURN(ServerFault f, FaultAt(c, since_open));
  const uint32_t reported_at_kill = c.progress().reported();
  const absl::Time t = absl::Now();
  RETURN_IF_ERROR(postgres_->Kill());
  RETURN_IF_ERROR(postgres_->Restart());
  const absl::Time back = absl::Now();
  f.down_seconds = absl::ToDoubleSeconds(back - t);
  const int k = static_cast<int>(database_restarts_.size()) + 1;
  progress_.Note(absl::StrFormat(
      "database restart %d: PostgreSQL killed during %s (%u reports stored), "
      "accepting again after %.2f s",
      k, c.id(), f.stored_before.size(), f.down_seconds));
  // Reports flow again when the store holds more than at the kill and the
  // operator has counted them (its sync and its lease are back).
  const absl::Time until = back + absl::Seconds(o_.timeout_s);
  while (absl::Now() < until) {
    RETURN_IF_ERROR(Check());
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::GetCampaignRequest get;
    get.set_campaign_id(c.id());
    v1::Campaign now;
    const grpc::Status g = admin_->stub->GetCampaign(&ctx, get, &now);
    if (g.ok()) {
      const uint32_t answered = now.progress().reported() + now.progress().refused();
      if (now.progress().reported() > reported_at_kill &&
          StoredCount(c.id()) > f.stored_before.size()) {
        f.flowing_seconds = absl::ToDoubleSeconds(absl::Now() - back);
        break;
      }
      if (answered >= now.progress().targeted() ||
          now.state() == v1::CAMPAIGN_STATE_CLOSED) {
        break;  // nothing left to flow
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (f.flowing_seconds) {
    progress_.Note(absl::StrFormat(
        "database restart %d: reports flow again %.2f s after its return", k,
        *f.flowing_seconds));
  }
  database_restarts_.push_back(std::move(f));
  return absl::OkStatus();
}

absl::Status Simulation::KillOperator(const v1::Campaign& c,
                                      absl::Duration since_open) {
  ASSIGN_OR_RETURN(ServerFault f, FaultAt(c, since_open));
  const int dead = active_slot_;
  const absl::Time t = absl::Now();
  const std::string how = curator_->Kill();
  curator_.reset();
  // The standby takes the lease, loads the state and writes its ready file.
  ASSIGN_OR_RETURN(port_, WaitReady(standby_.get(), OperatorReady(1 - dead),
                                    "standby operator"));
  f.takeover_seconds = absl::ToDoubleSeconds(absl::Now() - t);
  curator_ = std::move(standby_);
  active_slot_ = 1 - dead;
  // ldpctl's connection lists both operators: the first answer through it.
  const absl::Time until = t + absl::Seconds(o_.timeout_s);
  while (true) {
    RETURN_IF_ERROR(Check());
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    v1::CuratorStatus status;
    const grpc::Status g =
        admin_->stub->GetStatus(&ctx, v1::GetStatusRequest(), &status);
    if (g.ok()) break;
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no operator answered within --timeout after operator ", dead,
          " was killed: ", g.error_message()));
    }
  }
  f.serving_seconds = absl::ToDoubleSeconds(absl::Now() - t);
  progress_.Note(absl::StrFormat(
      "operator kill %d: operator %d %s during %s (%u reports stored); "
      "operator %d served after %.2f s, ldpctl reached it after %.2f s",
      operator_kills_.size() + 1, dead, how, c.id(), f.stored_before.size(),
      active_slot_, f.takeover_seconds, f.serving_seconds));
  // The killed one comes back as the next standby.
  RETURN_IF_ERROR(StartOperator(dead, &standby_));
  operator_kills_.push_back(std::move(f));
  return absl::OkStatus();
}

absl::StatusOr<json> Simulation::FaultFigures(
    const Campaigns& c, const std::vector<ServerFault>& faults,
    bool operator_kills) {
  std::vector<CampaignAnswers> answers;
  std::vector<uint32_t> final_set;
  RETURN_IF_ERROR(FinalAnswers(c, fault_campaign_, &answers, &final_set));
  ASSIGN_OR_RETURN(json spending, SpendingChecks(answers));
  uint64_t checked = 0, lost = 0;
  double worst = 0;
  json each = json::array();
  for (const ServerFault& f : faults) {
    const uint64_t missing = MissingFrom(f.stored_before, final_set);
    checked += f.stored_before.size();
    lost += missing;
    json j{{"after_seconds", f.after_seconds},
           {"answered_at_fault", f.answered_at_fault},
           {"stored_before", f.stored_before.size()},
           {"lost", missing}};
    if (operator_kills) {
      j["takeover_seconds"] = f.takeover_seconds;
      j["serving_seconds"] = f.serving_seconds;
      worst = std::max(worst, f.serving_seconds);
    } else {
      j["down_seconds"] = f.down_seconds;
      j["flowing_seconds"] = f.flowing_seconds ? json(*f.flowing_seconds) : json();
      if (f.flowing_seconds) worst = std::max(worst, *f.flowing_seconds);
    }
    each.push_back(std::move(j));
  }
  json figures{
      {"campaign", fault_campaign_},
      {operator_kills ? "kills" : "restarts", static_cast<int>(faults.size())},
      {"each", each},
      {operator_kills ? "serving_seconds_max" : "flowing_seconds_max", worst},
      {"acknowledged_reports_checked", checked},
      {"acknowledged_reports_lost", lost},
      {"lost_definition",
       "nodes the store held for the campaign just before a fault (a "
       "superset of those acknowledged) missing from its final reporters"}};
  if (operator_kills) {
    figures["serving_definition"] =
        "seconds from the active operator's SIGKILL until ldpctl's "
        "connection (listing both operators) got an answer from the standby";
  } else {
    figures["flowing_definition"] =
        "seconds from the database accepting connections again until the "
        "store held more answers than at the kill and the operator counted "
        "them (null: the campaign had no answer left to come)";
  }
  figures.update(spending);
  return figures;
}

}  // namespace ldpgraph::ldpctl::internal

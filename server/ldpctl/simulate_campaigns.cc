// The Simulation's campaigns and stages (internal/simulation.h): waiting
// until every online node is enrolled and every host subscribed, each
// campaign from creation to quorum or deadline (driving --churn and
// --frontend-kills while it runs), the campaigns of a run (edges, features,
// labels), and the curator's estimate and evaluate stages.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/commands.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/simulation.h"
#include "server/ldpctl/process.h"
#include "server/pipeline/config.h"

namespace ldpgraph::ldpctl::internal {
namespace {

// --defence and --screen-alpha into the estimate request: the screen.
void SetDefence(const Options& o, v1::EstimateRequest* req) {
  if (!o.defences.screen) return;
  req->set_defence("screen");
  req->set_screen_alpha(o.screen_alpha);
}

// --defence into the evaluate request: the whole list, of which evaluate
// applies robust (screen there asserts that the estimate was screened).
void SetDefence(const Options& o, v1::EvaluateRequest* req) {
  if (o.defences.any()) req->set_defence(pipeline::DefencesName(o.defences));
}

}  // namespace

absl::Status Simulation::WaitEnrolled() {
  const auto t = std::chrono::steady_clock::now();
  const absl::Time until = absl::Now() + absl::Seconds(o_.timeout_s);
  v1::CuratorStatus s;
  while (true) {
    RETURN_IF_ERROR(Check());
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    // Attached, the curator may not listen yet: wait for the channel (a
    // blocked call drives the reconnection; a failed one would leave it to
    // gRPC's 5 s backup poller).
    if (o_.attach) ctx.set_wait_for_ready(true);
    grpc::Status g = admin_->stub->GetStatus(&ctx, v1::GetStatusRequest(), &s);
    if (o_.attach &&
        (g.error_code() == grpc::StatusCode::UNAVAILABLE ||
         g.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
        absl::Now() < until) {
      // The curator may still be starting (a container, a pod).
      progress_.Update("waiting for the curator", g.error_message());
      absl::SleepFor(absl::Milliseconds(500));
      continue;
    }
    if (!g.ok()) return FromGrpc(g, admin_->address);
    if (o_.attach && s.graph_nodes() != data_.meta.nodes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the curator's graph has ", s.graph_nodes(), " nodes but ",
          o_.dataset_dir, "/meta.json says ", data_.meta.nodes,
          ": give the deployment's dataset"));
    }
    // Attached to a fleet, every shard's holder subscribes after it enrols:
    // wait for them all, or the campaign starts (and the table counts
    // hosts) before the last one is listening.
    const int want_hosts =
        o_.attach ? std::max(1, static_cast<int>(s.fleet_shards())) : o_.hosts;
    std::string fleet;
    if (s.fleet_shards() > 0) {
      fleet = absl::StrCat(", fleet of ", s.fleet_shards(), " shards");
    } else if (s.fleet_gathering() > 0) {
      fleet = absl::StrCat(", ", s.fleet_gathering(), " hosts gathering for shards");
    }
    progress_.Update(
        "enrolling",
        o_.attach ? absl::StrFormat("%u/%u nodes, %u hosts subscribed%s",
                                    s.enrolled_nodes(), s.graph_nodes(),
                                    s.task_streams(), fleet)
                  : absl::StrFormat("%u/%u nodes, %u/%d hosts subscribed",
                                    s.enrolled_nodes(), s.graph_nodes(),
                                    s.task_streams(), o_.hosts));
    const uint32_t want_nodes =
        o_.dropout > 0 ? online_nodes_ : s.graph_nodes();
    if (s.enrolled_nodes() >= want_nodes &&
        static_cast<int>(s.task_streams()) >= want_hosts) {
      hosts_ = o_.attach ? static_cast<int>(s.task_streams()) : o_.hosts;
      break;
    }
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(absl::StrCat(
          "only ", s.enrolled_nodes(), " of ", s.graph_nodes(),
          " nodes enrolled within --timeout"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  progress_.Done("enrolled", absl::StrFormat("%u nodes on %d agent hosts",
                                             s.enrolled_nodes(), hosts_));
  Record("start and enrol", std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - t).count());
  return absl::OkStatus();
}

absl::StatusOr<v1::Campaign> Simulation::OpenCampaign(
    v1::CreateCampaignRequest* req) {
  req->set_quorum(o_.quorum);
  if (o_.deadline_s > 0) {
    req->set_deadline_unix_ms(absl::ToUnixMillis(absl::Now()) +
                              static_cast<int64_t>(o_.deadline_s * 1000));
  }
  v1::Campaign c;
  grpc::ClientContext ctx;
  admin_->Prepare(&ctx);
  RETURN_IF_ERROR(FromGrpc(admin_->stub->CreateCampaign(&ctx, *req, &c),
                           admin_->address));
  return c;
}

absl::StatusOr<bool> Simulation::RefreshCampaign(
    const std::string& stage, absl::Time until,
    std::optional<absl::Time>* unavailable_since, v1::Campaign* c) {
  grpc::ClientContext ctx;
  admin_->Prepare(&ctx);
  v1::GetCampaignRequest get;
  get.set_campaign_id(c->id());
  const grpc::Status got = admin_->stub->GetCampaign(&ctx, get, c);
  // UNAVAILABLE, or CANCELLED by a server on its way down (an operator
  // that found its lease taken): the call never reached a curator that
  // answers.
  if ((got.error_code() == grpc::StatusCode::UNAVAILABLE ||
       got.error_code() == grpc::StatusCode::CANCELLED) &&
      absl::Now() < until && !Interrupts::interrupted()) {
    // An operator between its death and its standby's takeover, or the
    // database between a crash and its return: wait, as the agents do.
    // After 2 s away, connect anew: the names are resolved again.
    progress_.Update(stage, absl::StrCat("the curator is unavailable, "
                                         "retrying: ", got.error_message()));
    if (!*unavailable_since) *unavailable_since = absl::Now();
    if (absl::Now() - **unavailable_since > absl::Seconds(2)) {
      admin_ = Connect(admin_settings_);
      *unavailable_since = absl::Now();
    }
    absl::SleepFor(absl::Milliseconds(o_.server_faults() ? 20 : 200));
    return false;
  }
  unavailable_since->reset();
  RETURN_IF_ERROR(FromGrpc(got, admin_->address));
  return true;
}

absl::Status Simulation::AwaitCampaign(const std::string& what,
                                       const std::string& stage,
                                       absl::Time opened, absl::Time until,
                                       ChurnDriver* churn, v1::Campaign* c) {
  std::optional<absl::Time> unavailable_since;  // the curator away since
  while (true) {
    RETURN_IF_ERROR(Check());
    ASSIGN_OR_RETURN(const bool refreshed,
                     RefreshCampaign(stage, until, &unavailable_since, c));
    if (!refreshed) continue;
    const auto& p = c->progress();
    const uint32_t answered = p.reported() + p.refused();
    if (answered >= online_nodes_ && !all_online_seconds_.contains(c->id())) {
      all_online_seconds_[c->id()] = absl::ToDoubleSeconds(absl::Now() - opened);
    }
    progress_.Update(stage, absl::StrFormat(
                                "%u/%u reports, %u refusals, %u rejected",
                                p.reported(), p.targeted(), p.refused(), p.rejected()));
    if (answered >= p.targeted() || c->state() == v1::CAMPAIGN_STATE_CLOSED) {
      return absl::OkStatus();
    }
    if (churn) {
      RETURN_IF_ERROR(churn->Poll(answered, p.targeted(), absl::Now() - opened));
    }
    if (o_.frontend_kills > 0 && what == "features") {
      RETURN_IF_ERROR(KillFrontends(*c, absl::Now() - opened));
    }
    if ((o_.database_restarts > 0 || o_.operator_kills > 0) &&
        what == "features") {
      RETURN_IF_ERROR(ServerFaults(*c, absl::Now() - opened));
    }
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(absl::StrCat(
          c->id(), ": ", answered, " of ", p.targeted(),
          " nodes answered within --timeout"));
    }
    // A kill due soon is looked for often: a small campaign is over in a
    // few tens of milliseconds.
    const bool kill_due =
        what == "features" &&
        (frontend_kills_.size() < static_cast<size_t>(o_.frontend_kills) ||
         database_restarts_.size() < static_cast<size_t>(o_.database_restarts) ||
         operator_kills_.size() < static_cast<size_t>(o_.operator_kills));
    absl::SleepFor(
        absl::Milliseconds((churn && churn->pending()) || kill_due ? 2 : 50));
  }
}

absl::StatusOr<v1::Campaign> Simulation::Collect(
    v1::CreateCampaignRequest req, const std::string& what) {
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(v1::Campaign c, OpenCampaign(&req));
  const absl::Time opened = absl::Now();
  const absl::Time until = opened + absl::Seconds(o_.timeout_s);
  const std::string stage = absl::StrCat("collecting ", what, " (", c.id(), ")");
  std::optional<ChurnDriver> churn;
  if (o_.churn_on) {
    ASSIGN_OR_RETURN(churn, ChurnFor(c.id(), req.spec().kind() ==
                                         v1::MECHANISM_KIND_EDGE_SUBSTITUTION));
  }
  RETURN_IF_ERROR(AwaitCampaign(what, stage, opened, until,
                                churn ? &*churn : nullptr, &c));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  if (churn) {  // hosts still down come back before the next campaign
    RETURN_IF_ERROR(churn->Finish());
    churned_.back().kills = churn->kills();
  }
  progress_.Done(stage, absl::StrFormat("%u reports, %u refusals, %u rejected in %.2f s",
                                        c.progress().reported(), c.progress().refused(),
                                        c.progress().rejected(), secs));
  if (c.progress().rejected() > 0) {
    progress_.Note(absl::StrCat(
        "warning: the curator rejected ", c.progress().rejected(), " reports of ",
        c.id(), "; see ",
        o_.attach ? "the agent hosts' logs" : absl::StrCat(work_, "/agent-*.log")));
  }
  Record(absl::StrCat("collect ", what), secs);
  return c;
}

absl::Status Simulation::Stage(
    const std::string& what,
    const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  RETURN_IF_ERROR(Check());
  progress_.Update(what, "on the curator");
  const auto t = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  admin_->Prepare(&ctx);
  grpc::Status g;
  {
    Interrupts::Guard guard([&ctx] { ctx.TryCancel(); });
    g = call(&ctx);
  }
  RETURN_IF_ERROR(Check());
  RETURN_IF_ERROR(FromGrpc(g, admin_->address));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  progress_.Done(what, absl::StrFormat("%.2f s", secs));
  Record(what, secs);
  return absl::OkStatus();
}

absl::StatusOr<Simulation::Campaigns> Simulation::CollectAll() {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  v1::CreateCampaignRequest features;
  features.set_name(absl::StrCat("simulate: features, ", config_.mechanism));
  features.set_attribute(v1::ATTRIBUTE_FEATURES);
  ASSIGN_OR_RETURN(v1::MechanismKind kind, ParseMechanismKind(config_.mechanism));
  features.mutable_spec()->set_kind(kind);
  features.mutable_spec()->set_epsilon(config_.epsilon);
  features.mutable_spec()->set_dimension(static_cast<uint32_t>(data_.meta.features));
  if (config_.sampled) {
    features.mutable_spec()->set_sampled(static_cast<uint32_t>(*config_.sampled));
  }
  features.mutable_spec()->set_range_low(range_.first);
  features.mutable_spec()->set_range_high(range_.second);
  features.mutable_nodes()->set_all(true);
  std::vector<v1::Campaign> campaigns;
  // The graph first, when the agents hold it: randomized response, or
  // neighbour substitution over the features campaign's question (each
  // node answers both with one report).
  std::optional<v1::Campaign> graph_campaign;
  if (o_.edges != "none") {
    v1::CreateCampaignRequest edges;
    edges.set_attribute(v1::ATTRIBUTE_EDGES);
    v1::MechanismSpec* spec = edges.mutable_spec();
    spec->set_epsilon(o_.edge_epsilon);
    spec->set_dimension(n);
    if (o_.edges == "rr") {
      edges.set_name("simulate: edges, edge-rr");
      spec->set_kind(v1::MECHANISM_KIND_EDGE_RR);
    } else if (o_.edges == "blink") {
      edges.set_name("simulate: edges, edge-blink");
      spec->set_kind(v1::MECHANISM_KIND_EDGE_BLINK);
      spec->mutable_blink()->set_degree_share(o_.blink_delta);
    } else {
      edges.set_name(absl::StrCat("simulate: edges, edge-substitution ",
                                  o_.edges == "ns1" ? "approach 1"
                                                    : "approach 2"));
      spec->set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
      v1::SubstitutionSpec* sub = spec->mutable_substitution();
      *sub = edges::DefaultSubstitutionSpec();
      sub->set_approach(o_.edges == "ns1" ? 1 : 2);
      sub->set_round_timeout_ms(o_.round_timeout_ms);
      // Dummies in the middle of the public range, spread over it.
      sub->set_dummy_mean((range_.first + range_.second) / 2);
      sub->set_dummy_std((range_.second - range_.first) / 2);
      *sub->mutable_features() = features.spec();
    }
    edges.mutable_nodes()->set_all(true);
    ASSIGN_OR_RETURN(graph_campaign, Collect(edges, "edges"));
    campaigns.push_back(*graph_campaign);
  }
  ASSIGN_OR_RETURN(v1::Campaign fc, Collect(features, "features"));
  campaigns.push_back(fc);
  std::string label_campaign;
  if (config_.label_epsilon) {
    v1::CreateCampaignRequest labels;
    labels.set_name("simulate: labels, label-rr");
    labels.set_attribute(v1::ATTRIBUTE_LABEL);
    labels.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
    labels.mutable_spec()->set_epsilon(*config_.label_epsilon);
    labels.mutable_spec()->set_dimension(static_cast<uint32_t>(data_.meta.classes));
    labels.mutable_nodes()->set_all(true);
    ASSIGN_OR_RETURN(v1::Campaign lc, Collect(labels, "labels"));
    label_campaign = lc.id();
    campaigns.push_back(lc);
  }
  return Campaigns{std::move(campaigns), std::move(fc), std::move(graph_campaign),
                   std::move(label_campaign)};
}

absl::Status Simulation::Train(const Campaigns& c, v1::StageResult* estimate,
                               v1::StageResult* evaluate) {
  RETURN_IF_ERROR(Stage("estimate", [&](grpc::ClientContext* ctx) {
                    v1::EstimateRequest req;
                    req.set_campaign_id(c.features.id());
                    SetDefence(o_, &req);
                    return admin_->stub->Estimate(ctx, req, estimate);
                  }));
  return Stage("evaluate", [&](grpc::ClientContext* ctx) {
    v1::EvaluateRequest req;
    req.set_input(estimate->id());
    req.set_pipeline_task(o_.task);
    req.set_pipeline_method(o_.method);
    req.set_label_campaign_id(c.label_campaign);
    if (c.graph) req.set_graph_campaign_id(c.graph->id());
    if (o_.edges == "blink") {
      req.set_blink_variant(
          std::string(edges::kBlinkVariantNames.Name(o_.blink_variant)));
    }
    req.set_seed(o_.seed.value_or(1));
    SetDefence(o_, &req);
    if (o_.baselines_given ||
        data_.meta.nodes <= kDefaultBaselinesMaxNodes) {
      for (const pipeline::Baseline b : o_.baselines) {
        req.add_baselines(std::string(pipeline::kBaselineNames.Name(b)));
      }
    }
    return admin_->stub->Evaluate(ctx, req, evaluate);
  });
}

}  // namespace ldpgraph::ldpctl::internal

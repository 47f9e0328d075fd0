#include "server/curator/curator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "server/curator/credentials.h"

namespace ldpgraph::curator {
namespace {

absl::Status ValidateCaps(const v1::BudgetCaps& caps, uint32_t node) {
  if (!std::isfinite(caps.total()) || caps.total() <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node %u: caps.total must be finite and > 0, got %g", node,
        caps.total()));
  }
  for (const auto& [attribute, cap] : caps.per_attribute()) {
    if (!std::isfinite(cap) || cap <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "node %u: cap on '%s' must be finite and > 0, got %g", node,
          attribute, cap));
    }
  }
  return absl::OkStatus();
}

// A fresh bearer token: 32 random bytes, in hex.
absl::StatusOr<std::string> NewToken() {
  ASSIGN_OR_RETURN(std::string raw, SecureRandomBytes(32));
  return ToHex(raw);
}

}  // namespace

Curator::Curator(std::unique_ptr<store::CuratorStore> store, Options options)
    : options_(std::move(options)),
      store_(std::move(store)),
      sessions_(options_.num_nodes),
      ledger_(options_.num_nodes) {}

Curator::~Curator() = default;

absl::StatusOr<std::unique_ptr<Curator>> Curator::Open(
    std::unique_ptr<store::CuratorStore> store, Options options) {
  if (options.num_nodes == 0) {
    return absl::InvalidArgumentError("the curator needs a graph of >= 1 node");
  }
  if (options.node_key.size() < 16) {
    return absl::InvalidArgumentError(
        "the node key must hold at least 16 bytes");
  }
  if (options.max_enrol < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_enrol must be >= 1, got ", options.max_enrol));
  }
  std::unique_ptr<Curator> c(new Curator(std::move(store), std::move(options)));
  store::CuratorStore* const s = c->store_.get();
  const uint32_t num_nodes = c->options_.num_nodes;
  c->relay_ = std::make_unique<RelayMailbox>(s, num_nodes);
  FleetPlanner::Options fleet;
  fleet.num_nodes = num_nodes;
  fleet.settle = c->options_.fleet_settle;
  fleet.lease = c->options_.fleet_lease;
  fleet.min_hosts = c->options_.fleet_min_hosts;
  ASSIGN_OR_RETURN(c->fleet_, FleetPlanner::Create(fleet, s));
  CampaignBook::Options book;
  book.num_nodes = num_nodes;
  book.max_batch = c->options_.max_batch;
  book.close_on_quorum = c->options_.close_on_quorum;
  ASSIGN_OR_RETURN(c->campaigns_, CampaignBook::Open(s, &c->ledger_, book));
  RETURN_IF_ERROR(c->LoadCaps());
  ASSIGN_OR_RETURN(c->keys_, KeyDirectory::Open(s, num_nodes));
  CheckInDesk::Options desk = c->options_.check_in;
  desk.num_nodes = num_nodes;
  RETURN_IF_ERROR(desk.Validate());
  c->desk_ = std::make_unique<CheckInDesk>(desk);
  RETURN_IF_ERROR(c->CloseExpired(absl::Now()).status());
  return c;
}

absl::Status Curator::LoadCaps() {
  return store_->ForEachCaps([&](uint32_t node, const std::string& bytes) {
    v1::BudgetCaps caps;
    if (node >= options_.num_nodes || !caps.ParseFromString(bytes)) return;
    ledger_.SetCaps(node, caps);
  });
}

// --- agents -----------------------------------------------------------------

absl::Status Curator::CheckCredential(const v1::NodeCredential& c) const {
  if (c.node_id() >= options_.num_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", c.node_id(), " out of range: the graph has ",
        options_.num_nodes, " nodes"));
  }
  if (!VerifyNodeCredential(options_.node_key, c.node_id(), c.secret())) {
    return absl::UnauthenticatedError(
        absl::StrCat("credential of node ", c.node_id(), " does not verify"));
  }
  return absl::OkStatus();
}

absl::Status Curator::CheckNode(const v1::NodeCredential& n) const {
  RETURN_IF_ERROR(CheckCredential(n));
  if (n.has_caps()) RETURN_IF_ERROR(ValidateCaps(n.caps(), n.node_id()));
  if (!n.sealing_key().empty()) {
    RETURN_IF_ERROR(KeyDirectory::ValidateKey(n.node_id(), n.sealing_key()));
  }
  return absl::OkStatus();
}

absl::StatusOr<FleetPlanner::Grant> Curator::ClaimShard(
    const v1::ClaimShardRequest& request, absl::Time now) {
  if (absl::Status s = CheckCredential(request.proof()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("shard claim: ", s.message()));
  }
  return fleet_->Claim(request.host_name(), now);
}

absl::StatusOr<std::shared_ptr<const Session>> Curator::Enrol(
    const v1::EnrolRequest& request) {
  if (request.nodes_size() == 0) {
    return absl::InvalidArgumentError("enrolment lists no node");
  }
  if (request.nodes_size() > options_.max_enrol) {
    return absl::InvalidArgumentError(absl::StrCat(
        "enrolment lists ", request.nodes_size(), " nodes, at most ",
        options_.max_enrol, " allowed per call (enrol in parts: "
        "EnrolRequest.more)"));
  }
  // A later part of an enrolment in parts carries on with the session built
  // so far, which is out of the table until this part succeeds: a part that
  // fails ends the enrolment.
  std::shared_ptr<Session> session;
  if (!request.continues().empty()) {
    ASSIGN_OR_RETURN(session, sessions_.Resume(request.continues(), absl::Now()));
  } else {
    session = std::make_shared<Session>();
    session->host_name = request.host_name().substr(0, 256);
  }
  const std::string actor = absl::StrCat("host:", session->host_name);
  const size_t earlier = session->nodes.size();
  std::vector<std::pair<uint32_t, std::string>> caps, keys;
  for (const auto& n : request.nodes()) {
    RETURN_IF_ERROR(CheckNode(n));
    session->nodes.push_back(n.node_id());
    if (n.has_caps()) caps.emplace_back(n.node_id(), n.caps().SerializeAsString());
    if (!n.sealing_key().empty()) keys.emplace_back(n.node_id(), n.sealing_key());
  }
  const auto part = session->nodes.begin() + static_cast<ptrdiff_t>(earlier);
  std::sort(part, session->nodes.end());
  const uint32_t part_first = *part, part_last = session->nodes.back();
  std::inplace_merge(session->nodes.begin(), part, session->nodes.end());
  if (auto twice = std::adjacent_find(session->nodes.begin(),
                                      session->nodes.end());
      twice != session->nodes.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", *twice, " listed twice",
        earlier > 0 ? " (in this part, or in this and an earlier part)" : ""));
  }
  // The key directory: new keys stored, changed ones replaced and audited.
  ASSIGN_OR_RETURN(const KeyDirectory::Change keys_changed,
                   keys_->Put(keys, actor));
  // The caps and the enrolment's audit entry in one transaction: a fleet
  // reconnecting at once is thousands of enrolments, each a sync to disk.
  // A part of an enrolment in parts is audited as one, with "part".
  const bool in_parts = request.more() || earlier > 0;
  RETURN_IF_ERROR(store_->PutCapsAndAudit(
      caps, actor, "enrol",
      absl::StrFormat(
          R"({"nodes":%d,"first":%u,"last":%u,"caps":%d,"new_keys":%d,"replaced_keys":%d%s})",
          request.nodes_size(), part_first, part_last, caps.size(),
          keys_changed.added, keys_changed.replaced.size(),
          in_parts ? absl::StrFormat(R"(,"part":{"nodes_so_far":%d,"more":%s})",
                                     session->nodes.size(),
                                     request.more() ? "true" : "false")
                   : "")));
  for (const auto& n : request.nodes()) {
    if (n.has_caps()) ledger_.SetCaps(n.node_id(), n.caps());
  }
  if (session->token.empty()) {
    ASSIGN_OR_RETURN(session->token, NewToken());
  }
  if (request.more()) {
    RETURN_IF_ERROR(sessions_.Hold(session, absl::Now()));
    return std::shared_ptr<const Session>(session);
  }
  session->Index();
  sessions_.Open(session);
  return std::shared_ptr<const Session>(session);
}

absl::Status Curator::RecordCapsAndKeys(
    const google::protobuf::RepeatedPtrField<v1::NodeCredential>& nodes,
    const std::string& actor) {
  std::vector<std::pair<uint32_t, std::string>> caps, keys;
  for (const auto& n : nodes) {
    if (n.has_caps() && !ledger_.HasCaps(n.node_id(), n.caps())) {
      caps.emplace_back(n.node_id(), n.caps().SerializeAsString());
    }
    if (!n.sealing_key().empty()) keys.emplace_back(n.node_id(), n.sealing_key());
  }
  ASSIGN_OR_RETURN(const KeyDirectory::Change changed, keys_->Put(keys, actor));
  if (caps.empty() && changed.added == 0 && changed.replaced.empty()) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(store_->PutCapsAndAudit(
      caps, actor, "check-in",
      absl::StrFormat(R"({"nodes":%d,"first":%u,"caps":%d,"new_keys":%d,"replaced_keys":%d})",
                      nodes.size(), nodes.Get(0).node_id(), caps.size(),
                      changed.added, changed.replaced.size())));
  for (const auto& n : nodes) {
    if (n.has_caps()) ledger_.SetCaps(n.node_id(), n.caps());
  }
  return absl::OkStatus();
}

absl::StatusOr<Curator::CheckInResult> Curator::CheckIn(
    const v1::CheckInRequest& request, absl::Time now) {
  if (request.nodes_size() == 0) {
    return absl::InvalidArgumentError("check-in lists no node");
  }
  if (request.nodes_size() > kMaxCheckInNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "check-in lists ", request.nodes_size(), " nodes, at most ",
        kMaxCheckInNodes, " allowed (a host of many nodes enrols instead)"));
  }
  auto session = std::make_shared<Session>();
  session->host_name = request.device_name().substr(0, 256);
  for (const auto& n : request.nodes()) {
    RETURN_IF_ERROR(CheckNode(n));
    session->nodes.push_back(n.node_id());
  }
  std::sort(session->nodes.begin(), session->nodes.end());
  if (auto twice = std::adjacent_find(session->nodes.begin(), session->nodes.end());
      twice != session->nodes.end()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", *twice, " listed twice"));
  }
  CheckInResult result;
  if (!desk_->Admit(session->nodes, now, &result.retry_after)) {
    result.outcome = CheckInDesk::Outcome::kPaced;
    return result;
  }
  RETURN_IF_ERROR(RecordCapsAndKeys(request.nodes(),
                                    absl::StrCat("device:", session->host_name)));
  session->Index();
  result.tasks = campaigns_->PendingTasks(*session);
  if (result.tasks.empty()) {
    result.outcome = CheckInDesk::Outcome::kIdle;
  } else {
    result.outcome = CheckInDesk::Outcome::kServed;
    ASSIGN_OR_RETURN(session->token, NewToken());
    session->expires = now + desk_->options().session_ttl;
    sessions_.Open(session);
    result.session = session;
  }
  result.retry_after = desk_->Finish(result.outcome);
  return result;
}

absl::StatusOr<std::shared_ptr<const Session>> Curator::FindSession(
    absl::string_view token) const {
  return sessions_.Find(token);
}

std::vector<v1::Task> Curator::PendingTasks(const Session& session) const {
  return campaigns_->PendingTasks(session);
}

uint64_t Curator::generation() const { return campaigns_->generation(); }

uint64_t Curator::WaitForChange(uint64_t seen, absl::Time deadline) const {
  return campaigns_->WaitForChange(seen, deadline);
}

absl::StatusOr<v1::ReportAck> Curator::Ingest(const Session& session,
                                              const v1::ReportBatch& batch) {
  v1::ReportAck ack;
  RETURN_IF_ERROR(campaigns_->Ingest(session, batch, &ack));
  return ack;
}

absl::Status Curator::Ingest(const Session& session,
                             const v1::ReportBatch& batch,
                             v1::ReportAck* ack) {
  return campaigns_->Ingest(session, batch, ack);
}

absl::StatusOr<int> Curator::Relay(const Session& session,
                                   const v1::RelayRequest& request) {
  return relay_->Relay(session, request);
}

absl::StatusOr<std::vector<v1::SealedMessage>> Curator::FetchSealed(
    const Session& session, uint64_t after, int limit,
    const std::string& campaign) {
  return relay_->Fetch(session, after, limit, campaign);
}

absl::StatusOr<std::vector<v1::NodeKey>> Curator::PublicKeys(
    const Session& session, const std::vector<uint32_t>& nodes) const {
  return keys_->Get(nodes);
}

// --- several processes on one store ----------------------------------------

absl::StatusOr<CampaignBook::SyncCounts> Curator::Sync(bool close_quorate) {
  ASSIGN_OR_RETURN(CampaignBook::SyncCounts counts, campaigns_->Sync());
  if (close_quorate) RETURN_IF_ERROR(campaigns_->CloseQuorate(absl::Now()).status());
  return counts;
}

// --- operator ---------------------------------------------------------------

absl::StatusOr<v1::Campaign> Curator::CreateCampaign(
    const v1::CreateCampaignRequest& request) {
  if (options_.shared_store) {
    // Caps nodes declared to the frontends, and their spending, for the
    // ledger's check.
    RETURN_IF_ERROR(LoadCaps());
    RETURN_IF_ERROR(campaigns_->Sync().status());
  }
  return campaigns_->Create(request);
}

std::vector<v1::Campaign> Curator::ListCampaigns() const {
  return campaigns_->List();
}

absl::StatusOr<v1::Campaign> Curator::GetCampaign(absl::string_view id) const {
  return campaigns_->Get(id);
}

absl::StatusOr<v1::Campaign> Curator::CloseCampaign(absl::string_view id) {
  return campaigns_->Close(id);
}

absl::StatusOr<int> Curator::CloseExpired(absl::Time now) {
  return campaigns_->CloseExpired(now);
}

absl::StatusOr<std::vector<v1::RefusalRecord>> Curator::ListRefusals(
    absl::string_view id) const {
  return campaigns_->Refusals(id);
}

absl::StatusOr<std::vector<std::pair<uint32_t, v1::Report>>> Curator::Reports(
    absl::string_view id) const {
  return campaigns_->Reports(id);
}

std::vector<v1::NodeBudget> Curator::GetBudgets(
    const std::vector<uint32_t>& nodes) const {
  return ledger_.Budgets(nodes);
}

// --- pipeline results and the audit log -------------------------------------

absl::StatusOr<int64_t> Curator::AddResult(
    absl::FunctionRef<std::string(int64_t id)> record_for_id,
    const std::string& matrix_path) {
  return store_->AddResult(record_for_id, matrix_path);
}

absl::StatusOr<std::vector<store::ResultRow>> Curator::ListResults() const {
  return store_->ListResults();
}

absl::StatusOr<store::ResultRow> Curator::GetResult(int64_t id) const {
  return store_->GetResult(id);
}

absl::Status Curator::Audit(const std::string& actor, const std::string& action,
                            const std::string& details_json) {
  return store_->Audit(actor, action, details_json);
}

absl::StatusOr<std::vector<store::AuditRow>> Curator::ListAudit(
    int64_t after_sequence, int limit) const {
  return store_->ListAudit(after_sequence, limit);
}

// --- status -----------------------------------------------------------------

int Curator::open_campaigns() const { return campaigns_->open_campaigns(); }

CampaignBook::Tally Curator::CampaignTally() const {
  return campaigns_->Count();
}

v1::CuratorStatus Curator::Status() const {
  v1::CuratorStatus s;
  s.set_graph_nodes(options_.num_nodes);
  s.set_fleet_shards(fleet_->shards());
  s.set_fleet_gathering(fleet_->gathering());
  s.set_sessions(sessions_.sessions());
  s.set_enrolled_nodes(sessions_.enrolled_nodes());
  s.set_task_streams(static_cast<uint32_t>(std::max(0, task_streams_.load())));
  const CampaignBook::Tally tally = CampaignTally();
  s.set_open_campaigns(tally.open);
  s.set_closed_campaigns(tally.closed);
  s.set_stored_reports(tally.reports);
  s.set_stored_refusals(tally.refusals);
  const IngestCounters& counters = campaigns_->counters();
  const auto relaxed = std::memory_order_relaxed;
  s.set_reports_accepted(counters.reports_accepted.load(relaxed));
  s.set_reports_duplicate(counters.reports_duplicate.load(relaxed));
  uint64_t rejected = 0;
  for (const auto& r : counters.rejected) rejected += r.load(relaxed);
  s.set_reports_rejected(rejected);
  s.set_report_bytes_received(counters.report_bytes.load(relaxed));
  const CheckInDesk::Counters desk = desk_->counters();
  s.set_check_ins(desk.check_ins);
  s.set_devices_seen(desk.devices_seen);
  s.set_check_ins_served(desk.served);
  s.set_check_ins_idle(desk.idle);
  s.set_check_ins_paced(desk.paced);
  s.set_check_in_sessions(sessions_.lapsing());
  if (options_.add_frontend_status) {
    auto published = store_->FreshFrontendStatus(absl::Seconds(2));
    if (published.ok()) {
      for (const std::string& bytes : *published) {
        v1::CuratorStatus f;
        if (!f.ParseFromString(bytes)) continue;
        s.set_frontends(s.frontends() + 1);
        s.set_sessions(s.sessions() + f.sessions());
        s.set_enrolled_nodes(s.enrolled_nodes() + f.enrolled_nodes());
        s.set_task_streams(s.task_streams() + f.task_streams());
        s.set_reports_accepted(s.reports_accepted() + f.reports_accepted());
        s.set_reports_duplicate(s.reports_duplicate() + f.reports_duplicate());
        s.set_reports_rejected(s.reports_rejected() + f.reports_rejected());
        s.set_report_bytes_received(s.report_bytes_received() +
                                    f.report_bytes_received());
        s.set_check_ins(s.check_ins() + f.check_ins());
        s.set_devices_seen(s.devices_seen() + f.devices_seen());
        s.set_check_ins_served(s.check_ins_served() + f.check_ins_served());
        s.set_check_ins_idle(s.check_ins_idle() + f.check_ins_idle());
        s.set_check_ins_paced(s.check_ins_paced() + f.check_ins_paced());
        s.set_check_in_sessions(s.check_in_sessions() + f.check_in_sessions());
      }
    }
  }
  return s;
}

absl::Status Curator::PublishStatus(const std::string& name) {
  return store_->PutFrontendStatus(name, Status().SerializeAsString());
}

LedgerSummary Curator::PrivacySummary() const { return ledger_.Summary(); }

}  // namespace ldpgraph::curator

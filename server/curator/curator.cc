#include "server/curator/curator.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/accounting.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "server/curator/credentials.h"

namespace ldpgraph::curator {
namespace {

enum NodeStatus : uint8_t {
  kNotTargeted = 0,
  kPending = 1,
  kReported = 2,
  kRefused = 3,
};

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

std::string CampaignName(int64_t id) { return absl::StrCat("c", id); }

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

}  // namespace

struct Curator::CampaignState {
  int64_t id = 0;
  v1::Campaign record;  // as persisted; progress filled on the way out
  std::string attribute;
  QueryKey key;
  std::string key_canonical;
  // What a report to this campaign charges: its own question, and for
  // neighbour substitution the features question of its feature spec first
  // (wire::CampaignQuestions).
  std::vector<Ledger::Question> charges;
  std::unique_ptr<FeatureMechanism> mechanism;  // features campaigns only
  std::vector<uint8_t> status;                  // NodeStatus per node
  uint32_t targeted = 0, reported = 0, refused = 0;
  uint64_t rejected = 0;
  bool open() const { return record.state() == v1::CAMPAIGN_STATE_OPEN; }
  bool expired(int64_t now_ms) const {
    return record.deadline_unix_ms() > 0 && now_ms >= record.deadline_unix_ms();
  }
};

Curator::Curator(std::unique_ptr<store::CuratorStore> store, Options options)
    : options_(std::move(options)),
      store_(std::move(store)),
      ledger_(options_.num_nodes),
      sessions_(options_.num_nodes) {}

Curator::~Curator() = default;

absl::StatusOr<int64_t> Curator::ParseCampaignId(absl::string_view id) {
  int64_t n = 0;
  if (id.size() < 2 || id[0] != 'c' || !absl::SimpleAtoi(id.substr(1), &n) ||
      n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign id must look like c1, c2, ...; got '", id, "'"));
  }
  return n;
}

absl::StatusOr<std::unique_ptr<Curator>> Curator::Open(
    std::unique_ptr<store::CuratorStore> store, Options options) {
  if (options.num_nodes == 0) {
    return absl::InvalidArgumentError("the curator needs a graph of >= 1 node");
  }
  if (options.node_key.size() < 16) {
    return absl::InvalidArgumentError(
        "the node key must hold at least 16 bytes");
  }
  std::unique_ptr<Curator> c(new Curator(std::move(store), std::move(options)));
  c->relay_ = std::make_unique<RelayMailbox>(c->store_.get(),
                                             c->options_.num_nodes);
  FleetPlanner::Options fleet;
  fleet.num_nodes = c->options_.num_nodes;
  fleet.settle = c->options_.fleet_settle;
  fleet.lease = c->options_.fleet_lease;
  fleet.min_hosts = c->options_.fleet_min_hosts;
  ASSIGN_OR_RETURN(c->fleet_, FleetPlanner::Create(fleet, c->store_.get()));
  RETURN_IF_ERROR(c->Load());
  ASSIGN_OR_RETURN(c->keys_,
                   KeyDirectory::Open(c->store_.get(), c->options_.num_nodes));
  RETURN_IF_ERROR(c->CloseExpired(absl::Now()).status());
  return c;
}

// Builds the in-memory state of a persisted campaign record.
static absl::StatusOr<std::unique_ptr<FeatureMechanism>> MechanismFor(
    const v1::Campaign& record) {
  if (record.attribute() != v1::ATTRIBUTE_FEATURES) return nullptr;
  ASSIGN_OR_RETURN(MechanismSpec spec, wire::FromWireFeatureSpec(record.spec()));
  return CreateFeatureMechanism(spec);
}

absl::Status Curator::Load() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto rows, store_->ListCampaigns());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const auto& row : rows) {
    auto c = std::make_unique<CampaignState>();
    c->id = row.id;
    if (!c->record.ParseFromString(row.record)) {
      return absl::DataLossError(
          absl::StrCat("campaign ", row.id, ": stored record does not parse"));
    }
    ASSIGN_OR_RETURN(c->attribute, wire::AttributeName(c->record.attribute()));
    c->key = wire::WireQueryKey(c->record.attribute(), c->record.spec());
    c->key_canonical = c->key.Canonical();
    c->charges = ledger_.Intern(
        wire::CampaignQuestions(c->record.attribute(), c->record.spec()));
    ASSIGN_OR_RETURN(c->mechanism, MechanismFor(c->record));
    c->status.assign(options_.num_nodes, kNotTargeted);
    const v1::NodeSelection& sel = c->record.nodes();
    auto target = [&](uint32_t v) {
      if (v < options_.num_nodes && c->status[v] == kNotTargeted) {
        c->status[v] = kPending;
        ++c->targeted;
      }
    };
    if (sel.all()) {
      for (uint32_t v = 0; v < options_.num_nodes; ++v) target(v);
    } else if (sel.range_end() > sel.range_begin()) {
      for (uint32_t v = sel.range_begin(); v < sel.range_end(); ++v) target(v);
    } else {
      for (uint32_t v : sel.node_ids()) target(v);
    }
    campaigns_.push_back(std::move(c));
  }
  absl::Status status;
  RETURN_IF_ERROR(store_->ForEachAnswerKey(
      [&](int64_t campaign, uint32_t node, bool refusal) {
        CampaignState* c = FindLocked(campaign);
        if (c == nullptr || node >= options_.num_nodes) {
          if (status.ok()) {
            status = absl::DataLossError(absl::StrCat(
                "stored answer of node ", node, " to unknown campaign ",
                campaign));
          }
          return;
        }
        ApplyAnswer(*c, node, refusal);
      }));
  RETURN_IF_ERROR(status);
  return store_->ForEachCaps([&](uint32_t node, const std::string& bytes) {
    v1::BudgetCaps caps;
    if (node >= options_.num_nodes || !caps.ParseFromString(bytes)) return;
    ledger_.SetCaps(node, caps);
  });
}

void Curator::ApplyAnswer(CampaignState& c, uint32_t node, bool refusal) {
  if (c.status[node] == kReported || c.status[node] == kRefused) return;
  c.status[node] = refusal ? kRefused : kReported;
  if (refusal) {
    ++c.refused;
    return;
  }
  ++c.reported;
  ledger_.Charge(node, c.charges);
}

Curator::CampaignState* Curator::FindLocked(int64_t id) const {
  // Ids are assigned 1, 2, ... in order and campaigns are never deleted.
  if (id >= 1 && static_cast<size_t>(id) <= campaigns_.size() &&
      campaigns_[id - 1]->id == id) {
    return campaigns_[id - 1].get();
  }
  for (const auto& c : campaigns_) {
    if (c->id == id) return c.get();
  }
  return nullptr;
}

absl::StatusOr<Curator::CampaignState*> Curator::FindLocked(
    absl::string_view id) const {
  ASSIGN_OR_RETURN(int64_t n, ParseCampaignId(id));
  CampaignState* c = FindLocked(n);
  if (c == nullptr) {
    return absl::NotFoundError(absl::StrCat("no campaign ", id));
  }
  return c;
}

void Curator::BumpGeneration() { ++generation_; }

uint64_t Curator::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

uint64_t Curator::WaitForChange(uint64_t seen, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return generation_ != seen;
  };
  mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
  return generation_;
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
        options_.max_enrol, " allowed"));
  }
  auto session = std::make_shared<Session>();
  session->host_name = request.host_name().substr(0, 256);
  std::vector<std::pair<uint32_t, std::string>> caps, keys;
  for (const auto& n : request.nodes()) {
    RETURN_IF_ERROR(CheckCredential(n));
    session->nodes.push_back(n.node_id());
    if (n.has_caps()) {
      RETURN_IF_ERROR(ValidateCaps(n.caps(), n.node_id()));
      caps.emplace_back(n.node_id(), n.caps().SerializeAsString());
    }
    if (!n.sealing_key().empty()) {
      RETURN_IF_ERROR(KeyDirectory::ValidateKey(n.node_id(), n.sealing_key()));
      keys.emplace_back(n.node_id(), n.sealing_key());
    }
  }
  std::sort(session->nodes.begin(), session->nodes.end());
  if (auto twice = std::adjacent_find(session->nodes.begin(),
                                      session->nodes.end());
      twice != session->nodes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", *twice, " listed twice"));
  }
  session->Index();
  RETURN_IF_ERROR(store_->PutCaps(caps));
  // The key directory: new keys stored, changed ones replaced and audited.
  ASSIGN_OR_RETURN(const KeyDirectory::Change keys_changed,
                   keys_->Put(keys, absl::StrCat("host:", session->host_name)));
  for (const auto& n : request.nodes()) {
    if (n.has_caps()) ledger_.SetCaps(n.node_id(), n.caps());
  }
  ASSIGN_OR_RETURN(auto rng, SecureRandom::Create());
  std::string raw(32, '\0');
  for (size_t i = 0; i < raw.size(); i += 8) {
    const uint64_t w = rng->Next64();
    for (int b = 0; b < 8; ++b) raw[i + b] = static_cast<char>(w >> (8 * b));
  }
  session->token = ToHex(raw);
  RETURN_IF_ERROR(store_->Audit(
      absl::StrCat("host:", session->host_name), "enrol",
      absl::StrFormat(
          R"({"nodes":%d,"first":%u,"last":%u,"caps":%d,"new_keys":%d,"replaced_keys":%d})",
          session->nodes.size(), session->nodes.front(), session->nodes.back(),
          caps.size(), keys_changed.added, keys_changed.replaced.size())));
  sessions_.Open(session);
  return std::shared_ptr<const Session>(session);
}

absl::StatusOr<std::shared_ptr<const Session>> Curator::FindSession(
    absl::string_view token) const {
  return sessions_.Find(token);
}

std::vector<v1::Task> Curator::PendingTasks(const Session& session) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Task> tasks;
  const int64_t now = NowMs();
  for (const auto& c : campaigns_) {
    if (!c->open() || c->expired(now)) continue;
    v1::Task t;
    for (uint32_t v : session.nodes) {
      if (v < c->status.size() && c->status[v] == kPending) t.add_node_ids(v);
    }
    if (t.node_ids_size() == 0) continue;
    t.set_campaign_id(CampaignName(c->id));
    t.set_attribute(c->record.attribute());
    *t.mutable_spec() = c->record.spec();
    t.set_deadline_unix_ms(c->record.deadline_unix_ms());
    tasks.push_back(std::move(t));
  }
  return tasks;
}

absl::Status Curator::Check(const Session& session, const v1::Report& report,
                            int64_t now_ms, CampaignState** campaign) {
  // Batches usually answer one campaign: reuse the previous lookup.
  CampaignState* c = *campaign;
  if (c == nullptr || report.campaign_id() != c->record.id()) {
    auto id = ParseCampaignId(report.campaign_id());
    if (!id.ok()) return id.status();
    c = FindLocked(*id);
    if (c == nullptr) {
      *campaign = nullptr;
      return absl::NotFoundError(
          absl::StrCat("no campaign ", report.campaign_id()));
    }
  }
  *campaign = c;
  const uint32_t v = report.node_id();
  if (!session.Covers(v)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", v, " is not one of this session's nodes"));
  }
  if (v >= c->status.size() || c->status[v] == kNotTargeted) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", report.campaign_id(), " does not ask node ", v));
  }
  // A node that already answered: the store tells a resend (acknowledged
  // again) from a different second report (refused).
  if (c->status[v] != kPending) return absl::OkStatus();
  if (!c->open()) {
    return absl::FailedPreconditionError(
        absl::StrCat("campaign ", report.campaign_id(), " is closed"));
  }
  if (c->expired(now_ms)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", report.campaign_id(), " passed its deadline"));
  }
  switch (report.body_case()) {
    case v1::Report::kRefusal:
      if (report.refusal().reason() == v1::REFUSAL_REASON_UNSPECIFIED) {
        return absl::InvalidArgumentError("refusal without a reason");
      }
      // proto3 enums are open: an unknown number parses, and would be
      // stored as a reason no one can read.
      if (!v1::RefusalReason_IsValid(report.refusal().reason())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "refusal reason ", static_cast<int>(report.refusal().reason()),
            " is not a known RefusalReason"));
      }
      if (report.refusal().message().size() > 1024) {
        return absl::InvalidArgumentError(absl::StrCat(
            "refusal message of ", report.refusal().message().size(),
            " bytes; at most 1024"));
      }
      return absl::OkStatus();
    case v1::Report::kFeatures:
      if (c->record.attribute() != v1::ATTRIBUTE_FEATURES) break;
      return wire::DecodeFeatureReport(report.features(), *c->mechanism)
          .status();
    case v1::Report::kLabel:
      if (c->record.attribute() != v1::ATTRIBUTE_LABEL) break;
      return wire::ValidateLabelReport(report.label(), c->record.spec());
    case v1::Report::kEdges:
      if (c->record.attribute() != v1::ATTRIBUTE_EDGES) break;
      return wire::ValidateEdgeReport(report.edges(), c->record.spec(), v);
    case v1::Report::BODY_NOT_SET:
      return absl::InvalidArgumentError("report has no body");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "campaign ", report.campaign_id(), " asks about ", c->attribute,
      "; the report carries another attribute"));
}

absl::StatusOr<v1::ReportAck> Curator::Ingest(const Session& session,
                                              const v1::ReportBatch& batch) {
  v1::ReportAck ack;
  RETURN_IF_ERROR(Ingest(session, batch, &ack));
  return ack;
}

absl::Status Curator::Ingest(const Session& session,
                             const v1::ReportBatch& batch,
                             v1::ReportAck* ack_out) {
  const int n = batch.reports_size();
  if (n > options_.max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch of ", n, " reports; at most ", options_.max_batch));
  }
  v1::ReportAck& ack = *ack_out;
  ack.Clear();
  ack.set_batch_id(batch.batch_id());
  ack.mutable_results()->Reserve(n);
  absl::MutexLock lock(&mu_);
  std::vector<store::AnswerRow> rows;
  std::vector<int> row_of(n, -1);
  std::vector<CampaignState*> campaign_of(n, nullptr);
  std::vector<absl::Status> verdict(n);
  rows.reserve(n);
  const int64_t now = NowMs();
  uint64_t bytes = 0;
  CampaignState* previous = nullptr;
  for (int i = 0; i < n; ++i) {
    const v1::Report& r = batch.reports(i);
    campaign_of[i] = previous;
    verdict[i] = Check(session, r, now, &campaign_of[i]);
    previous = campaign_of[i];
    if (!verdict[i].ok()) continue;
    store::AnswerRow row;
    row.campaign = campaign_of[i]->id;
    row.node = r.node_id();
    row.refusal = r.body_case() == v1::Report::kRefusal;
    row.payload = r.SerializeAsString();
    row.unix_ms = now;
    bytes += row.payload.size();
    row_of[i] = static_cast<int>(rows.size());
    rows.push_back(std::move(row));
  }
  std::vector<store::AppendOutcome> outcomes;
  if (!rows.empty()) {
    ASSIGN_OR_RETURN(outcomes, store_->AppendAnswers(rows));
  }
  std::vector<CampaignState*> touched;
  for (int i = 0; i < n; ++i) {
    v1::ReportResult* result = ack.add_results();
    absl::Status s = verdict[i];
    if (s.ok()) {
      const store::AnswerRow& row = rows[row_of[i]];
      switch (outcomes[row_of[i]]) {
        case store::AppendOutcome::kStored:
          ApplyAnswer(*campaign_of[i], row.node, row.refusal);
          touched.push_back(campaign_of[i]);
          if (row.refusal) {
            counters_.refusals.fetch_add(1, std::memory_order_relaxed);
            const int reason = batch.reports(i).refusal().reason();
            const int slot = v1::RefusalReason_IsValid(reason) ? reason : 0;
            counters_.refusals_by_reason[slot].fetch_add(
                1, std::memory_order_relaxed);
          } else {
            counters_.reports_accepted.fetch_add(1, std::memory_order_relaxed);
          }
          break;
        case store::AppendOutcome::kDuplicate:
          result->set_duplicate(true);
          counters_.reports_duplicate.fetch_add(1, std::memory_order_relaxed);
          break;
        case store::AppendOutcome::kConflict:
          s = absl::AlreadyExistsError(absl::StrCat(
              "node ", row.node, " already answered campaign ",
              CampaignName(row.campaign), " with a different report"));
          break;
      }
    }
    if (!s.ok()) {
      result->set_code(static_cast<int>(s.code()));
      result->set_message(std::string(s.message()));
      counters_.rejected[std::min(static_cast<int>(s.code()), 16)].fetch_add(
          1, std::memory_order_relaxed);
      if (campaign_of[i] != nullptr) ++campaign_of[i]->rejected;
    }
  }
  counters_.report_bytes.fetch_add(bytes, std::memory_order_relaxed);
  // Quorum: close campaigns that have heard from enough nodes.
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (CampaignState* c : touched) {
    const double quorum = c->record.quorum();
    if (c->open() && quorum > 0 &&
        c->reported + c->refused >= std::ceil(quorum * c->targeted - 1e-9)) {
      RETURN_IF_ERROR(CloseLocked(*c, "quorum", absl::Now()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Curator::Relay(const Session& session,
                                   const v1::RelayRequest& request) {
  return relay_->Relay(session, request);
}

absl::StatusOr<std::vector<v1::NodeKey>> Curator::PublicKeys(
    const Session& session, const std::vector<uint32_t>& nodes) const {
  return keys_->Get(nodes);
}

absl::StatusOr<std::vector<v1::SealedMessage>> Curator::FetchSealed(
    const Session& session, uint64_t after, int limit,
    const std::string& campaign) {
  return relay_->Fetch(session, after, limit, campaign);
}

// --- operator ---------------------------------------------------------------

absl::StatusOr<v1::Campaign> Curator::CreateCampaign(
    const v1::CreateCampaignRequest& request) {
  RETURN_IF_ERROR(wire::ValidateWireSpec(request.spec()));
  const v1::Attribute attribute = wire::AttributeOf(request.spec().kind());
  if (request.attribute() != attribute) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mechanism ", v1::MechanismKind_Name(request.spec().kind()),
        " answers about ", v1::Attribute_Name(attribute), ", not ",
        v1::Attribute_Name(request.attribute())));
  }
  if (attribute == v1::ATTRIBUTE_EDGES &&
      request.spec().dimension() != options_.num_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an edges campaign needs dimension = number of nodes (",
        options_.num_nodes, "), got ", request.spec().dimension()));
  }
  if (!(request.quorum() >= 0 && request.quorum() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("quorum must be in [0, 1], got ", request.quorum()));
  }
  const int64_t now = NowMs();
  if (request.deadline_unix_ms() < 0 ||
      (request.deadline_unix_ms() > 0 && request.deadline_unix_ms() <= now)) {
    return absl::InvalidArgumentError("deadline must be 0 or in the future");
  }
  const v1::NodeSelection& sel = request.nodes();
  const int forms = (sel.all() ? 1 : 0) +
                    (sel.range_end() > sel.range_begin() ? 1 : 0) +
                    (sel.node_ids_size() > 0 ? 1 : 0);
  if (forms != 1) {
    return absl::InvalidArgumentError(
        "nodes: give exactly one of all, a non-empty range, or a list");
  }
  std::vector<uint32_t> targets;
  if (sel.all()) {
    targets.resize(options_.num_nodes);
    for (uint32_t v = 0; v < options_.num_nodes; ++v) targets[v] = v;
  } else if (sel.range_end() > sel.range_begin()) {
    if (sel.range_end() > options_.num_nodes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nodes: range end ", sel.range_end(), " beyond the ",
          options_.num_nodes, " nodes"));
    }
    for (uint32_t v = sel.range_begin(); v < sel.range_end(); ++v) {
      targets.push_back(v);
    }
  } else {
    targets.assign(sel.node_ids().begin(), sel.node_ids().end());
    std::sort(targets.begin(), targets.end());
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] >= options_.num_nodes) {
        return absl::InvalidArgumentError(
            absl::StrCat("nodes: node ", targets[i], " out of range"));
      }
      if (i > 0 && targets[i] == targets[i - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("nodes: node ", targets[i], " listed twice"));
      }
    }
  }

  auto state = std::make_unique<CampaignState>();
  ASSIGN_OR_RETURN(state->attribute, wire::AttributeName(attribute));
  state->key = wire::WireQueryKey(attribute, request.spec());
  state->key_canonical = state->key.Canonical();
  const std::vector<QueryKey> questions =
      wire::CampaignQuestions(attribute, request.spec());

  absl::MutexLock lock(&mu_);
  state->charges = ledger_.Intern(questions);
  // The ledger: would any node with known caps be pushed over one?
  const double eps = request.spec().epsilon();
  auto pending = [&](uint32_t v,
                     absl::FunctionRef<void(const Ledger::Question&)> ask)
                     ABSL_SHARED_LOCKS_REQUIRED(mu_) {
                       for (const auto& c : campaigns_) {
                         if (!c->open() || c->status[v] != kPending) continue;
                         for (const auto& q : c->charges) ask(q);
                       }
                     };
  const Ledger::Shortfall short_of =
      ledger_.CannotAfford(targets, state->charges, pending);
  if (short_of.nodes > 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "ledger: %d of %d targeted nodes cannot afford epsilon %g on '%s' "
        "(spent + open campaigns + this one; first: %s)",
        short_of.nodes, targets.size(), eps, state->attribute,
        short_of.first));
  }

  v1::Campaign record;
  record.set_name(request.name());
  record.set_attribute(attribute);
  *record.mutable_spec() = request.spec();
  *record.mutable_nodes() = request.nodes();
  record.set_quorum(request.quorum());
  record.set_deadline_unix_ms(request.deadline_unix_ms());
  record.set_state(v1::CAMPAIGN_STATE_OPEN);
  record.set_created_unix_ms(now);
  ASSIGN_OR_RETURN(int64_t id, store_->CreateCampaign([&](int64_t id) {
    record.set_id(CampaignName(id));
    return record.SerializeAsString();
  }));
  state->id = id;
  state->record = std::move(record);
  ASSIGN_OR_RETURN(state->mechanism, MechanismFor(state->record));
  state->status.assign(options_.num_nodes, kNotTargeted);
  for (uint32_t v : targets) state->status[v] = kPending;
  state->targeted = static_cast<uint32_t>(targets.size());
  RETURN_IF_ERROR(store_->Audit(
      "admin", "campaign.create",
      absl::StrFormat(
          R"({"campaign":"%s","attribute":"%s","mechanism":"%s","epsilon":%.17g,"targeted":%d})",
          CampaignName(id), state->attribute, state->key.mechanism, eps,
          targets.size())));
  campaigns_.push_back(std::move(state));
  BumpGeneration();
  return ToProto(*campaigns_.back());
}

v1::Campaign Curator::ToProto(const CampaignState& c) const {
  v1::Campaign out = c.record;
  v1::CampaignProgress* p = out.mutable_progress();
  p->set_targeted(c.targeted);
  p->set_reported(c.reported);
  p->set_refused(c.refused);
  p->set_rejected(c.rejected);
  return out;
}

std::vector<v1::Campaign> Curator::ListCampaigns() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Campaign> out;
  for (auto it = campaigns_.rbegin(); it != campaigns_.rend(); ++it) {
    out.push_back(ToProto(**it));
  }
  return out;
}

absl::StatusOr<v1::Campaign> Curator::GetCampaign(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
  return ToProto(*c);
}

absl::Status Curator::CloseLocked(CampaignState& c, absl::string_view reason,
                                  absl::Time now) {
  v1::Campaign record = c.record;
  record.set_state(v1::CAMPAIGN_STATE_CLOSED);
  record.set_closed_unix_ms(absl::ToUnixMillis(now));
  record.set_close_reason(std::string(reason));
  store::CampaignRow row;
  row.id = c.id;
  row.open = false;
  row.record = record.SerializeAsString();
  // The closed state and its audit entry in one transaction, and in memory
  // only once both are stored: a failure (a full disk) leaves the campaign
  // open everywhere, and a retry closes it.
  RETURN_IF_ERROR(store_->UpdateCampaignAndAudit(
      row, reason == "operator" ? "admin" : "curator", "campaign.close",
      absl::StrFormat(
          R"({"campaign":"%s","reason":"%s","targeted":%d,"reported":%d,"refused":%d,"rejected":%d})",
          CampaignName(c.id), reason, c.targeted, c.reported, c.refused,
          c.rejected)));
  c.record = std::move(record);
  BumpGeneration();
  return absl::OkStatus();
}

absl::StatusOr<v1::Campaign> Curator::CloseCampaign(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
  if (c->open()) RETURN_IF_ERROR(CloseLocked(*c, "operator", absl::Now()));
  return ToProto(*c);
}

absl::StatusOr<int> Curator::CloseExpired(absl::Time now) {
  absl::MutexLock lock(&mu_);
  int closed = 0;
  const int64_t now_ms = absl::ToUnixMillis(now);
  for (auto& c : campaigns_) {
    if (c->open() && c->expired(now_ms)) {
      RETURN_IF_ERROR(CloseLocked(*c, "deadline", now));
      ++closed;
    }
  }
  return closed;
}

int Curator::open_campaigns() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& c : campaigns_) n += c->open() ? 1 : 0;
  return n;
}

v1::CuratorStatus Curator::Status() const {
  v1::CuratorStatus s;
  s.set_graph_nodes(options_.num_nodes);
  s.set_fleet_shards(fleet_->shards());
  s.set_fleet_gathering(fleet_->gathering());
  s.set_sessions(sessions_.sessions());
  s.set_enrolled_nodes(sessions_.enrolled_nodes());
  s.set_task_streams(static_cast<uint32_t>(std::max(0, task_streams_.load())));
  {
    absl::MutexLock lock(&mu_);
    uint64_t reports = 0, refusals = 0;
    uint32_t open = 0;
    for (const auto& c : campaigns_) {
      open += c->open() ? 1 : 0;
      reports += c->reported;
      refusals += c->refused;
    }
    s.set_open_campaigns(open);
    s.set_closed_campaigns(static_cast<uint32_t>(campaigns_.size()) - open);
    s.set_stored_reports(reports);
    s.set_stored_refusals(refusals);
  }
  const auto relaxed = std::memory_order_relaxed;
  s.set_reports_accepted(counters_.reports_accepted.load(relaxed));
  s.set_reports_duplicate(counters_.reports_duplicate.load(relaxed));
  uint64_t rejected = 0;
  for (const auto& r : counters_.rejected) rejected += r.load(relaxed);
  s.set_reports_rejected(rejected);
  s.set_report_bytes_received(counters_.report_bytes.load(relaxed));
  return s;
}

absl::StatusOr<std::vector<v1::RefusalRecord>> Curator::ListRefusals(
    absl::string_view id) const {
  int64_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
    n = c->id;
  }
  std::vector<v1::RefusalRecord> out;
  RETURN_IF_ERROR(store_->ForEachAnswer(n, [&](const store::AnswerRow& a) {
    if (!a.refusal) return true;
    v1::Report r;
    r.ParseFromString(a.payload);
    v1::RefusalRecord rec;
    rec.set_node_id(a.node);
    rec.set_reason(r.refusal().reason());
    rec.set_message(r.refusal().message());
    rec.set_unix_ms(a.unix_ms);
    out.push_back(std::move(rec));
    return true;
  }));
  return out;
}

absl::StatusOr<std::vector<std::pair<uint32_t, v1::Report>>> Curator::Reports(
    absl::string_view id) const {
  int64_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
    n = c->id;
  }
  std::vector<std::pair<uint32_t, v1::Report>> out;
  absl::Status status;
  RETURN_IF_ERROR(store_->ForEachAnswer(n, [&](const store::AnswerRow& a) {
    if (a.refusal) return true;
    v1::Report r;
    if (!r.ParseFromString(a.payload)) {
      status = absl::DataLossError(absl::StrCat(
          "stored report of node ", a.node, " to ", id, " does not parse"));
      return false;
    }
    out.emplace_back(a.node, std::move(r));
    return true;
  }));
  RETURN_IF_ERROR(status);
  return out;
}

std::vector<v1::NodeBudget> Curator::GetBudgets(
    const std::vector<uint32_t>& nodes) const {
  return ledger_.Budgets(nodes);
}

LedgerSummary Curator::PrivacySummary() const { return ledger_.Summary(); }

}  // namespace ldpgraph::curator

#include "server/curator/campaigns.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/accounting.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"

namespace ldpgraph::curator {
namespace {

enum NodeStatus : uint8_t {
  kNotTargeted = 0,
  kPending = 1,
  kReported = 2,
  kRefused = 3,
};

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

using store::CampaignName;

}  // namespace

struct CampaignBook::CampaignState {
  int64_t id = 0;
  v1::Campaign record;  // as persisted; progress filled on the way out
  // record.spec(), compiled once (at Create, or when loaded); the rest of
  // the campaign's question derives from it.
  std::shared_ptr<const wire::CompiledSpec> spec;
  std::string attribute;
  QueryKey key;
  // What a report to this campaign charges: its own question, and for
  // neighbour substitution the features question of its feature spec first
  // (CompiledSpec::Questions).
  std::vector<Ledger::Question> charges;
  std::vector<uint8_t> status;  // NodeStatus per node
  uint32_t targeted = 0, reported = 0, refused = 0;
  uint64_t rejected = 0;
  bool open() const { return record.state() == v1::CAMPAIGN_STATE_OPEN; }
  bool expired(int64_t now_ms) const {
    return record.deadline_unix_ms() > 0 && now_ms >= record.deadline_unix_ms();
  }
};

struct CampaignBook::CheckedBatch {
  explicit CheckedBatch(int n) : row_of(n, -1), campaign_of(n), verdict(n) {}
  std::vector<store::AnswerRow> rows;  // the reports that passed, to store
  std::vector<store::AppendOutcome> outcomes;  // one per row
  std::vector<int> row_of;                     // per report: its row or -1
  std::vector<CampaignState*> campaign_of;     // per report, null if unknown
  std::vector<absl::Status> verdict;           // per report
  uint64_t bytes = 0;
};

CampaignBook::CampaignBook(store::CuratorStore* store, Ledger* ledger,
                           Options options)
    : store_(store), ledger_(ledger), options_(options) {}

CampaignBook::~CampaignBook() = default;

absl::StatusOr<int64_t> CampaignBook::ParseId(absl::string_view id) {
  return store::ParseCampaignName(id);
}

absl::StatusOr<std::unique_ptr<CampaignBook>> CampaignBook::Open(
    store::CuratorStore* store, Ledger* ledger, Options options) {
  if (options.num_nodes == 0) {
    return absl::InvalidArgumentError("campaigns need a graph of >= 1 node");
  }
  std::unique_ptr<CampaignBook> book(new CampaignBook(store, ledger, options));
  RETURN_IF_ERROR(book->Load());
  return book;
}

// --- loading ----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CampaignBook::CampaignState>>
CampaignBook::NewState(v1::Attribute attribute, wire::CompiledSpec spec) const {
  auto c = std::make_unique<CampaignState>();
  ASSIGN_OR_RETURN(c->attribute, wire::AttributeName(attribute));
  c->key = spec.Key(attribute);
  c->charges = ledger_->Intern(spec.Questions(attribute));
  c->spec = std::make_shared<const wire::CompiledSpec>(std::move(spec));
  return c;
}

absl::StatusOr<std::unique_ptr<CampaignBook::CampaignState>>
CampaignBook::Restore(const store::CampaignRow& row) {
  v1::Campaign record;
  if (!record.ParseFromString(row.record)) {
    return absl::DataLossError(
        absl::StrCat("campaign ", row.id, ": stored record does not parse"));
  }
  RETURN_IF_ERROR(wire::AttributeName(record.attribute()).status());
  ASSIGN_OR_RETURN(wire::CompiledSpec spec,
                   wire::CompiledSpec::Compile(record.spec()));
  // As Create checked it: ingest and the stages rely on it (a features
  // campaign's spec has a feature mechanism).
  if (wire::AttributeOf(spec.kind()) != record.attribute()) {
    return absl::DataLossError(absl::StrCat(
        "campaign ", row.id, ": stored spec ",
        v1::MechanismKind_Name(spec.kind()), " does not answer about ",
        v1::Attribute_Name(record.attribute())));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CampaignState> c,
                   NewState(record.attribute(), std::move(spec)));
  c->id = row.id;
  c->record = std::move(record);
  const uint32_t num_nodes = options_.num_nodes;
  c->status.assign(num_nodes, kNotTargeted);
  const v1::NodeSelection& sel = c->record.nodes();
  auto target = [&](uint32_t v) {
    if (v < num_nodes && c->status[v] == kNotTargeted) {
      c->status[v] = kPending;
      ++c->targeted;
    }
  };
  if (sel.all()) {
    for (uint32_t v = 0; v < num_nodes; ++v) target(v);
  } else if (sel.range_end() > sel.range_begin()) {
    for (uint32_t v = sel.range_begin(); v < sel.range_end(); ++v) target(v);
  } else {
    for (uint32_t v : sel.node_ids()) target(v);
  }
  return c;
}

absl::Status CampaignBook::Load() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto rows, store_->ListCampaigns());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const auto& row : rows) {
    ASSIGN_OR_RETURN(auto c, Restore(row));
    campaigns_.push_back(std::move(c));
  }
  absl::Status status;
  RETURN_IF_ERROR(store_->ForEachAnswerKey(
      [&](int64_t campaign, uint32_t node, bool refusal)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            if (CampaignState* c =
                    ApplyStoredLocked(campaign, node, refusal, &status)) {
              ledger_->Charge(node, c->charges);
            }
          }));
  return status;
}

CampaignBook::CampaignState* CampaignBook::ApplyStoredLocked(
    int64_t campaign, uint32_t node, bool refusal, absl::Status* status) {
  CampaignState* c = FindLocked(campaign);
  if (c == nullptr || node >= options_.num_nodes) {
    if (status->ok()) {
      *status = absl::DataLossError(absl::StrCat(
          "stored answer of node ", node, " to unknown campaign ", campaign));
    }
    return nullptr;
  }
  return ApplyAnswerLocked(*c, node, refusal) ? c : nullptr;
}

bool CampaignBook::QuorateLocked(const CampaignState& c) const {
  const double quorum = c.record.quorum();
  return c.open() && quorum > 0 &&
         c.reported + c.refused >= std::ceil(quorum * c.targeted - 1e-9);
}

// --- lookups ----------------------------------------------------------------

CampaignBook::CampaignState* CampaignBook::FindLocked(int64_t id) const {
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

absl::StatusOr<CampaignBook::CampaignState*> CampaignBook::FindLocked(
    absl::string_view id) const {
  ASSIGN_OR_RETURN(int64_t n, ParseId(id));
  CampaignState* c = FindLocked(n);
  if (c == nullptr) {
    return absl::NotFoundError(absl::StrCat("no campaign ", id));
  }
  return c;
}

absl::StatusOr<int64_t> CampaignBook::StoredId(absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
  return c->id;
}

v1::Campaign CampaignBook::ToProto(const CampaignState& c) const {
  v1::Campaign out = c.record;
  v1::CampaignProgress* p = out.mutable_progress();
  p->set_targeted(c.targeted);
  p->set_reported(c.reported);
  p->set_refused(c.refused);
  p->set_rejected(c.rejected);
  return out;
}

bool CampaignBook::ApplyAnswerLocked(CampaignState& c, uint32_t node,
                                     bool refusal) {
  if (c.status[node] == kReported || c.status[node] == kRefused) return false;
  c.status[node] = refusal ? kRefused : kReported;
  ++(refusal ? c.refused : c.reported);
  return !refusal;
}

// --- operator ---------------------------------------------------------------

absl::StatusOr<wire::CompiledSpec> CampaignBook::ValidateRequest(
    const v1::CreateCampaignRequest& request, int64_t now_ms) const {
  // The spec's checks (wire::ValidateWireSpec's) are its compilation's.
  ASSIGN_OR_RETURN(wire::CompiledSpec spec,
                   wire::CompiledSpec::Compile(request.spec()));
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
  if (request.deadline_unix_ms() < 0 ||
      (request.deadline_unix_ms() > 0 &&
       request.deadline_unix_ms() <= now_ms)) {
    return absl::InvalidArgumentError("deadline must be 0 or in the future");
  }
  return spec;
}

absl::StatusOr<std::vector<uint32_t>> CampaignBook::Targets(
    const v1::NodeSelection& sel) const {
  const uint32_t num_nodes = options_.num_nodes;
  const int forms = (sel.all() ? 1 : 0) +
                    (sel.range_end() > sel.range_begin() ? 1 : 0) +
                    (sel.node_ids_size() > 0 ? 1 : 0);
  if (forms != 1) {
    return absl::InvalidArgumentError(
        "nodes: give exactly one of all, a non-empty range, or a list");
  }
  std::vector<uint32_t> targets;
  if (sel.all()) {
    targets.resize(num_nodes);
    for (uint32_t v = 0; v < num_nodes; ++v) targets[v] = v;
  } else if (sel.range_end() > sel.range_begin()) {
    if (sel.range_end() > num_nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("nodes: range end ", sel.range_end(), " beyond the ",
                       num_nodes, " nodes"));
    }
    for (uint32_t v = sel.range_begin(); v < sel.range_end(); ++v) {
      targets.push_back(v);
    }
  } else {
    if (sel.node_ids_size() > kMaxListedNodes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nodes: an explicit list holds at most ", kMaxListedNodes,
          " node ids, got ", sel.node_ids_size(),
          "; select a range (range_begin, range_end) or all instead"));
    }
    targets.assign(sel.node_ids().begin(), sel.node_ids().end());
    std::sort(targets.begin(), targets.end());
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] >= num_nodes) {
        return absl::InvalidArgumentError(
            absl::StrCat("nodes: node ", targets[i], " out of range"));
      }
      if (i > 0 && targets[i] == targets[i - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("nodes: node ", targets[i], " listed twice"));
      }
    }
  }
  return targets;
}

absl::Status CampaignBook::CheckAffordableLocked(
    const CampaignState& state, const std::vector<uint32_t>& targets,
    double epsilon) const {
  // What the open campaigns still ask of v: read under this book's lock,
  // which the caller holds, while the ledger holds its own.
  auto pending =
      [this](uint32_t v, absl::FunctionRef<void(const Ledger::Question&)> ask)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            for (const auto& c : campaigns_) {
              if (!c->open() || c->status[v] != kPending) continue;
              for (const auto& q : c->charges) ask(q);
            }
          };
  const Ledger::Shortfall short_of =
      ledger_->CannotAfford(targets, state.charges, pending);
  if (short_of.nodes == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "ledger: %d of %d targeted nodes cannot afford epsilon %g on '%s' "
      "(spent + open campaigns + this one; first: %s)",
      short_of.nodes, targets.size(), epsilon, state.attribute,
      short_of.first));
}

absl::Status CampaignBook::AddLocked(std::unique_ptr<CampaignState> state,
                                     const v1::CreateCampaignRequest& request,
                                     const std::vector<uint32_t>& targets,
                                     int64_t now_ms) {
  v1::Campaign record;
  record.set_name(request.name());
  record.set_attribute(request.attribute());
  *record.mutable_spec() = request.spec();
  *record.mutable_nodes() = request.nodes();
  record.set_quorum(request.quorum());
  record.set_deadline_unix_ms(request.deadline_unix_ms());
  record.set_state(v1::CAMPAIGN_STATE_OPEN);
  record.set_created_unix_ms(now_ms);
  ASSIGN_OR_RETURN(int64_t id, store_->CreateCampaign([&](int64_t id) {
    record.set_id(CampaignName(id));
    return record.SerializeAsString();
  }));
  state->id = id;
  state->record = std::move(record);
  state->status.assign(options_.num_nodes, kNotTargeted);
  for (uint32_t v : targets) state->status[v] = kPending;
  state->targeted = static_cast<uint32_t>(targets.size());
  RETURN_IF_ERROR(store_->Audit(
      "admin", "campaign.create",
      absl::StrFormat(
          R"({"campaign":"%s","attribute":"%s","mechanism":"%s","epsilon":%.17g,"targeted":%d})",
          CampaignName(id), state->attribute, state->key.mechanism,
          request.spec().epsilon(), targets.size())));
  campaigns_.push_back(std::move(state));
  ++generation_;
  return absl::OkStatus();
}

absl::StatusOr<v1::Campaign> CampaignBook::Create(
    const v1::CreateCampaignRequest& request) {
  const int64_t now = NowMs();
  ASSIGN_OR_RETURN(wire::CompiledSpec spec, ValidateRequest(request, now));
  ASSIGN_OR_RETURN(const std::vector<uint32_t> targets,
                   Targets(request.nodes()));
  ASSIGN_OR_RETURN(std::unique_ptr<CampaignState> state,
                   NewState(request.attribute(), std::move(spec)));

  absl::MutexLock lock(&mu_);
  // The ledger: would any node with known caps be pushed over one?
  RETURN_IF_ERROR(
      CheckAffordableLocked(*state, targets, request.spec().epsilon()));
  RETURN_IF_ERROR(AddLocked(std::move(state), request, targets, now));
  return ToProto(*campaigns_.back());
}

std::vector<v1::Campaign> CampaignBook::List(int64_t before_id,
                                            size_t limit) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<v1::Campaign> out;
  // campaigns_ is by ascending id: the first at or past before_id, then
  // backwards.
  auto it = std::lower_bound(
      campaigns_.begin(), campaigns_.end(), before_id,
      [](const std::unique_ptr<CampaignState>& c, int64_t id) {
        return c->id < id;
      });
  while (it != campaigns_.begin() && out.size() < limit) {
    --it;
    out.push_back(ToProto(**it));
  }
  return out;
}

absl::StatusOr<v1::Campaign> CampaignBook::Get(absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
  return ToProto(*c);
}

absl::StatusOr<std::shared_ptr<const wire::CompiledSpec>> CampaignBook::Spec(
    absl::string_view id) const {
  absl::ReaderMutexLock lock(&mu_);
  ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
  return c->spec;
}

absl::Status CampaignBook::CloseLocked(CampaignState& c,
                                       absl::string_view reason,
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
  ++generation_;
  return absl::OkStatus();
}

absl::StatusOr<v1::Campaign> CampaignBook::Close(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(CampaignState * c, FindLocked(id));
  if (c->open()) RETURN_IF_ERROR(CloseLocked(*c, "operator", absl::Now()));
  return ToProto(*c);
}

absl::StatusOr<int> CampaignBook::CloseExpired(absl::Time now) {
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

namespace {

v1::RefusalRecord RefusalOf(const store::AnswerRow& a) {
  v1::Report r;
  r.ParseFromString(a.payload);
  v1::RefusalRecord rec;
  rec.set_node_id(a.node);
  rec.set_reason(r.refusal().reason());
  rec.set_message(r.refusal().message());
  rec.set_unix_ms(a.unix_ms);
  return rec;
}

}  // namespace

absl::StatusOr<std::vector<v1::RefusalRecord>> CampaignBook::Refusals(
    absl::string_view id, uint32_t first_node, int limit) const {
  ASSIGN_OR_RETURN(const int64_t n, StoredId(id));
  ASSIGN_OR_RETURN(std::vector<store::AnswerRow> rows,
                   store_->ListAnswers(n, first_node, limit,
                                       /*refusals_only=*/true));
  std::vector<v1::RefusalRecord> out;
  out.reserve(rows.size());
  for (const store::AnswerRow& a : rows) out.push_back(RefusalOf(a));
  return out;
}

absl::StatusOr<std::vector<std::pair<uint32_t, v1::Report>>>
CampaignBook::Reports(absl::string_view id) const {
  ASSIGN_OR_RETURN(const int64_t n, StoredId(id));
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

// --- agents -----------------------------------------------------------------

std::vector<v1::Task> CampaignBook::PendingTasks(const Session& session) const {
  absl::ReaderMutexLock lock(&mu_);
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

uint64_t CampaignBook::generation() const {
  absl::ReaderMutexLock lock(&mu_);
  return generation_;
}

uint64_t CampaignBook::WaitForChange(uint64_t seen, absl::Time deadline) const {
  absl::ReaderMutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return generation_ != seen;
  };
  mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
  return generation_;
}

absl::Status CampaignBook::CheckReport(const Session& session,
                                       const v1::Report& report, int64_t now_ms,
                                       CampaignState** campaign) const {
  // Batches usually answer one campaign: reuse the previous lookup.
  CampaignState* c = *campaign;
  if (c == nullptr || report.campaign_id() != c->record.id()) {
    auto id = ParseId(report.campaign_id());
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
    return absl::PermissionDeniedError(
        absl::StrCat("node ", v, " is not one of this session's nodes"));
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
      return wire::DecodeFeatureReport(report.features(), *c->spec->feature())
          .status();
    case v1::Report::kLabel:
      if (c->record.attribute() != v1::ATTRIBUTE_LABEL) break;
      return wire::ValidateLabelReport(report.label(), c->spec->wire());
    case v1::Report::kEdges:
      if (c->record.attribute() != v1::ATTRIBUTE_EDGES) break;
      return wire::ValidateEdgeReport(report.edges(), c->spec->wire(), v);
    case v1::Report::BODY_NOT_SET:
      return absl::InvalidArgumentError("report has no body");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("campaign ", report.campaign_id(), " asks about ",
                   c->attribute, "; the report carries another attribute"));
}

// Ingest holds the lock in shared mode while it checks the batch and
// appends it to the store, and exclusively while it applies the outcomes:
//  - The append happens under the same shared hold as the checks, so no
//    close (which takes the lock exclusively) can come between a report
//    found to answer an open campaign and its storing: a stored report was
//    valid when stored.
//  - Two batches checked at once may both find a node pending and both
//    append its answer. The store decides each (campaign, node) atomically
//    (AppendAnswers: kStored for the first, then kDuplicate for the same
//    bytes or kConflict for others), so exactly one is stored and counted,
//    and ApplyAnswerLocked ignores a node already recorded.
//  - Between the two phases another thread may change a campaign (close
//    it, or apply another batch): the outcomes are still the store's, so
//    progress and the ledger count exactly the stored reports; a campaign
//    closed in between counts the reports stored before its close, though
//    its close audit may not yet have.
absl::Status CampaignBook::Ingest(const Session& session,
                                  const v1::ReportBatch& batch,
                                  v1::ReportAck* ack) {
  const int n = batch.reports_size();
  if (n > options_.max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", n, " reports; at most ", options_.max_batch));
  }
  ack->Clear();
  ack->set_batch_id(batch.batch_id());
  ack->mutable_results()->Reserve(n);
  CheckedBatch checked(n);
  {
    absl::ReaderMutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckAndAppendShared(session, batch, checked));
  }
  absl::MutexLock lock(&mu_);
  return ApplyLocked(batch, checked, *ack);
}

absl::Status CampaignBook::CheckAndAppendShared(const Session& session,
                                                const v1::ReportBatch& batch,
                                                CheckedBatch& checked) {
  const int n = batch.reports_size();
  checked.rows.reserve(n);
  const int64_t now = NowMs();
  CampaignState* previous = nullptr;
  for (int i = 0; i < n; ++i) {
    const v1::Report& r = batch.reports(i);
    checked.campaign_of[i] = previous;
    checked.verdict[i] = CheckReport(session, r, now, &checked.campaign_of[i]);
    previous = checked.campaign_of[i];
    if (!checked.verdict[i].ok()) continue;
    store::AnswerRow row;
    row.campaign = checked.campaign_of[i]->id;
    row.node = r.node_id();
    row.refusal = r.body_case() == v1::Report::kRefusal;
    row.payload = r.SerializeAsString();
    row.unix_ms = now;
    checked.bytes += row.payload.size();
    checked.row_of[i] = static_cast<int>(checked.rows.size());
    checked.rows.push_back(std::move(row));
  }
  if (checked.rows.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(checked.outcomes, store_->AppendAnswers(checked.rows));
  return absl::OkStatus();
}

absl::Status CampaignBook::ApplyLocked(const v1::ReportBatch& batch,
                                       CheckedBatch& checked,
                                       v1::ReportAck& ack) {
  const auto relaxed = std::memory_order_relaxed;
  std::vector<CampaignState*> touched;
  std::vector<Ledger::Debit> debits;
  for (int i = 0; i < batch.reports_size(); ++i) {
    v1::ReportResult* result = ack.add_results();
    absl::Status s = checked.verdict[i];
    CampaignState* c = checked.campaign_of[i];
    if (s.ok()) {
      const store::AnswerRow& row = checked.rows[checked.row_of[i]];
      switch (checked.outcomes[checked.row_of[i]]) {
        case store::AppendOutcome::kStored:
          if (ApplyAnswerLocked(*c, row.node, row.refusal)) {
            debits.push_back(Ledger::Debit{row.node, c->charges});
          }
          touched.push_back(c);
          if (row.refusal) {
            const int reason = batch.reports(i).refusal().reason();
            const int slot = v1::RefusalReason_IsValid(reason) ? reason : 0;
            counters_.refusals_by_reason[slot].fetch_add(1, relaxed);
          } else {
            counters_.reports_accepted.fetch_add(1, relaxed);
          }
          break;
        case store::AppendOutcome::kDuplicate:
          result->set_duplicate(true);
          counters_.reports_duplicate.fetch_add(1, relaxed);
          break;
        case store::AppendOutcome::kConflict:
          s = absl::AlreadyExistsError(absl::StrCat(
              "node ", row.node, " already answered campaign ",
              CampaignName(row.campaign), " with a different report"));
          break;
        case store::AppendOutcome::kClosed:
          // Another curator process closed it; Sync brings the close here.
          s = absl::FailedPreconditionError(absl::StrCat(
              "campaign ", CampaignName(row.campaign), " is closed"));
          break;
      }
    }
    if (!s.ok()) {
      result->set_code(static_cast<int>(s.code()));
      result->set_message(std::string(s.message()));
      counters_.rejected[std::min(static_cast<int>(s.code()), 16)].fetch_add(
          1, relaxed);
      if (c != nullptr) ++c->rejected;
    }
  }
  counters_.report_bytes.fetch_add(checked.bytes, relaxed);
  ledger_->Charge(debits);
  // Quorum: close campaigns that have heard from enough nodes.
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (CampaignState* c : touched) {
    if (options_.close_on_quorum && QuorateLocked(*c)) {
      RETURN_IF_ERROR(CloseLocked(*c, "quorum", absl::Now()));
    }
  }
  return absl::OkStatus();
}

// --- several curator processes ----------------------------------------------

absl::StatusOr<CampaignBook::SyncCounts> CampaignBook::Sync() {
  // Read the store before taking the lock: ingest waits on it only while
  // the outcomes are applied.
  ASSIGN_OR_RETURN(std::vector<store::CampaignRow> rows,
                   store_->ListCampaigns());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  SyncCounts counts;
  absl::MutexLock lock(&mu_);
  for (const store::CampaignRow& row : rows) {
    CampaignState* c = FindLocked(row.id);
    if (c == nullptr) {
      ASSIGN_OR_RETURN(auto state, Restore(row));
      campaigns_.push_back(std::move(state));
      ++counts.campaigns_opened;
      ++generation_;
      continue;
    }
    if (c->open() && !row.open) {
      v1::Campaign record;
      if (!record.ParseFromString(row.record)) {
        return absl::DataLossError(
            absl::StrCat("campaign ", row.id, ": stored record does not parse"));
      }
      c->record = std::move(record);
      ++counts.campaigns_closed;
      ++generation_;
    }
  }
  absl::Status status;
  std::vector<Ledger::Debit> debits;
  RETURN_IF_ERROR(store_->ForEachNewAnswerKey(
      [&](int64_t campaign, uint32_t node, bool refusal)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            ++counts.answers;
            if (CampaignState* c =
                    ApplyStoredLocked(campaign, node, refusal, &status)) {
              debits.push_back(Ledger::Debit{node, c->charges});
            }
          }));
  ledger_->Charge(debits);
  RETURN_IF_ERROR(status);
  return counts;
}

absl::StatusOr<int> CampaignBook::CloseQuorate(absl::Time now) {
  absl::MutexLock lock(&mu_);
  int closed = 0;
  for (auto& c : campaigns_) {
    if (QuorateLocked(*c)) {
      RETURN_IF_ERROR(CloseLocked(*c, "quorum", now));
      ++closed;
    }
  }
  return closed;
}

// --- status -----------------------------------------------------------------

CampaignBook::Tally CampaignBook::Count() const {
  absl::ReaderMutexLock lock(&mu_);
  Tally t;
  for (const auto& c : campaigns_) {
    t.open += c->open() ? 1 : 0;
    t.reports += c->reported;
    t.refusals += c->refused;
    if (c->open()) {
      t.open_targeted += c->targeted;
      t.open_reports += c->reported;
      t.open_refusals += c->refused;
    }
  }
  t.closed = static_cast<uint32_t>(campaigns_.size()) - t.open;
  return t;
}

int CampaignBook::open_campaigns() const {
  absl::ReaderMutexLock lock(&mu_);
  int n = 0;
  for (const auto& c : campaigns_) n += c->open() ? 1 : 0;
  return n;
}

}  // namespace ldpgraph::curator

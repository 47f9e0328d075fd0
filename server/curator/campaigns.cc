// The campaign book (campaigns.h): loading, lookups, the operator's calls,
// several curator processes on one store, status. The agents' side (their
// tasks, Ingest) is in campaigns_ingest.cc.
#include "server/curator/campaigns.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dp/accounting.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "server/curator/internal/campaign_state.h"

namespace ldpgraph::curator {

using campaigns_internal::kNotTargeted;
using campaigns_internal::kPending;
using campaigns_internal::kRefused;
using campaigns_internal::kReported;
using campaigns_internal::NowMs;
using store::CampaignName;

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

namespace {

// A stored campaign's record; DATA_LOSS when it does not parse.
absl::StatusOr<v1::Campaign> StoredRecord(const store::CampaignRow& row) {
  v1::Campaign record;
  if (!record.ParseFromString(row.record)) {
    return absl::DataLossError(
        absl::StrCat("campaign ", row.id, ": stored record does not parse"));
  }
  return record;
}

// Stored campaigns by ascending id, the order of campaigns_.
void SortById(std::vector<store::CampaignRow>& rows) {
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
}

}  // namespace

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
  ASSIGN_OR_RETURN(v1::Campaign record, StoredRecord(row));
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
  SortById(rows);
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


// --- several curator processes ----------------------------------------------

absl::StatusOr<CampaignBook::SyncCounts> CampaignBook::Sync() {
  // Read the store before taking the lock: ingest waits on it only while
  // the outcomes are applied.
  ASSIGN_OR_RETURN(std::vector<store::CampaignRow> rows,
                   store_->ListCampaigns());
  SortById(rows);
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
      ASSIGN_OR_RETURN(c->record, StoredRecord(row));
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

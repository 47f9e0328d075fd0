// The campaign book's side of the agents (campaigns.h, "agents"): the tasks
// the open campaigns set, the generation that task streams wait on, and
// Ingest, which checks and stores a batch of answers and applies what the
// store decided.
#include "server/curator/campaigns.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "server/curator/internal/campaign_state.h"

namespace ldpgraph::curator {

using campaigns_internal::kNotTargeted;
using campaigns_internal::kPending;
using campaigns_internal::NowMs;
using store::CampaignName;

struct CampaignBook::CheckedBatch {
  explicit CheckedBatch(int n) : row_of(n, -1), campaign_of(n), verdict(n) {}
  std::vector<store::AnswerRow> rows;  // the reports that passed, to store
  std::vector<store::AppendOutcome> outcomes;  // one per row
  std::vector<int> row_of;                     // per report: its row or -1
  std::vector<CampaignState*> campaign_of;     // per report, null if unknown
  std::vector<absl::Status> verdict;           // per report
  uint64_t bytes = 0;
};

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

}  // namespace ldpgraph::curator

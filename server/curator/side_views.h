// The narrow views the curator's two sides hand out (agent_side.h,
// operator_side.h): what each caller may do with the campaign book and the
// store, enforced by the type. A view is a pointer to the part, copied by
// value; it forwards to the part and adds nothing, so a call through it
// has the part's contract (campaigns.h, server/store/store.h).
//
//   CampaignIntake  the agents' side: a session's pending tasks, the
//                   generation to wait on, ingest. It cannot create, close,
//                   list or read campaigns.
//   CampaignDesk    the operator's side: list, get, close, refusals, stored
//                   reports, compiled specs; sync and closing by deadline or
//                   quorum; the counters. It cannot create a campaign (that
//                   is OperatorSide::CreateCampaign, which brings in the
//                   shared store's caps before the ledger's check) nor
//                   ingest (the agents' side's).
//   ResultStore     the operator's side: the pipeline's results and the
//                   audit log, the operator lease and Describe. Campaigns,
//                   answers, caps, keys and sealed messages are written by
//                   their parts only, never through this.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/curator/campaigns.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class CampaignIntake {
 public:
  explicit CampaignIntake(CampaignBook& book) : book_(&book) {}

  std::vector<v1::Task> PendingTasks(const Session& session) const {
    return book_->PendingTasks(session);
  }
  uint64_t generation() const { return book_->generation(); }
  uint64_t WaitForChange(uint64_t seen, absl::Time deadline) const {
    return book_->WaitForChange(seen, deadline);
  }
  absl::Status Ingest(const Session& session, const v1::ReportBatch& batch,
                      v1::ReportAck* ack) {
    return book_->Ingest(session, batch, ack);
  }

 private:
  CampaignBook* book_;
};

class CampaignDesk {
 public:
  explicit CampaignDesk(CampaignBook& book) : book_(&book) {}

  std::vector<v1::Campaign> List(
      int64_t before_id = std::numeric_limits<int64_t>::max(),
      size_t limit = std::numeric_limits<size_t>::max()) const {
    return book_->List(before_id, limit);
  }
  absl::StatusOr<v1::Campaign> Get(absl::string_view id) const {
    return book_->Get(id);
  }
  absl::StatusOr<std::shared_ptr<const wire::CompiledSpec>> Spec(
      absl::string_view id) const {
    return book_->Spec(id);
  }
  absl::StatusOr<v1::Campaign> Close(absl::string_view id) {
    return book_->Close(id);
  }
  absl::StatusOr<int> CloseExpired(absl::Time now) {
    return book_->CloseExpired(now);
  }
  absl::StatusOr<std::vector<v1::RefusalRecord>> Refusals(
      absl::string_view id, uint32_t first_node = 0,
      int limit = std::numeric_limits<int>::max()) const {
    return book_->Refusals(id, first_node, limit);
  }
  absl::StatusOr<std::vector<std::pair<uint32_t, v1::Report>>> Reports(
      absl::string_view id) const {
    return book_->Reports(id);
  }
  absl::StatusOr<CampaignBook::SyncCounts> Sync() { return book_->Sync(); }
  absl::StatusOr<int> CloseQuorate(absl::Time now) {
    return book_->CloseQuorate(now);
  }
  CampaignBook::Tally Count() const { return book_->Count(); }
  int open_campaigns() const { return book_->open_campaigns(); }
  const IngestCounters& counters() const { return book_->counters(); }

 private:
  CampaignBook* book_;
};

class ResultStore {
 public:
  explicit ResultStore(store::CuratorStore& store) : store_(&store) {}

  absl::StatusOr<int64_t> AddResult(
      absl::FunctionRef<std::string(int64_t id)> record_for_id,
      const std::string& matrix_path) {
    return store_->AddResult(record_for_id, matrix_path);
  }
  absl::StatusOr<std::vector<store::ResultRow>> ListResults() {
    return store_->ListResults();
  }
  absl::StatusOr<std::vector<store::ResultRow>> ListResultsBefore(
      int64_t before_id, int limit) {
    return store_->ListResultsBefore(before_id, limit);
  }
  absl::StatusOr<store::ResultRow> GetResult(int64_t id) {
    return store_->GetResult(id);
  }
  absl::Status Audit(const std::string& actor, const std::string& action,
                     const std::string& details_json) {
    return store_->Audit(actor, action, details_json);
  }
  absl::StatusOr<std::vector<store::AuditRow>> ListAudit(
      int64_t after_sequence, int limit) {
    return store_->ListAudit(after_sequence, limit);
  }
  absl::StatusOr<bool> TryOperatorLease() {
    return store_->TryOperatorLease();
  }
  std::string Describe() const { return store_->Describe(); }
  store::CuratorStore::WriteCounts write_counts() const {
    return store_->write_counts();
  }

 private:
  store::CuratorStore* store_;
};

}  // namespace ldpgraph::curator

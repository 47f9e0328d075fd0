// The admin API's listings, a page at a time (AIP-158; admin.proto's file
// comment): campaigns, a campaign's refusals, the ledger's budgets, stage
// results, a result's id lists, the release ledger and the audit log. What
// keeps every admin reply bounded, whatever the graph and the history.
//
// A page holds at most the request's page_size items (0: kDefaultPageSize;
// above kMaxPageSize: kMaxPageSize; ListAudit's limit: 0 or above 10,000 is
// 1,000) and, counting each item's serialized size, at most
// Options::page_bytes of them; but always at least one item, so a listing
// always advances (one item is bounded: admin.proto). Each listing reads
// one more item than the page holds from its part, so that it knows
// whether a next page exists.
//
// Page tokens are "<listing>:<position>", the position being what the next
// page starts after, in the listing's order:
//   campaigns:<last id>               ListCampaigns (newest first)
//   refusals:<campaign>:<last node>   ListRefusals (by node)
//   budgets:<last node>               GetBudgets, every known node
//   budget-range:<last node>          GetBudgets over a range
//   budget-list:<next index>          GetBudgets over node_ids
//   results:<last id>                 ListResults (newest first)
//   result-ids:<result>:<list>:<next index>   ListResultIds
//   release-ledger:<last graph>       GetReleaseLedger (by graph)
//   audit:<last sequence>             ListAudit
// Stable across writes: a listing read while campaigns, answers or results
// are added lists each item at most once. A token of another listing or
// scope (another campaign's refusals, say), or that does not parse, is
// INVALID_ARGUMENT quoting it.
//
// Thread-safe (the parts are). The operator side and the stages are not
// owned and must outlive this.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "ldpgraph/v1/admin.pb.h"
#include "server/curator/operator_side.h"
#include "server/curator/stages.h"

namespace ldpgraph::curator {

class Listings {
 public:
  static constexpr uint32_t kDefaultPageSize = 1000;
  static constexpr uint32_t kMaxPageSize = 100000;
  struct Options {
    // The byte budget of a page (a curator option, --admin-page-bytes):
    // well under the gRPC message limit, which the server checks
    // (ServerOptions::admin_page_bytes).
    size_t page_bytes = size_t{4} << 20;
  };

  Listings(OperatorSide* curator, Stages* stages, Options options)
      : curator_(curator), stages_(stages), options_(options) {}

  // Each: one page of its listing, as the file comment says; the parts'
  // errors otherwise (NOT_FOUND for an unknown campaign or result, ...).
  absl::StatusOr<v1::ListCampaignsResponse> Campaigns(
      const v1::ListCampaignsRequest& r) const;
  absl::StatusOr<v1::ListRefusalsResponse> Refusals(
      const v1::ListRefusalsRequest& r) const;
  // Also INVALID_ARGUMENT for node_ids with a range, an empty or reversed
  // range, or node_ids of more than kMaxListedNodes ids.
  absl::StatusOr<v1::GetBudgetsResponse> Budgets(
      const v1::GetBudgetsRequest& r) const;
  absl::StatusOr<v1::ListResultsResponse> Results(
      const v1::ListResultsRequest& r) const;
  absl::StatusOr<v1::ListResultIdsResponse> ResultIds(
      const v1::ListResultIdsRequest& r) const;
  absl::StatusOr<v1::ReleaseLedger> ReleaseLedger(
      const v1::GetReleaseLedgerRequest& r) const;
  absl::StatusOr<v1::ListAuditResponse> Audit(
      const v1::ListAuditRequest& r) const;

 private:
  OperatorSide* const curator_;
  Stages* const stages_;
  const Options options_;
};

}  // namespace ldpgraph::curator

#include "server/curator/listings.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/io/coded_stream.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/curator/campaigns.h"

namespace ldpgraph::curator {
namespace {

size_t PageSize(uint32_t requested) {
  if (requested == 0) return Listings::kDefaultPageSize;
  return std::min(requested, Listings::kMaxPageSize);
}

// A page being filled: items while fewer than `size` are in and their cost
// (bytes in the reply) stays within `bytes`; the first always.
class Page {
 public:
  Page(size_t size, size_t bytes) : size_(size), bytes_(bytes) {}
  // Whether an item of this cost fits; counted if so.
  bool Fits(size_t cost) {
    if (taken_ == size_ || (taken_ > 0 && used_ + cost > bytes_)) return false;
    ++taken_;
    used_ += cost;
    return true;
  }

 private:
  const size_t size_, bytes_;
  size_t taken_ = 0, used_ = 0;
};

// A message's cost in a repeated field: its bytes, tag and length.
size_t Cost(const google::protobuf::Message& m) { return m.ByteSizeLong() + 6; }

// Moves items into `field` while they fit the page; true if one was left
// out (there is a next page).
template <typename T>
bool Fill(Page& page, std::vector<T>& items,
          google::protobuf::RepeatedPtrField<T>* field) {
  for (T& item : items) {
    if (!page.Fits(Cost(item))) return true;
    *field->Add() = std::move(item);
  }
  return false;
}

// Fills `field` (a page of at most `size` items) from a part read in
// batches: fetch(n) returns the next at most n items of the listing, each
// call going on where the last stopped, fewer than n at its end. Batches
// start small and double, so that a page of large items reads few more
// than it holds, and one of small items few batches; in all, at most one
// item beyond the page. True if an item was left out (a next page).
template <typename T, typename Fetch>
absl::StatusOr<bool> FillFrom(Page& page, size_t size, Fetch fetch,
                              google::protobuf::RepeatedPtrField<T>* field) {
  size_t batch = 64;
  for (;;) {
    const size_t want =
        std::min(batch, size + 1 - static_cast<size_t>(field->size()));
    ASSIGN_OR_RETURN(std::vector<T> items, fetch(want));
    if (Fill(page, items, field)) return true;
    if (items.size() < want) return false;
    batch *= 2;
  }
}

std::string Token(absl::string_view prefix, uint64_t position) {
  return absl::StrCat(prefix, position);
}

absl::Status BadToken(absl::string_view method, absl::string_view token) {
  return absl::InvalidArgumentError(absl::StrCat(
      "page_token '", token, "' is not a page token of this ", method,
      " listing: pass the next_page_token of the page before unchanged (with "
      "the request's other fields as they were), or none for the first page"));
}

// The position in a token "<prefix><number>".
absl::StatusOr<uint64_t> TokenNumber(absl::string_view token,
                                     absl::string_view prefix,
                                     absl::string_view method) {
  absl::string_view rest = token;
  uint64_t n = 0;
  if (!absl::ConsumePrefix(&rest, prefix) || rest.empty() ||
      !std::all_of(rest.begin(), rest.end(),
                   [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(rest, &n)) {
    return BadToken(method, token);
  }
  return n;
}

// The first node id a page starts at: after the token's last node, or 0.
absl::StatusOr<uint64_t> FirstNode(absl::string_view token,
                                   absl::string_view prefix,
                                   absl::string_view method) {
  if (token.empty()) return 0;
  ASSIGN_OR_RETURN(const uint64_t last, TokenNumber(token, prefix, method));
  if (last > std::numeric_limits<uint32_t>::max()) return BadToken(method, token);
  return last + 1;
}

// Where a newest-first listing's page starts: before the token's last id,
// or (no token) before any.
absl::StatusOr<int64_t> BeforeId(absl::string_view token,
                                 absl::string_view prefix,
                                 absl::string_view method) {
  int64_t before = std::numeric_limits<int64_t>::max();
  if (!token.empty()) {
    ASSIGN_OR_RETURN(const uint64_t last, TokenNumber(token, prefix, method));
    if (last == 0 || last > uint64_t{std::numeric_limits<int64_t>::max()}) {
      return BadToken(method, token);
    }
    before = static_cast<int64_t>(last);
  }
  return before;
}

constexpr absl::string_view kBudgetsMethod = "GetBudgets";

// GetBudgets' node selection: INVALID_ARGUMENT for node_ids with a range,
// an empty or reversed range, or node_ids of more than kMaxListedNodes ids.
absl::Status CheckBudgetsSelection(const v1::GetBudgetsRequest& r, bool list,
                                   bool range) {
  if (list && range) {
    return absl::InvalidArgumentError(
        "give node_ids or a range (range_begin, range_end), not both");
  }
  if (range && r.range_end() <= r.range_begin()) {
    return absl::InvalidArgumentError(
        absl::StrCat("range_end must be > range_begin, got [", r.range_begin(),
                     ", ", r.range_end(), ")"));
  }
  if (r.node_ids_size() > kMaxListedNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node_ids holds at most ", kMaxListedNodes, " ids, got ",
        r.node_ids_size(), "; give a range (range_begin, range_end) instead"));
  }
  return absl::OkStatus();
}

// A page of GetBudgets over node_ids into *out: the listed ids inside the
// graph, in the list's order.
absl::Status ListedBudgets(const Ledger& ledger,
                           const v1::GetBudgetsRequest& r, Page& page,
                           size_t size, v1::GetBudgetsResponse* out) {
  const uint64_t n = ledger.num_nodes();
  constexpr absl::string_view kPrefix = "budget-list:";
  uint64_t next = 0;
  if (!r.page_token().empty()) {
    ASSIGN_OR_RETURN(next,
                     TokenNumber(r.page_token(), kPrefix, kBudgetsMethod));
    if (next > static_cast<uint64_t>(r.node_ids_size())) {
      return BadToken(kBudgetsMethod, r.page_token());
    }
  }
  // The listed ids inside the graph, and where each is.
  std::vector<uint64_t> positions;
  auto fetch = [&](size_t want) -> absl::StatusOr<std::vector<v1::NodeBudget>> {
    std::vector<uint32_t> ids;
    for (; next < static_cast<uint64_t>(r.node_ids_size()) && ids.size() < want;
         ++next) {
      if (r.node_ids(static_cast<int>(next)) < n) {
        ids.push_back(r.node_ids(static_cast<int>(next)));
        positions.push_back(next);
      }
    }
    if (ids.empty()) return std::vector<v1::NodeBudget>();
    return ledger.Budgets(ids);
  };
  ASSIGN_OR_RETURN(const bool more,
                   FillFrom(page, size, fetch, out->mutable_budgets()));
  if (more) {
    out->set_next_page_token(
        Token(kPrefix, positions[out->budgets_size() - 1] + 1));
  }
  return absl::OkStatus();
}

// A page of GetBudgets over [range_begin, range_end) into *out.
absl::Status RangeBudgets(const Ledger& ledger, const v1::GetBudgetsRequest& r,
                          Page& page, size_t size,
                          v1::GetBudgetsResponse* out) {
  const uint64_t n = ledger.num_nodes();
  constexpr absl::string_view kPrefix = "budget-range:";
  ASSIGN_OR_RETURN(uint64_t first,
                   FirstNode(r.page_token(), kPrefix, kBudgetsMethod));
  first = std::max<uint64_t>(first, r.range_begin());
  const uint64_t end = std::min<uint64_t>(r.range_end(), n);
  auto fetch = [&](size_t want) -> absl::StatusOr<std::vector<v1::NodeBudget>> {
    std::vector<uint32_t> ids;
    for (; first < end && ids.size() < want; ++first) {
      ids.push_back(static_cast<uint32_t>(first));
    }
    if (ids.empty()) return std::vector<v1::NodeBudget>();
    return ledger.Budgets(ids);
  };
  ASSIGN_OR_RETURN(const bool more,
                   FillFrom(page, size, fetch, out->mutable_budgets()));
  if (more) {
    out->set_next_page_token(
        Token(kPrefix, out->budgets().rbegin()->node_id()));
  }
  return absl::OkStatus();
}

// A page of GetBudgets over every node whose budget is known into *out.
absl::Status KnownNodeBudgets(const Ledger& ledger,
                              const v1::GetBudgetsRequest& r, Page& page,
                              size_t size, v1::GetBudgetsResponse* out) {
  const uint64_t n = ledger.num_nodes();
  constexpr absl::string_view kPrefix = "budgets:";
  ASSIGN_OR_RETURN(uint64_t first,
                   FirstNode(r.page_token(), kPrefix, kBudgetsMethod));
  auto fetch = [&](size_t want) -> absl::StatusOr<std::vector<v1::NodeBudget>> {
    if (first >= n) return std::vector<v1::NodeBudget>();
    std::vector<v1::NodeBudget> items =
        ledger.KnownBudgets(static_cast<uint32_t>(first), want);
    if (!items.empty()) first = uint64_t{items.back().node_id()} + 1;
    return items;
  };
  ASSIGN_OR_RETURN(const bool more,
                   FillFrom(page, size, fetch, out->mutable_budgets()));
  if (more) {
    out->set_next_page_token(
        Token(kPrefix, out->budgets().rbegin()->node_id()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::ListCampaignsResponse> Listings::Campaigns(
    const v1::ListCampaignsRequest& r) const {
  constexpr absl::string_view kPrefix = "campaigns:";
  ASSIGN_OR_RETURN(int64_t before,
                   BeforeId(r.page_token(), kPrefix, "ListCampaigns"));
  const size_t size = PageSize(r.page_size());
  v1::ListCampaignsResponse out;
  Page page(size, options_.page_bytes);
  auto fetch = [&](size_t n) -> absl::StatusOr<std::vector<v1::Campaign>> {
    std::vector<v1::Campaign> items = curator_->campaigns().List(before, n);
    if (!items.empty()) {
      ASSIGN_OR_RETURN(before, CampaignBook::ParseId(items.back().id()));
    }
    return items;
  };
  ASSIGN_OR_RETURN(const bool more,
                   FillFrom(page, size, fetch, out.mutable_campaigns()));
  if (more) {
    ASSIGN_OR_RETURN(const int64_t last,
                     CampaignBook::ParseId(out.campaigns().rbegin()->id()));
    out.set_next_page_token(Token(kPrefix, static_cast<uint64_t>(last)));
  }
  return out;
}

absl::StatusOr<v1::ListRefusalsResponse> Listings::Refusals(
    const v1::ListRefusalsRequest& r) const {
  const std::string prefix = absl::StrCat("refusals:", r.campaign_id(), ":");
  ASSIGN_OR_RETURN(const uint64_t first,
                   FirstNode(r.page_token(), prefix, "ListRefusals"));
  v1::ListRefusalsResponse out;
  const size_t size = PageSize(r.page_size());
  Page page(size, options_.page_bytes);
  uint64_t next = first;
  auto fetch =
      [&](size_t n) -> absl::StatusOr<std::vector<v1::RefusalRecord>> {
    if (next > std::numeric_limits<uint32_t>::max()) {
      return std::vector<v1::RefusalRecord>();
    }
    ASSIGN_OR_RETURN(std::vector<v1::RefusalRecord> items,
                     curator_->campaigns().Refusals(
                         r.campaign_id(), static_cast<uint32_t>(next),
                         static_cast<int>(n)));
    if (!items.empty()) next = uint64_t{items.back().node_id()} + 1;
    return items;
  };
  ASSIGN_OR_RETURN(const bool more,
                   FillFrom(page, size, fetch, out.mutable_refusals()));
  if (more) {
    out.set_next_page_token(
        Token(prefix, out.refusals().rbegin()->node_id()));
  }
  return out;
}

absl::StatusOr<v1::GetBudgetsResponse> Listings::Budgets(
    const v1::GetBudgetsRequest& r) const {
  const bool list = r.node_ids_size() > 0;
  const bool range = r.range_begin() != 0 || r.range_end() != 0;
  RETURN_IF_ERROR(CheckBudgetsSelection(r, list, range));
  const Ledger& ledger = curator_->ledger();
  const size_t size = PageSize(r.page_size());
  Page page(size, options_.page_bytes);
  v1::GetBudgetsResponse out;
  if (list) {
    RETURN_IF_ERROR(ListedBudgets(ledger, r, page, size, &out));
  } else if (range) {
    RETURN_IF_ERROR(RangeBudgets(ledger, r, page, size, &out));
  } else {
    RETURN_IF_ERROR(KnownNodeBudgets(ledger, r, page, size, &out));
  }
  return out;
}

absl::StatusOr<v1::ListResultsResponse> Listings::Results(
    const v1::ListResultsRequest& r) const {
  constexpr absl::string_view kPrefix = "results:";
  ASSIGN_OR_RETURN(int64_t before,
                   BeforeId(r.page_token(), kPrefix, "ListResults"));
  const size_t size = PageSize(r.page_size());
  std::vector<int64_t> ids;  // of the results read, in order
  auto fetch = [&](size_t n) -> absl::StatusOr<std::vector<v1::StageResult>> {
    ASSIGN_OR_RETURN(const std::vector<store::ResultRow> rows,
                     curator_->store().ListResultsBefore(before,
                                                         static_cast<int>(n)));
    std::vector<v1::StageResult> items(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!items[i].ParseFromString(rows[i].record)) {
        return absl::DataLossError(
            absl::StrCat("stored result r", rows[i].id, " does not parse"));
      }
      ids.push_back(rows[i].id);
      before = rows[i].id;
    }
    return items;
  };
  v1::ListResultsResponse out;
  Page page(size, options_.page_bytes);
  ASSIGN_OR_RETURN(const bool more,
                   FillFrom(page, size, fetch, out.mutable_results()));
  if (more) {
    out.set_next_page_token(
        Token(kPrefix, static_cast<uint64_t>(ids[out.results_size() - 1])));
  }
  return out;
}

absl::StatusOr<v1::ListResultIdsResponse> Listings::ResultIds(
    const v1::ListResultIdsRequest& r) const {
  const std::string prefix =
      absl::StrCat("result-ids:", r.result_id(), ":", r.list(), ":");
  uint64_t next = 0;
  if (!r.page_token().empty()) {
    ASSIGN_OR_RETURN(next, TokenNumber(r.page_token(), prefix, "ListResultIds"));
  }
  ASSIGN_OR_RETURN(const std::vector<uint32_t> ids,
                   stages_->IdList(r.result_id(), r.list()));
  if (next > ids.size()) return BadToken("ListResultIds", r.page_token());
  v1::ListResultIdsResponse out;
  Page page(PageSize(r.page_size()), options_.page_bytes);
  for (uint64_t i = next; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (!page.Fits(google::protobuf::io::CodedOutputStream::VarintSize32(id))) {
      out.set_next_page_token(Token(prefix, i));
      break;
    }
    out.add_ids(id);
  }
  return out;
}

absl::StatusOr<v1::ReleaseLedger> Listings::ReleaseLedger(
    const v1::GetReleaseLedgerRequest& r) const {
  constexpr absl::string_view kPrefix = "release-ledger:";
  absl::string_view after = r.page_token();
  if (!after.empty() && !absl::ConsumePrefix(&after, kPrefix)) {
    return BadToken("GetReleaseLedger", r.page_token());
  }
  ASSIGN_OR_RETURN(v1::ReleaseLedger all, stages_->Ledger());
  v1::ReleaseLedger out;
  out.set_epsilon_cap(all.epsilon_cap());
  out.set_delta(all.delta());
  // By graph name (Stages::Ledger's order): those after the token's.
  std::vector<v1::GraphReleases> items;
  for (v1::GraphReleases& g : *all.mutable_graphs()) {
    if (r.page_token().empty() || g.graph() > after) items.push_back(std::move(g));
  }
  const size_t size = PageSize(r.page_size());
  if (items.size() > size + 1) items.resize(size + 1);
  Page page(size, options_.page_bytes);
  if (Fill(page, items, out.mutable_graphs())) {
    out.set_next_page_token(absl::StrCat(kPrefix, out.graphs().rbegin()->graph()));
  }
  return out;
}

absl::StatusOr<v1::ListAuditResponse> Listings::Audit(
    const v1::ListAuditRequest& r) const {
  constexpr absl::string_view kPrefix = "audit:";
  uint64_t after = r.after_sequence();
  if (!r.page_token().empty()) {
    ASSIGN_OR_RETURN(after, TokenNumber(r.page_token(), kPrefix, "ListAudit"));
  }
  if (after > uint64_t{std::numeric_limits<int64_t>::max()}) {
    return v1::ListAuditResponse();
  }
  const size_t size = r.limit() == 0 || r.limit() > 10000 ? 1000 : r.limit();
  auto fetch = [&](size_t n) -> absl::StatusOr<std::vector<v1::AuditEntry>> {
    ASSIGN_OR_RETURN(const std::vector<store::AuditRow> rows,
                     curator_->store().ListAudit(static_cast<int64_t>(after),
                                                 static_cast<int>(n)));
    std::vector<v1::AuditEntry> items(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      v1::AuditEntry& e = items[i];
      e.set_sequence(static_cast<uint64_t>(rows[i].sequence));
      e.set_unix_ms(rows[i].unix_ms);
      e.set_actor(rows[i].actor);
      e.set_action(rows[i].action);
      e.set_details_json(rows[i].details_json);
      after = e.sequence();
    }
    return items;
  };
  v1::ListAuditResponse out;
  Page page(size, options_.page_bytes);
  ASSIGN_OR_RETURN(const bool more,
                   FillFrom(page, size, fetch, out.mutable_entries()));
  if (more) {
    out.set_next_page_token(Token(kPrefix, out.entries().rbegin()->sequence()));
  }
  return out;
}

}  // namespace ldpgraph::curator

#include "server/store/log_core.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/store/answer_log.h"

namespace ldpgraph::store {

namespace {

// The answers an Append stores to one campaign, as indices in its
// `answers`.
struct AppendGroup {
  int64_t campaign;
  const CampaignIndex* indexed;  // null: nothing stored yet
  std::vector<uint32_t> stored;
  // Whether the nodes in `stored` ascend strictly (the usual case), so
  // that none repeats.
  bool ascending = true;
};

// The answers of a batch that the index does not hold, grouped by campaign
// (in order of first appearance). An answer stored earlier is not grouped:
// its outcome is kDuplicate when it is the same answer (the stored bytes
// read through `rows`), kConflict otherwise.
absl::StatusOr<std::vector<AppendGroup>> GroupNewAnswers(
    LogRows& rows, const AnswerIndex& index,
    const std::vector<AnswerRow>& answers,
    std::vector<AppendOutcome>& outcomes) {
  std::vector<AppendGroup> groups;
  absl::flat_hash_map<int64_t, uint32_t> group_of;
  std::string stored_payload;
  uint32_t g = 0;
  for (uint32_t i = 0; i < answers.size(); ++i) {
    const AnswerRow& a = answers[i];
    if (groups.empty() || groups[g].campaign != a.campaign) {
      const auto [it, inserted] = group_of.try_emplace(
          a.campaign, static_cast<uint32_t>(groups.size()));
      if (inserted) {
        groups.push_back(AppendGroup{a.campaign, index.Find(a.campaign), {}});
      }
      g = it->second;
    }
    AppendGroup& group = groups[g];
    if (group.indexed != nullptr) {
      if (const AnswerLoc* found = group.indexed->Find(a.node)) {
        // Stored earlier: the same answer or not?
        const AnswerLoc& loc = *found;
        const uint32_t length = loc.length();
        bool same = loc.refusal() == a.refusal && length == a.payload.size();
        if (same && length > 0) {
          RETURN_IF_ERROR(rows.ReadBytes(group.indexed->rows[loc.row],
                                         loc.offset, length, stored_payload));
          same = std::memcmp(stored_payload.data(), a.payload.data(), length) ==
                 0;
        }
        outcomes[i] = same ? AppendOutcome::kDuplicate : AppendOutcome::kConflict;
        continue;
      }
    }
    if (!group.stored.empty() && answers[group.stored.back()].node >= a.node) {
      group.ascending = false;
    }
    group.stored.push_back(i);
  }
  return groups;
}

// A second answer for a node in the batch is compared with the first: it
// is kDuplicate or kConflict, and left out of its group.
void DropRepeatedNodes(const std::vector<AnswerRow>& answers,
                       std::vector<AppendGroup>& groups,
                       std::vector<AppendOutcome>& outcomes) {
  for (AppendGroup& group : groups) {
    if (group.ascending) continue;
    absl::flat_hash_map<uint32_t, uint32_t> first;  // node -> answer
    first.reserve(group.stored.size());
    size_t kept = 0;
    for (const uint32_t i : group.stored) {
      const AnswerRow& a = answers[i];
      const auto [it, inserted] = first.try_emplace(a.node, i);
      if (inserted) {
        group.stored[kept++] = i;
        continue;
      }
      const AnswerRow& earlier = answers[it->second];
      outcomes[i] = earlier.refusal == a.refusal && earlier.payload == a.payload
                        ? AppendOutcome::kDuplicate
                        : AppendOutcome::kConflict;
    }
    group.stored.resize(kept);
  }
}

// Inserts a group's answers through `rows`: one row, more if they pass
// kMaxLogBlobBytes, each added to *new_rows. bytes: the blob being built
// (a buffer reused from group to group).
absl::Status InsertGroupRows(LogRows& rows, const AppendGroup& group,
                             const std::vector<AnswerRow>& answers,
                             int64_t now_ms, std::string& bytes,
                             std::vector<NewRow>* new_rows) {
  size_t payload_bytes = 0;
  for (const uint32_t i : group.stored) payload_bytes += answers[i].payload.size();
  size_t k = 0;
  while (k < group.stored.size()) {
    bytes.reserve(std::min(kMaxLogBlobBytes,
                           kLogHeaderBytes + payload_bytes +
                               (group.stored.size() - k) * kMaxEntryOverhead));
    StartLogBlob(bytes);
    NewRow& row = new_rows->emplace_back();
    row.campaign = group.campaign;
    row.entries.reserve(group.stored.size() - k);
    int64_t previous_ms = 0;
    for (; k < group.stored.size(); ++k) {
      const AnswerRow& a = answers[group.stored[k]];
      if (!row.entries.empty() &&
          bytes.size() + kMaxEntryOverhead + a.payload.size() >
              kMaxLogBlobBytes) {
        break;
      }
      const int64_t ms = a.unix_ms != 0 ? a.unix_ms : now_ms;
      const size_t offset =
          EncodeEntry(bytes, a.node, a.refusal, a.payload, ms, previous_ms);
      previous_ms = ms;
      // (Offsets and lengths past 32 bits fail below: neither engine
      // takes a value of 2^31 bytes or more.)
      row.entries.push_back(NewEntry{
          a.node, static_cast<uint32_t>(offset),
          static_cast<uint32_t>(a.payload.size() << 1 | (a.refusal ? 1 : 0))});
    }
    FinishLogBlob(bytes, static_cast<uint32_t>(row.entries.size()));
    ASSIGN_OR_RETURN(row.id, rows.Insert(group.campaign, bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LogCore::CorruptRow(int64_t id, int64_t campaign,
                                 absl::string_view what) const {
  return absl::DataLossError(absl::StrCat("curator store ", name_,
                                          ": answer_log row ", id,
                                          " (campaign ", campaign, "): ", what));
}

absl::Status LogCore::ReadCampaignRow(LogRows& rows, int64_t id,
                                      int64_t campaign,
                                      std::string* blob) const {
  int64_t row_campaign = 0;
  RETURN_IF_ERROR(rows.ReadRow(id, &row_campaign, blob));
  if (row_campaign != campaign) {
    return CorruptRow(id, row_campaign,
                      absl::StrCat("indexed as a row of campaign ", campaign));
  }
  return absl::OkStatus();
}

absl::Status LogCore::CatchUp(LogRows& rows, bool initial) {
  std::vector<LogEntry> entries;
  return rows.ReadAfter(
      index_.last_row(),
      [&](int64_t id, int64_t campaign, absl::string_view blob) -> absl::Status {
        entries.clear();
        absl::Status status = LogReader(blob).Read(
            [&](const LogEntry& e) { entries.push_back(e); });
        if (status.ok()) status = index_.AddLoggedRow(id, campaign, entries);
        if (!status.ok()) return CorruptRow(id, campaign, status.message());
        if (!initial) {
          for (const LogEntry& e : entries) {
            foreign_.push_back(ForeignKey{campaign, e.node, e.refusal});
          }
        }
        return absl::OkStatus();
      });
}

void LogCore::TakeForeign(
    absl::FunctionRef<void(int64_t campaign, uint32_t node, bool refusal)> fn) {
  for (const ForeignKey& k : foreign_) fn(k.campaign, k.node, k.refusal);
  foreign_.clear();
  foreign_.shrink_to_fit();
}

void LogCore::ForEachKey(
    absl::FunctionRef<void(int64_t campaign, uint32_t node, bool refusal)> fn)
    const {
  for (const int64_t campaign : index_.Campaigns()) {
    index_.Find(campaign)->ForEach([&](uint32_t node, const AnswerLoc& loc) {
      fn(campaign, node, loc.refusal());
    });
  }
}

absl::StatusOr<std::vector<AppendOutcome>> LogCore::Append(
    LogRows& rows, const std::vector<AnswerRow>& answers, int64_t now_ms,
    std::vector<NewRow>* new_rows) {
  std::vector<AppendOutcome> outcomes(answers.size(), AppendOutcome::kStored);
  ASSIGN_OR_RETURN(std::vector<AppendGroup> groups,
                   GroupNewAnswers(rows, index_, answers, outcomes));
  DropRepeatedNodes(answers, groups, outcomes);
  // New answers to a campaign the store holds closed (closed by another
  // curator process since this one checked) are not stored.
  std::vector<int64_t> with_new;
  for (const AppendGroup& group : groups) {
    if (!group.stored.empty()) with_new.push_back(group.campaign);
  }
  if (with_new.empty()) return outcomes;
  ASSIGN_OR_RETURN(const absl::flat_hash_set<int64_t> closed,
                   rows.Closed(with_new));

  // One row per campaign (more if its answers pass kMaxLogBlobBytes).
  std::string bytes;
  for (const AppendGroup& group : groups) {
    if (closed.contains(group.campaign)) {
      for (const uint32_t i : group.stored) outcomes[i] = AppendOutcome::kClosed;
      continue;
    }
    RETURN_IF_ERROR(
        InsertGroupRows(rows, group, answers, now_ms, bytes, new_rows));
  }
  return outcomes;
}

absl::Status LogCore::Emit(LogRows& rows, int64_t campaign,
                           absl::FunctionRef<bool(const AnswerRow&)> fn,
                           bool* stopped) {
  const CampaignIndex* indexed = index_.Find(campaign);
  if (indexed == nullptr) return absl::OkStatus();
  const CampaignIndex& c = *indexed;
  struct Ref {
    uint32_t row;  // index in c.rows and blobs
    LogEntry entry;
  };
  std::vector<std::string> blobs(c.rows.size());
  std::vector<Ref> refs;
  refs.reserve(c.count());
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const int64_t id = c.rows[i];
    RETURN_IF_ERROR(ReadCampaignRow(rows, id, campaign, &blobs[i]));
    const auto row = static_cast<uint32_t>(i);
    if (absl::Status status = LogReader(blobs[i]).Read(
            [&](const LogEntry& e) { refs.push_back(Ref{row, e}); });
        !status.ok()) {
      return CorruptRow(id, campaign, status.message());
    }
  }
  const auto by_node = [](const Ref& a, const Ref& b) {
    return a.entry.node < b.entry.node;
  };
  if (!std::is_sorted(refs.begin(), refs.end(), by_node)) {
    std::sort(refs.begin(), refs.end(), by_node);
  }
  AnswerRow answer;
  answer.campaign = campaign;
  for (size_t i = 0; i < refs.size(); ++i) {
    const Ref& r = refs[i];
    if (i > 0 && refs[i - 1].entry.node == r.entry.node) {
      return CorruptRow(c.rows[r.row], campaign,
                        absl::StrCat("a second answer of node ", r.entry.node,
                                     " (the first is in row ",
                                     c.rows[refs[i - 1].row], ")"));
    }
    answer.node = r.entry.node;
    answer.refusal = r.entry.refusal;
    answer.unix_ms = r.entry.unix_ms;
    answer.payload.assign(blobs[r.row], r.entry.offset, r.entry.length);
    if (!fn(answer)) {
      *stopped = true;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status LogCore::EmitPage(LogRows& rows, int64_t campaign,
                               uint32_t first_node, size_t limit,
                               bool refusals_only,
                               std::vector<AnswerRow>* out) {
  const CampaignIndex* indexed = index_.Find(campaign);
  if (indexed == nullptr || limit == 0) return absl::OkStatus();
  const CampaignIndex& c = *indexed;
  // The page's answers from the index alone: (node, row), the first
  // `limit` by node.
  std::vector<std::pair<uint32_t, uint32_t>> picked;
  c.ForEach([&](uint32_t node, const AnswerLoc& loc) {
    if (node >= first_node && (!refusals_only || loc.refusal())) {
      picked.emplace_back(node, loc.row);
    }
  });
  if (picked.size() > limit) {
    std::nth_element(picked.begin(), picked.begin() + limit, picked.end());
    picked.resize(limit);
  }
  std::sort(picked.begin(), picked.end());
  std::vector<uint32_t> needed;
  needed.reserve(picked.size());
  for (const auto& [node, row] : picked) needed.push_back(row);
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  const size_t first = out->size();
  out->resize(first + picked.size());
  std::vector<bool> filled(picked.size(), false);
  std::string blob;
  for (const uint32_t row : needed) {
    const int64_t id = c.rows[row];
    RETURN_IF_ERROR(ReadCampaignRow(rows, id, campaign, &blob));
    absl::Status status = LogReader(blob).Read([&](const LogEntry& e) {
      const auto it = std::lower_bound(
          picked.begin(), picked.end(), std::make_pair(e.node, uint32_t{0}));
      if (it == picked.end() || it->first != e.node || it->second != row) {
        return;
      }
      const size_t i = static_cast<size_t>(it - picked.begin());
      AnswerRow& a = (*out)[first + i];
      a.campaign = campaign;
      a.node = e.node;
      a.refusal = e.refusal;
      a.unix_ms = e.unix_ms;
      a.payload.assign(blob, e.offset, e.length);
      filled[i] = true;
    });
    if (!status.ok()) return CorruptRow(id, campaign, status.message());
  }
  for (size_t i = 0; i < picked.size(); ++i) {
    if (!filled[i]) {
      return CorruptRow(c.rows[picked[i].second], campaign,
                        absl::StrCat("holds no answer of node ",
                                     picked[i].first, ", as indexed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::store

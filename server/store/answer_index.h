// The curator store's in-memory index of its answer log: where each stored
// answer is, keyed by (campaign, node), so that telling a new answer from a
// resend or a conflict needs no query. Built at CuratorStore::Open from the
// whole log (AddLoggedRow), extended after each commit of AppendAnswers
// (AddNewRow), and caught up with rows another connection added. Nothing
// here knows SQLite; not thread-safe (the store's mutex guards it).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/store/answer_log.h"

namespace ldpgraph::store {

// Where one stored answer is.
struct AnswerLoc {
  // No answer (in CampaignIndex's dense slots): no payload is 2^31 bytes
  // long.
  static constexpr uint32_t kAbsent = 0xffffffff;

  uint32_t row = 0;                   // index in CampaignIndex::rows
  uint32_t offset = 0;                // of the payload in the row's blob
  uint32_t length_refusal = kAbsent;  // payload length << 1 | refusal

  uint32_t length() const { return length_refusal >> 1; }
  bool refusal() const { return (length_refusal & 1) != 0; }
};

// One campaign's answers, by node: nodes are usually 0, 1, ... (the
// curator's), so those below dense.size() are found by position, 12 bytes a
// node; the others (a sparse set) in a hash map. dense grows (doubling,
// taking over sparse's nodes below its new size) to cover a new node when
// that leaves it at least about half full.
class CampaignIndex {
 public:
  // The campaign's answer_log ids, ascending; AnswerLoc::row indexes it.
  std::vector<int64_t> rows;

  // The answer of node, or null.
  const AnswerLoc* Find(uint32_t node) const;
  // Adds an answer; false (and nothing changed) if node has one.
  bool Insert(uint32_t node, const AnswerLoc& loc);
  // Undoes Insert.
  void Erase(uint32_t node);
  // The number of answers.
  size_t count() const { return count_; }
  // Calls fn(node, loc) for every answer, in no particular order.
  void ForEach(
      absl::FunctionRef<void(uint32_t node, const AnswerLoc& loc)> fn) const;

 private:
  void Grow(size_t size);

  std::vector<AnswerLoc> dense_;
  absl::flat_hash_map<uint32_t, AnswerLoc> sparse_;
  size_t count_ = 0;
};

// An entry of a row AppendAnswers wrote, to be indexed once committed.
struct NewEntry {
  uint32_t node;
  uint32_t offset;
  uint32_t length_refusal;
};
struct NewRow {
  int64_t id = 0;
  int64_t campaign = 0;
  std::vector<NewEntry> entries;
};

class AnswerIndex {
 public:
  // The campaign's index, or null if it has no answers.
  const CampaignIndex* Find(int64_t campaign) const;

  // Adds row `id` of the log, of `campaign`, decoded into entries.
  // DATA_LOSS describing the fault (without naming the row: the caller
  // does) if one of its nodes already has an answer, in an earlier row or
  // in this one ("a second answer of node N (the first is in row R)"), or
  // if the campaign has 2^32 - 1 rows; the index is then as it was before
  // the call.
  absl::Status AddLoggedRow(int64_t id, int64_t campaign,
                            absl::Span<const LogEntry> entries);
  // Adds rows this store wrote and committed (their nodes are new).
  void AddNewRows(absl::Span<const NewRow> rows);

  // The highest answer_log id indexed; 0 for none.
  int64_t last_row() const { return last_row_; }
  // The campaigns with answers, ascending.
  std::vector<int64_t> Campaigns() const;

 private:
  absl::flat_hash_map<int64_t, CampaignIndex> campaigns_;
  int64_t last_row_ = 0;
};

}  // namespace ldpgraph::store

// The answer log's logic that does not depend on the database engine: how
// AppendAnswers tells new answers from resends and conflicts, packs the new
// ones into rows (answer_log.h) and indexes them (answer_index.h); how the
// index catches up with rows other connections committed; how a campaign's
// answers are read back in node order. Each backend (the SQLite store,
// sqlite_impl.cc; the PostgreSQL store, postgres_connection.cc) supplies
// LogRows: the few reads and writes of the answer_log table, run inside the
// transaction the backend opened.
//
// Not thread-safe: the backend calls it under its own lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/store/answer_index.h"
#include "server/store/store.h"

namespace ldpgraph::store {

// The answer_log table of one database, as seen inside a transaction.
// Errors are the backend's (already naming the database and operation).
class LogRows {
 public:
  virtual ~LogRows() = default;
  // Calls fn with each row whose id > after, ascending: its id, campaign
  // and blob. A row whose columns are not (integer, integer, bytes) is
  // DATA_LOSS naming it. fn's error stops the scan and is returned.
  virtual absl::Status ReadAfter(
      int64_t after,
      absl::FunctionRef<absl::Status(int64_t id, int64_t campaign,
                                     absl::string_view blob)>
          fn) = 0;
  // Row `id`'s campaign and blob; DATA_LOSS naming it if there is none.
  virtual absl::Status ReadRow(int64_t id, int64_t* campaign,
                               std::string* blob) = 0;
  // Bytes [offset, offset + length) of row `id`'s blob into out;
  // DATA_LOSS if the row does not hold them.
  virtual absl::Status ReadBytes(int64_t id, uint32_t offset, uint32_t length,
                                 std::string& out) = 0;
  // Inserts a row; its id, greater than every id committed before it.
  virtual absl::StatusOr<int64_t> Insert(int64_t campaign,
                                         absl::string_view blob) = 0;
  // Which of `campaigns` the campaigns table holds closed.
  virtual absl::StatusOr<absl::flat_hash_set<int64_t>> Closed(
      const std::vector<int64_t>& campaigns) = 0;
};

class LogCore {
 public:
  // name: the database, for messages ("curator store <name>: ...").
  explicit LogCore(std::string name) : name_(std::move(name)) {}

  // Indexes the rows after the index's last: all of them at open, those
  // other connections committed since otherwise. Unless `initial`, their
  // answers are also kept for TakeForeign. A row that does not parse, or
  // repeats an indexed answer, is DATA_LOSS naming it.
  absl::Status CatchUp(LogRows& rows, bool initial = false);

  // AppendAnswers' body, inside the backend's write transaction, after
  // CatchUp (store.h has the contract). Inserts the new rows through
  // `rows`; Commit(*new_rows) must follow the transaction's commit.
  absl::StatusOr<std::vector<AppendOutcome>> Append(
      LogRows& rows, const std::vector<AnswerRow>& answers, int64_t now_ms,
      std::vector<NewRow>* new_rows);
  void Commit(const std::vector<NewRow>& new_rows) {
    index_.AddNewRows(new_rows);
  }

  // Calls fn with `campaign`'s answers in node order until it returns
  // false (then *stopped). Reads each of the campaign's rows once.
  absl::Status Emit(LogRows& rows, int64_t campaign,
                    absl::FunctionRef<bool(const AnswerRow&)> fn,
                    bool* stopped);
  // The answers of `campaign` with node >= first_node (refusals only, with
  // refusals_only), ascending by node, at most limit, into *out (appended).
  // The index picks them; each log row holding one is read once.
  absl::Status EmitPage(LogRows& rows, int64_t campaign, uint32_t first_node,
                        size_t limit, bool refusals_only,
                        std::vector<AnswerRow>* out);
  // Every indexed answer's key, by campaign.
  void ForEachKey(
      absl::FunctionRef<void(int64_t campaign, uint32_t node, bool refusal)>
          fn) const;
  // The keys of answers other connections stored, found by CatchUp since
  // the last call, in log order; then forgets them.
  void TakeForeign(
      absl::FunctionRef<void(int64_t campaign, uint32_t node, bool refusal)>
          fn);

  const AnswerIndex& index() const { return index_; }

 private:
  absl::Status CorruptRow(int64_t id, int64_t campaign,
                          absl::string_view what) const;
  // Row `id`'s blob into *blob (the backend's error if it cannot be read);
  // DATA_LOSS naming it if it is not a row of `campaign`, as the index says.
  absl::Status ReadCampaignRow(LogRows& rows, int64_t id, int64_t campaign,
                               std::string* blob) const;

  const std::string name_;
  AnswerIndex index_;
  struct ForeignKey {
    int64_t campaign;
    uint32_t node;
    bool refusal;
  };
  std::vector<ForeignKey> foreign_;
};

}  // namespace ldpgraph::store

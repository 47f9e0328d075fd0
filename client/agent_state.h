// The durable memo of an agent host: every question its nodes have answered
// and the answer they gave, so that a restarted host neither forgets what it
// has revealed nor spends epsilon twice on the same question
// (docs/operators.md, "The three programs").
//
// One SQLite database, <state-dir>/agent.db, in WAL mode with
// synchronous=FULL: when Commit returns OK the rows are on disk, and the
// agent releases a report only after the commit of its memo row (see
// AgentShard::RespondAll in client/agent.h). Schema (user_version 1):
//
//   memo(node INTEGER, key TEXT, attribute TEXT, mechanism TEXT,
//        parameters TEXT, epsilon REAL, answer BLOB, draws INTEGER,
//        PRIMARY KEY(node, key))
//
//   keys(node INTEGER PRIMARY KEY, private_key BLOB)
//
// key is QueryKey::Canonical(); attribute, mechanism, parameters and epsilon
// are the QueryKey's fields, so a restore rebuilds the key from its columns
// (and checks it against key). answer is opaque here (the agent stores a
// serialised v1::Report body). draws is MemoRow::draws; the column was
// added to version 1 without a version change (Open adds it, 0 for the rows
// stored before, to a database that lacks it). A node's spend is not stored: it is the sum
// of the epsilons of its rows, rebuilt by PrivacyBudget::Restore.
//
// keys holds each node's X25519 private key (32 bytes) for sealed
// agent-to-agent messages (common/crypto/sealed.h): made once, on the
// node's first start, and never replaced, so that the public key the
// curator publishes stays valid across restarts. The private key never
// leaves this file and the agent's memory. The table was added without a
// version change: Open creates it in a version-1 database that lacks it.
//
// Errors: a SQLite failure is mapped by common/storage/sqlite.h's SqliteError:
// INTERNAL naming the database path, the operation and SQLite's message;
// RESOURCE_EXHAUSTED for a full disk (or the max_bytes bound); UNAVAILABLE
// when another connection holds the write lock past busy_timeout_ms. A
// failed Commit is rolled back: none of its rows is stored.
//
// Thread-safe: calls are serialised by an internal mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/dp/accounting.h"

struct sqlite3;

namespace ldpgraph::agent {

// One answered question of one node. Its cost is key.epsilon.
struct MemoRow {
  uint32_t node = 0;
  QueryKey key;
  std::string answer;
  // How many words the node had drawn from its random source once this
  // answer was made. A seeded node (a simulation) continues its stream from
  // the largest of its rows after a restart, so that it draws exactly what
  // it would have drawn without the restart. Not part of the answer's
  // identity: operator== ignores it.
  uint64_t draws = 0;

  friend bool operator==(const MemoRow& a, const MemoRow& b) {
    return a.node == b.node && a.key.Canonical() == b.key.Canonical() &&
           a.answer == b.answer;
  }
};

class AgentStateStore {
 public:
  struct Options {
    // PRAGMA busy_timeout: how long a write waits for a lock held by another
    // connection before failing with UNAVAILABLE.
    int busy_timeout_ms = 5000;
    // Upper bound on the database size in bytes (PRAGMA max_page_count);
    // 0: none. A write beyond it fails with RESOURCE_EXHAUSTED as a full
    // disk would: tests use it to simulate one.
    int64_t max_bytes = 0;
    // Open an existing <dir>/agent.db read-only, for a reader beside the
    // host that owns it (ldpctl's figures): nothing is created or changed,
    // the file must exist (NOT_FOUND naming it) and hold this schema
    // version (FAILED_PRECONDITION otherwise), and Commit and StoreKeys
    // fail with FAILED_PRECONDITION.
    bool read_only = false;
  };

  // Opens <dir>/agent.db, creating the directory (mode 0700, parents
  // included) and the database if missing, in WAL mode with
  // synchronous=FULL. A mistyped directory therefore starts an empty memo:
  // deployments should point every restart of a host at the same volume.
  // INTERNAL naming the path if the directory cannot be created or the file
  // is not a SQLite database; FAILED_PRECONDITION if it holds a schema of
  // another version; INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<AgentStateStore>> Open(
      const std::string& dir, Options options);
  static absl::StatusOr<std::unique_ptr<AgentStateStore>> Open(
      const std::string& dir) {
    return Open(dir, Options());
  }
  ~AgentStateStore();

  AgentStateStore(const AgentStateStore&) = delete;
  AgentStateStore& operator=(const AgentStateStore&) = delete;

  // Calls fn on every stored row, ordered by (node, key), for restoring the
  // budgets at startup. The first error fn returns stops the scan and is
  // returned. DATA_LOSS naming the row if its columns do not rebuild its key
  // (a damaged or hand-edited database).
  absl::Status ForEach(absl::FunctionRef<absl::Status(const MemoRow&)> fn)
      const;

  // Stores rows in ONE transaction, durable when it returns OK. A row
  // identical to a stored one (same node, key and answer) is fine and
  // changes nothing, so a retry after a failure is safe; a different answer
  // for a stored (node, key), also within rows, is INTERNAL: the memo
  // invariant (one answer per question) is broken, and nothing of rows is
  // stored. INVALID_ARGUMENT, before touching the database, for a row whose
  // epsilon is not finite and > 0. An empty rows is OK and touches nothing.
  absl::Status Commit(const std::vector<MemoRow>& rows);

  // Number of stored rows.
  absl::StatusOr<int64_t> Count() const;

  // Every stored private key, by node.
  absl::StatusOr<std::vector<std::pair<uint32_t, std::string>>> LoadKeys()
      const;
  // Stores new private keys in ONE transaction, durable when it returns OK.
  // A key identical to the stored one is fine; a different key for a node
  // that has one is INTERNAL (a node's key is never replaced) and nothing
  // is stored. INVALID_ARGUMENT, before touching the database, for a key
  // that is not 32 bytes.
  absl::Status StoreKeys(
      const std::vector<std::pair<uint32_t, std::string>>& keys);

  // <dir>/agent.db.
  const std::string& path() const { return path_; }

 private:
  AgentStateStore(std::string path, sqlite3* db, bool read_only)
      : path_(std::move(path)), read_only_(read_only), db_(db) {}
  static absl::StatusOr<std::unique_ptr<AgentStateStore>> OpenReadOnly(
      const std::string& dir);
  // OK, or FAILED_PRECONDITION naming the file if it was opened read-only.
  absl::Status Writable(absl::string_view what) const;
  absl::Status CommitLocked(const std::vector<MemoRow>& rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const bool read_only_;
  mutable absl::Mutex mu_;
  sqlite3* const db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace ldpgraph::agent

// The curator's store on a PostgreSQL server (libpq): the same contract as
// the SQLite store (store.h), for deployments whose server side outgrows
// one machine -- several curator processes (server/curator/roles.h: any
// number of frontends and one operator) on one database.
//
// Schema: the tables of the SQLite store, in PostgreSQL's types (bytea for
// every record and every string a client supplied, bigint ids from
// sequences), created and migrated at Open by numbered migrations recorded
// in ldpgraph_schema(version); Open holds an advisory lock while it
// migrates, so processes starting at once migrate once. A database of a
// newer version than this build knows is FAILED_PRECONDITION.
//
// Several processes on one database:
//   - Appends to the answer log, the audit log and the sealed messages hold
//     a transaction-scoped advisory lock each, so rows commit in the order
//     of their ids and a reader that polls "id > last seen" misses none.
//   - A new answer to a campaign the database holds closed is kClosed, not
//     stored, whichever process closed it (the check is in the append's
//     transaction, and a campaign's update takes the append's lock: a close
//     commits before or after an append, never inside it).
//   - TryOperatorLease is a session-level advisory lock on a connection of
//     its own: PostgreSQL frees it when that connection ends, so a killed
//     operator's lease passes to a standby as soon as the server notices.
//     A restart of the database frees it too: the operator that held it
//     takes it again when the database is back, ahead of a standby, which
//     waits kOperatorLeaseGrace (3 s) after its own reconnection first.
//
// Reconnection: every call reconnects a connection that broke, and notices
// before it uses an idle connection that the server has closed since (a
// restart), so the first call after a database restart succeeds rather than
// failing with "server closed the connection unexpectedly". A call that
// was in flight when the database went away is UNAVAILABLE (see Errors).
//
// Durability: a call returns OK once PostgreSQL committed it
// (synchronous_commit on; off with Options::synchronous_full false, which
// survives a crash of the curator but not of the database server).
//
// Errors: a lost connection, a server that is shutting down or starting,
// a serialization failure or deadlock are UNAVAILABLE (retry later; the
// next call reconnects); a full disk or out-of-memory (SQLSTATE class 53)
// RESOURCE_EXHAUSTED; anything else INTERNAL naming the database, the
// operation and PostgreSQL's message. A failed call's transaction is
// rolled back. A commit whose reply was lost is reported UNAVAILABLE though
// it may have been stored: the caller's resend then finds a duplicate.
//
// Thread-safe: calls are serialised by an internal mutex (one connection),
// like the SQLite store's.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/store/store.h"

namespace ldpgraph::store {

class PostgresStore {
 public:
  struct Options {
    // postgres://USER@HOST:PORT/DATABASE[?sslmode=...] (libpq's URI; any
    // libpq parameter but password may be given). A password in it is
    // INVALID_ARGUMENT: it would show in process listings.
    std::string url;
    // A file whose first line is the password; empty for none.
    std::string password_file;
    bool synchronous_full = true;
    // Seconds a connection attempt may take.
    int connect_timeout_s = 5;
  };
  // Connects, migrates the schema, reads the answer log to build the
  // in-memory index. UNAVAILABLE if the server cannot be reached (naming
  // it and libpq's message); INVALID_ARGUMENT for a malformed URL, a
  // password in it, or an unreadable password file.
  static absl::StatusOr<std::unique_ptr<CuratorStore>> Open(Options options);
};

// The schema version this build creates and reads.
inline constexpr int kPostgresSchemaVersion = 4;

}  // namespace ldpgraph::store

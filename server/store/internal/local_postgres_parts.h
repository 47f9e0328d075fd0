// Internal to ldpgraph_local_postgres: the pieces LocalPostgres
// (server/store/local_postgres.h) is made of, by file --
// local_postgres_binaries.cc (the server binaries, the user to run them as),
// local_postgres_process.cc (children: spawning, waiting, /proc, readiness,
// a free port), local_postgres_files.cc (log tails, secret files,
// passwords) and local_postgres_sql.cc (libpq connections, quoting,
// identifiers). Not for use outside server/store/.
#pragma once

#include <libpq-fe.h>
#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store/local_postgres.h"

namespace ldpgraph::store::internal {

// Exit statuses of a child that failed before exec.
constexpr int kExitCannotEnter = 125;
constexpr int kExitCannotDrop = 126;
constexpr int kExitCannotExec = 127;

struct PgConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgConn = std::unique_ptr<PGconn, PgConnDeleter>;
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// --- the binaries and the user (local_postgres_binaries.cc) ---------------

// The folder of initdb and postgres: `configured` if set (and only it),
// else as local_postgres.h says; FAILED_PRECONDITION naming what was tried.
absl::StatusOr<std::string> FindBinDir(const std::string& configured);

// The first folder on the way to path (path included) that `user` may not
// search by its mode bits, as "<folder> (mode 0700, owner uid 0)"; "" if
// none (ACLs aside).
std::string FirstUnsearchable(const std::string& path,
                              const ProcessUser& user);

// The user to run initdb and postgres as (local_postgres.h, "Running as
// root").
absl::StatusOr<ProcessUser> ChooseUser();

// --- children (local_postgres_process.cc) ----------------------------------

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::vector<std::string> env;
  std::string cwd;
  int out_fd = -1;
  int err_fd = -1;
  int death_signal = SIGTERM;  // sent when the spawning thread ends
};

// Forks and execs spec.argv as `user`, in a process group of its own, with
// stdin from /dev/null, stdout and stderr on the given descriptors and no
// other descriptor of ours. Returns the child's pid; the child exits
// kExitCannotEnter/kExitCannotDrop/kExitCannotExec (after writing why to
// err_fd) when chdir, the privilege drop or exec fails.
absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec, const ProcessUser& user);

// waitpid without EINTR.
pid_t WaitPid(pid_t pid, int* status, int flags);

// Runs a command to its end; its status.
absl::StatusOr<int> RunToEnd(const SpawnSpec& spec, const ProcessUser& user);

// Whether data/postmaster.pid says the postmaster `pid` is ready (line 1
// its pid, line 8 its status).
bool PidFileSaysReady(const std::string& pid_file, pid_t pid);

// A process as /proc/<pid>/stat has it: parent, state, start time.
struct ProcStat {
  pid_t ppid = 0;
  char state = '?';
  unsigned long long start_time = 0;
};

// The /proc/<pid>/stat of a process; nullopt if it cannot be read.
std::optional<ProcStat> ReadProcStat(pid_t pid);

struct ProcId {
  pid_t pid;
  unsigned long long start_time;
};

// The processes whose parent is `parent`.
std::vector<ProcId> ChildrenOf(pid_t parent);

// Gone: no such process, a zombie (its resources are released) or another
// process under the same pid.
bool Gone(const ProcId& p);

// A free TCP port on 127.0.0.1: bound with port 0, read and closed
// (common/net/free_port.h), its errors prefixed "LocalPostgres: ".
absl::StatusOr<int> PickFreePort();

// --- files (local_postgres_files.cc) ----------------------------------------

// argv joined with spaces, for messages.
std::string Join(const std::vector<std::string>& argv);

// The last `lines` lines of path from byte `offset` on, each as
// "  | line\n"; a note when there are none.
std::string FileTail(const std::string& path, off_t offset, int lines);

// Creates (or replaces) path with contents, mode 0600, through a temporary
// file renamed into place; owned by uid/gid when chown is true.
absl::Status WriteSecretFile(const std::string& path,
                             const std::string& contents, bool chown, uid_t uid,
                             gid_t gid);

// The password in path: 32 hex characters (FAILED_PRECONDITION otherwise).
absl::StatusOr<std::string> ReadPassword(const std::string& path);

// A new password: 32 hex characters from OpenSSL's CSPRNG.
absl::StatusOr<std::string> NewPassword();

// --- SQL (local_postgres_sql.cc) --------------------------------------------

// Whether s is a lower-case SQL identifier: [a-z_][a-z0-9_]*, at most 63.
bool IsPlainIdentifier(const std::string& s);

// libpq's message for a connection, or "out of memory" for none.
std::string ConnError(PGconn* c);

// A connection with these libpq parameters; INTERNAL with libpq's message.
absl::StatusOr<PgConn> Connect(
    const std::vector<std::pair<std::string, std::string>>& params);

// Runs sql (no result rows); INTERNAL "LocalPostgres: <what>: <message>".
absl::Status Exec(PGconn* c, const std::string& sql, const std::string& what);

// s quoted as an SQL identifier, and as a literal.
std::string QuoteIdent(PGconn* c, const std::string& s);
std::string QuoteLiteral(PGconn* c, const std::string& s);

}  // namespace ldpgraph::store::internal

// A throwaway PostgreSQL server on this machine, for tests, benchmarks and
// `ldpctl simulate --store postgres`: Start() makes a cluster in a folder
// (initdb), runs the server as a child process on 127.0.0.1, creates one
// login role with a random password and one database owned by it, and the
// destructor stops the server. Kill() and Restart() crash and restart it, for
// tests of what survives a crashed database.
//
// The folder (Options::dir) after Start:
//   data/                 the cluster (PGDATA)
//   password              the role's password: 32 hex characters and a
//                         newline, mode 0600 (password_file())
//   superuser-password    the password of the superuser `postgres`, 0600
//   initdb.log            initdb's output
//   postgres.log          the server's stdout and stderr, appended to by
//                         every start (Restart included)
//   .s.PGSQL.<port>       the server's unix socket (and its .lock), unless
//                         the folder's path is too long for one (see
//                         socket_dir())
//
// Binaries: Options::bin_dir when set (and only it); else the folder
// `pg_config --bindir` names when it holds initdb and postgres (libpq-dev's
// pg_config may belong to another major version than the server), else the
// highest /usr/lib/postgresql/<major>/bin that does (Debian's layout).
//
// Running as root: initdb and postgres refuse to run as root, so when the
// effective uid is 0 every command runs as the system user `postgres` (made
// by Debian's postgresql-common, a dependency of postgresql-15), or as
// `nobody` when there is no such user. `postgres` is preferred because it is
// the account meant to own clusters; `nobody` is meant to own no files, and
// a cluster it owned could be changed by any other daemon running as nobody.
// Start chowns Options::dir (not its parents), the socket folder and the
// superuser's password file to that user (initdb makes data/ as it; the
// logs and the role's password file stay the caller's), and privileges are
// dropped in the child after fork (setgroups, setgid, setuid; no sudo or
// su). Every parent of dir must be searchable by
// that user: a folder under /tmp is, one under /root is not (Start then
// fails naming the folder). Otherwise everything runs as the calling user.
//
// Clients: url() over TCP with the password (pg_hba: scram-sha-256 for
// every connection, local or TCP; nothing is trusted). Start itself creates
// the role over the unix socket and waits for readiness over TCP, so both
// work when it returns.
//
// Children: the server runs in a process group of its own (a terminal's
// Ctrl-C reaches the caller, which stops it in order), with a clean
// environment (PATH, LC_ALL=C) and no descriptor of the caller's but its log,
// and receives SIGINT (fast shutdown) when the thread that last started it
// (Start or Restart) ends (PR_SET_PDEATHSIG), so a crashed caller leaves no
// server behind. Call Start and Restart from a thread that lives as long as
// the server: the main thread, typically.
//
// Not thread-safe: one thread controls a LocalPostgres. Clients may connect
// from any thread or process.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ldpgraph::store {

namespace internal {
// The user LocalPostgres runs initdb and postgres as.
struct ProcessUser {
  bool drop = false;  // the caller is root: switch to uid/gid/groups
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string name;
};
}  // namespace internal

class LocalPostgres {
 public:
  struct Options {
    // The folder of the cluster, its log and (usually) its socket; created
    // with its missing parents if absent, and left in place by the
    // destructor (the caller removes it). Relative paths are taken from the
    // working directory at Start.
    std::string dir;
    // The login role Start creates (with CREATEDB, so a test may make a
    // database per case) and the database it owns. Each a lower-case SQL
    // identifier: [a-z_][a-z0-9_]*, at most 63 characters; the role may not
    // be `postgres` (the superuser).
    std::string user = "ldpgraph";
    std::string database = "ldpgraph";
    // The TCP port on 127.0.0.1; 0 picks a free one (and picks again if
    // another process takes it before the server binds it).
    int port = 0;
    // PostgreSQL's fsync (and initdb's sync at the end). false only for
    // tests that do not test durability: a commit then survives a crash of
    // the server (Kill) but not of the machine.
    bool fsync = true;
    // When dir already holds a cluster Start made earlier (data/ and the
    // password file): false fails (FAILED_PRECONDITION), true starts that
    // cluster as it is, keeping its data and its role's password (the role
    // and the database must exist in it).
    bool reuse = false;
    // Server settings suited to many clients on one machine.
    int max_connections = 200;
    std::string shared_buffers = "128MB";
    // How long a start (crash recovery included) may take until the server
    // accepts connections.
    absl::Duration start_timeout = absl::Seconds(30);
    // The folder holding initdb and postgres; empty finds them (see above).
    std::string bin_dir;
  };

  // Makes the cluster (or, with reuse, finds it), starts the server and
  // waits until it accepts connections on 127.0.0.1:port(), then creates the
  // role and the database (a new cluster only).
  // Errors:
  //   INVALID_ARGUMENT  an option out of its range (empty dir, a user or
  //                     database that is not a plain identifier, port
  //                     outside 0..65535, max_connections < 1, ...).
  //   FAILED_PRECONDITION  no PostgreSQL binaries (the message says
  //                     `apt-get install postgresql-15`); dir holds a data/
  //                     folder that is not a cluster of ours, or is ours and
  //                     reuse is false; reuse of a cluster without the role
  //                     or database; running as root and neither `postgres`
  //                     nor `nobody` exists; the run-as user cannot enter dir.
  //   DEADLINE_EXCEEDED  the server did not accept connections within
  //                     start_timeout (it is stopped).
  //   INTERNAL / the errno's code  a step failed (creating the folder,
  //                     initdb, the server exiting, creating the role...).
  // Every error names the step and, for a command, its command line and the
  // last lines of its log. After an error no server of this call runs; the
  // folder keeps what was made (logs included), for a look.
  static absl::StatusOr<std::unique_ptr<LocalPostgres>> Start(Options options);

  // Stop(); a failure is printed to stderr. Removes the socket folder under
  // /tmp if Start made one; leaves Options::dir as it is.
  ~LocalPostgres();
  LocalPostgres(const LocalPostgres&) = delete;
  LocalPostgres& operator=(const LocalPostgres&) = delete;

  // "postgres://USER@127.0.0.1:PORT/DATABASE": no password in it; libpq
  // takes that as a separate parameter (or PGPASSWORD).
  std::string url() const;
  // Options::dir/password: the role's password and a newline, mode 0600,
  // owned by the calling user.
  std::string password_file() const;
  // The password itself (32 hex characters from OpenSSL's CSPRNG).
  const std::string& password() const { return password_; }
  // Options::dir/superuser-password: the password of the superuser
  // `postgres` (for tests that need one), mode 0600.
  std::string superuser_password_file() const;
  const std::string& user() const { return options_.user; }
  const std::string& database() const { return options_.database; }
  // The OS user initdb and the server run as: `postgres` (or `nobody`)
  // when the caller is root, else the caller.
  const std::string& os_user() const { return user_.name; }
  // The absolute cluster folder (Options::dir made absolute).
  const std::string& dir() const { return options_.dir; }
  // The folder of the unix socket (libpq's host=, psql -h): dir() itself,
  // or a folder /tmp/ldpgraph-pg-XXXXXX when dir's path is too long for a
  // socket path (sun_path holds 107 bytes, so dir may have at most 92) or
  // holds a comma or a quote (the setting is a list).
  const std::string& socket_dir() const { return socket_dir_; }
  // The TCP port; the same across Restart.
  int port() const { return options_.port; }
  // The postmaster's pid while it runs (the server as this object started
  // it, whether or not it has since exited on its own), -1 after Stop or
  // Kill.
  pid_t pid() const { return pid_; }
  // Whether the postmaster is running (reaps it if it exited on its own).
  bool running();
  // The last `lines` lines of postgres.log, each as "  | line\n".
  std::string LogTail(int lines = 20) const;

  // Fast shutdown (SIGINT: clients are disconnected, a checkpoint is
  // written), waiting up to a minute; then immediate shutdown (SIGQUIT) and,
  // 5 s later, SIGKILL. OK once the server is down: at once if it was down
  // already (Stop and Kill are idempotent and may be mixed). Errors (the
  // server is down all the same): INTERNAL if the server had exited on its
  // own since it started (a crash: how, and the log's tail) or did not exit
  // cleanly; DEADLINE_EXCEEDED if it had to be killed.
  absl::Status Stop();

  // A crash of the whole server, as a machine crash would have it: SIGKILL
  // to the postmaster and to every process it had started (backends,
  // checkpointer, ...), and waits until all are gone, so that Restart can
  // start at once (a leftover backend would keep the old shared memory in
  // use). Committed transactions survive (in WAL; with fsync=false, as long
  // as the machine does not crash too). OK if the server is already down.
  // INTERNAL if a process does not go within 10 s.
  absl::Status Kill();

  // Starts the server again on the same folder and port (crash recovery
  // after Kill), after a Stop when it is running. Errors as Start's (the
  // port taken by another process is INTERNAL with "Address already in
  // use" in the log's tail: the port is not changed).
  absl::Status Restart();

 private:
  explicit LocalPostgres(Options options) : options_(std::move(options)) {}

  // Start's steps (local_postgres.cc, in order).
  absl::Status PrepareFolder();
  absl::StatusOr<bool> IsNewCluster() const;
  absl::Status PickSocketDir();
  absl::Status MakeOrReadPasswords(bool fresh, std::string* superuser_password);
  absl::Status LaunchOnAPort();

  std::string DataDir() const;
  std::string LogPath() const;
  // The environment of every child: PATH, LC_ALL=C, LANG=C, HOME.
  std::vector<std::string> ChildEnv() const;
  std::vector<std::string> PostgresArgv() const;
  absl::Status RunInitdb();
  // Starts postgres and waits until it is ready; on an error no server of
  // this call runs, and *address_in_use says whether it could not bind the
  // port.
  absl::Status Launch(bool* address_in_use);
  absl::Status CreateRoleAndDatabase(const std::string& superuser_password);
  absl::Status CheckRoleAndDatabase();
  // Whether the postmaster exited (and was reaped) within limit.
  bool WaitForExit(absl::Duration limit);

  Options options_;  // dir absolute; port the one in use
  std::string bin_dir_;
  internal::ProcessUser user_;
  std::string socket_dir_;
  bool own_socket_dir_ = false;  // a /tmp folder of ours, removed at the end
  std::string password_;
  pid_t pid_ = -1;  // -1 after Stop or Kill
  // Set when running() reaped a postmaster that exited by itself: how, and
  // its wait status.
  std::optional<std::string> ended_;
  int ended_status_ = 0;
};

}  // namespace ldpgraph::store

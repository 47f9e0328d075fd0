#include "server/store/local_postgres.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/wait_status.h"
#include "server/store/internal/local_postgres_parts.h"

// LocalPostgres's lifecycle: Start (options, the folder, initdb, the port,
// the role), Stop, Kill, Restart. Its pieces are in the files that
// server/store/internal/local_postgres_parts.h lists.
namespace ldpgraph::store {
namespace {

namespace fs = std::filesystem;

// The superuser initdb makes (-U), whatever the OS user is.
constexpr char kSuperuser[] = "postgres";
constexpr char kPasswordFile[] = "password";
constexpr char kSuperuserPasswordFile[] = "superuser-password";
constexpr char kServerLog[] = "postgres.log";
constexpr char kInitdbLog[] = "initdb.log";
// sun_path holds 108 bytes with the terminating NUL; postgres puts its
// socket at "<dir>/.s.PGSQL.<port>" (up to 15 more bytes).
constexpr size_t kMaxSocketPath = 107;
constexpr size_t kSocketNameRoom = sizeof("/.s.PGSQL.65535") - 1;
constexpr int kPortAttempts = 5;
constexpr int kLogLines = 20;

using internal::ChildrenOf;
using internal::ChooseUser;
using internal::Connect;
using internal::ConnError;
using internal::Exec;
using internal::FileTail;
using internal::FindBinDir;
using internal::FirstUnsearchable;
using internal::Gone;
using internal::IsPlainIdentifier;
using internal::Join;
using internal::kExitCannotEnter;
using internal::NewPassword;
using internal::PgConn;
using internal::PickFreePort;
using internal::PidFileSaysReady;
using internal::ProcessUser;
using internal::ProcId;
using internal::ProcStat;
using internal::QuoteIdent;
using internal::QuoteLiteral;
using internal::ReadPassword;
using internal::ReadProcStat;
using internal::RunToEnd;
using internal::Spawn;
using internal::SpawnSpec;
using internal::WaitPid;
using internal::WriteSecretFile;

}  // namespace

// Start, step by step: check the options, prepare the folder (the
// binaries, the user to run as), find whether a cluster is there already,
// pick the socket's folder, make or read the passwords (initdb for a new
// cluster), launch the server on a port, and make or check the role and
// database. Each step is a function of its own.

namespace {

// A step of Start: the options, checked; dir made absolute, without a
// trailing slash.
absl::Status CheckAndNormalise(LocalPostgres::Options& options) {
  if (options.dir.empty()) {
    return absl::InvalidArgumentError("LocalPostgres: Options::dir is empty");
  }
  if (!IsPlainIdentifier(options.user) || options.user == kSuperuser) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LocalPostgres: Options::user \"", options.user,
        "\" must match [a-z_][a-z0-9_]* (at most 63 characters) and not be "
        "the superuser postgres"));
  }
  if (!IsPlainIdentifier(options.database)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LocalPostgres: Options::database \"", options.database,
                     "\" must match [a-z_][a-z0-9_]* (at most 63 characters)"));
  }
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("LocalPostgres: Options::port ", options.port,
                     " is outside 0..65535 (0 picks a free one)"));
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("LocalPostgres: Options::max_connections ",
                     options.max_connections, " is below 1"));
  }
  if (options.shared_buffers.empty() ||
      !std::all_of(options.shared_buffers.begin(), options.shared_buffers.end(),
                   [](char c) { return absl::ascii_isalnum(c); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("LocalPostgres: Options::shared_buffers \"",
                     options.shared_buffers, "\" is not a size such as 128MB"));
  }
  if (options.start_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "LocalPostgres: Options::start_timeout must be positive");
  }
  std::error_code ec;
  fs::path dir = fs::absolute(options.dir, ec).lexically_normal();
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("LocalPostgres: cannot make ", options.dir,
                     " absolute: ", ec.message()));
  }
  options.dir = dir.string();
  while (options.dir.size() > 1 && options.dir.back() == '/') {
    options.dir.pop_back();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalPostgres>> LocalPostgres::Start(
    Options options) {
  RETURN_IF_ERROR(CheckAndNormalise(options));
  std::unique_ptr<LocalPostgres> pg(new LocalPostgres(std::move(options)));
  RETURN_IF_ERROR(pg->PrepareFolder());
  ASSIGN_OR_RETURN(const bool fresh, pg->IsNewCluster());
  RETURN_IF_ERROR(pg->PickSocketDir());
  std::string superuser_password;
  RETURN_IF_ERROR(pg->MakeOrReadPasswords(fresh, &superuser_password));
  RETURN_IF_ERROR(pg->LaunchOnAPort());
  absl::Status made = fresh ? pg->CreateRoleAndDatabase(superuser_password)
                            : pg->CheckRoleAndDatabase();
  if (made.ok() && fresh) {
    // Last: the password file marks a cluster that is complete.
    made = WriteSecretFile(pg->password_file(), pg->password_ + "\n", false, 0, 0);
  }
  if (!made.ok()) {
    pg->Stop().IgnoreError();
    return made;
  }
  return pg;
}

// A step of Start: the binaries, the user the server runs as, and dir,
// made (mode 0700) and given to that user.
absl::Status LocalPostgres::PrepareFolder() {
  const Options& o = options_;
  ASSIGN_OR_RETURN(bin_dir_, FindBinDir(o.bin_dir));
  ASSIGN_OR_RETURN(user_, ChooseUser());
  RETURN_IF_ERROR(MakeDirs(o.dir, 0700));
  if (user_.drop && ::chown(o.dir.c_str(), user_.uid, user_.gid) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: cannot give ", o.dir, " to user ",
                            user_.name));
  }
  return absl::OkStatus();
}

// A step of Start: true for a new cluster, false for the one an earlier
// Start made (with Options::reuse); FAILED_PRECONDITION for anything else
// in the data folder.
absl::StatusOr<bool> LocalPostgres::IsNewCluster() const {
  const Options& o = options_;
  const std::string data = DataDir();
  std::error_code ec;
  if (!fs::exists(data, ec)) return true;
  if (!fs::is_directory(data, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("LocalPostgres: ", data, " exists and is not a folder"));
  }
  if (!fs::exists(data + "/PG_VERSION", ec)) {
    if (!fs::is_empty(data, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "LocalPostgres: ", data,
          " holds files but no PostgreSQL cluster (no PG_VERSION); remove "
          "it or choose another Options::dir"));
    }
    return true;
  }
  if (!fs::exists(password_file(), ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: ", data,
        " holds a cluster that LocalPostgres did not finish making (no ",
        password_file(), "); remove ", o.dir,
        " or choose another Options::dir"));
  }
  if (!o.reuse) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: ", o.dir,
        " already holds a cluster made by an earlier Start; set "
        "Options::reuse to start it as it is, or remove the folder for a "
        "new one"));
  }
  return false;
}

// A step of Start: the socket's folder: dir itself when
// "<dir>/.s.PGSQL.<port>" fits in sun_path and dir is a single item of the
// comma-separated setting; else a new /tmp folder of ours.
absl::Status LocalPostgres::PickSocketDir() {
  const Options& o = options_;
  const bool dir_fits = o.dir.size() + kSocketNameRoom <= kMaxSocketPath &&
                        o.dir.find_first_of(",\"'\\ \t") == std::string::npos;
  if (dir_fits) {
    socket_dir_ = o.dir;
    return absl::OkStatus();
  }
  char tmpl[] = "/tmp/ldpgraph-pg-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    return absl::ErrnoToStatus(
        errno, "LocalPostgres: cannot make a socket folder /tmp/ldpgraph-pg-*");
  }
  socket_dir_ = tmpl;
  own_socket_dir_ = true;
  if (user_.drop && ::chown(tmpl, user_.uid, user_.gid) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: cannot give ", tmpl, " to user ",
                            user_.name));
  }
  return absl::OkStatus();
}

// A step of Start: for a new cluster, the role's and the superuser's
// passwords (the superuser's written for initdb) and initdb; for an earlier
// one, the role's password read back.
absl::Status LocalPostgres::MakeOrReadPasswords(bool fresh,
                                                std::string* superuser_password) {
  if (!fresh) {
    ASSIGN_OR_RETURN(password_, ReadPassword(password_file()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(password_, NewPassword());
  ASSIGN_OR_RETURN(*superuser_password, NewPassword());
  RETURN_IF_ERROR(WriteSecretFile(superuser_password_file(),
                                  *superuser_password + "\n", user_.drop,
                                  user_.uid, user_.gid));
  return RunInitdb();
}

// A step of Start: the server launched; with a port of our choosing, chosen
// again if another process took it before the server bound it.
absl::Status LocalPostgres::LaunchOnAPort() {
  const bool pick = options_.port == 0;
  for (int attempt = 1;; ++attempt) {
    if (pick) {
      ASSIGN_OR_RETURN(options_.port, PickFreePort());
    }
    bool address_in_use = false;
    absl::Status s = Launch(&address_in_use);
    if (s.ok()) return absl::OkStatus();
    if (!pick || !address_in_use || attempt == kPortAttempts) return s;
  }
}

LocalPostgres::~LocalPostgres() {
  if (absl::Status s = Stop(); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
  }
  if (own_socket_dir_) {
    std::error_code ec;
    fs::remove_all(socket_dir_, ec);
  }
}

std::string LocalPostgres::url() const {
  return absl::StrCat("postgres://", options_.user,
                      "@127.0.0.1:", options_.port, "/", options_.database);
}

std::string LocalPostgres::password_file() const {
  return absl::StrCat(options_.dir, "/", kPasswordFile);
}

std::string LocalPostgres::superuser_password_file() const {
  return absl::StrCat(options_.dir, "/", kSuperuserPasswordFile);
}

std::string LocalPostgres::DataDir() const {
  return absl::StrCat(options_.dir, "/data");
}

std::string LocalPostgres::LogPath() const {
  return absl::StrCat(options_.dir, "/", kServerLog);
}

std::string LocalPostgres::LogTail(int lines) const {
  return FileTail(LogPath(), 0, lines);
}

std::vector<std::string> LocalPostgres::ChildEnv() const {
  return {absl::StrCat("PATH=", bin_dir_, ":/usr/bin:/bin"), "LC_ALL=C",
          "LANG=C", absl::StrCat("HOME=", options_.dir)};
}

absl::Status LocalPostgres::RunInitdb() {
  const std::string log = absl::StrCat(options_.dir, "/", kInitdbLog);
  const int fd =
      ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: cannot open ", log));
  }
  SpawnSpec spec;
  // clang-format off
  spec.argv = {bin_dir_ + "/initdb",
               "-D", DataDir(),
               "-U", kSuperuser,
               absl::StrCat("--pwfile=", superuser_password_file()),
               "--auth=scram-sha-256",
               "-E", "UTF8",
               "--locale=C"};
  // clang-format on
  if (!options_.fsync) spec.argv.push_back("--no-sync");
  spec.env = ChildEnv();
  spec.cwd = options_.dir;
  spec.out_fd = fd;
  spec.err_fd = fd;
  absl::StatusOr<int> status = RunToEnd(spec, user_);
  ::close(fd);
  RETURN_IF_ERROR(status.status());
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return absl::OkStatus();
  const std::string message = absl::StrCat(
      "LocalPostgres: initdb ", DescribeWaitStatus(*status),
      "\n  command: ", Join(spec.argv), "\n  as user: ", user_.name,
      "\n  log (", log, "), last lines:\n", FileTail(log, 0, kLogLines));
  if (WIFEXITED(*status) && WEXITSTATUS(*status) == kExitCannotEnter) {
    const std::string blocker = FirstUnsearchable(options_.dir, user_);
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: the user ", user_.name, " cannot enter ", options_.dir,
        blocker.empty()
            ? ""
            : absl::StrCat(": ", blocker, " is not searchable by it"),
        "; every parent folder must be (chmod o+x, or a folder under /tmp "
        "made with mode 0755)\n",
        message));
  }
  return absl::InternalError(message);
}

std::vector<std::string> LocalPostgres::PostgresArgv() const {
  // clang-format off
  return {bin_dir_ + "/postgres",
          "-D", DataDir(),
          "-k", socket_dir_,
          "-h", "127.0.0.1",
          "-p", absl::StrCat(options_.port),
          "-c", absl::StrCat("fsync=", options_.fsync ? "on" : "off"),
          "-c", absl::StrCat("max_connections=", options_.max_connections),
          "-c", absl::StrCat("shared_buffers=", options_.shared_buffers),
          // Everything the server says goes to our log, whatever the
          // cluster's postgresql.conf says.
          "-c", "logging_collector=off",
          "-c", "log_destination=stderr"};
  // clang-format on
}

absl::Status LocalPostgres::Launch(bool* address_in_use) {
  *address_in_use = false;
  const std::string log = LogPath();
  const int fd =
      ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: cannot open ", log));
  }
  const off_t log_start = ::lseek(fd, 0, SEEK_END);
  SpawnSpec spec;
  spec.argv = PostgresArgv();
  spec.env = ChildEnv();
  spec.cwd = options_.dir;
  spec.out_fd = fd;
  spec.err_fd = fd;
  spec.death_signal = SIGINT;  // fast shutdown
  absl::StatusOr<pid_t> pid = Spawn(spec, user_);
  ::close(fd);
  RETURN_IF_ERROR(pid.status());
  pid_ = *pid;
  ended_.reset();

  auto failure = [&](absl::StatusCode code, absl::string_view what) {
    return absl::Status(
        code, absl::StrCat("LocalPostgres: postgres ", what, "\n  command: ",
                           Join(spec.argv), "\n  as user: ", user_.name,
                           "\n  log (", log, "), last lines:\n",
                           FileTail(log, log_start, kLogLines)));
  };
  const std::string pid_file = DataDir() + "/postmaster.pid";
  const std::string ping =
      absl::StrCat("host=127.0.0.1 port=", options_.port,
                   " dbname=postgres user=", kSuperuser, " connect_timeout=2");
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  while (true) {
    if (!running()) {
      const std::string how = *ended_;
      const int status = ended_status_;
      pid_ = -1;
      ended_.reset();
      const std::string tail = FileTail(log, log_start, 1000);
      *address_in_use = absl::StrContains(tail, "Address already in use");
      return failure(
          WIFEXITED(status) && WEXITSTATUS(status) == kExitCannotEnter
              ? absl::StatusCode::kFailedPrecondition
              : absl::StatusCode::kInternal,
          absl::StrCat(how, " while starting"));
    }
    if (PidFileSaysReady(pid_file, pid_) && PQping(ping.c_str()) == PQPING_OK) {
      return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      const absl::Status killed = Kill();
      return failure(
          absl::StatusCode::kDeadlineExceeded,
          absl::StrCat(
              "did not accept connections on 127.0.0.1:", options_.port,
              " within ", absl::FormatDuration(options_.start_timeout),
              " (killed", killed.ok() ? "" : ": ", killed.message(), ")"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status LocalPostgres::CreateRoleAndDatabase(
    const std::string& superuser_password) {
  absl::StatusOr<PgConn> conn = Connect({{"host", socket_dir_},
                                         {"port", absl::StrCat(options_.port)},
                                         {"user", kSuperuser},
                                         {"dbname", "postgres"},
                                         {"password", superuser_password},
                                         {"connect_timeout", "10"}});
  if (!conn.ok()) {
    return absl::InternalError(absl::StrCat(
        "LocalPostgres: connecting as the superuser over the socket in ",
        socket_dir_, " to create the role: ", conn.status().message(),
        "\n  server log, last lines:\n", LogTail(kLogLines)));
  }
  PGconn* c = conn->get();
  // The SCRAM verifier, computed here: the password itself never reaches
  // the server (nor its log).
  char* verifier = PQencryptPasswordConn(
      c, password_.c_str(), options_.user.c_str(), "scram-sha-256");
  if (verifier == nullptr) {
    return absl::InternalError(absl::StrCat(
        "LocalPostgres: encrypting the role's password: ", ConnError(c)));
  }
  const std::string literal = QuoteLiteral(c, verifier);
  PQfreemem(verifier);
  const std::string role = QuoteIdent(c, options_.user);
  RETURN_IF_ERROR(Exec(
      c,
      absl::StrCat("CREATE ROLE ", role, " LOGIN CREATEDB PASSWORD ", literal),
      absl::StrCat("creating the role ", options_.user)));
  RETURN_IF_ERROR(
      Exec(c,
           absl::StrCat("CREATE DATABASE ", QuoteIdent(c, options_.database),
                        " OWNER ", role),
           absl::StrCat("creating the database ", options_.database)));
  return absl::OkStatus();
}

absl::Status LocalPostgres::CheckRoleAndDatabase() {
  // What a client does: the role, its password and the database over TCP.
  absl::StatusOr<PgConn> conn = Connect({{"host", "127.0.0.1"},
                                         {"port", absl::StrCat(options_.port)},
                                         {"user", options_.user},
                                         {"dbname", options_.database},
                                         {"password", password_},
                                         {"connect_timeout", "10"}});
  if (!conn.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: the reused cluster in ", options_.dir, " does not let ",
        options_.user, " into ", options_.database, " with the password of ",
        password_file(),
        " (made for other "
        "Options::user or database?): ",
        conn.status().message()));
  }
  return absl::OkStatus();
}

bool LocalPostgres::running() {
  if (pid_ < 0 || ended_) return false;
  int status = 0;
  const pid_t r = WaitPid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) {
    ended_ = DescribeWaitStatus(status);
    ended_status_ = status;
  } else {
    ended_ = "ended (reaped elsewhere)";
    ended_status_ = 0;
  }
  return false;
}

bool LocalPostgres::WaitForExit(absl::Duration limit) {
  const absl::Time until = absl::Now() + limit;
  while (running()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

absl::Status LocalPostgres::Stop() {
  if (pid_ < 0) return absl::OkStatus();
  const pid_t pid = pid_;
  if (!running()) {
    const std::string how = *ended_;
    pid_ = -1;
    ended_.reset();
    return absl::InternalError(
        absl::StrCat("LocalPostgres: postgres (pid ", pid, ") had ", how,
                     " on its own before Stop; ", LogPath(), ", last lines:\n",
                     LogTail(kLogLines)));
  }
  ::kill(pid, SIGINT);  // fast shutdown
  if (WaitForExit(absl::Minutes(1))) {
    const std::string how = *ended_;
    const int status = ended_status_;
    pid_ = -1;
    ended_.reset();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("LocalPostgres: postgres (pid ", pid, ") ", how,
                     " on a fast shutdown; ", LogPath(), ", last lines:\n",
                     LogTail(kLogLines)));
  }
  ::kill(pid, SIGQUIT);  // immediate shutdown
  const bool quit = WaitForExit(absl::Seconds(5));
  RETURN_IF_ERROR(Kill());
  return absl::DeadlineExceededError(
      absl::StrCat("LocalPostgres: postgres (pid ", pid,
                   ") did not finish a fast shutdown within a minute; ",
                   quit ? "it took an immediate shutdown" : "it was killed",
                   "; ", LogPath(), ", last lines:\n", LogTail(kLogLines)));
}

absl::Status LocalPostgres::Kill() {
  if (pid_ < 0) return absl::OkStatus();
  const pid_t pid = pid_;
  if (!running()) {
    // Its children notice the postmaster's death and exit on their own.
    pid_ = -1;
    ended_.reset();
    return absl::OkStatus();
  }
  // Freeze the postmaster so that the list of its children is complete,
  // then kill it first (it would start new ones) and them.
  ::kill(pid, SIGSTOP);
  for (int i = 0; i < 500; ++i) {
    const std::optional<ProcStat> st = ReadProcStat(pid);
    if (!st || st->state == 'T' || st->state == 'Z') break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  const std::vector<ProcId> children = ChildrenOf(pid);
  ::kill(pid, SIGKILL);
  for (const ProcId& c : children) ::kill(c.pid, SIGKILL);
  int status = 0;
  WaitPid(pid, &status, 0);
  pid_ = -1;
  ended_.reset();
  const absl::Time until = absl::Now() + absl::Seconds(10);
  for (const ProcId& c : children) {
    while (!Gone(c)) {
      if (absl::Now() > until) {
        return absl::InternalError(absl::StrCat(
            "LocalPostgres: process ", c.pid, " of the killed postgres (pid ",
            pid, ") is still there after 10 s"));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  return absl::OkStatus();
}

absl::Status LocalPostgres::Restart() {
  if (pid_ >= 0) {
    if (running()) {
      RETURN_IF_ERROR(Stop());
    } else {
      RETURN_IF_ERROR(Kill());  // reaped already: only forgets it
    }
  }
  bool address_in_use = false;
  return Launch(&address_in_use);
}

}  // namespace ldpgraph::store

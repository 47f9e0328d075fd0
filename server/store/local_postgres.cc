#include "server/store/local_postgres.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/hex.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "common/wait_status.h"

namespace ldpgraph::store {
namespace {

namespace fs = std::filesystem;

// The superuser initdb makes (-U), whatever the OS user is.
constexpr char kSuperuser[] = "postgres";
constexpr char kPasswordFile[] = "password";
constexpr char kSuperuserPasswordFile[] = "superuser-password";
constexpr char kServerLog[] = "postgres.log";
constexpr char kInitdbLog[] = "initdb.log";
constexpr char kInstallHint[] =
    "install them: apt-get install postgresql-15 (Debian 12)";
// sun_path holds 108 bytes with the terminating NUL; postgres puts its
// socket at "<dir>/.s.PGSQL.<port>" (up to 15 more bytes).
constexpr size_t kMaxSocketPath = 107;
constexpr size_t kSocketNameRoom = sizeof("/.s.PGSQL.65535") - 1;
constexpr int kPortAttempts = 5;
constexpr int kLogLines = 20;

// Exit statuses of a child that failed before exec.
constexpr int kExitCannotEnter = 125;
constexpr int kExitCannotDrop = 126;
constexpr int kExitCannotExec = 127;

using internal::ProcessUser;

struct PgConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgConn = std::unique_ptr<PGconn, PgConnDeleter>;
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

std::string Join(const std::vector<std::string>& argv) {
  return absl::StrJoin(argv, " ");
}

// The last `lines` lines of path from byte `offset` on, each as
// "  | line\n"; a note when there are none.
std::string FileTail(const std::string& path, off_t offset, int lines) {
  std::ifstream f(path);
  if (!f) return absl::StrCat("  (cannot read ", path, ")\n");
  f.seekg(offset);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(f, line)) {
    tail.push_back(std::move(line));
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  if (tail.empty()) return "  (empty)\n";
  std::string out;
  for (const std::string& l : tail) absl::StrAppend(&out, "  | ", l, "\n");
  return out;
}

bool IsExecutable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

bool HasServerBinaries(const std::string& dir) {
  return !dir.empty() && IsExecutable(dir + "/initdb") &&
         IsExecutable(dir + "/postgres");
}

bool IsPlainIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  if (!(absl::ascii_islower(s[0]) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
  });
}

// Writes "<n>" in decimal with write(2) alone (async-signal-safe).
void WriteNumber(int fd, long n) {
  char buf[24];
  int i = sizeof(buf);
  const bool negative = n < 0;
  unsigned long u = negative ? -static_cast<unsigned long>(n) : n;
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0 && i > 1);
  if (negative) buf[--i] = '-';
  [[maybe_unused]] ssize_t w = ::write(fd, buf + i, sizeof(buf) - i);
}

void WriteString(int fd, const std::string& s) {
  [[maybe_unused]] ssize_t w = ::write(fd, s.data(), s.size());
}

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
absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec, const ProcessUser& user) {
  // Everything the child needs is made here: after fork only
  // async-signal-safe calls.
  std::vector<std::string> argv = spec.argv;
  std::vector<std::string> env = spec.env;
  std::vector<char*> cargv, cenv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (std::string& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  const std::string enter_msg = absl::StrCat(
      "LocalPostgres: cannot enter ", spec.cwd, " as user ", user.name,
      " (every parent folder must be searchable by it); errno ");
  const std::string drop_msg =
      absl::StrCat("LocalPostgres: cannot switch to user ", user.name, " (uid ",
                   user.uid, ", gid ", user.gid, "); errno ");
  const std::string exec_msg =
      absl::StrCat("LocalPostgres: cannot execute ", argv[0], "; errno ");
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    return absl::ErrnoToStatus(errno, "LocalPostgres: cannot open /dev/null");
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(null_fd);
    return absl::ErrnoToStatus(
        err, absl::StrCat("LocalPostgres: fork for ", argv[0]));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) {
      ::signal(sig, SIG_DFL);
    }
    ::dup2(null_fd, 0);
    ::dup2(spec.out_fd, 1);
    ::dup2(spec.err_fd, 2);
    if (user.drop) {
      if (::setgroups(user.groups.size(), user.groups.data()) != 0 ||
          ::setgid(user.gid) != 0 || ::setuid(user.uid) != 0) {
        const int err = errno;
        WriteString(2, drop_msg);
        WriteNumber(2, err);
        WriteString(2, "\n");
        ::_exit(kExitCannotDrop);
      }
    }
    // After the credential change, which clears it.
    ::prctl(PR_SET_PDEATHSIG, spec.death_signal);
    if (::getppid() != parent) ::_exit(kExitCannotExec);  // parent gone
    if (::chdir(spec.cwd.c_str()) != 0) {
      const int err = errno;
      WriteString(2, enter_msg);
      WriteNumber(2, err);
      WriteString(2, "\n");
      ::_exit(kExitCannotEnter);
    }
    if (::close_range(3, ~0U, 0) != 0) {
      rlimit lim{};
      const long max_fd =
          ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 65536
              ? static_cast<long>(lim.rlim_cur)
              : 65536;
      for (long fd = 3; fd < max_fd; ++fd) ::close(static_cast<int>(fd));
    }
    ::execve(cargv[0], cargv.data(), cenv.data());
    const int err = errno;
    WriteString(2, exec_msg);
    WriteNumber(2, err);
    WriteString(2, "\n");
    ::_exit(kExitCannotExec);
  }
  ::close(null_fd);
  ::setpgid(pid, pid);  // also from here: no race with the child's own
  return pid;
}

// waitpid without EINTR.
pid_t WaitPid(pid_t pid, int* status, int flags) {
  pid_t r;
  do {
    r = ::waitpid(pid, status, flags);
  } while (r < 0 && errno == EINTR);
  return r;
}

// Runs a command to its end; its status.
absl::StatusOr<int> RunToEnd(const SpawnSpec& spec, const ProcessUser& user) {
  ASSIGN_OR_RETURN(const pid_t pid, Spawn(spec, user));
  int status = 0;
  if (WaitPid(pid, &status, 0) < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: waiting for ", spec.argv[0]));
  }
  return status;
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

// `pg_config --bindir`'s output, or "" (with why in *note).
std::string PgConfigBinDir(std::string* note) {
  const std::string pg_config = FindOnPath("pg_config");
  if (pg_config.empty()) {
    *note = "no pg_config on PATH";
    return "";
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *note = absl::StrCat("pipe for ", pg_config, ": ", std::strerror(errno));
    return "";
  }
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  SpawnSpec spec;
  spec.argv = {pg_config, "--bindir"};
  spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  spec.cwd.assign(1, '/');
  spec.out_fd = fds[1];
  spec.err_fd = null_fd >= 0 ? null_fd : fds[1];
  absl::StatusOr<pid_t> pid = Spawn(spec, ProcessUser{});
  ::close(fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  std::string out;
  if (pid.ok()) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof(buf))) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      out.append(buf, n);
    }
  }
  ::close(fds[0]);
  if (!pid.ok()) {
    *note = std::string(pid.status().message());
    return "";
  }
  int status = 0;
  WaitPid(*pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *note = absl::StrCat(pg_config, " --bindir ", DescribeWaitStatus(status));
    return "";
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

absl::StatusOr<std::string> FindBinDir(const std::string& configured) {
  if (!configured.empty()) {
    if (HasServerBinaries(configured)) return configured;
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: Options::bin_dir ", configured,
        " holds no PostgreSQL server binaries (initdb and postgres); ",
        kInstallHint));
  }
  std::vector<std::string> tried;
  std::string note;
  const std::string from_pg_config = PgConfigBinDir(&note);
  if (HasServerBinaries(from_pg_config)) return from_pg_config;
  tried.push_back(from_pg_config.empty()
                      ? note
                      : absl::StrCat("pg_config --bindir is ", from_pg_config,
                                     ", which has no initdb and postgres"));
  // Debian's layout: /usr/lib/postgresql/<major>/bin, the highest first.
  std::vector<std::pair<int, std::string>> versions;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int major = 0;
    if (absl::SimpleAtoi(entry.path().filename().string(), &major)) {
      versions.emplace_back(major, (entry.path() / "bin").string());
    }
  }
  std::sort(versions.rbegin(), versions.rend());
  for (const auto& [major, bin] : versions) {
    if (HasServerBinaries(bin)) return bin;
  }
  tried.push_back(versions.empty()
                      ? "no /usr/lib/postgresql/<major>/bin"
                      : "no /usr/lib/postgresql/<major>/bin holds initdb and "
                        "postgres");
  return absl::FailedPreconditionError(absl::StrCat(
      "LocalPostgres: no PostgreSQL server binaries (initdb and postgres) "
      "found (",
      absl::StrJoin(tried, "; "), "); ", kInstallHint));
}

// The first folder on the way to path (path included) that `user` may not
// search by its mode bits, as "<folder> (mode 0700, owner uid 0)"; "" if
// none (ACLs aside).
std::string FirstUnsearchable(const std::string& path,
                              const ProcessUser& user) {
  fs::path so_far = "/";
  for (const fs::path& part : fs::path(path).relative_path()) {
    so_far /= part;
    struct stat st;
    if (::stat(so_far.c_str(), &st) != 0) break;
    mode_t bit = S_IXOTH;
    if (st.st_uid == user.uid) {
      bit = S_IXUSR;
    } else if (st.st_gid == user.gid ||
               std::find(user.groups.begin(), user.groups.end(), st.st_gid) !=
                   user.groups.end()) {
      bit = S_IXGRP;
    }
    if ((st.st_mode & bit) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
      return absl::StrCat(so_far.string(), " (mode ", mode, ", owner uid ",
                          st.st_uid, ")");
    }
  }
  return "";
}

absl::StatusOr<ProcessUser> ChooseUser() {
  ProcessUser user;
  if (::geteuid() != 0) {
    user.uid = ::geteuid();
    user.gid = ::getegid();
    const passwd* pw = ::getpwuid(user.uid);
    user.name = pw != nullptr ? pw->pw_name : absl::StrCat("uid ", user.uid);
    return user;
  }
  // initdb and postgres refuse root: run them as a system user.
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) pw = ::getpwnam("nobody");
  if (pw == nullptr) {
    return absl::FailedPreconditionError(
        "LocalPostgres: running as root, and there is neither a `postgres` "
        "nor a `nobody` user to run PostgreSQL as (initdb and postgres refuse "
        "root); apt-get install postgresql-15 creates `postgres`");
  }
  user.drop = true;
  user.uid = pw->pw_uid;
  user.gid = pw->pw_gid;
  user.name = pw->pw_name;
  int n = 16;
  user.groups.resize(n);
  while (::getgrouplist(user.name.c_str(), user.gid, user.groups.data(), &n) <
         0) {
    user.groups.resize(n);
  }
  user.groups.resize(n);
  return user;
}

// Creates (or replaces) path with contents, mode 0600, through a temporary
// file renamed into place; owned by uid/gid when chown is true.
absl::Status WriteSecretFile(const std::string& path,
                             const std::string& contents, bool chown, uid_t uid,
                             gid_t gid) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: cannot create ", tmp));
  }
  int err = 0;
  if (::fchmod(fd, 0600) != 0) err = errno;
  if (err == 0 && chown && ::fchown(fd, uid, gid) != 0) err = errno;
  size_t done = 0;
  while (err == 0 && done < contents.size()) {
    const ssize_t n =
        ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    done += n;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return absl::ErrnoToStatus(
        err, absl::StrCat("LocalPostgres: cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::string pw(absl::StripAsciiWhitespace(text));
  if (pw.size() != 32 || !FromHex(pw).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: ", path,
        " does not hold a password of 32 hex characters (not a folder of "
        "LocalPostgres, or damaged)"));
  }
  return pw;
}

absl::StatusOr<std::string> NewPassword() {
  ASSIGN_OR_RETURN(const std::string bytes, SecureRandomBytes(16));
  return ToHex(bytes);
}

// A free TCP port on 127.0.0.1: bound with port 0, read and closed.
absl::StatusOr<int> PickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, "LocalPostgres: socket for a free port");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err,
                               "LocalPostgres: binding 127.0.0.1:0 for a port");
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

// Whether data/postmaster.pid says the postmaster `pid` is ready (line 1
// its pid, line 8 its status).
bool PidFileSaysReady(const std::string& pid_file, pid_t pid) {
  std::ifstream f(pid_file);
  std::string line;
  for (int i = 1; std::getline(f, line); ++i) {
    if (i == 1) {
      int p = 0;
      if (!absl::SimpleAtoi(line, &p) || p != pid) return false;
    }
    if (i == 8) return absl::StartsWith(line, "ready");
  }
  return false;
}

// A process as /proc/<pid>/stat has it: parent, state, start time.
struct ProcStat {
  pid_t ppid = 0;
  char state = '?';
  unsigned long long start_time = 0;
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(f)),
                   std::istreambuf_iterator<char>());
  // "pid (comm) state ppid ..." where comm may hold anything: read after
  // the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 1));
  ProcStat st;
  std::string skip;
  rest >> st.state >> st.ppid;
  // Fields 5..21, then the start time (field 22).
  for (int field = 5; field <= 21; ++field) rest >> skip;
  rest >> st.start_time;
  if (!rest) return std::nullopt;
  return st;
}

struct ProcId {
  pid_t pid;
  unsigned long long start_time;
};

std::vector<ProcId> ChildrenOf(pid_t parent) {
  std::vector<ProcId> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::optional<ProcStat> st = ReadProcStat(pid);
    if (st && st->ppid == parent) out.push_back({pid, st->start_time});
  }
  ::closedir(d);
  return out;
}

// Gone: no such process, a zombie (its resources are released) or another
// process under the same pid.
bool Gone(const ProcId& p) {
  const std::optional<ProcStat> st = ReadProcStat(p.pid);
  return !st || st->state == 'Z' || st->state == 'X' ||
         st->start_time != p.start_time;
}

std::string ConnError(PGconn* c) {
  return c == nullptr
             ? "out of memory"
             : std::string(absl::StripAsciiWhitespace(PQerrorMessage(c)));
}

absl::StatusOr<PgConn> Connect(
    const std::vector<std::pair<std::string, std::string>>& params) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : params) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PgConn c(PQconnectdbParams(keys.data(), values.data(), 0));
  if (c == nullptr || PQstatus(c.get()) != CONNECTION_OK) {
    return absl::InternalError(ConnError(c.get()));
  }
  return c;
}

absl::Status Exec(PGconn* c, const std::string& sql, const std::string& what) {
  PgResult r(PQexec(c, sql.c_str()));
  if (r == nullptr || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    return absl::InternalError(
        absl::StrCat("LocalPostgres: ", what, ": ", ConnError(c)));
  }
  return absl::OkStatus();
}

std::string QuoteIdent(PGconn* c, const std::string& s) {
  char* q = PQescapeIdentifier(c, s.c_str(), s.size());
  std::string out = q != nullptr ? q : "";
  PQfreemem(q);
  return out;
}

std::string QuoteLiteral(PGconn* c, const std::string& s) {
  char* q = PQescapeLiteral(c, s.c_str(), s.size());
  std::string out = q != nullptr ? q : "";
  PQfreemem(q);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalPostgres>> LocalPostgres::Start(
    Options options) {
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

  std::unique_ptr<LocalPostgres> pg(new LocalPostgres(std::move(options)));
  const Options& o = pg->options_;
  ASSIGN_OR_RETURN(pg->bin_dir_, FindBinDir(o.bin_dir));
  ASSIGN_OR_RETURN(pg->user_, ChooseUser());
  const ProcessUser& user = pg->user_;

  RETURN_IF_ERROR(MakeDirs(o.dir, 0700));
  if (user.drop && ::chown(o.dir.c_str(), user.uid, user.gid) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: cannot give ", o.dir, " to user ",
                            user.name));
  }

  // A new cluster, or the one an earlier Start made?
  const std::string data = pg->DataDir();
  bool fresh = true;
  if (fs::exists(data, ec)) {
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
    } else if (!fs::exists(pg->password_file(), ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "LocalPostgres: ", data,
          " holds a cluster that LocalPostgres did not finish making (no ",
          pg->password_file(), "); remove ", o.dir,
          " or choose another Options::dir"));
    } else if (!o.reuse) {
      return absl::FailedPreconditionError(absl::StrCat(
          "LocalPostgres: ", o.dir,
          " already holds a cluster made by an earlier Start; set "
          "Options::reuse to start it as it is, or remove the folder for a "
          "new one"));
    } else {
      fresh = false;
    }
  }

  // The socket's folder: dir itself when "<dir>/.s.PGSQL.<port>" fits in
  // sun_path and dir is a single item of the comma-separated setting.
  const bool dir_fits = o.dir.size() + kSocketNameRoom <= kMaxSocketPath &&
                        o.dir.find_first_of(",\"'\\ \t") == std::string::npos;
  if (dir_fits) {
    pg->socket_dir_ = o.dir;
  } else {
    char tmpl[] = "/tmp/ldpgraph-pg-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      return absl::ErrnoToStatus(
          errno,
          "LocalPostgres: cannot make a socket folder /tmp/ldpgraph-pg-*");
    }
    pg->socket_dir_ = tmpl;
    pg->own_socket_dir_ = true;
    if (user.drop && ::chown(tmpl, user.uid, user.gid) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("LocalPostgres: cannot give ", tmpl, " to user ",
                              user.name));
    }
  }

  std::string superuser_password;
  if (fresh) {
    ASSIGN_OR_RETURN(pg->password_, NewPassword());
    ASSIGN_OR_RETURN(superuser_password, NewPassword());
    RETURN_IF_ERROR(WriteSecretFile(pg->superuser_password_file(),
                                    superuser_password + "\n", user.drop,
                                    user.uid, user.gid));
    RETURN_IF_ERROR(pg->RunInitdb());
  } else {
    ASSIGN_OR_RETURN(pg->password_, ReadPassword(pg->password_file()));
  }

  // Start; with a port of our choosing, choose again if another process
  // took it before the server bound it.
  const bool pick = o.port == 0;
  for (int attempt = 1;; ++attempt) {
    if (pick) {
      ASSIGN_OR_RETURN(pg->options_.port, PickFreePort());
    }
    bool address_in_use = false;
    absl::Status s = pg->Launch(&address_in_use);
    if (s.ok()) break;
    if (!pick || !address_in_use || attempt == kPortAttempts) return s;
  }

  absl::Status made = fresh ? pg->CreateRoleAndDatabase(superuser_password)
                            : pg->CheckRoleAndDatabase();
  if (!made.ok()) {
    pg->Stop().IgnoreError();
    return made;
  }
  if (fresh) {
    // Last: the password file marks a cluster that is complete.
    absl::Status s =
        WriteSecretFile(pg->password_file(), pg->password_ + "\n", false, 0, 0);
    if (!s.ok()) {
      pg->Stop().IgnoreError();
      return s;
    }
  }
  return pg;
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

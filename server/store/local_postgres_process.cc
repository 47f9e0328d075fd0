// LocalPostgres's children (server/store/local_postgres.h: "Children"):
// spawning as the run-as user, waiting, what /proc says of a process, the
// server's readiness, and a free port.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net/free_port.h"
#include "common/status_macros.h"
#include "server/store/internal/local_postgres_parts.h"

namespace ldpgraph::store::internal {
namespace {

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

}  // namespace

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

absl::StatusOr<int> PickFreePort() {
  absl::StatusOr<int> port = net::FreeLoopbackPort();
  if (!port.ok()) {
    return absl::Status(port.status().code(),
                        absl::StrCat("LocalPostgres: ", port.status().message()));
  }
  return port;
}

}  // namespace ldpgraph::store::internal

#include "server/ldpctl/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/wait_status.h"

namespace ldpgraph::ldpctl {
namespace {

sigset_t SupervisedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

std::atomic<int> g_signal{0};
std::mutex g_mu;
std::map<int, std::function<void()>>* g_cancellers = nullptr;  // under g_mu
int g_next_id = 0;

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    std::string name, std::vector<std::string> argv, std::string log_path) {
  if (argv.empty()) {
    return absl::InvalidArgumentError("ChildProcess: empty argv");
  }
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(
        argv[0], " is not an executable file (", std::strerror(errno),
        "); build it, or point --bin-dir at the build directory"));
  }
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) {
    return absl::InternalError(
        absl::StrCat("cannot open log ", log_path, ": ", std::strerror(errno)));
  }
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(log);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(e)));
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the supervisor died already
    setpgid(0, 0);
    const sigset_t set = SupervisedSignals();
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(log);
  setpgid(pid, pid);  // also from the parent: no race with the child's
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess());
  child->name_ = std::move(name);
  child->log_path_ = std::move(log_path);
  child->pid_ = pid;
  return child;
}

ChildProcess::~ChildProcess() { Stop(absl::Seconds(5)); }

std::optional<std::string> ChildProcess::Exited() {
  if (ended_) return ended_;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    ended_ = DescribeWaitStatus(status);
  } else if (r < 0 && errno == ECHILD) {
    ended_ = "ended (already reaped)";
  }
  return ended_;
}

void ChildProcess::Terminate() {
  if (!Exited()) kill(pid_, SIGTERM);
}

std::string ChildProcess::Stop(absl::Duration grace) {
  if (Exited()) return *ended_;
  kill(pid_, SIGTERM);
  const absl::Time until = absl::Now() + grace;
  while (absl::Now() < until) {
    if (Exited()) return *ended_;
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  ended_ = DescribeWaitStatus(status) + " after " + absl::FormatDuration(grace) +
           " without exiting on SIGTERM";
  return *ended_;
}

std::string ChildProcess::Kill() {
  if (Exited()) return *ended_;
  kill(pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  ended_ = DescribeWaitStatus(status);
  return *ended_;
}

uint64_t ChildProcess::PeakRssBytes() const {
  if (ended_) return 0;
  std::ifstream f(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    uint64_t kb = 0;
    if (std::sscanf(line.c_str(), "VmHWM: %lu kB", &kb) == 1) return kb * 1024;
  }
  return 0;
}

uint64_t SelfPeakRssBytes() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;  // kB on Linux
}

std::string ChildProcess::LogTail(int lines) const {
  std::ifstream f(log_path_);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(f, line)) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const std::string& l : tail) absl::StrAppend(&out, "  | ", l, "\n");
  return out;
}

void Interrupts::Install() {
  static std::once_flag once;
  std::call_once(once, [] {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_cancellers = new std::map<int, std::function<void()>>();
    }
    sigset_t set = SupervisedSignals();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread([set] {
      while (true) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        int expected = 0;
        g_signal.compare_exchange_strong(expected, sig);
        std::lock_guard<std::mutex> lock(g_mu);
        for (auto& [id, cancel] : *g_cancellers) cancel();
      }
    }).detach();
  });
}

bool Interrupts::interrupted() { return g_signal.load() != 0; }
int Interrupts::signal() { return g_signal.load(); }

Interrupts::Guard::Guard(std::function<void()> cancel) {
  std::lock_guard<std::mutex> lock(g_mu);
  id_ = g_next_id++;
  if (g_signal.load() != 0) cancel();
  if (g_cancellers != nullptr) g_cancellers->emplace(id_, std::move(cancel));
}

Interrupts::Guard::~Guard() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_cancellers != nullptr) g_cancellers->erase(id_);
}

}  // namespace ldpgraph::ldpctl

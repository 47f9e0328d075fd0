// Child processes and interrupts for `ldpctl simulate`, which runs a curator
// and its agent hosts as real processes and must leave none behind: not on
// success, not on failure, not on Ctrl-C, and not when ldpctl itself is
// killed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ldpgraph::ldpctl {

// One supervised child. The child runs in a process group of its own (so a
// terminal's Ctrl-C reaches ldpctl alone, which then stops its children in
// order), with stdin from /dev/null and stdout and stderr appended to a log
// file, and receives SIGTERM if ldpctl's main thread dies first
// (PR_SET_PDEATHSIG), so that even a SIGKILL of ldpctl leaves nothing
// running for long.
class ChildProcess {
 public:
  // Starts argv[0] (a path) with argv. INVALID_ARGUMENT for an empty argv,
  // NOT_FOUND if argv[0] is not an executable file, INTERNAL if the log
  // cannot be opened or fork fails.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      std::string name, std::vector<std::string> argv, std::string log_path);
  // Stop(absl::Seconds(5)).
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Without blocking: if the child has exited, how ("exited with status 1",
  // "killed by signal 9"); nullopt while it runs.
  std::optional<std::string> Exited();
  // Sends SIGTERM without waiting (Stop then waits); a no-op once it ended.
  void Terminate();
  // SIGTERM, up to `grace` for it to exit, then SIGKILL; reaps the child.
  // Returns how it ended. Idempotent.
  std::string Stop(absl::Duration grace);
  // SIGKILL at once (a crash, for churn scenarios) and reaps the child.
  // Returns how it ended. Idempotent.
  std::string Kill();

  const std::string& name() const { return name_; }
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return pid_; }
  // The child's peak resident memory so far (VmHWM), bytes; 0 once it has
  // exited or if unknown.
  uint64_t PeakRssBytes() const;
  // The last `lines` lines of the log ("" if unreadable).
  std::string LogTail(int lines) const;

 private:
  ChildProcess() = default;
  std::string name_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<std::string> ended_;
};

// This process's own peak resident memory (getrusage RUSAGE_SELF), bytes;
// 0 if unknown.
uint64_t SelfPeakRssBytes();

// Ctrl-C, SIGTERM and SIGHUP for a supervisor. Install() blocks the three
// signals in the calling thread (call it first, before any thread starts,
// so every thread inherits the mask) and starts a thread that waits for
// them: the first sets interrupted() and runs every registered canceller;
// ChildProcess::Start unblocks them in the child. Idempotent.
class Interrupts {
 public:
  static void Install();
  static bool interrupted();
  // The signal received, 0 if none.
  static int signal();
  // Runs `cancel` on interrupt while the returned guard lives (for example
  // a grpc::ClientContext's TryCancel); at once if already interrupted.
  class Guard {
   public:
    explicit Guard(std::function<void()> cancel);
    ~Guard();
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    int id_;
  };
};

}  // namespace ldpgraph::ldpctl

// Helpers shared by the integration tests: dev TLS material from
// deploy/dev-certs.sh, the shared datasets, free loopback ports, child
// processes, and polling with a deadline (never a fixed sleep as an
// assertion). A test whose dataset is absent says so with
// LDPGRAPH_SKIP_OR_FAIL_IN_CI() (common/testing/missing_input.h): a skip,
// or a failure under CI=true.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/testing/missing_input.h"

namespace ldpgraph::integration {

// The datasets folder: $LDPGRAPH_DATASETS if set, else LDPGRAPH_DATASETS_DIR.
std::string DatasetsDir();
// A prepared copy of DatasetsDir()/cora (PrepareDataset: its central
// feature schema and the device index) if that holds a dataset; otherwise a
// generated dataset of cora's shape (2708 nodes, 7 classes, 1433 features),
// written once per process under the test temp dir; empty only if that
// fails.
std::string CoraDir();

// A fresh, empty directory under ::testing::TempDir(), unique per process
// and call: <TempDir>/ldpgraph-it-<pid>-<n>-<name>.
std::string NewTempDir(const std::string& name);

// Removes a directory made by NewTempDir, with everything in it.
void RemoveTempDir(const std::string& dir);

absl::StatusOr<std::string> ReadFile(const std::string& path);

// The files deploy/dev-certs.sh writes, read back.
struct DevCerts {
  std::string dir;
  std::string ca_pem, cert_pem, key_pem;
  // Raw bytes of admin.token and node.key, and the admin token as the
  // curator compares it (lower-case hex, what "Bearer" carries).
  std::string admin_raw, admin_hex, node_key;
};
// Runs <source>/deploy/dev-certs.sh into dir and reads the material back.
absl::StatusOr<DevCerts> MakeDevCerts(const std::string& dir);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0):
// common/net/free_port.h's FreeLoopbackPort, which LocalPostgres uses too.
absl::StatusOr<int> FreePort();

// TLS channel to 127.0.0.1:port trusting ca_pem.
std::shared_ptr<grpc::Channel> TlsChannel(int port, const std::string& ca_pem);

// Calls fn until it returns true or the timeout passes, sleeping `every`
// between calls. Returns whether fn returned true.
bool PollUntil(const std::function<bool()>& fn, absl::Duration timeout,
               absl::Duration every = absl::Milliseconds(50));

// A child process: fork/exec with stdout and stderr appended to log. The
// child dies with its parent (PR_SET_PDEATHSIG).
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills (SIGKILL) and reaps a child that is still running.
  ~ChildProcess() { Kill(); }

  absl::Status Start(const std::vector<std::string>& argv,
                     const std::string& log_path);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_; }
  // SIGKILL and waitpid; no-op if not running.
  void Kill();
  // Sends sig without waiting (SIGSTOP, SIGCONT, ...); false if not running.
  bool Send(int sig);
  // Sends sig and waits up to timeout for the exit; returns the wait status,
  // or DEADLINE_EXCEEDED (after which the child is SIGKILLed and reaped).
  absl::StatusOr<int> Signal(int sig, absl::Duration timeout);
  // Waits up to timeout for the child to exit by itself.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // Whether the child has exited (reaps it if so).
  bool Exited(int* status = nullptr);
  // The last bytes of the log, for failure messages.
  std::string LogTail(size_t bytes = 4000) const;

 private:
  pid_t pid_ = -1;
  std::string log_;
};

// Runs argv to completion (up to timeout); returns the exit code and
// stdout (stderr goes to log_path).
struct CommandResult {
  int exit_code = -1;  // -1: ended by a signal (err then ends saying which)
  std::string out;
  std::string err;
};
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& scratch_dir,
                                         absl::Duration timeout);

}  // namespace ldpgraph::integration

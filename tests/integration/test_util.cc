#include "tests/integration/test_util.h"

#include <iostream>

#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/dataset/prepare.h"
#include "common/cli_args.h"
#include "common/net/free_port.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/testing/generated_datasets.h"
#include "common/testing/shared_datasets.h"
#include "gtest/gtest.h"
#include "server/curator/credentials.h"

namespace ldpgraph::integration {

namespace fs = std::filesystem;

std::string DatasetsDir() { return SharedDatasetsDir(); }

std::string CoraDir() {
  // Removed when the test process exits.
  struct Generated {
    std::string dir;
    ~Generated() { RemoveTempDir(dir); }
  };
  static const Generated generated{[]() -> std::string {
    const std::string cora = DatasetsDir() + "/cora";
    if (fs::exists(cora + "/meta.json")) {
      // Agents need the public schema and the device index:
      // `ldpgraph prepare --out`, once per process.
      const std::string dir = NewTempDir("cora-prepared");
      if (!PrepareDataset(cora, dir).ok()) return std::string();
      return dir;
    }
    // No shared datasets (a fresh CI machine): a generated dataset of cora's
    // shape (2708 nodes, 7 classes, 1433 features), so that the deployment
    // is still tested end to end.
    const GeneratorOptions o = testing_datasets::CoraShapedOptions();
    auto d = GenerateDataset(o);
    if (!d.ok()) return std::string();
    const std::string dir = NewTempDir("cora-shaped");
    if (!WriteDataset(*d, dir).ok()) return std::string();
    std::cerr << "[integration] no cora under " << DatasetsDir()
              << ": using a generated dataset of its shape in " << dir << "\n";
    return dir;
  }()};
  return generated.dir;
}

std::string NewTempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string base = ::testing::TempDir();
  if (!base.empty() && base.back() == '/') base.pop_back();
  const std::string dir = absl::StrCat(base, "/ldpgraph-it-", ::getpid(), "-",
                                       counter.fetch_add(1), "-", name);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  return dir;
}

void RemoveTempDir(const std::string& dir) {
  if (dir.find("/ldpgraph-it-") == std::string::npos) return;  // not ours
  std::error_code ec;
  fs::remove_all(dir, ec);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  return ReadFileToString(path);
}

absl::StatusOr<DevCerts> MakeDevCerts(const std::string& dir) {
  const std::string script =
      std::string(LDPGRAPH_SOURCE_DIR) + "/deploy/dev-certs.sh";
  std::error_code ec;
  fs::create_directories(dir, ec);
  ASSIGN_OR_RETURN(CommandResult r,
                   RunCommand({"/bin/bash", script, dir}, dir,
                              absl::Seconds(120)));
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat(script, " ", dir, " exited with ",
                                            r.exit_code, ": ", r.err));
  }
  DevCerts c;
  c.dir = dir;
  ASSIGN_OR_RETURN(c.ca_pem, ReadFile(dir + "/ca.pem"));
  ASSIGN_OR_RETURN(c.cert_pem, ReadFile(dir + "/curator.pem"));
  ASSIGN_OR_RETURN(c.key_pem, ReadFile(dir + "/curator.key"));
  ASSIGN_OR_RETURN(c.admin_raw,
                   curator::ReadHexSecretFile(dir + "/admin.token"));
  c.admin_hex = curator::ToHex(c.admin_raw);
  ASSIGN_OR_RETURN(c.node_key, curator::ReadHexSecretFile(dir + "/node.key"));
  return c;
}

absl::StatusOr<int> FreePort() { return net::FreeLoopbackPort(); }

std::shared_ptr<grpc::Channel> TlsChannel(int port, const std::string& ca_pem) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  // Reconnect quickly after a curator restart.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::SslCredentials(ssl), args);
}

bool PollUntil(const std::function<bool()>& fn, absl::Duration timeout,
               absl::Duration every) {
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    if (fn()) return true;
    if (absl::Now() >= until) return false;
    absl::SleepFor(every);
  }
}

namespace {

// fork + exec with stdout to out_path and stderr to err_path (appended).
// Everything the child needs is prepared before fork: only
// async-signal-safe calls run between fork and exec.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv,
                            const std::string& out_path,
                            const std::string& err_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out < 0 || err < 0) ::_exit(126);
    ::dup2(out, 1);
    ::dup2(err, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

absl::StatusOr<int> WaitPid(pid_t pid, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) {
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (absl::Now() >= until) {
      return absl::DeadlineExceededError(
          absl::StrCat("process ", pid, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

absl::Status ChildProcess::Start(const std::vector<std::string>& argv,
                                 const std::string& log_path) {
  Kill();
  log_ = log_path;
  {
    std::ofstream(log_path, std::ios::app)
        << "=== start:" << [&] {
             std::string s;
             for (const auto& a : argv) absl::StrAppend(&s, " ", a);
             return s;
           }() << "\n";
  }
  ASSIGN_OR_RETURN(pid_, Spawn(argv, log_path, log_path));
  return absl::OkStatus();
}

void ChildProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

bool ChildProcess::Send(int sig) {
  return pid_ > 0 && ::kill(pid_, sig) == 0;
}

absl::StatusOr<int> ChildProcess::Signal(int sig, absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  ::kill(pid_, sig);
  absl::StatusOr<int> status = WaitPid(pid_, timeout);
  if (!status.ok()) {
    Kill();
    return status.status();
  }
  pid_ = -1;
  return status;
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  ASSIGN_OR_RETURN(int status, WaitPid(pid_, timeout));
  pid_ = -1;
  return status;
}

bool ChildProcess::Exited(int* status) {
  if (pid_ <= 0) return true;
  int s = 0;
  if (::waitpid(pid_, &s, WNOHANG) == pid_) {
    pid_ = -1;
    if (status != nullptr) *status = s;
    return true;
  }
  return false;
}

std::string ChildProcess::LogTail(size_t bytes) const {
  absl::StatusOr<std::string> text = ReadFile(log_);
  if (!text.ok()) return "(no log)";
  return text->size() <= bytes ? *text : text->substr(text->size() - bytes);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& scratch_dir,
                                         absl::Duration timeout) {
  static std::atomic<int> counter{0};
  const std::string stem =
      absl::StrCat(scratch_dir, "/cmd-", ::getpid(), "-", counter.fetch_add(1));
  const std::string out_path = stem + ".out", err_path = stem + ".err";
  ASSIGN_OR_RETURN(pid_t pid, Spawn(argv, out_path, err_path));
  absl::StatusOr<int> status = WaitPid(pid, timeout);
  if (!status.ok()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return status.status();
  }
  CommandResult r;
  r.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  r.out = ReadFile(out_path).value_or("");
  r.err = ReadFile(err_path).value_or("");
  if (WIFSIGNALED(*status)) {
    const int sig = WTERMSIG(*status);
    absl::StrAppend(&r.err, "\n[", argv.front(), " ended by signal ", sig,
                    " (", ::strsignal(sig), ")",
                    WCOREDUMP(*status) ? ", core dumped" : "", "]\n");
  }
  std::error_code ec;
  fs::remove(out_path, ec);
  fs::remove(err_path, ec);
  return r;
}

}  // namespace ldpgraph::integration

// What the load tools (fleet_load and its check-in mode, restart_bench)
// share: processes and what /proc says of them, the program search, the
// curator's ready file and extra flags, integer flags in a range, latency
// percentiles, channels with the run's security, and the simulated agents'
// reports. Benchmark code, not a library of the system.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/random/random.h"
#include "ldpgraph/v1/agent.pb.h"

namespace ldpgraph::bench {

using Clock = std::chrono::steady_clock;

// Seconds on the monotonic clock, comparable across processes of the machine
// (steady_clock is CLOCK_MONOTONIC).
double MonoSeconds();

// Set by OnInterrupt (install it for SIGINT and SIGTERM).
extern volatile std::sig_atomic_t g_interrupted;
void OnInterrupt(int);

// s on one line (tabs and line breaks as spaces), cut after max characters.
std::string OneLine(std::string s, size_t max = 300);
// "CODE_NAME: message".
std::string GrpcError(const grpc::Status& s);

// What /proc says about a process.
struct ProcStats {
  bool ok = false;
  double cpu_seconds = 0;  // utime + stime
  long rss_kib = 0;        // VmRSS
  long hwm_kib = 0;        // VmHWM: peak RSS
  // From smaps_rollup: the process's proportional share of its pages (a
  // page shared by k processes counts 1/k: what a fleet of them really
  // costs), and its private pages.
  long pss_kib = 0;
  long private_kib = 0;
  int threads = 0;
};
ProcStats ReadProc(pid_t pid);
// Open sockets of a process (its /proc/<pid>/fd entries that are sockets).
int CountSockets(pid_t pid);
double Mib(long kib);

// A child process running argv, stdout and stderr appended to log; it dies
// with this process (PR_SET_PDEATHSIG) and inherits no descriptor but 0-2.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log,
            int nice = 0);
// Whether pid has exited (reaped if so), with how.
std::optional<std::string> ExitedHow(pid_t pid);
// SIGTERM, up to grace for the exit, then SIGKILL; reaps.
void StopProcess(pid_t pid, double grace_seconds);
std::string LogTail(const std::string& path, size_t bytes = 2000);
// A file's whole text; "" if it cannot be read.
std::string ReadFileOr(const std::string& path);
// The gRPC port that a curator's --ready-file at path names ("grpc_port");
// nullopt while it names none (not written yet, or not whole).
std::optional<int> ReadyFilePort(const std::string& path);
// Appends extra (a run's --curator-args) to a curator's argv. When extra
// gives --http (to scrape /metrics), it replaces the "--http VALUE" pair
// that argv must hold.
void AppendCuratorArgs(const std::vector<std::string>& extra,
                       std::vector<std::string>* argv);
// Whether something accepts TCP connections on 127.0.0.1:port now.
bool PortAccepts(int port);

// HAProxy (common/net/edge_config.h) in front of `targets` on a free
// loopback port: it shows the certificate and key of dir's curator.pem and
// curator.key, checks the backend against dir's ca.pem for `tls_name`, and
// writes dir/edge.pem, haproxy.cfg and edge.log. Returns once it accepts
// connections; an error saying what failed (the edge's log tail if it
// exited, or no listener within 30 s). max_connections > 0: the clients it
// holds at once (EdgeConfig::max_connections), for a run of that many.
struct EdgeProcess {
  pid_t pid = -1;
  std::string address;  // 127.0.0.1:PORT
};
absl::StatusOr<EdgeProcess> StartEdge(const std::string& dir,
                                      const std::vector<std::string>& targets,
                                      const std::string& tls_name,
                                      int max_connections = 0);

// Integer flag `flag` of a, when given, into *out (unchanged otherwise):
// INVALID_ARGUMENT "--FLAG must be in [lo, hi]" outside that range, and
// CliArgs's error for a value that is not an integer.
template <typename T>
absl::Status GetIntFlag(const CliArgs& a, const char* flag, T* out, int64_t lo, int64_t hi) {
  absl::StatusOr<std::optional<int64_t>> v = a.GetInt(flag);
  if (!v.ok()) return v.status();
  if (!*v) return absl::OkStatus();
  if (**v < lo || **v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be in [", lo, ", ", hi, "]"));
  }
  *out = static_cast<T>(**v);
  return absl::OkStatus();
}

// Fresh secure random bytes as hex (exits on failure).
std::string RandomHex(size_t bytes);
bool WriteFile(const std::string& path, const std::string& text, mode_t mode);

// A run's work folder, mode 0700: `dir` when given (empty or new; created),
// else a new one under $TMPDIR (or /tmp) named prefix.XXXXXX. made: whether
// this call created it from the template (the caller removes it at the end).
// The error names the folder and why.
struct WorkFolder {
  std::string path;
  bool made = false;
};
absl::StatusOr<WorkFolder> MakeWorkFolder(const std::string& dir,
                                          const std::string& prefix);

// The run's secrets, written to folder as node.key (a random 32-byte node
// key, hex) and admin.token (a random 32-byte admin token, hex), both 0600.
struct RunSecrets {
  std::string node_key;   // the key's 32 bytes
  std::string admin_hex;  // the token, hex
};
absl::StatusOr<RunSecrets> WriteRunSecrets(const std::string& folder);
// The program beside this one, or one or two folders up.
std::string FindProgram(const std::string& name);

struct Percentiles {
  size_t samples = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0;  // milliseconds
};
Percentiles Summarise(std::vector<double> ms);
nlohmann::json ToJson(const Percentiles& p);

// A channel to target: plaintext when ca_pem is empty, otherwise TLS
// trusting ca_pem and checking the certificate against tls_name.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const std::string& ca_pem,
                                           const std::string& tls_name,
                                           grpc::ChannelArguments args);

// The reports of task's nodes, perturbed as an agent would: label
// campaigns by k-ary randomized response, features campaigns by their
// mechanism. The "private" values are made up (node v's label is v mod
// classes, its features uniform in the range). INVALID_ARGUMENT for a spec
// the mechanisms refuse or an attribute not simulated.
absl::StatusOr<std::vector<v1::Report>> SimulatedReports(const v1::Task& task,
                                                         RandomSource& rng);

}  // namespace ldpgraph::bench

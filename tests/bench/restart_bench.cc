// restart_bench: how long agent hosts take to come back after the curator
// restarts.
//
// Starts a real ldpgraph-curator (TLS with a development CA made for the
// run, on 127.0.0.1, its state in a temporary folder) and --hosts real
// ldpgraph-agent processes, each with a contiguous shard of --nodes-per-host
// nodes of a generated dataset, and waits until every host is enrolled and
// subscribed. Then, --restarts times: kills the curator (SIGKILL) while the
// hosts idle, keeps it down --down seconds (longer than a reconnect backoff
// that doubles from 100 ms would wait), restarts it on the same data folder
// and port, and measures the time from the restarted curator being ready
// (its admin API answers) to every host being enrolled and subscribed again
// with one session each (GetStatus: task streams = hosts, enrolled nodes =
// every node, sessions = hosts).
//
// The target is every host back within --target-ms (default 2000) of the
// curator being ready: an agent's channel retries every 100 ms growing to
// 500 ms, so on an idle machine they are back in well under a second. The
// figures, the target and whether it was met go to stderr (a table) and
// stdout (one JSON object). The exit status is 0 unless something failed
// (a process died, the hosts did not come back within --deadline); with
// --check a missed target is a failure too (exit 1). restart_test checks
// the same restart for correctness only, with a 60 s deadline and no bound.
//
//   build/bench/restart_bench                    4 hosts, 3 restarts
//   build/bench/restart_bench --hosts 20 --restarts 10 --check
//
// The binaries are looked for beside restart_bench and one or two folders
// up; --curator and --agent override.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/hex.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/dev_tls.h"
#include "tests/bench/load_util.h"

namespace {

namespace v1 = ldpgraph::v1;
namespace fs = std::filesystem;
using ldpgraph::bench::MonoSeconds;
using nlohmann::json;

constexpr char kUsage[] = R"(restart_bench: agent hosts coming back after a curator restart

Usage: restart_bench [flags]

Starts ldpgraph-curator (TLS, 127.0.0.1) and real ldpgraph-agent processes on
a generated dataset, waits until every host is enrolled and subscribed, then
kills the curator (SIGKILL), keeps it down, restarts it on the same data and
port, and times how long after it is ready every host is enrolled and
subscribed again. A table goes to stderr, one JSON object to stdout.

  --hosts H             agent processes (default 4)
  --nodes-per-host N    nodes each host speaks for (default 677)
  --restarts R          curator restarts measured (default 3)
  --down S              seconds the curator stays down (default 3)
  --target-ms T         the target: every host back within T ms of the
                        curator being ready (default 2000)
  --check               exit 1 when a restart misses the target
  --deadline S          longest wait for the hosts to come back, and for the
                        first enrolment (default 60)
  --curator PATH        ldpgraph-curator (default: found beside restart_bench,
                        or one or two folders up)
  --agent PATH          ldpgraph-agent (same search)
  --dir DIR             work folder, empty or new (default: a new one under
                        $TMPDIR or /tmp, removed at the end unless --keep or
                        a failure)
  --keep                keep the work folder
)";

constexpr char kTlsName[] = "localhost";

struct Options {
  int hosts = 4;
  uint32_t nodes_per_host = 677;
  int restarts = 3;
  double down = 3;
  double target_ms = 2000;
  bool check = false;
  double deadline = 60;
  std::string curator_bin, agent_bin, dir;
  bool keep = false;
};

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  auto parsed = ldpgraph::CliArgs::Parse(
      args,
      {"hosts", "nodes-per-host", "restarts", "down", "target-ms", "deadline",
       "curator", "agent", "dir"},
      {"check", "keep"});
  if (!parsed.ok()) return parsed.status();
  const ldpgraph::CliArgs& a = *parsed;
  Options o;
  auto get_double = [&](const char* flag, double lo, double* out) -> absl::Status {
    auto v = a.GetDouble(flag);
    if (!v.ok()) return v.status();
    if (!*v) return absl::OkStatus();
    if (**v < lo) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be >= ", lo));
    }
    *out = **v;
    return absl::OkStatus();
  };
  for (absl::Status s :
       {ldpgraph::bench::GetIntFlag(a, "hosts", &o.hosts, 1, 10000),
        ldpgraph::bench::GetIntFlag(a, "nodes-per-host", &o.nodes_per_host, 1, 1000000),
        ldpgraph::bench::GetIntFlag(a, "restarts", &o.restarts, 1, 1000),
        get_double("down", 0, &o.down),
        get_double("target-ms", 0, &o.target_ms), get_double("deadline", 1, &o.deadline)}) {
    if (!s.ok()) return s;
  }
  o.check = a.Flag("check");
  o.keep = a.Flag("keep");
  o.curator_bin = a.Get("curator").value_or(ldpgraph::bench::FindProgram("ldpgraph-curator"));
  o.agent_bin = a.Get("agent").value_or(ldpgraph::bench::FindProgram("ldpgraph-agent"));
  o.dir = a.Get("dir").value_or("");
  return o;
}

class Bench {
 public:
  explicit Bench(Options o) : o_(std::move(o)) {}
  ~Bench() { Cleanup(); }
  int Main();

 private:
  uint32_t nodes() const { return static_cast<uint32_t>(o_.hosts) * o_.nodes_per_host; }
  bool Prepare();
  // Starts the curator on listen (127.0.0.1:0 the first time, then its
  // port) and waits until its admin API answers.
  bool StartCurator(const std::string& listen);
  void KillCurator();
  // Waits until every host is enrolled and subscribed, with one session
  // each; false (and a failure) after --deadline or if a process died.
  bool WaitBack(const char* what);
  std::optional<std::string> SomethingDied();
  void Fail(const std::string& message) {
    failures_.push_back(message);
    std::cerr << "restart_bench: " << message << "\n";
  }
  void Cleanup();

  Options o_;
  std::string dir_;
  bool made_dir_ = false;
  std::string ca_pem_, admin_hex_;
  int port_ = 0;
  pid_t curator_ = -1;
  std::vector<pid_t> agents_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
  v1::CuratorStatus last_;
  std::vector<std::string> failures_;
};

bool Bench::Prepare() {
  using ldpgraph::bench::WriteFile;
  for (const std::string& bin : {o_.curator_bin, o_.agent_bin}) {
    if (!fs::exists(bin)) {
      Fail(absl::StrCat(bin, " not found: build it, or give --curator and --agent"));
      return false;
    }
  }
  auto folder = ldpgraph::bench::MakeWorkFolder(o_.dir, "restart_bench");
  if (!folder.ok()) {
    Fail(std::string(folder.status().message()));
    return false;
  }
  dir_ = folder->path;
  made_dir_ = folder->made;
  auto secrets = ldpgraph::bench::WriteRunSecrets(dir_);
  if (!secrets.ok()) {
    Fail(std::string(secrets.status().message()));
    return false;
  }
  admin_hex_ = secrets->admin_hex;
  auto tls = ldpgraph::ldpctl::MakeDevTlsMaterial({kTlsName, "127.0.0.1"});
  if (!tls.ok()) {
    Fail(absl::StrCat("making the run's TLS certificates: ", tls.status().message()));
    return false;
  }
  if (auto s = ldpgraph::ldpctl::WriteDevTlsMaterial(*tls, dir_); !s.ok()) {
    Fail(std::string(s.message()));
    return false;
  }
  ca_pem_ = tls->ca_cert_pem;
  ldpgraph::GeneratorOptions g = ldpgraph::DefaultGeneratorOptions();
  g.nodes = nodes();
  g.avg_degree = std::min(g.avg_degree, std::max(1.0, (nodes() - 1) / 4.0));
  auto data = ldpgraph::GenerateDataset(g);
  if (!data.ok()) {
    Fail(absl::StrCat("generating the dataset: ", data.status().message()));
    return false;
  }
  if (auto s = ldpgraph::WriteDataset(*data, dir_ + "/dataset"); !s.ok()) {
    Fail(absl::StrCat("writing the dataset: ", s.message()));
    return false;
  }
  for (int a = 0; a < o_.hosts; ++a) {
    const uint32_t begin = static_cast<uint32_t>(a) * o_.nodes_per_host;
    if (!WriteFile(absl::StrCat(dir_, "/agent-", a, ".credentials"),
                   ldpgraph::curator::CredentialsFileText(secrets->node_key, begin,
                                                          begin + o_.nodes_per_host),
                   0600)) {
      Fail("cannot write the credentials files");
      return false;
    }
  }
  return true;
}

bool Bench::StartCurator(const std::string& listen) {
  const std::string ready = dir_ + "/curator.ready";
  std::error_code ec;
  fs::remove(ready, ec);
  curator_ = ldpgraph::bench::Spawn(
      {o_.curator_bin, "--listen", listen, "--http", "off", "--data-dir",
       dir_ + "/curator", "--graph", dir_ + "/dataset", "--admin-token",
       dir_ + "/admin.token", "--node-key", dir_ + "/node.key", "--tls-cert",
       dir_ + "/curator.pem", "--tls-key", dir_ + "/curator.key", "--ready-file",
       ready},
      dir_ + "/curator.log");
  const double until = MonoSeconds() + 60;
  while (true) {
    if (auto how = ldpgraph::bench::ExitedHow(curator_)) {
      curator_ = -1;
      Fail(absl::StrCat("the curator ", *how, "; last lines of ", dir_,
                        "/curator.log:\n", ldpgraph::bench::LogTail(dir_ + "/curator.log")));
      return false;
    }
    if (std::optional<int> port = ldpgraph::bench::ReadyFilePort(ready)) {
      port_ = *port;
      break;
    }
    if (MonoSeconds() > until || ldpgraph::bench::g_interrupted) {
      Fail("the curator did not write its ready file within 60 s");
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // A fresh admin channel each start, once the curator serves: the moment
  // it counts as ready is when this channel's GetStatus first answers.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
  admin_ = v1::AdminService::NewStub(ldpgraph::bench::MakeChannel(
      absl::StrCat("127.0.0.1:", port_), ca_pem_, kTlsName, args));
  while (true) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + admin_hex_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::CuratorStatus status;
    if (admin_->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok()) return true;
    if (auto how = ldpgraph::bench::ExitedHow(curator_)) {
      curator_ = -1;
      Fail(absl::StrCat("the curator ", *how, "; last lines of ", dir_,
                        "/curator.log:\n", ldpgraph::bench::LogTail(dir_ + "/curator.log")));
      return false;
    }
    if (MonoSeconds() > until || ldpgraph::bench::g_interrupted) {
      Fail("the curator's admin API did not answer within 60 s");
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Bench::KillCurator() {
  if (curator_ <= 0) return;
  kill(curator_, SIGKILL);
  int status = 0;
  while (waitpid(curator_, &status, 0) < 0 && errno == EINTR) {
  }
  curator_ = -1;
}

std::optional<std::string> Bench::SomethingDied() {
  if (curator_ > 0) {
    if (auto how = ldpgraph::bench::ExitedHow(curator_)) {
      curator_ = -1;
      return absl::StrCat("the curator ", *how, "; last lines of ", dir_,
                          "/curator.log:\n",
                          ldpgraph::bench::LogTail(dir_ + "/curator.log"));
    }
  }
  for (size_t a = 0; a < agents_.size(); ++a) {
    if (agents_[a] <= 0) continue;
    if (auto how = ldpgraph::bench::ExitedHow(agents_[a])) {
      agents_[a] = -1;
      const std::string log = absl::StrCat(dir_, "/agent-", a, ".log");
      return absl::StrCat("agent ", a, " ", *how, "; last lines of ", log, ":\n",
                          ldpgraph::bench::LogTail(log));
    }
  }
  return std::nullopt;
}

bool Bench::WaitBack(const char* what) {
  const double until = MonoSeconds() + o_.deadline;
  while (true) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + admin_hex_);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::CuratorStatus status;
    if (admin_->GetStatus(&ctx, v1::GetStatusRequest(), &status).ok()) {
      last_ = status;
      if (status.task_streams() == static_cast<uint32_t>(o_.hosts) &&
          status.enrolled_nodes() == nodes() &&
          status.sessions() == static_cast<uint32_t>(o_.hosts)) {
        return true;
      }
    }
    if (auto died = SomethingDied()) {
      Fail(*died);
      return false;
    }
    if (MonoSeconds() > until || ldpgraph::bench::g_interrupted) {
      Fail(absl::StrCat("the hosts were not all ", what, " within ", o_.deadline,
                        " s: ", last_.ShortDebugString()));
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Bench::Cleanup() {
  for (pid_t& p : agents_) {
    if (p > 0) ldpgraph::bench::StopProcess(p, 5);
    p = -1;
  }
  if (curator_ > 0) ldpgraph::bench::StopProcess(curator_, 5);
  curator_ = -1;
  if (made_dir_ && failures_.empty() && !o_.keep && !dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    dir_.clear();
  }
}

int Bench::Main() {
  if (!Prepare() || !StartCurator("127.0.0.1:0")) return 2;
  const std::string target = absl::StrCat("127.0.0.1:", port_);
  for (int a = 0; a < o_.hosts; ++a) {
    const uint32_t begin = static_cast<uint32_t>(a) * o_.nodes_per_host;
    agents_.push_back(ldpgraph::bench::Spawn(
        {o_.agent_bin, "--curator", target, "--ca", dir_ + "/ca.pem",
         "--server-name", kTlsName, "--credentials",
         absl::StrCat(dir_, "/agent-", a, ".credentials"), "--dataset",
         dir_ + "/dataset", "--nodes",
         absl::StrCat(begin, "-", begin + o_.nodes_per_host), "--state-dir",
         absl::StrCat(dir_, "/agent-", a), "--http", "off", "--name",
         absl::StrCat("restart-bench-agent-", a)},
        absl::StrCat(dir_, "/agent-", a, ".log")));
  }
  std::cerr << "restart_bench: curator on " << target << ", " << o_.hosts
            << " agent hosts of " << o_.nodes_per_host << " nodes\n";
  if (!WaitBack("enrolled and subscribed")) return 2;

  std::vector<double> back_ms, start_ms;
  for (int r = 0; r < o_.restarts; ++r) {
    KillCurator();
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.down));
    const double spawned = MonoSeconds();
    if (!StartCurator(target)) return 2;
    const double ready = MonoSeconds();
    if (!WaitBack("back")) return 2;
    back_ms.push_back((MonoSeconds() - ready) * 1000);
    start_ms.push_back((ready - spawned) * 1000);
    std::cerr << absl::StrFormat(
        "restart %d: curator ready %.0f ms after its start; every host "
        "enrolled and subscribed %.0f ms after that\n",
        r + 1, start_ms.back(), back_ms.back());
  }

  std::vector<double> sorted = back_ms;
  std::sort(sorted.begin(), sorted.end());
  const double worst = sorted.back();
  const double median = sorted[sorted.size() / 2];
  const bool met = worst <= o_.target_ms;
  const double start_max = *std::max_element(start_ms.begin(), start_ms.end());
  std::cerr << absl::StrFormat(
      "\n  hosts %d, nodes %u, curator down %.1f s, %d restarts\n"
      "  curator ready      max %.0f ms after its start\n"
      "  back after ready   min %.0f ms, median %.0f ms, max %.0f ms\n"
      "  target             every host back within %.0f ms: %s\n",
      o_.hosts, nodes(), o_.down, o_.restarts, start_max, sorted.front(), median,
      worst, o_.target_ms, met ? "met" : "MISSED");
  json out = {{"hosts", o_.hosts},
              {"nodes", nodes()},
              {"down_seconds", o_.down},
              {"restarts", o_.restarts},
              {"ready_ms", start_ms},
              {"back_ms", back_ms},
              {"back_ms_min", sorted.front()},
              {"back_ms_median", median},
              {"back_ms_max", worst},
              {"target_ms", o_.target_ms},
              {"target_met", met}};
  std::cout << out.dump() << "\n";
  if (!met && o_.check) {
    failures_.push_back("target missed");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (ldpgraph::WantsHelp(args)) {
    std::cout << kUsage;
    return 0;
  }
  auto options = ParseOptions(args);
  if (!options.ok()) {
    std::cerr << "restart_bench: " << options.status().message()
              << "\nRun restart_bench --help for the flags.\n";
    return 2;
  }
  std::signal(SIGINT, ldpgraph::bench::OnInterrupt);
  std::signal(SIGTERM, ldpgraph::bench::OnInterrupt);
  std::signal(SIGPIPE, SIG_IGN);
  Bench bench(*std::move(options));
  return bench.Main();
}

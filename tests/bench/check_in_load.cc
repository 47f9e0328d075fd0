#include "tests/bench/check_in_load.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <queue>
#include <thread>

#include <grpc/grpc_security.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/hex.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/dev_tls.h"
#include "server/ldpctl/pages.h"
#include "tests/bench/load_util.h"

namespace ldpgraph::bench {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kTlsName[] = "localhost";

struct Options {
  int devices = 100000;
  double window = 300;
  int processes = 2;
  int threads = 32;  // per worker process
  int visits = 1;    // check-ins per device: a population that returns
  bool tls = true;
  bool resume = true;
  bool edge = false;  // devices reach the curator through HAProxy
  double rate = 0;  // the curator's --check-in-rate
  double epsilon = 1;
  int classes = 6;
  int fleet_nice = 10;
  double timeout = 0;  // 0: window + 300
  std::string curator_bin;
  std::vector<std::string> curator_args;
  std::string dir;
  bool keep = false;
};

absl::StatusOr<Options> Parse(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(args,
                     {"devices", "window", "processes", "threads", "check-in-rate", "visits",
                      "epsilon", "classes", "fleet-nice", "timeout", "curator",
                      "curator-args", "dir"},
                     {"plaintext", "no-resume", "keep", "tls", "edge"}));
  Options o;
  auto get_int = [&](const char* flag, int* out, int lo, int hi) -> absl::Status {
    ASSIGN_OR_RETURN(auto v, a.GetInt(flag));
    if (!v) return absl::OkStatus();
    if (*v < lo || *v > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " must be in [", lo, ", ", hi, "]"));
    }
    *out = static_cast<int>(*v);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(get_int("devices", &o.devices, 1, 10000000));
  RETURN_IF_ERROR(get_int("processes", &o.processes, 1, 64));
  RETURN_IF_ERROR(get_int("threads", &o.threads, 1, 1024));
  RETURN_IF_ERROR(get_int("visits", &o.visits, 1, 1000));
  RETURN_IF_ERROR(get_int("classes", &o.classes, 2, 1000));
  RETURN_IF_ERROR(get_int("fleet-nice", &o.fleet_nice, 0, 19));
  for (auto [flag, out] : {std::pair{"window", &o.window}, std::pair{"check-in-rate", &o.rate},
                           std::pair{"epsilon", &o.epsilon}, std::pair{"timeout", &o.timeout}}) {
    ASSIGN_OR_RETURN(auto v, a.GetDouble(flag));
    if (!v) continue;
    if (!(*v >= 0) || !std::isfinite(*v)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be finite and >= 0"));
    }
    *out = *v;
  }
  if (!(o.window > 0) || !(o.epsilon > 0)) {
    return absl::InvalidArgumentError("--window and --epsilon must be > 0");
  }
  if (o.processes > o.devices) o.processes = o.devices;
  o.tls = !a.Flag("plaintext");
  o.resume = !a.Flag("no-resume");
  o.edge = a.Flag("edge");
  if (o.edge && !o.tls) {
    return absl::InvalidArgumentError("--edge terminates TLS: not with --plaintext");
  }
  o.keep = a.Flag("keep");
  o.dir = a.Get("dir").value_or("");
  o.curator_bin = a.Get("curator").value_or(FindProgram("ldpgraph-curator"));
  if (a.Has("curator-args")) {
    o.curator_args = absl::StrSplit(*a.Get("curator-args"), ' ', absl::SkipEmpty());
  }
  if (o.timeout == 0) o.timeout = 2 * o.window + 300;
  return o;
}

// --- a worker process: its devices' visits ------------------------------------

struct WorkerConfig {
  uint32_t first = 0, end = 0;
  int threads = 32;
  int visits = 1;
  bool resume = true;
  double window = 300;
  std::string node_key, ca_pem;
  int up_fd = -1, down_fd = -1;
};

// Device v's first check-in, as a fraction of the window: a fixed hash of
// its id (SplitMix64), so runs are comparable. A simulation's design.
double ArrivalFraction(uint32_t v) {
  uint64_t z = v + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / static_cast<double>(uint64_t{1} << 53);
}

class Worker {
 public:
  explicit Worker(WorkerConfig c) : c_(std::move(c)) {}

  [[noreturn]] void Run() {
    // The parent's go: "<target> <monotonic start>".
    std::string line;
    char ch;
    while (read(c_.down_fd, &ch, 1) == 1 && ch != '\n') line += ch;
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2) _exit(2);
    target_ = parts[0];
    const double t0 = std::stod(parts[1]);
    for (uint32_t v = c_.first; v < c_.end; ++v) {
      queue_.push({t0 + c_.window * ArrivalFraction(v), v});
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < c_.threads; ++i) threads.emplace_back([this] { Loop(); });
    for (auto& t : threads) t.join();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    json j = counters_;
    j["cpu_seconds"] = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    j["visit_ms"] = ToJson(Summarise(latencies_));
    j["first_errors"] = errors_;
    const std::string text = j.dump() + "\n";
    if (write(c_.up_fd, text.data(), text.size()) < 0) _exit(3);
    _exit(0);
  }

 private:
  using Due = std::pair<double, uint32_t>;  // (monotonic time, device)

  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      if (queue_.empty()) {
        if (in_flight_ == 0) {
          cv_.notify_all();
          return;
        }
        cv_.wait(l);
        continue;
      }
      const Due due = queue_.top();
      const double wait = due.first - MonoSeconds();
      if (wait > 0) {
        cv_.wait_for(l, std::chrono::duration<double>(std::min(wait, 0.5)));
        continue;
      }
      queue_.pop();
      ++in_flight_;
      counters_["max_in_flight"] = std::max(counters_.value("max_in_flight", 0), in_flight_);
      l.unlock();
      const double start = MonoSeconds();
      std::optional<double> again = Visit(due.second);
      const double ms = (MonoSeconds() - start) * 1000;
      l.lock();
      latencies_.push_back(ms);
      --in_flight_;
      if (again) queue_.push({MonoSeconds() + *again, due.second});
      cv_.notify_all();
    }
  }

  void Count(const char* key, int64_t n = 1) {
    std::lock_guard<std::mutex> l(mu_);
    counters_[key] = counters_.value(key, int64_t{0}) + n;
  }
  void Error(const std::string& text) {
    std::lock_guard<std::mutex> l(mu_);
    counters_["errors"] = counters_.value("errors", int64_t{0}) + 1;
    if (errors_.size() < 3) errors_.push_back(OneLine(text));
  }

  // The device's TLS session cache: made at its first visit, so that a
  // paced device's next visit resumes; dropped when it is done.
  grpc_ssl_session_cache* Cache(uint32_t v, bool done) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = caches_.find(v);
    if (done) {
      if (it != caches_.end()) {
        grpc_ssl_session_cache_destroy(it->second);
        caches_.erase(it);
      }
      return nullptr;
    }
    if (it != caches_.end()) return it->second;
    return caches_[v] = grpc_ssl_session_cache_create_lru(1);
  }

  // One visit of device v: connect, check in, answer, submit, leave. The
  // seconds until its next visit (paced, or visits left); nullopt when it
  // is done.
  std::optional<double> Visit(uint32_t v) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    if (!c_.ca_pem.empty() && c_.resume) {
      grpc_arg cache = grpc_ssl_session_cache_create_channel_arg(Cache(v, false));
      args.SetPointerWithVtable(cache.key, cache.value.pointer.p, cache.value.pointer.vtable);
    }
    auto stub = v1::AgentService::NewStub(MakeChannel(target_, c_.ca_pem, kTlsName, args));
    v1::CheckInRequest req;
    req.set_device_name(absl::StrCat("device-", v));
    v1::NodeCredential* n = req.add_nodes();
    n->set_node_id(v);
    n->set_secret(curator::NodeCredential(c_.node_key, v));
    n->mutable_caps()->set_total(8);
    v1::CheckInResponse reply;
    Count("check_ins");
    {
      grpc::ClientContext ctx;
      ctx.set_wait_for_ready(true);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status s = stub->CheckIn(&ctx, req, &reply);
      if (!s.ok()) {
        Error(absl::StrCat("device ", v, ": CheckIn: ", GrpcError(s)));
        Cache(v, true);
        return std::nullopt;
      }
    }
    if (reply.outcome() == v1::CHECK_IN_OUTCOME_PACED) {
      Count("paced");
      return reply.retry_after_ms() / 1000.0;
    }
    // Visits that were not paced, this one included.
    int done;
    {
      std::lock_guard<std::mutex> l(mu_);
      done = ++visits_[v];
    }
    std::optional<double> next;
    if (done < c_.visits) {
      next = reply.retry_after_ms() / 1000.0;
    } else {
      Cache(v, true);
    }
    if (reply.outcome() != v1::CHECK_IN_OUTCOME_SERVED) {
      Count("idle");
      if (done == 1) {
        Error(absl::StrCat("device ", v, ": nothing to answer (",
                           v1::CheckInOutcome_Name(reply.outcome()), ")"));
      }
      return next;
    }
    Count("served");
    if (done > 1) Error(absl::StrCat("device ", v, ": served again at visit ", done));
    thread_local std::unique_ptr<SecureRandom> rng;
    if (!rng) rng = *SecureRandom::Create();
    for (const v1::Task& task : reply.tasks()) {
      auto reports = SimulatedReports(task, *rng);
      if (!reports.ok()) {
        Error(absl::StrCat("device ", v, ": ", reports.status().ToString()));
        continue;
      }
      v1::ReportBatch batch;
      for (auto& r : *reports) *batch.add_reports() = std::move(r);
      v1::ReportAck ack;
      grpc::ClientContext ctx;
      ctx.AddMetadata("ldpgraph-session", reply.session_token());
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status s = stub->Submit(&ctx, batch, &ack);
      if (!s.ok()) {
        Error(absl::StrCat("device ", v, ": Submit: ", GrpcError(s)));
        continue;
      }
      for (const auto& r : ack.results()) {
        if (r.code() != 0) {
          Error(absl::StrCat("device ", v, ": report rejected: ", r.message()));
        } else {
          Count("reports_acked");
          if (r.duplicate()) Count("duplicates");
        }
      }
    }
    return next;
  }

  const WorkerConfig c_;
  std::string target_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> queue_;
  int in_flight_ = 0;
  json counters_ = json::object();
  std::vector<std::string> errors_;
  std::vector<double> latencies_;
  std::map<uint32_t, grpc_ssl_session_cache*> caches_;
  std::map<uint32_t, int> visits_;
};

// --- the run ---------------------------------------------------------------------

int Fail(const std::string& what) {
  std::cerr << "fleet_load --check-in: " << what << "\n";
  return 1;
}

}  // namespace

std::string CheckInLoadUsage() {
  return R"(fleet_load --check-in: the curator under devices that check in

Usage: fleet_load --check-in [--devices N] [--window S] [flags]

Starts ldpgraph-curator (127.0.0.1, TLS with a development CA made for the
run, state in a temporary folder), opens one label campaign (k-ary
randomized response) over N nodes, and lets N simulated one-node devices
check in over a window of S seconds: each at a fixed pseudo-random time,
with a connection and TLS handshake of its own, its node's credential, a
CheckIn call, and, when served, its perturbed report in one Submit; then
it leaves. A paced device comes back at the slot the curator gives it,
resuming its TLS session (a client-side session cache per device).
Measures: check-ins by outcome, the curator's CPU seconds and check-ins per
CPU-second, its peak RSS and the peak of its open sockets (connections),
visit latency, and afterwards every node's spend from the ledger (no node
may spend more than the campaign's epsilon). A table on stderr, one JSON
object on stdout; exit status 0 only if every device answered once with no
error.

Flags:
  --devices N        devices (nodes) (default 100000)
  --window S         seconds over which they first check in (default 300)
  --check-in-rate R  the curator's --check-in-rate (default 0: no pacing)
  --processes P      worker processes the devices are spread over (default 2)
  --threads T        concurrent visits per worker process (default 32)
  --visits K         check-ins per device (default 1): a device served
                     comes back when the curator says (its interval is set
                     to S / K) and finds nothing more to answer (IDLE): a
                     population that returns, resuming its TLS sessions
  --plaintext        no TLS (compare)
  --edge             the devices connect to HAProxy (apt-get install
                     haproxy), which terminates their TLS and forwards their
                     calls to the curator on a few kept-alive HTTP/2
                     connections (TLS too); the edge's own CPU and memory
                     are reported beside the curator's
  --no-resume        no TLS session cache: every visit a full handshake
  --epsilon E        the campaign's epsilon (default 1)
  --classes C        label classes (default 6)
  --fleet-nice N     niceness of the worker processes (default 10)
  --timeout S        longest run (default: window + 300)
  --curator PATH, --curator-args "ARGS", --dir DIR, --keep: as fleet_load

Example:
  fleet_load --check-in --devices 100000 --window 300
)";
}

int RunCheckInLoad(const std::vector<std::string>& args) {
  auto parsed = Parse(args);
  if (!parsed.ok()) {
    std::cerr << "fleet_load --check-in: " << parsed.status().message()
              << "\nRun fleet_load --check-in --help for the flags.\n";
    return 2;
  }
  const Options o = *parsed;
  // The work folder, the secrets and the TLS material.
  std::string dir = o.dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/check_in_load.XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) return Fail("cannot create a work folder");
    dir = tmpl;
  } else {
    fs::create_directories(dir);
  }
  const std::string key_hex = RandomHex(32), admin_hex = RandomHex(32);
  const std::string node_key = *FromHex(key_hex);
  if (!WriteFile(dir + "/node.key", key_hex + "\n", 0600) ||
      !WriteFile(dir + "/admin.token", admin_hex + "\n", 0600)) {
    return Fail("cannot write the node key and admin token");
  }
  std::string ca_pem;
  if (o.tls) {
    auto tls = ldpctl::MakeDevTlsMaterial({kTlsName, "127.0.0.1"});
    if (!tls.ok()) return Fail(std::string(tls.status().message()));
    if (auto s = ldpctl::WriteDevTlsMaterial(*tls, dir); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    ca_pem = tls->ca_cert_pem;
  }

  // The workers, forked before this process touches gRPC.
  struct Child {
    pid_t pid;
    int up, down;
  };
  std::vector<Child> workers;
  for (int w = 0; w < o.processes; ++w) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return Fail("pipe failed");
    WorkerConfig c;
    c.first = static_cast<uint32_t>(int64_t{o.devices} * w / o.processes);
    c.end = static_cast<uint32_t>(int64_t{o.devices} * (w + 1) / o.processes);
    c.threads = o.threads;
    c.visits = o.visits;
    c.resume = o.resume;
    c.window = o.window;
    c.node_key = node_key;
    c.ca_pem = ca_pem;
    c.up_fd = up[1];
    c.down_fd = down[0];
    const pid_t pid = fork();
    if (pid < 0) return Fail("fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (o.fleet_nice > 0) setpriority(PRIO_PROCESS, 0, o.fleet_nice);
      close(up[0]);
      close(down[1]);
      Worker(std::move(c)).Run();
    }
    close(up[1]);
    close(down[0]);
    workers.push_back({pid, up[0], down[1]});
  }

  // The curator: served devices come back only after the run.
  const std::string ready = dir + "/curator.ready";
  std::vector<std::string> argv = {
      o.curator_bin, "--listen", "127.0.0.1:0", "--http", "off", "--data-dir",
      dir + "/curator", "--admin-token", dir + "/admin.token", "--node-key",
      dir + "/node.key", "--nodes", absl::StrCat(o.devices), "--ready-file", ready,
      "--check-in-interval",
      absl::StrCat(o.visits > 1 ? o.window / o.visits : std::max(3600.0, 4 * o.window)),
      "--check-in-rate", absl::StrCat(o.rate)};
  if (o.tls) {
    argv.insert(argv.end(), {"--tls-cert", dir + "/curator.pem", "--tls-key", dir + "/curator.key"});
  } else {
    argv.push_back("--insecure");
  }
  // --curator-args may give --http (to scrape /metrics): then it replaces
  // the "--http off" above.
  if (std::find(o.curator_args.begin(), o.curator_args.end(), "--http") !=
      o.curator_args.end()) {
    auto http = std::find(argv.begin(), argv.end(), "--http");
    argv.erase(http, http + 2);
  }
  argv.insert(argv.end(), o.curator_args.begin(), o.curator_args.end());
  const pid_t curator = Spawn(argv, dir + "/curator.log");
  int port = 0;
  for (double until = MonoSeconds() + 60; port == 0;) {
    if (auto how = ExitedHow(curator)) {
      return Fail(absl::StrCat("the curator ", *how, ":\n", LogTail(dir + "/curator.log")));
    }
    std::ifstream f(ready);
    json j = json::parse(f, nullptr, false);
    if (!j.is_discarded() && j.contains("grpc_port")) port = j["grpc_port"].get<int>();
    if (MonoSeconds() > until) return Fail("the curator did not start within 60 s");
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string target = absl::StrCat("127.0.0.1:", port);
  // --edge: HAProxy in front of the curator; the devices go there, the
  // admin calls stay direct.
  pid_t edge = -1;
  std::string device_target = target;
  if (o.edge) {
    auto started = StartEdge(dir, {target}, kTlsName);
    if (!started.ok()) return Fail(std::string(started.status().message()));
    edge = started->pid;
    device_target = started->address;
  }
  grpc::ChannelArguments admin_args;
  admin_args.SetMaxReceiveMessageSize(256 << 20);
  auto admin = v1::AdminService::NewStub(MakeChannel(target, ca_pem, kTlsName, admin_args));
  auto call = [&](auto method, const auto& req, auto* resp, double seconds = 30) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + admin_hex);
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
    return (admin.get()->*method)(&ctx, req, resp);
  };
  v1::CreateCampaignRequest create;
  create.set_attribute(v1::ATTRIBUTE_LABEL);
  create.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
  create.mutable_spec()->set_epsilon(o.epsilon);
  create.mutable_spec()->set_dimension(o.classes);
  create.mutable_nodes()->set_all(true);
  create.set_quorum(1);
  create.set_name("check-in load");
  v1::Campaign campaign;
  if (auto s = call(&v1::AdminService::Stub::CreateCampaign, create, &campaign); !s.ok()) {
    return Fail(absl::StrCat("CreateCampaign: ", GrpcError(s)));
  }
  const ProcStats at_go = ReadProc(curator);
  const ProcStats edge_at_go = edge > 0 ? ReadProc(edge) : ProcStats{};
  const double t0 = MonoSeconds() + 0.2;
  for (const Child& w : workers) {
    const std::string go = absl::StrCat(device_target, " ", absl::StrFormat("%.6f", t0), "\n");
    if (write(w.down, go.data(), go.size()) < 0) return Fail("cannot start a worker");
  }
  std::cerr << absl::StrFormat(
      "fleet_load --check-in: %d devices over %.0f s (%s, %d worker processes x %d visits), "
      "curator %s%s, campaign %s\n",
      o.devices, o.window, o.tls ? (o.resume ? "TLS, sessions resumed" : "TLS, no resumption")
                                 : "plaintext",
      o.processes, o.threads, target,
      o.edge ? absl::StrCat(" behind the edge at ", device_target) : "", campaign.id());

  // Watch: the curator's CPU, memory and sockets, GetStatus latency, and
  // progress, until the campaign completes and the workers are done.
  std::vector<double> status_ms;
  int peak_sockets = 0;
  long peak_rss = 0;
  v1::CuratorStatus st;
  int running = o.processes;
  double last_line = 0, completed_at = -1;
  while (running > 0 && MonoSeconds() < t0 + o.timeout && !g_interrupted) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    peak_sockets = std::max(peak_sockets, CountSockets(curator));
    const ProcStats p = ReadProc(curator);
    peak_rss = std::max(peak_rss, p.hwm_kib);
    const double start = MonoSeconds();
    if (call(&v1::AdminService::Stub::GetStatus, v1::GetStatusRequest(), &st).ok()) {
      status_ms.push_back((MonoSeconds() - start) * 1000);
    }
    if (completed_at < 0 && st.stored_reports() >= static_cast<uint64_t>(o.devices)) {
      completed_at = MonoSeconds() - t0;
    }
    running = 0;
    for (Child& w : workers) {
      if (w.pid > 0 && ExitedHow(w.pid)) w.pid = -1;  // reaped
      if (w.pid > 0) ++running;
    }
    if (MonoSeconds() - last_line >= 10) {
      last_line = MonoSeconds();
      std::cerr << absl::StrFormat(
          "[%7.1fs] %d check-ins: %d served, %d paced, %d idle; %d reports stored; "
          "%d sockets open\n",
          MonoSeconds() - t0, st.check_ins(), st.check_ins_served(), st.check_ins_paced(),
          st.check_ins_idle(), st.stored_reports(), CountSockets(curator));
    }
  }
  const double elapsed = MonoSeconds() - t0;
  const ProcStats at_end = ReadProc(curator);
  const ProcStats edge_at_end = edge > 0 ? ReadProc(edge) : ProcStats{};
  json fleet = json::object();
  std::vector<std::string> errors;
  double workers_cpu = 0;
  Percentiles visit{};
  for (Child& w : workers) {
    std::string text;
    char buf[4096];
    fcntl(w.up, F_SETFL, O_NONBLOCK);
    ssize_t n;
    while ((n = read(w.up, buf, sizeof(buf))) > 0) text.append(buf, n);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      errors.push_back("a worker process ended without its figures");
      continue;
    }
    for (auto& [k, v] : j.items()) {
      if (v.is_number_integer()) {
        fleet[k] = k == "max_in_flight" ? std::max(fleet.value(k, int64_t{0}), v.get<int64_t>())
                                        : fleet.value(k, int64_t{0}) + v.get<int64_t>();
      }
    }
    workers_cpu += j.value("cpu_seconds", 0.0);
    visit.p50 = std::max(visit.p50, j["visit_ms"].value("p50", 0.0));
    visit.p99 = std::max(visit.p99, j["visit_ms"].value("p99", 0.0));
    for (const auto& e : j["first_errors"]) errors.push_back(e.get<std::string>());
  }
  for (Child& w : workers) StopProcess(w.pid, 1);

  // No extra epsilon: every node's spend from the ledger, page by page.
  double max_spent = 0, total_spent = 0;
  int64_t over = 0;
  v1::GetBudgetsRequest budgets;
  budgets.set_page_size(100000);
  const absl::Status b = ldpctl::ForEachPage(
      *admin, &v1::AdminService::Stub::GetBudgets, budgets,
      [&](grpc::ClientContext* ctx) {
        ctx->AddMetadata("authorization", "Bearer " + admin_hex);
        ctx->set_wait_for_ready(true);
        ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      },
      &ldpctl::GrpcToAbsl,
      [&](const v1::GetBudgetsResponse& page) {
        for (const auto& nb : page.budgets()) {
          max_spent = std::max(max_spent, nb.total_spent());
          total_spent += nb.total_spent();
          if (nb.total_spent() > o.epsilon + 1e-9) ++over;
        }
        return absl::OkStatus();
      });
  call(&v1::AdminService::Stub::GetStatus, v1::GetStatusRequest(), &st);
  StopProcess(curator, 10);
  if (edge > 0) StopProcess(edge, 5);

  const double cpu = at_end.cpu_seconds - at_go.cpu_seconds;
  const int64_t errs = fleet.value("errors", int64_t{0}) + static_cast<int64_t>(!b.ok());
  const bool complete =
      st.stored_reports() == static_cast<uint64_t>(o.devices) &&
      st.check_ins() - st.check_ins_paced() == static_cast<uint64_t>(o.devices) * o.visits;
  json j;
  j["mode"] = "check-in";
  j["tls"] = o.tls;
  j["tls_resumption"] = o.tls && o.resume;
  j["devices"] = o.devices;
  j["visits_per_device"] = o.visits;
  j["window_seconds"] = o.window;
  j["check_in_rate"] = o.rate;
  j["elapsed_seconds"] = elapsed;
  j["complete"] = complete;
  j["completed_seconds"] = completed_at;
  j["curator"] = {{"check_ins", st.check_ins()},
                  {"devices_seen", st.devices_seen()},
                  {"served", st.check_ins_served()},
                  {"idle", st.check_ins_idle()},
                  {"paced", st.check_ins_paced()},
                  {"stored_reports", st.stored_reports()},
                  {"reports_duplicate", st.reports_duplicate()},
                  {"cpu_seconds", cpu},
                  {"check_ins_per_cpu_second", cpu > 0 ? st.check_ins() / cpu : 0.0},
                  {"peak_rss_mib", Mib(peak_rss)},
                  {"peak_open_sockets", peak_sockets}};
  const double edge_cpu = edge_at_end.cpu_seconds - edge_at_go.cpu_seconds;
  if (edge > 0) {
    j["edge"] = {{"kind", "haproxy"},
                 {"cpu_seconds", edge_cpu},
                 {"cpu_ms_per_check_in",
                  st.check_ins() > 0 ? 1000 * edge_cpu / st.check_ins() : 0.0},
                 {"peak_rss_mib", Mib(edge_at_end.hwm_kib)}};
  }
  j["fleet"] = fleet;
  j["fleet"]["cpu_seconds"] = workers_cpu;
  j["visit_ms_worst_worker"] = {{"p50", visit.p50}, {"p99", visit.p99}};
  j["getstatus_ms"] = ToJson(Summarise(status_ms));
  j["epsilon"] = {{"campaign", o.epsilon}, {"max_spent", max_spent},
                  {"total_spent", total_spent}, {"nodes_over", over}};
  j["errors"] = errs;
  j["first_errors"] = errors;
  j["work_dir"] = o.keep ? dir : "";
  const Percentiles gs = Summarise(status_ms);
  std::cerr << absl::StrFormat(
      "\n== fleet_load --check-in: %d devices over %.0f s, %s ==\n"
      "  check-ins (curator)     %d: %d served, %d idle, %d paced; %d devices seen\n"
      "  reports stored          %d of %d%s, %d duplicates\n"
      "  curator CPU             %.2f s: %.0f check-ins per CPU-second\n"
      "  curator peak RSS        %.1f MiB; peak open sockets %d\n"
      "  visit (worst worker)    p50 %.1f ms, p99 %.1f ms\n"
      "  GetStatus               p50 %.2f ms, p99 %.2f ms\n"
      "  epsilon                 max spent %.3g of %.3g, %d nodes over\n"
      "  errors                  %d\n",
      o.devices, o.window, o.tls ? (o.resume ? "TLS (resumed)" : "TLS") : "plaintext",
      st.check_ins(), st.check_ins_served(), st.check_ins_idle(), st.check_ins_paced(),
      st.devices_seen(), st.stored_reports(), o.devices,
      completed_at >= 0 ? absl::StrFormat(" (complete at %.1f s)", completed_at) : "",
      st.reports_duplicate(), cpu, cpu > 0 ? st.check_ins() / cpu : 0.0, Mib(peak_rss),
      peak_sockets, visit.p50, visit.p99, gs.p50, gs.p99, max_spent, o.epsilon, over, errs);
  if (edge > 0) {
    std::cerr << absl::StrFormat(
        "  edge (HAProxy) CPU      %.2f s: %.3f ms per check-in; peak RSS %.1f MiB\n",
        edge_cpu, st.check_ins() > 0 ? 1000 * edge_cpu / st.check_ins() : 0.0,
        Mib(edge_at_end.hwm_kib));
  }
  for (const auto& e : errors) std::cerr << "    " << e << "\n";
  std::cout << j.dump() << std::endl;
  if (!o.keep) fs::remove_all(dir);
  return complete && errs == 0 && over == 0 ? 0 : 1;
}

}  // namespace ldpgraph::bench

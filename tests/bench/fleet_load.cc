// fleet_load: the curator under a fleet of agent hosts, measured.
//
// Starts a real ldpgraph-curator (on 127.0.0.1, plaintext or with --tls real
// TLS, its state in a temporary folder) and puts a fleet in front of it, in
// one of two modes:
//
//  * simulated hosts (default): --hosts H agent hosts, each with its own
//    gRPC channel and TCP connection, owning --nodes-per-host nodes with
//    valid credentials. Every host enrols, holds a Subscribe stream open and
//    answers each task it gets on a Report stream, as ldpgraph-agent does
//    (one stream per task, batches of --batch reports): k-ary randomized
//    response for a label campaign, HDS for a features campaign. The hosts
//    are spread over --processes worker processes driven by gRPC's callback
//    API, so a handful of threads carry thousands of streams.
//  * real agents (--real-agents K): K ldpgraph-agent processes, each with a
//    contiguous shard of a generated dataset (the generator's defaults,
//    --nodes-per-host nodes per agent) and its own credentials file.
//
// Once every host has enrolled and subscribed, one campaign over all nodes
// is created through the admin API and waited for until every node has
// reported (or --timeout), and with --hold the fleet stays connected a while
// longer. Meanwhile a separate thread calls admin GetStatus every
// --status-interval-ms and records its latency, by phase. At the end: a
// table on stderr and one JSON object on stdout with enrolment and campaign
// times, errors (failed enrols and streams, rejected reports, failed admin
// calls; the first three messages of each kind are printed), the curator's
// CPU seconds (in all and per phase), RSS, peak RSS and threads (from
// /proc/<pid>/stat and status, read while the fleet is still connected),
// GetStatus latency percentiles, the worker processes' CPU seconds, and,
// with real agents, their CPU and RSS. Exit status 0 only when the campaign
// completed without a single error.
//
// Scenarios (off by default): --latency, --jitter and --loss put every
// host's connection through one fault-injecting TCP proxy in this process
// (common/net/fault_proxy.h: delays per chunk, so each connection gets its
// own; the admin and GetStatus channels stay direct), and --dropout F leaves
// each node offline with probability F (SimulatedOffline, seed 1): it never
// enrols nor answers (a simulated host whose nodes are all offline never
// connects), the campaign closes on its --campaign-deadline (default 30 s
// under dropout), and it counts as complete when every online node reported.
//
// A simulated host does not reconnect: unlike ldpgraph-agent, which backs
// off, enrols again and is re-sent its pending tasks, a host whose call
// fails counts an error and stays down, so that a curator that refuses load
// (RESOURCE_EXHAUSTED, say) shows as errors rather than as slow progress.
//
//   build/bench/fleet_load --hosts 200
//   build/bench/fleet_load --hosts 2000 --processes 4 --nodes-per-host 10
//   build/bench/fleet_load --real-agents 20 --nodes-per-host 100
//   build/bench/fleet_load --hosts 1000 --curator-args "--sync normal"
//
// The binaries are looked for beside fleet_load and one or two folders up
// (the build tree puts benchmarks in build/bench and the programs in build/);
// --curator and --agent override. Progress goes to stderr. The soft limit on
// open files is raised to the hard limit (the curator inherits it): each
// simulated host holds one socket in its worker and one in the curator.
// Not a CTest test: run it by hand.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/hex.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/net/fault_proxy.h"
#include "common/random.h"
#include "common/seed_mix.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/dev_tls.h"
#include "tests/bench/check_in_load.h"
#include "tests/bench/load_util.h"
#include "server/ldpctl/churn.h"

namespace {

namespace v1 = ldpgraph::v1;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kUsage[] = R"(fleet_load: the curator under a fleet of agent hosts

Usage: fleet_load [--hosts H] [--nodes-per-host N] [--processes P] [flags]
       fleet_load --real-agents K [--nodes-per-host N] [flags]
       fleet_load --check-in [--devices N] [--window S] [flags]
                  (devices that check in and leave: fleet_load --check-in --help)

Starts ldpgraph-curator (127.0.0.1, plaintext or --tls, state in a temporary
folder),
enrols a fleet, subscribes it, runs one campaign over every node and
measures. Simulated hosts (default) each have their own gRPC channel and TCP
connection and answer like ldpgraph-agent; --real-agents starts real
ldpgraph-agent processes instead. A table goes to stderr, one JSON object to
stdout. Exit status 0 only if the campaign completed with no error.

Fleet:
  --hosts H               simulated agent hosts (default 1000)
  --nodes-per-host N      nodes each host (or real agent) speaks for
                          (default 1; 100 with --real-agents)
  --processes P           worker processes the simulated hosts are spread
                          over (default: the number of CPUs, at most 8)
  --fleet-nice N          niceness of the worker processes and real agents
                          (default 10, 0 to 19): a real fleet runs on other
                          machines, so here it yields the CPU to the curator
  --enrol-concurrency C   at most C Enrol calls in flight per worker process
                          (default 0: every host at once, like a fleet
                          reconnecting after a curator restart)
  --batch B               reports per ReportBatch (default 512)
  --real-agents K         K real ldpgraph-agent processes instead of
                          simulated hosts, on a generated dataset of
                          K * nodes-per-host nodes
  --churn F               with --real-agents: ceil(F x K) of the agent
                          processes (drawn from seed 1) are killed with
                          SIGKILL once mid-campaign, when its answers pass a
                          fraction drawn in [0.1, 0.6], and restarted on the
                          same state after 1 s (log agent-A.restart-1.log);
                          JSON "churn": kills, restarts (default 0: off)
Campaign:
  --attribute A           label (k-ary randomized response, default) or
                          features (HDS, sampled dimensions: the default)
  --epsilon E             the campaign's epsilon (default 1)
  --classes C             label classes of the simulated hosts (default 6;
                          real agents: the generated dataset's, 6)
  --features D            feature dimension (default 64, the generator's)
Measurement:
  --status-interval-ms T  pause between admin GetStatus calls (default 50)
  --enrol-timeout S       longest wait for enrolment and subscription
                          (default 120)
  --timeout S             longest wait for the campaign (default 300)
  --hold S                after the campaign, keep the fleet connected and
                          GetStatus sampling for S more seconds (default 0)
Scenarios (default: off):
  --latency MS            every host's connection goes through one
                          fault-injecting TCP proxy in this process (user
                          space: no root, no netem) that delays each chunk
                          of bytes MS milliseconds each way (default 0: no
                          proxy). Admin and GetStatus calls stay direct
  --jitter MS             plus a uniform draw in [-MS, +MS] per chunk,
                          clipped at zero; bytes never reorder (default 0)
  --loss P                per-chunk probability P in [0, 1) of a lost
                          segment: the chunk and what follows it stall one
                          RTO, max(200 ms, 2 x latency + 4 x jitter)
                          (default 0)
  --dropout F             each node is offline with probability F in [0, 1)
                          (drawn from seed 1 and its id, as ldpctl simulate
                          does): it never enrols nor answers (default 0)
  --campaign-deadline S   the campaign closes S seconds after it opened
                          (default: none; 30 with --dropout); it counts as
                          complete when every online node reported
Programs and files:
  --curator PATH          ldpgraph-curator (default: found beside fleet_load,
                          or one or two folders up)
  --agent PATH            ldpgraph-agent (same search)
  --curator-args "ARGS"   extra curator flags, split at spaces, e.g.
                          "--sync normal --max-threads 2000"
  --dir DIR               work folder, empty or new (default: a new one under
                          $TMPDIR or /tmp, removed at the end unless --keep
                          or a failure)
  --tls                   real TLS: the curator serves a certificate of a
                          development CA made for the run, and every
                          simulated host's channel (its own connection) and
                          every real agent does its own TLS handshake, with
                          its node credentials as without TLS
  --keep                  keep the work folder (logs, stores)
  -h, --help              this text

Examples:
  fleet_load --hosts 200
  fleet_load --hosts 5000 --processes 4 --enrol-concurrency 200
  fleet_load --real-agents 20 --nodes-per-host 100 --attribute features
  fleet_load --hosts 500 --latency 200 --jitter 20 --loss 0.05
  fleet_load --hosts 500 --dropout 0.2 --campaign-deadline 10
)";

// --- small utilities: tests/bench/load_util.h ---------------------------------

using namespace ldpgraph::bench;  // NOLINT: the load tools' shared toolbox

// --tls: the run's development CA (PEM), which every channel trusts; empty:
// plaintext. Set before the workers fork, so they inherit it.
std::string g_tls_ca_pem;  // NOLINT: one per process, set once
// The name the curator's certificate is made for and checked against.
constexpr char kTlsName[] = "localhost";

// A channel to target with the run's security (TLS or plaintext).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           grpc::ChannelArguments args) {
  return ldpgraph::bench::MakeChannel(target, g_tls_ca_pem, kTlsName, std::move(args));
}

// --- options --------------------------------------------------------------------

struct Options {
  int hosts = 1000;
  int nodes_per_host = 1;
  int processes = 1;
  // Niceness of the fleet's processes (workers, real agents): on a real
  // deployment the hosts are other machines, so here they must not take the
  // curator's CPU.
  int fleet_nice = 10;
  int enrol_concurrency = 0;
  int batch = 512;
  int real_agents = 0;
  double churn = 0;  // --real-agents: the fraction killed mid-campaign
  std::string attribute = "label";
  double epsilon = 1.0;
  int classes = 6;
  int features = 64;
  int status_interval_ms = 50;
  double enrol_timeout = 120;
  double timeout = 300;
  double hold = 0;
  std::string curator_bin, agent_bin;
  std::vector<std::string> curator_args;
  std::string dir;
  bool keep = false;
  bool tls = false;
  // Scenarios: the network (no proxy when all three are 0) and dropout.
  double latency_ms = 0, jitter_ms = 0, loss = 0;
  double dropout = 0;
  double campaign_deadline = 0;  // seconds; 0: none
  bool network() const { return latency_ms > 0 || jitter_ms > 0 || loss > 0; }
};

// Seed of the dropout draw and of the proxy's delays: fixed, so runs are
// comparable. A simulation's design, never privacy noise.
constexpr uint64_t kScenarioSeed = 1;

bool NodeOffline(const Options& o, uint32_t v) {
  return ldpgraph::SimulatedOffline(kScenarioSeed, v, o.dropout);
}

// --latency, --jitter, --loss, --dropout and --campaign-deadline.
absl::Status ParseScenario(const ldpgraph::CliArgs& a, Options* o) {
  struct Range {
    const char* flag;
    double* out;
    double lo, hi;
    bool hi_open;
  };
  for (const Range& r : {Range{"latency", &o->latency_ms, 0, 600000, false},
                         Range{"jitter", &o->jitter_ms, 0, 600000, false},
                         Range{"loss", &o->loss, 0, 1, true},
                         Range{"dropout", &o->dropout, 0, 1, true}}) {
    auto v = a.GetDouble(r.flag);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    if (!(**v >= r.lo && (r.hi_open ? **v < r.hi : **v <= r.hi))) {
      return absl::InvalidArgumentError(absl::StrCat("--", r.flag, " must be in [", r.lo, ", ",
                                                     r.hi, r.hi_open ? ")" : "]", ", got ", **v));
    }
    *r.out = **v;
  }
  auto deadline = a.GetDouble("campaign-deadline");
  if (!deadline.ok()) return deadline.status();
  if (*deadline) {
    if (!(**deadline > 0)) {
      return absl::InvalidArgumentError("--campaign-deadline must be > 0 seconds");
    }
    o->campaign_deadline = **deadline;
  } else if (o->dropout > 0) {
    o->campaign_deadline = 30;  // offline nodes would hold it open
  }
  if (o->campaign_deadline >= o->timeout) {
    return absl::InvalidArgumentError("--campaign-deadline must be below --timeout");
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  auto parsed = ldpgraph::CliArgs::Parse(
      args,
      {"hosts", "nodes-per-host", "processes", "enrol-concurrency", "batch", "real-agents",
       "attribute", "epsilon", "classes", "features", "status-interval-ms", "enrol-timeout",
       "fleet-nice",
       "timeout", "hold", "churn", "curator", "agent", "curator-args", "dir", "latency",
       "jitter", "loss", "dropout", "campaign-deadline"},
      {"keep", "tls"});
  if (!parsed.ok()) return parsed.status();
  const ldpgraph::CliArgs& a = *parsed;
  Options o;
  o.processes = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
  auto get_int = [&](const char* flag, int* out, int64_t lo, int64_t hi) -> absl::Status {
    auto v = a.GetInt(flag);
    if (!v.ok()) return v.status();
    if (!*v) return absl::OkStatus();
    if (**v < lo || **v > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " must be in [", lo, ", ", hi, "]"));
    }
    *out = static_cast<int>(**v);
    return absl::OkStatus();
  };
  auto get_double = [&](const char* flag, double* out) -> absl::Status {
    auto v = a.GetDouble(flag);
    if (!v.ok()) return v.status();
    if (!*v) return absl::OkStatus();
    if (!(**v > 0)) return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be > 0"));
    *out = **v;
    return absl::OkStatus();
  };
  for (absl::Status s :
       {get_int("hosts", &o.hosts, 1, 1000000), get_int("processes", &o.processes, 1, 256),
        get_int("enrol-concurrency", &o.enrol_concurrency, 0, 1000000),
        get_int("batch", &o.batch, 1, 65536), get_int("real-agents", &o.real_agents, 1, 10000),
        get_int("classes", &o.classes, 2, 1000000), get_int("features", &o.features, 1, 1000000),
        get_int("status-interval-ms", &o.status_interval_ms, 0, 60000),
        get_int("fleet-nice", &o.fleet_nice, 0, 19),
        get_double("epsilon", &o.epsilon), get_double("enrol-timeout", &o.enrol_timeout),
        get_double("timeout", &o.timeout), get_double("hold", &o.hold)}) {
    if (!s.ok()) return s;
  }
  if (auto churn = a.GetDouble("churn"); !churn.ok()) {
    return churn.status();
  } else if (*churn) {
    if (!(**churn >= 0 && **churn <= 1) || o.real_agents == 0) {
      return absl::InvalidArgumentError("--churn F needs F in [0, 1] and --real-agents");
    }
    o.churn = **churn;
  }
  if (o.real_agents > 0) {
    o.nodes_per_host = 100;
    if (a.Has("hosts") || a.Has("processes") || a.Has("enrol-concurrency") || a.Has("batch") ||
        a.Has("classes")) {
      return absl::InvalidArgumentError(
          "--hosts, --processes, --enrol-concurrency, --batch and --classes "
          "are for simulated hosts; --real-agents K starts K ldpgraph-agent "
          "processes");
    }
  }
  if (absl::Status s = get_int("nodes-per-host", &o.nodes_per_host, 1, 100000); !s.ok()) {
    return s;
  }
  const int64_t hosts = o.real_agents > 0 ? o.real_agents : o.hosts;
  if (hosts * o.nodes_per_host > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError("hosts * nodes-per-host is too large");
  }
  if (o.real_agents > 0 && hosts * o.nodes_per_host < 12) {
    return absl::InvalidArgumentError(
        "--real-agents needs at least 12 nodes in all (the generated "
        "dataset's 6 classes, twice)");
  }
  o.processes = std::min(o.processes, o.hosts);
  o.attribute = a.Get("attribute").value_or("label");
  if (o.attribute != "label" && o.attribute != "features") {
    return absl::InvalidArgumentError(
        absl::StrCat("--attribute must be label or features, got '", o.attribute, "'"));
  }
  o.curator_bin = a.Get("curator").value_or(FindProgram("ldpgraph-curator"));
  o.agent_bin = a.Get("agent").value_or(FindProgram("ldpgraph-agent"));
  for (const auto& bin : o.real_agents > 0 ? std::vector<std::string>{o.curator_bin, o.agent_bin}
                                           : std::vector<std::string>{o.curator_bin}) {
    if (access(bin.c_str(), X_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(bin,
                       " is not an executable: build it (ninja ldpgraph-curator "
                       "ldpgraph-agent) or give --curator / --agent"));
    }
  }
  if (auto extra = a.Get("curator-args")) {
    o.curator_args = absl::StrSplit(*extra, ' ', absl::SkipEmpty());
  }
  o.dir = a.Get("dir").value_or("");
  o.keep = a.Flag("keep");
  o.tls = a.Flag("tls");
  if (absl::Status s = ParseScenario(a, &o); !s.ok()) return s;
  return o;
}

// --- simulated agent hosts (worker processes) -----------------------------------
//
// A worker owns hosts [first_host, end_host). It reports to the parent over a
// pipe, one line per message:
//   C <counters...>   cumulative counters (every 100 ms and at exit)
//   E <text>          one error message (the first few only)
// and takes commands on another: 'g' (start enrolling), 'q' or end of file
// (cancel every stream and exit).

struct WorkerConfig {
  int index = 0;
  int first_host = 0, end_host = 0;
  int nodes_per_host = 1;
  int enrol_concurrency = 0;
  int batch = 512;
  double dropout = 0;  // --dropout: offline nodes are left out of Enrol
  std::string target;
  std::string node_key;  // raw bytes
  int up_fd = -1, down_fd = -1;
};

// The counters a worker sends, in this order.
struct WorkerCounters {
  int64_t enrolled = 0;          // Enrol OK
  int64_t enrol_failed = 0;      // Enrol failed
  int64_t subscribe_failed = 0;  // task stream ended or failed (not at stop)
  int64_t tasks = 0;             // tasks received
  int64_t reported = 0;          // reports acknowledged OK
  int64_t rejected = 0;          // reports acknowledged with an error code
  int64_t report_failed = 0;     // Report streams that failed
  int64_t lost_nodes = 0;        // nodes of hosts that can no longer answer
  int64_t errors = 0;            // every error counted above (and others)
  int64_t last_ack_us = 0;       // monotonic time of the latest ack

  static constexpr int64_t WorkerCounters::*kFields[] = {
      &WorkerCounters::enrolled,         &WorkerCounters::enrol_failed,
      &WorkerCounters::subscribe_failed, &WorkerCounters::tasks,
      &WorkerCounters::reported,         &WorkerCounters::rejected,
      &WorkerCounters::report_failed,    &WorkerCounters::lost_nodes,
      &WorkerCounters::errors,           &WorkerCounters::last_ack_us};
};

class Worker;

// One simulated agent host: its channel, session and task stream.
struct Host {
  Worker* worker = nullptr;
  int index = 0;
  uint32_t first_node = 0, count = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentService::Stub> stub;
  grpc::ClientContext enrol_ctx;
  v1::EnrolRequest enrol_req;
  v1::EnrolResponse enrol_resp;
  std::string token;
  std::mutex mu;                      // answered, subscribe
  std::vector<std::string> answered;  // campaigns answered
  class SubscribeReactor* subscribe = nullptr;
  std::atomic<bool> dead{false};
  std::atomic<int64_t> pending_nodes{0};  // nodes asked but not yet acked
};

class Worker {
 public:
  explicit Worker(WorkerConfig c) : c_(std::move(c)) {}
  [[noreturn]] void Run();

  bool stopping() const { return stopping_.load(); }
  void Count(int64_t WorkerCounters::*field, int64_t n = 1) {
    std::lock_guard<std::mutex> l(mu_);
    counters_.*field += n;
  }
  // One error: counted in field (if any) and in errors; its message is
  // passed on if it is among the worker's first three of its kind (a word:
  // enrol, task-stream, report-stream, rejected, other).
  void Error(int64_t WorkerCounters::*field, const char* kind, const std::string& message) {
    std::lock_guard<std::mutex> l(mu_);
    if (field != nullptr) counters_.*field += 1;
    counters_.errors += 1;
    KeepLocked(kind, message);
  }
  // A message about errors counted elsewhere.
  void Note(const char* kind, const std::string& message) {
    std::lock_guard<std::mutex> l(mu_);
    KeepLocked(kind, message);
  }
  // A host that will answer nothing more: its pending nodes are lost.
  void Dead(Host& h) {
    if (h.dead.exchange(true)) return;
    const int64_t pending = h.pending_nodes.exchange(0);
    bool answered_any;
    {
      std::lock_guard<std::mutex> l(h.mu);
      answered_any = !h.answered.empty();
    }
    Count(&WorkerCounters::lost_nodes, answered_any ? pending : h.count);
  }
  void Acked(int64_t ok, int64_t rejected) {
    std::lock_guard<std::mutex> l(mu_);
    counters_.reported += ok;
    counters_.rejected += rejected;
    counters_.errors += rejected;
    counters_.last_ack_us = static_cast<int64_t>(MonoSeconds() * 1e6);
  }
  void CallStarted() { outstanding_.fetch_add(1); }
  void CallDone() {
    if (outstanding_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> l(mu_);
      cv_.notify_all();
    }
  }
  void EnrolDone() {
    std::lock_guard<std::mutex> l(mu_);
    --enrols_in_flight_;
    cv_.notify_all();
  }
  void Answer(Host& h, const v1::Task& task);
  void StartSubscribe(Host& h);

 private:
  void SendStatus();
  void Enrol(Host& h);
  void KeepLocked(const char* kind, const std::string& message) {
    if (kept_[kind]++ < 3) messages_.push_back(absl::StrCat(kind, " ", OneLine(message)));
  }

  WorkerConfig c_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> outstanding_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  WorkerCounters counters_;
  std::vector<std::string> messages_;  // "kind text", not sent yet
  std::map<std::string, int> kept_;
  int enrols_in_flight_ = 0;
  std::mutex write_mu_;
};

thread_local std::unique_ptr<ldpgraph::SecureRandom> t_rng;
ldpgraph::RandomSource& Rng() {
  if (!t_rng) {
    auto r = ldpgraph::SecureRandom::Create();
    if (!r.ok()) {
      std::cerr << "fleet_load: " << r.status() << "\n";
      _exit(3);
    }
    t_rng = *std::move(r);
  }
  return *t_rng;
}

// The task stream of one host; lives as long as its host (never deleted
// before the worker exits, so TryCancel is always safe).
class SubscribeReactor : public grpc::ClientReadReactor<v1::Task> {
 public:
  explicit SubscribeReactor(Host* h) : h_(h) { ctx_.AddMetadata("ldpgraph-session", h->token); }
  void Start() {
    h_->worker->CallStarted();
    h_->stub->async()->Subscribe(&ctx_, &req_, this);
    StartRead(&task_);
    StartCall();
  }
  void Cancel() { ctx_.TryCancel(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    h_->worker->Count(&WorkerCounters::tasks);
    h_->worker->Answer(*h_, task_);
    StartRead(&task_);
  }
  void OnDone(const grpc::Status& s) override {
    Worker& w = *h_->worker;
    if (!w.stopping()) {
      w.Error(&WorkerCounters::subscribe_failed, "task-stream",
              absl::StrCat("host ", h_->index, ": task stream ended: ", GrpcError(s)));
      w.Dead(*h_);
    }
    w.CallDone();
  }

 private:
  Host* h_;
  grpc::ClientContext ctx_;
  v1::SubscribeRequest req_;
  v1::Task task_;
};

// One Report stream: the host's answers to one task, in batches; deletes
// itself when done.
class ReportReactor : public grpc::ClientBidiReactor<v1::ReportBatch, v1::ReportAck> {
 public:
  ReportReactor(Host* h, std::vector<v1::ReportBatch> batches)
      : h_(h), batches_(std::move(batches)) {
    ctx_.AddMetadata("ldpgraph-session", h->token);
  }
  void Start() {
    h_->worker->CallStarted();
    h_->stub->async()->Report(&ctx_, this);
    WriteNext();
    StartRead(&ack_);
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // else OnDone says why
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    int64_t good = 0, bad = 0;
    const v1::ReportBatch& batch = batches_[std::min(acks_, batches_.size() - 1)];
    for (int i = 0; i < ack_.results_size(); ++i) {
      const v1::ReportResult& r = ack_.results(i);
      if (r.code() == 0) {
        ++good;
      } else if (++bad == 1) {
        h_->worker->Note(
            "rejected",
            absl::StrCat(
                "host ", h_->index, ": report of node ",
                i < batch.reports_size() ? absl::StrCat(batch.reports(i).node_id()) : "?",
                " rejected: ",
                GrpcError(grpc::Status(static_cast<grpc::StatusCode>(r.code()), r.message()))));
      }
    }
    h_->worker->Acked(good, bad);  // rejections count as errors
    h_->pending_nodes.fetch_sub(good + bad);
    if (++acks_ < batches_.size()) StartRead(&ack_);
  }
  void OnDone(const grpc::Status& s) override {
    Worker& w = *h_->worker;
    if ((!s.ok() || acks_ < batches_.size()) && !w.stopping()) {
      w.Error(&WorkerCounters::report_failed, "report-stream",
              absl::StrCat("host ", h_->index, ": report stream: ", GrpcError(s), ", ", acks_,
                           " of ", batches_.size(), " batches acked"));
      w.Dead(*h_);
    }
    w.CallDone();
    delete this;
  }

 private:
  void WriteNext() {
    if (next_ >= batches_.size()) return;
    const size_t i = next_++;
    if (next_ == batches_.size()) {
      StartWriteLast(&batches_[i], grpc::WriteOptions());
    } else {
      StartWrite(&batches_[i]);
    }
  }
  Host* h_;
  grpc::ClientContext ctx_;
  std::vector<v1::ReportBatch> batches_;
  size_t next_ = 0;
  size_t acks_ = 0;
  v1::ReportAck ack_;
};

void Worker::Answer(Host& h, const v1::Task& task) {
  {
    std::lock_guard<std::mutex> l(h.mu);
    if (std::find(h.answered.begin(), h.answered.end(), task.campaign_id()) != h.answered.end()) {
      return;  // a resend: answered already
    }
    h.answered.push_back(task.campaign_id());
  }
  // The reports, perturbed as an agent would (load_util.h).
  auto simulated = SimulatedReports(task, Rng());
  if (!simulated.ok()) {
    Error(nullptr, "other",
          absl::StrCat("host ", h.index, ": campaign ", task.campaign_id(),
                       ": cannot answer: ", simulated.status().ToString()));
    Dead(h);
    return;
  }
  std::vector<v1::Report> reports = *std::move(simulated);
  if (reports.empty()) return;
  h.pending_nodes.fetch_add(static_cast<int64_t>(reports.size()));
  std::vector<v1::ReportBatch> batches;
  for (size_t first = 0; first < reports.size(); first += c_.batch) {
    v1::ReportBatch b;
    b.set_batch_id(batches.size() + 1);
    const size_t last = std::min(reports.size(), first + c_.batch);
    for (size_t i = first; i < last; ++i) *b.add_reports() = std::move(reports[i]);
    batches.push_back(std::move(b));
  }
  (new ReportReactor(&h, std::move(batches)))->Start();
}

void Worker::StartSubscribe(Host& h) {
  auto* r = new SubscribeReactor(&h);
  {
    std::lock_guard<std::mutex> l(h.mu);
    if (stopping()) {
      delete r;
      return;
    }
    h.subscribe = r;
  }
  // Outside the lock: a reaction may run on this thread (OnDone of a call
  // that fails at once), and it takes h.mu.
  r->Start();
}

void Worker::Enrol(Host& h) {
  h.enrol_ctx.set_wait_for_ready(true);
  h.enrol_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  CallStarted();
  h.stub->async()->Enrol(&h.enrol_ctx, &h.enrol_req, &h.enrol_resp, [this, &h](grpc::Status s) {
    if (s.ok()) {
      h.token = h.enrol_resp.session_token();
      Count(&WorkerCounters::enrolled);
      StartSubscribe(h);
    } else if (!stopping()) {
      Error(&WorkerCounters::enrol_failed, "enrol",
            absl::StrCat("host ", h.index, ": Enrol: ", GrpcError(s)));
      Dead(h);
    }
    EnrolDone();
    CallDone();
  });
}

void Worker::SendStatus() {
  std::string out;
  {
    std::lock_guard<std::mutex> l(mu_);
    out.push_back('C');
    for (auto f : WorkerCounters::kFields) absl::StrAppend(&out, " ", counters_.*f);
    out += "\n";
    for (auto& m : messages_) absl::StrAppend(&out, "E ", m, "\n");
    messages_.clear();
  }
  std::lock_guard<std::mutex> l(write_mu_);
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = write(c_.up_fd, out.data() + done, out.size() - done);
    if (n <= 0) _exit(4);  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

void Worker::Run() {
  // Channels (lazy: nothing connects before the first call) and credentials.
  for (int i = c_.first_host; i < c_.end_host; ++i) {
    auto h = std::make_unique<Host>();
    h->worker = this;
    h->index = i;
    h->first_node = static_cast<uint32_t>(i) * c_.nodes_per_host;
    h->count = static_cast<uint32_t>(c_.nodes_per_host);
    grpc::ChannelArguments args;
    // A connection of its own per host, as separate machines would have.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("ldpgraph.fleet_load.host", i);
    args.SetMaxReceiveMessageSize(64 << 20);
    h->channel = MakeChannel(c_.target, args);
    h->stub = v1::AgentService::NewStub(h->channel);
    h->enrol_req.set_host_name(absl::StrCat("fleet-load-", i));
    for (uint32_t v = h->first_node; v < h->first_node + h->count; ++v) {
      if (ldpgraph::SimulatedOffline(kScenarioSeed, v, c_.dropout)) continue;
      v1::NodeCredential* n = h->enrol_req.add_nodes();
      n->set_node_id(v);
      n->set_secret(ldpgraph::curator::NodeCredential(c_.node_key, v));
      n->mutable_caps()->set_total(8);  // ldpgraph-agent's default cap
    }
    hosts_.push_back(std::move(h));
  }
  // The parent's commands.
  std::atomic<bool> go{false};
  std::thread commands([&] {
    char cmd;
    while (read(c_.down_fd, &cmd, 1) == 1) {
      if (cmd == 'g') {
        go.store(true);
        std::lock_guard<std::mutex> l(mu_);
        cv_.notify_all();
      }
      if (cmd == 'q') break;
    }
    stopping_.store(true);
    std::lock_guard<std::mutex> l(mu_);
    cv_.notify_all();
  });
  std::thread status([&] {
    while (!stopping()) {
      SendStatus();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return go.load() || stopping(); });
  }
  for (auto& h : hosts_) {
    if (c_.enrol_concurrency > 0) {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return enrols_in_flight_ < c_.enrol_concurrency || stopping(); });
    }
    if (stopping()) break;
    if (h->enrol_req.nodes_size() == 0) continue;  // every node offline
    {
      std::lock_guard<std::mutex> l(mu_);
      ++enrols_in_flight_;
    }
    Enrol(*h);
  }
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return stopping(); });
  }
  // Stop: cancel every call, wait (a little) for them to end, report, exit
  // without tearing gRPC down (the process ends anyway).
  for (auto& h : hosts_) {
    h->enrol_ctx.TryCancel();
    SubscribeReactor* r;
    {
      std::lock_guard<std::mutex> l(h->mu);
      r = h->subscribe;
    }
    if (r != nullptr) r->Cancel();
  }
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(5), [&] { return outstanding_.load() == 0; });
  }
  status.join();
  SendStatus();
  commands.detach();
  _exit(0);
}

// The parent's view of its workers.
class Fleet {
 public:
  struct Proc {
    pid_t pid = -1;
    int up = -1, down = -1;
    std::string buffer;
    WorkerCounters counters;
    bool closed = false;
  };

  // Forks the workers; call before this process touches gRPC.
  bool Start(const Options& o, const std::string& target, const std::string& node_key) {
    const int p = o.processes;
    std::vector<std::array<int, 2>> ups(p), downs(p);
    for (int i = 0; i < p; ++i) {
      if (pipe(ups[i].data()) != 0 || pipe(downs[i].data()) != 0) return false;
    }
    workers_.resize(p);
    for (int i = 0; i < p; ++i) {
      WorkerConfig c;
      c.index = i;
      c.first_host = static_cast<int>(int64_t{o.hosts} * i / p);
      c.end_host = static_cast<int>(int64_t{o.hosts} * (i + 1) / p);
      c.nodes_per_host = o.nodes_per_host;
      c.enrol_concurrency = o.enrol_concurrency;
      c.batch = o.batch;
      c.dropout = o.dropout;
      c.target = target;
      c.node_key = node_key;
      c.up_fd = ups[i][1];
      c.down_fd = downs[i][0];
      const pid_t pid = fork();
      if (pid < 0) return false;
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (o.fleet_nice > 0) setpriority(PRIO_PROCESS, 0, o.fleet_nice);
        signal(SIGINT, SIG_IGN);  // the parent stops the workers
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_IGN);
        // Only this worker's two ends stay open, so that each pipe reads EOF
        // once its other process is gone.
        for (int j = 0; j < p; ++j) {
          if (j != i) {
            close(ups[j][1]);
            close(downs[j][0]);
          }
          close(ups[j][0]);
          close(downs[j][1]);
        }
        Worker(std::move(c)).Run();
      }
      workers_[i].pid = pid;
    }
    for (int i = 0; i < p; ++i) {
      close(ups[i][1]);
      close(downs[i][0]);
      workers_[i].up = ups[i][0];
      workers_[i].down = downs[i][1];
      fcntl(workers_[i].up, F_SETFD, FD_CLOEXEC);
      fcntl(workers_[i].down, F_SETFD, FD_CLOEXEC);
    }
    reader_ = std::thread([this] { Read(); });
    return true;
  }

  std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const auto& w : workers_) out.push_back(w.pid);
    return out;
  }

  void Go() {
    for (auto& w : workers_) (void)!write(w.down, "g", 1);
  }

  // Stops every worker: 'q', then up to 10 s for them to exit.
  void Stop() {
    if (stopped_.exchange(true)) return;
    for (auto& w : workers_) {
      (void)!write(w.down, "q", 1);
      close(w.down);
    }
    const double until = MonoSeconds() + 10;
    for (auto& w : workers_) {
      while (MonoSeconds() < until && waitpid(w.pid, nullptr, WNOHANG) != w.pid) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (waitpid(w.pid, nullptr, WNOHANG) == 0) {
        kill(w.pid, SIGKILL);
        waitpid(w.pid, nullptr, 0);
      }
    }
    if (reader_.joinable()) reader_.join();
  }
  ~Fleet() { Stop(); }

  WorkerCounters Totals() const {
    std::lock_guard<std::mutex> l(mu_);
    WorkerCounters t;
    for (const auto& w : workers_) {
      for (auto f : WorkerCounters::kFields) {
        if (f == &WorkerCounters::last_ack_us) {
          t.*f = std::max(t.*f, w.counters.*f);
        } else {
          t.*f += w.counters.*f;
        }
      }
    }
    return t;
  }
  // The first three messages of each kind of error, "kind text".
  std::vector<std::string> Messages() const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::string> out;
    for (const char* kind : {"enrol", "task-stream", "report-stream", "rejected", "other"}) {
      auto it = messages_.find(kind);
      if (it == messages_.end()) continue;
      for (const auto& m : it->second) out.push_back(absl::StrCat(kind, ": ", m));
    }
    return out;
  }
  // A worker that died (not asked to stop): its description.
  std::optional<std::string> Died() {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i].closed && !stopped_) {
        return absl::StrCat("worker process ", i, " (pid ", workers_[i].pid, ") ended early");
      }
    }
    return std::nullopt;
  }

 private:
  void Read() {
    while (true) {
      std::vector<pollfd> fds;
      std::vector<size_t> which;
      {
        std::lock_guard<std::mutex> l(mu_);
        for (size_t i = 0; i < workers_.size(); ++i) {
          if (workers_[i].closed) continue;
          fds.push_back({workers_[i].up, POLLIN, 0});
          which.push_back(i);
        }
      }
      if (fds.empty()) return;
      if (poll(fds.data(), fds.size(), 200) <= 0) continue;
      for (size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        char buf[65536];
        const ssize_t n = read(fds[k].fd, buf, sizeof buf);
        std::lock_guard<std::mutex> l(mu_);
        Proc& w = workers_[which[k]];
        if (n <= 0) {
          w.closed = true;
          close(w.up);
          continue;
        }
        w.buffer.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = w.buffer.find('\n')) != std::string::npos) {
          const std::string line = w.buffer.substr(0, nl);
          w.buffer.erase(0, nl + 1);
          if (line.rfind("C ", 0) == 0) {
            std::vector<std::string> f = absl::StrSplit(line.substr(2), ' ');
            for (size_t i = 0; i < std::size(WorkerCounters::kFields) && i < f.size(); ++i) {
              w.counters.*WorkerCounters::kFields[i] = std::stoll(f[i]);
            }
          } else if (line.rfind("E ", 0) == 0) {
            const std::string rest = line.substr(2);
            const size_t space = rest.find(' ');
            auto& kept = messages_[rest.substr(0, space)];
            if (kept.size() < 3 && space != std::string::npos) {
              kept.push_back(rest.substr(space + 1));
            }
          }
        }
      }
    }
  }

  std::vector<Proc> workers_;
  std::map<std::string, std::vector<std::string>> messages_;  // by kind
  mutable std::mutex mu_;
  std::thread reader_;
  std::atomic<bool> stopped_{false};
};

// --- the admin side -------------------------------------------------------------

std::shared_ptr<grpc::Channel> AdminChannel(const std::string& target, const char* role) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetString("ldpgraph.fleet_load.admin", role);
  args.SetMaxReceiveMessageSize(64 << 20);
  return MakeChannel(target, args);
}

class Admin {
 public:
  Admin(const std::string& target, const std::string& token, const char* role)
      : stub_(v1::AdminService::NewStub(AdminChannel(target, role))), token_(token) {}
  void Prepare(grpc::ClientContext* ctx, double deadline_s = 10) const {
    ctx->AddMetadata("authorization", "Bearer " + token_);
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
  }
  grpc::Status Status(v1::CuratorStatus* out) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    return stub_->GetStatus(&ctx, v1::GetStatusRequest(), out);
  }
  v1::AdminService::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<v1::AdminService::Stub> stub_;
  std::string token_;
};

// GetStatus in a loop on its own channel: latencies by phase, failures, and
// the curator's thread count and RSS sampled alongside.
class StatusProbe {
 public:
  StatusProbe(const std::string& target, const std::string& token, pid_t curator, int interval_ms)
      : admin_(target, token, "status-probe"), curator_(curator), interval_ms_(interval_ms) {}
  ~StatusProbe() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void SetPhase(int phase) { phase_.store(phase); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Latencies (ms) of successful calls in a phase; -1: all phases.
  std::vector<double> Latencies(int phase) const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<double> out;
    for (const auto& [p, ms] : samples_) {
      if (phase < 0 || p == phase) out.push_back(ms);
    }
    return out;
  }
  int64_t failures() const { return failures_.load(); }
  std::vector<std::string> Messages() const {
    std::lock_guard<std::mutex> l(mu_);
    return messages_;
  }
  int max_threads() const { return max_threads_.load(); }
  long max_rss_kib() const { return max_rss_.load(); }

 private:
  void Loop() {
    while (!stop_.load()) {
      const int phase = phase_.load();
      v1::CuratorStatus s;
      const auto t = Clock::now();
      grpc::Status g = admin_.Status(&s);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
      {
        std::lock_guard<std::mutex> l(mu_);
        if (g.ok()) {
          samples_.emplace_back(phase, ms);
        } else {
          failures_.fetch_add(1);
          if (messages_.size() < 3) {
            messages_.push_back(absl::StrCat("admin: GetStatus: ", GrpcError(g)));
          }
        }
      }
      ProcStats p = ReadProc(curator_);
      if (p.ok) {
        max_threads_.store(std::max(max_threads_.load(), p.threads));
        max_rss_.store(std::max(max_rss_.load(), p.rss_kib));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms_));
    }
  }

  Admin admin_;
  pid_t curator_;
  int interval_ms_;
  std::atomic<bool> stop_{false};
  std::atomic<int> phase_{0};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::pair<int, double>> samples_;
  std::vector<std::string> messages_;
  std::atomic<int64_t> failures_{0};
  std::atomic<int> max_threads_{0};
  std::atomic<long> max_rss_{0};
};

enum Phase { kEnrolPhase = 0, kCampaignPhase = 1, kHoldPhase = 2 };

// Progress lines on stderr, at most one a second per stage.
class Progress {
 public:
  explicit Progress(double t0) : t0_(t0) {}
  void Maybe(const std::string& text) {
    const double now = MonoSeconds();
    if (now - last_ < 1.0) return;
    last_ = now;
    Line(text);
  }
  void Line(const std::string& text) {
    std::cerr << absl::StrFormat("[%7.2fs] %s\n", MonoSeconds() - t0_, text) << std::flush;
  }
  void Reset() { last_ = 0; }

 private:
  double t0_;
  double last_ = 0;
};

// --- the run -------------------------------------------------------------------

class Run {
 public:
  explicit Run(Options o) : o_(std::move(o)), progress_(MonoSeconds()) {}
  ~Run() { Cleanup(); }
  int Main();

 private:
  bool real() const { return o_.real_agents > 0; }
  int hosts() const { return real() ? o_.real_agents : o_.hosts; }
  uint32_t nodes() const { return static_cast<uint32_t>(int64_t{hosts()} * o_.nodes_per_host); }
  bool Prepare();
  bool StartCurator();
  bool StartAgents();
  // --latency/--jitter/--loss: the proxy the fleet reaches the curator
  // through (agent_target_; target_ without them), and --dropout's offline
  // nodes (offline_) and hosts with a node online.
  bool StartScenario();
  int OnlineHosts() const;
  std::vector<std::string> AgentScenarioArgs() const;
  // With a deadline, waits until the campaign closed; false on a failure.
  bool WaitClosed();
  json ScenarioJson() const;
  std::string ScenarioText() const;
  // Agent process a, its log agent-a<log_suffix>.log.
  pid_t StartAgent(int a, const std::string& log_suffix);
  // --churn: the campaign's kill plan, and one look at it per poll.
  void StartChurn();
  void PollChurn(uint64_t answered, uint64_t targeted, double since_open);
  std::optional<ldpgraph::ldpctl::ChurnDriver> churn_;
  // Every host enrolled and subscribed (or failed, or the timeout).
  void WaitEnrolled();
  void RunCampaign();
  // The figures of the run, gathered once for the JSON and the table.
  struct Figures;
  Figures Gather() const;
  json FiguresJson(const Figures& f, int exit_code) const;
  std::string Table(const Figures& f, bool show_dir) const;
  // Prints the table (stderr) and the JSON object (stdout).
  void Finish(int exit_code);
  void Fail(const std::string& message) {
    failures_.push_back(message);
    std::cerr << "fleet_load: " << message << "\n";
  }
  // Errors so far: everything counted, plus processes that died.
  int64_t Errors() const;
  std::optional<std::string> SomethingDied();
  void Cleanup();

  Options o_;
  Progress progress_;
  std::string dir_;
  bool made_dir_ = false;
  bool success_ = false;  // the work folder is removed only then
  std::string node_key_;  // raw
  std::string admin_hex_;
  std::string dataset_;
  pid_t curator_ = -1;
  int port_ = 0;
  std::string target_;
  std::string agent_target_;  // the proxy's address, or target_
  std::unique_ptr<ldpgraph::net::FaultProxy> proxy_;
  uint32_t offline_ = 0;  // --dropout: nodes that never come online
  std::vector<pid_t> agents_;
  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<StatusProbe> probe_;
  std::vector<std::string> failures_;
  int64_t agent_errors_ = 0;  // real agents that exited
  int64_t admin_errors_ = 0;  // admin calls of the campaign loop that failed
  std::vector<std::string> admin_messages_;

  // Measurements.
  ProcStats at_ready_, at_go_, at_campaign_, at_campaign_end_, at_done_;
  double enrol_seconds_ = -1;
  double campaign_seconds_ = -1;  // until every node answered
  double campaign_waited_ = -1;   // until it answered or the wait ended
  double last_ack_seconds_ = -1;
  bool complete_ = false;
  bool aborted_ = false;
  uint32_t subscribed_ = 0, enrolled_nodes_ = 0;
  v1::Campaign campaign_;
  std::vector<ProcStats> agent_stats_;
  double fleet_cpu_ = 0;  // the worker processes' CPU seconds
};

bool Run::Prepare() {
  if (o_.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/fleet_load.XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      Fail(absl::StrCat("cannot create a work folder: ", std::strerror(errno)));
      return false;
    }
    dir_ = tmpl;
    made_dir_ = true;
  } else {
    dir_ = o_.dir;
    std::error_code ec;
    if (fs::exists(dir_) && !fs::is_empty(dir_, ec)) {
      Fail(absl::StrCat("--dir ", dir_, " is not empty: give an empty or new folder"));
      return false;
    }
    fs::create_directories(dir_, ec);
    if (ec) {
      Fail(absl::StrCat("cannot create ", dir_, ": ", ec.message()));
      return false;
    }
  }
  chmod(dir_.c_str(), 0700);
  const std::string key_hex = RandomHex(32);
  admin_hex_ = RandomHex(32);
  auto raw = ldpgraph::FromHex(key_hex);
  if (!raw.ok() || !WriteFile(dir_ + "/node.key", key_hex + "\n", 0600) ||
      !WriteFile(dir_ + "/admin.token", admin_hex_ + "\n", 0600)) {
    Fail("cannot write the node key and admin token");
    return false;
  }
  node_key_ = *raw;
  if (o_.tls) {
    auto tls = ldpgraph::ldpctl::MakeDevTlsMaterial({kTlsName, "127.0.0.1"});
    if (!tls.ok()) {
      Fail(absl::StrCat("making the run's TLS certificates: ", tls.status().message()));
      return false;
    }
    if (auto s = ldpgraph::ldpctl::WriteDevTlsMaterial(*tls, dir_); !s.ok()) {
      Fail(std::string(s.message()));
      return false;
    }
    g_tls_ca_pem = tls->ca_cert_pem;
  }
  if (real()) {
    // The agents' private records: a generated dataset with the generator's
    // defaults but the size, and one credentials file per agent.
    progress_.Line(absl::StrCat("generating a dataset of ", nodes(), " nodes"));
    ldpgraph::GeneratorOptions g = ldpgraph::DefaultGeneratorOptions();
    g.nodes = nodes();
    g.features = o_.features;
    g.avg_degree = std::min(g.avg_degree, std::max(1.0, (nodes() - 1) / 4.0));
    auto data = ldpgraph::GenerateDataset(g);
    if (!data.ok()) {
      Fail(absl::StrCat("generating the dataset: ", data.status().message()));
      return false;
    }
    o_.classes = static_cast<int>(data->meta.classes);
    dataset_ = dir_ + "/dataset";
    if (auto s = ldpgraph::WriteDataset(*data, dataset_); !s.ok()) {
      Fail(absl::StrCat("writing the dataset: ", s.message()));
      return false;
    }
    for (int a = 0; a < o_.real_agents; ++a) {
      const uint32_t begin = static_cast<uint32_t>(a) * o_.nodes_per_host;
      if (!WriteFile(
              absl::StrCat(dir_, "/agent-", a, ".credentials"),
              ldpgraph::curator::CredentialsFileText(node_key_, begin, begin + o_.nodes_per_host),
              0600)) {
        Fail("cannot write the credentials files");
        return false;
      }
    }
  }
  return true;
}

bool Run::StartCurator() {
  const std::string ready = dir_ + "/curator.ready";
  std::vector<std::string> argv = {o_.curator_bin,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--http",
                                   "off",
                                   "--data-dir",
                                   dir_ + "/curator",
                                   "--admin-token",
                                   dir_ + "/admin.token",
                                   "--node-key",
                                   dir_ + "/node.key",
                                   "--ready-file",
                                   ready};
  if (o_.tls) {
    argv.insert(argv.end(), {"--tls-cert", dir_ + "/curator.pem", "--tls-key",
                             dir_ + "/curator.key"});
  } else {
    argv.push_back("--insecure");
  }
  if (real()) {
    argv.insert(argv.end(), {"--graph", dataset_});
  } else {
    argv.insert(argv.end(), {"--nodes", absl::StrCat(nodes())});
  }
  // --curator-args may give --http (to scrape /metrics): then it replaces
  // the "--http off" above.
  if (std::find(o_.curator_args.begin(), o_.curator_args.end(), "--http") !=
      o_.curator_args.end()) {
    auto http = std::find(argv.begin(), argv.end(), "--http");
    argv.erase(http, http + 2);
  }
  argv.insert(argv.end(), o_.curator_args.begin(), o_.curator_args.end());
  progress_.Line(absl::StrCat("starting ", o_.curator_bin));
  curator_ = Spawn(argv, dir_ + "/curator.log");
  const double until = MonoSeconds() + 60;
  while (true) {
    if (auto how = ExitedHow(curator_)) {
      curator_ = -1;
      Fail(absl::StrCat("the curator ", *how, "; last lines of ", dir_, "/curator.log:\n",
                        LogTail(dir_ + "/curator.log")));
      return false;
    }
    std::ifstream f(ready);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    json j = json::parse(text, nullptr, false);
    if (!j.is_discarded() && j.contains("grpc_port")) {
      port_ = j["grpc_port"].get<int>();
      break;
    }
    if (MonoSeconds() > until || g_interrupted) {
      Fail("the curator did not write its ready file within 60 s");
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  target_ = absl::StrCat("127.0.0.1:", port_);
  at_ready_ = ReadProc(curator_);
  progress_.Line(absl::StrCat("curator ready on ", target_, " (pid ", curator_, ", ",
                              at_ready_.threads, " threads, RSS ",
                              absl::StrFormat("%.1f", Mib(at_ready_.rss_kib)), " MiB)"));
  return true;
}

bool Run::StartAgents() {
  for (int a = 0; a < o_.real_agents; ++a) agents_.push_back(StartAgent(a, ""));
  return true;
}

pid_t Run::StartAgent(int a, const std::string& log_suffix) {
  {
    const uint32_t begin = static_cast<uint32_t>(a) * o_.nodes_per_host;
    std::vector<std::string> argv = {
        o_.agent_bin,    "--curator",
        agent_target_,
        "--credentials", absl::StrCat(dir_, "/agent-", a, ".credentials"),
        "--dataset",     dataset_,
        "--nodes",       absl::StrCat(begin, "-", begin + o_.nodes_per_host),
        "--state-dir",   absl::StrCat(dir_, "/agent-", a),
        "--http",        "off",
        "--name",        absl::StrCat("fleet-load-agent-", a)};
    if (o_.tls) {
      argv.insert(argv.end(), {"--ca", dir_ + "/ca.pem", "--server-name", kTlsName});
    } else {
      argv.push_back("--insecure");
    }
    for (const std::string& x : AgentScenarioArgs()) argv.push_back(x);
    return Spawn(argv, absl::StrCat(dir_, "/agent-", a, log_suffix, ".log"),
                 o_.fleet_nice);
  }
}

void Run::StartChurn() {
  auto plan = ldpgraph::ldpctl::PlanChurn(1, 0, o_.real_agents, o_.churn, /*exchange=*/false);
  if (!plan.ok()) return Fail(std::string(plan.status().message()));
  ldpgraph::ldpctl::ChurnDriver::Hooks hooks;
  hooks.kill = [this](int a) {
    kill(agents_[a], SIGKILL);
    int status = 0;
    while (waitpid(agents_[a], &status, 0) < 0 && errno == EINTR) {
    }
    agents_[a] = -1;  // not a failure: SomethingDied skips it
    progress_.Line(absl::StrCat("churn: agent ", a, " killed (SIGKILL)"));
    return absl::OkStatus();
  };
  hooks.restart = [this](int a) {
    agents_[a] = StartAgent(a, ".restart-1");
    progress_.Line(absl::StrCat("churn: agent ", a, " restarted"));
    return absl::OkStatus();
  };
  churn_.emplace(*std::move(plan), absl::Seconds(1), std::move(hooks));
}

void Run::PollChurn(uint64_t answered, uint64_t targeted, double since_open) {
  if (!churn_) return;
  absl::Status s = churn_->Poll(static_cast<uint32_t>(answered),
                                static_cast<uint32_t>(targeted),
                                absl::Seconds(since_open));
  if (s.ok() && answered >= targeted) s = churn_->Finish();
  if (!s.ok()) Fail(absl::StrCat("churn: ", s.message()));
}

std::optional<std::string> Run::SomethingDied() {
  if (curator_ > 0) {
    if (auto how = ExitedHow(curator_)) {
      const pid_t pid = curator_;
      curator_ = -1;
      return absl::StrCat("the curator (pid ", pid, ") ", *how, "; last lines of ", dir_,
                          "/curator.log:\n", LogTail(dir_ + "/curator.log"));
    }
  }
  for (size_t a = 0; a < agents_.size(); ++a) {
    if (agents_[a] <= 0) continue;
    if (auto how = ExitedHow(agents_[a])) {
      agents_[a] = -1;
      ++agent_errors_;
      const std::string log = absl::StrCat(dir_, "/agent-", a, ".log");
      return absl::StrCat("agent ", a, " ", *how, "; last lines of ", log, ":\n",
                          LogTail(log, 800));
    }
  }
  if (fleet_) return fleet_->Died();
  return std::nullopt;
}

int64_t Run::Errors() const {
  int64_t e = agent_errors_ + admin_errors_ + (probe_ ? probe_->failures() : 0);
  e += campaign_.progress().refused();
  // Simulated hosts count the reports the curator rejected themselves.
  e += fleet_ ? fleet_->Totals().errors : campaign_.progress().rejected();
  return e;
}

void Run::WaitEnrolled() {
  const double t0 = MonoSeconds();
  at_go_ = ReadProc(curator_);
  probe_->SetPhase(kEnrolPhase);
  if (fleet_) fleet_->Go();
  const double until = t0 + o_.enrol_timeout;
  progress_.Reset();
  v1::CuratorStatus s;
  bool have_status = false;
  while (!g_interrupted) {
    if (auto died = SomethingDied()) {
      Fail(*died);
      aborted_ = true;  // no campaign: a process of the fleet is gone
      return;
    }
    grpc::Status g = admin_->Status(&s);
    if (g.ok()) {
      have_status = true;
    } else {
      ++admin_errors_;
      if (admin_messages_.size() < 3) {
        admin_messages_.push_back(absl::StrCat("admin: GetStatus: ", GrpcError(g)));
      }
    }
    bool done = false;
    std::string line;
    if (fleet_) {
      const WorkerCounters c = fleet_->Totals();
      const int64_t settled = c.enrolled + c.enrol_failed;
      // Every Enrol answered, and every host that enrolled holds a task
      // stream (the curator counts them) or lost it.
      done = have_status && settled >= OnlineHosts() &&
             int64_t{s.task_streams()} + c.subscribe_failed >= c.enrolled;
      line = absl::StrFormat(
          "enrolling: %d/%d hosts enrolled, %u task streams open on the curator, "
          "%d errors (%d enrols, %d task streams failed)",
          c.enrolled, o_.hosts, s.task_streams(), c.errors, c.enrol_failed, c.subscribe_failed);
    } else {
      done = have_status && s.enrolled_nodes() >= nodes() - offline_ &&
             s.task_streams() >= static_cast<uint32_t>(o_.real_agents);
      line = absl::StrFormat("enrolling: %u/%u nodes enrolled, %u/%d agents subscribed",
                             s.enrolled_nodes(), nodes(), s.task_streams(), o_.real_agents);
    }
    if (done) {
      enrol_seconds_ = MonoSeconds() - t0;
      progress_.Line(line);
      break;
    }
    progress_.Maybe(line);
    if (MonoSeconds() > until) {
      progress_.Line(line);
      Fail(absl::StrFormat("enrolment did not finish within --enrol-timeout %.0f s",
                           o_.enrol_timeout));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  subscribed_ = s.task_streams();
  enrolled_nodes_ = s.enrolled_nodes();
}

void Run::RunCampaign() {
  v1::CreateCampaignRequest req;
  req.set_name("fleet_load");
  v1::MechanismSpec* spec = req.mutable_spec();
  spec->set_epsilon(o_.epsilon);
  if (o_.attribute == "label") {
    req.set_attribute(v1::ATTRIBUTE_LABEL);
    spec->set_kind(v1::MECHANISM_KIND_LABEL_RR);
    spec->set_dimension(static_cast<uint32_t>(o_.classes));
  } else {
    req.set_attribute(v1::ATTRIBUTE_FEATURES);
    spec->set_kind(v1::MECHANISM_KIND_HDS);
    spec->set_dimension(static_cast<uint32_t>(o_.features));
    // ldpgraph-agent's default scaling (symmetric) puts features in [-1, 1].
    spec->set_range_low(-1);
    spec->set_range_high(1);
  }
  req.mutable_nodes()->set_all(true);
  req.set_quorum(1.0);
  if (o_.campaign_deadline > 0) {
    req.set_deadline_unix_ms(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count() +
        static_cast<int64_t>(o_.campaign_deadline * 1000));
  }

  at_campaign_ = ReadProc(curator_);
  probe_->SetPhase(kCampaignPhase);
  const double t0 = MonoSeconds();
  struct Waited {
    double t0;
    double* out;
    ~Waited() { *out = MonoSeconds() - t0; }
  } waited{t0, &campaign_waited_};
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx, 60);
    grpc::Status g = admin_->stub().CreateCampaign(&ctx, req, &campaign_);
    if (!g.ok()) {
      ++admin_errors_;
      Fail(absl::StrCat("CreateCampaign: ", GrpcError(g)));
      return;
    }
  }
  progress_.Line(absl::StrCat("campaign ", campaign_.id(), " created (", o_.attribute, ", ",
                              nodes(), " nodes)"));
  if (o_.churn > 0) StartChurn();
  const double until = t0 + o_.timeout;
  progress_.Reset();
  int64_t stalled_polls = 0;
  while (!g_interrupted) {
    if (auto died = SomethingDied()) {
      Fail(*died);  // its nodes will not answer
      return;
    }
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::GetCampaignRequest get;
    get.set_campaign_id(campaign_.id());
    v1::Campaign c;
    grpc::Status g = admin_->stub().GetCampaign(&ctx, get, &c);
    if (!g.ok()) {
      ++admin_errors_;
      if (admin_messages_.size() < 3) {
        admin_messages_.push_back(absl::StrCat("admin: GetCampaign: ", GrpcError(g)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    campaign_ = c;
    const auto& p = c.progress();
    const uint64_t answered = uint64_t{p.reported()} + p.refused();
    std::string line =
        absl::StrFormat("campaign %s: %u/%u reported, %u refused, %u rejected", c.id(),
                        p.reported(), p.targeted(), p.refused(), p.rejected());
    if (fleet_) {
      const WorkerCounters w = fleet_->Totals();
      absl::StrAppend(&line, absl::StrFormat(", %d errors", w.errors));
      // Nothing more can come: the rest belongs to hosts that failed.
      if (answered + offline_ < p.targeted() &&
          answered + offline_ + static_cast<uint64_t>(w.lost_nodes + w.rejected) >=
              p.targeted()) {
        if (++stalled_polls > 25) {  // half a second, for stragglers in flight
          progress_.Line(line);
          Fail(absl::StrCat("campaign ", c.id(), " cannot complete: ", p.targeted() - answered,
                            " nodes belong to hosts that failed or were rejected"));
          return;
        }
      }
    }
    PollChurn(answered, p.targeted(), MonoSeconds() - t0);
    // Every online node answered (all of them, without --dropout).
    const uint64_t expected = p.targeted() - offline_;
    if (answered < expected && c.state() == v1::CAMPAIGN_STATE_CLOSED) {
      progress_.Line(line);
      Fail(absl::StrCat("campaign ", c.id(), " closed on ", c.close_reason(), " with ", answered,
                        " of ", expected, " online nodes answered"));
      return;
    }
    if (answered >= expected) {
      campaign_seconds_ = MonoSeconds() - t0;
      complete_ = p.reported() == expected;
      if (fleet_) {
        // The latest ack any host received, on the same monotonic clock.
        // The workers' counters lag by up to 100 ms: wait for them.
        for (int i = 0; i < 50; ++i) {
          const WorkerCounters w = fleet_->Totals();
          if (w.reported + w.rejected >= static_cast<int64_t>(expected)) {
            last_ack_seconds_ = w.last_ack_us * 1e-6 - t0;
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      progress_.Line(line);
      if (p.refused() > 0) {
        Fail(absl::StrCat(p.refused(), " nodes refused the campaign"));
      }
      if (!WaitClosed()) complete_ = false;
      return;
    }
    progress_.Maybe(line);
    if (MonoSeconds() > until) {
      progress_.Line(line);
      Fail(absl::StrFormat("campaign %s incomplete after --timeout %.0f s", c.id(), o_.timeout));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Run::Cleanup() {
  if (fleet_) fleet_->Stop();
  for (pid_t& a : agents_) {
    if (a > 0) kill(a, SIGTERM);
  }
  for (pid_t& a : agents_) {
    if (a > 0) StopProcess(a, 5);
    a = -1;
  }
  if (probe_) probe_->Stop();
  probe_.reset();
  proxy_.reset();
  admin_.reset();  // an open admin channel would hold the curator's shutdown
  if (curator_ > 0) StopProcess(curator_, 15);
  curator_ = -1;
  if (made_dir_ && success_ && !o_.keep) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

int Run::Main() {
  if (!Prepare()) return 1;
  if (!StartCurator()) return 1;
  if (!StartScenario()) return 1;
  if (real()) {
    StartAgents();
  } else {
    // Workers first: a process must fork before it starts gRPC.
    fleet_ = std::make_unique<Fleet>();
    if (!fleet_->Start(o_, agent_target_, node_key_)) {
      Fail("cannot start the worker processes");
      return 1;
    }
  }
  admin_ = std::make_unique<Admin>(target_, admin_hex_, "control");
  probe_ = std::make_unique<StatusProbe>(target_, admin_hex_, curator_, o_.status_interval_ms);
  probe_->Start();
  progress_.Line(real() ? absl::StrCat(o_.real_agents, " agent processes started, ",
                                       o_.nodes_per_host, " nodes each")
                        : absl::StrCat(o_.hosts, " simulated hosts of ", o_.nodes_per_host,
                                       " nodes over ", o_.processes, " worker processes"));
  WaitEnrolled();
  if (curator_ > 0 && !aborted_ && !g_interrupted) RunCampaign();
  if (curator_ > 0) at_campaign_end_ = ReadProc(curator_);
  if (o_.hold > 0 && curator_ > 0 && !g_interrupted) {
    probe_->SetPhase(kHoldPhase);
    progress_.Line(absl::StrFormat("holding the fleet connected for %.0f s", o_.hold));
    const double until = MonoSeconds() + o_.hold;
    while (MonoSeconds() < until && !g_interrupted) {
      if (auto died = SomethingDied()) {
        Fail(*died);
        if (curator_ < 0) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  probe_->Stop();
  if (g_interrupted) Fail("interrupted");

  // The curator (and the agents) while the fleet is still connected.
  if (curator_ > 0) at_done_ = ReadProc(curator_);
  for (pid_t a : agents_) agent_stats_.push_back(a > 0 ? ReadProc(a) : ProcStats());
  if (fleet_) {
    for (pid_t w : fleet_->pids()) {
      if (ProcStats p = ReadProc(w); p.ok) fleet_cpu_ += p.cpu_seconds;
    }
  }

  success_ = complete_ && Errors() == 0 && failures_.empty();
  Finish(success_ ? 0 : 1);
  return success_ ? 0 : 1;
}

struct Run::Figures {
  // Curator CPU seconds in total and per phase (-1: not measured).
  double cpu_total = -1, cpu_enrol = -1, cpu_campaign = -1, cpu_hold = -1;
  Percentiles all, enrol, camp, hold;  // GetStatus latency per phase
  WorkerCounters w;
  std::vector<std::string> messages;  // the first errors of each kind
  int64_t errors = 0;
  // The real agents' memory (KiB) and CPU, summed, and each one's RSS.
  long agents_rss = 0, agents_hwm = 0, agent_max_rss = 0;
  long agents_pss = 0, agents_private = 0;
  double agents_cpu = 0;
  json per_agent = json::array();
};

Run::Figures Run::Gather() const {
  Figures f;
  f.cpu_total = at_done_.ok ? at_done_.cpu_seconds : -1;
  f.cpu_enrol =
      at_campaign_.ok && at_go_.ok ? at_campaign_.cpu_seconds - at_go_.cpu_seconds : -1;
  f.cpu_campaign = at_campaign_end_.ok && at_campaign_.ok
                       ? at_campaign_end_.cpu_seconds - at_campaign_.cpu_seconds
                       : -1;
  f.cpu_hold =
      at_done_.ok && at_campaign_end_.ok ? at_done_.cpu_seconds - at_campaign_end_.cpu_seconds : -1;
  f.all = Summarise(probe_->Latencies(-1));
  f.enrol = Summarise(probe_->Latencies(kEnrolPhase));
  f.camp = Summarise(probe_->Latencies(kCampaignPhase));
  f.hold = Summarise(probe_->Latencies(kHoldPhase));
  if (fleet_) f.w = fleet_->Totals();
  if (fleet_) f.messages = fleet_->Messages();
  for (const auto& m : admin_messages_) f.messages.push_back(m);
  for (const auto& m : probe_->Messages()) f.messages.push_back(m);
  f.errors = Errors();
  for (const auto& a : agent_stats_) {
    f.agents_rss += a.rss_kib;
    f.agents_pss += a.pss_kib;
    f.agents_private += a.private_kib;
    f.agents_cpu += a.cpu_seconds;
    f.agents_hwm += a.hwm_kib;
    f.agent_max_rss = std::max(f.agent_max_rss, a.rss_kib);
    f.per_agent.push_back(std::round(Mib(a.rss_kib) * 10) / 10);
  }
  return f;
}

json Run::FiguresJson(const Figures& f, int exit_code) const {
  const auto& p = campaign_.progress();
  const WorkerCounters& w = f.w;
  json j;
  j["mode"] = real() ? "real-agents" : "simulated";
  j["tls"] = o_.tls;
  if (churn_) {
    int kills = 0, restarts = 0;
    for (const ldpgraph::ldpctl::ChurnKill& k : churn_->kills()) {
      kills += k.killed;
      restarts += k.restarted;
    }
    j["churn"] = {{"fraction", o_.churn}, {"kills", kills}, {"restarts", restarts}};
  }
  j["hosts"] = hosts();
  j["nodes_per_host"] = o_.nodes_per_host;
  j["nodes"] = nodes();
  if (!real()) j["processes"] = o_.processes;
  j["attribute"] = o_.attribute;
  j["subscribed"] = subscribed_;
  j["enrolled_nodes"] = enrolled_nodes_;
  j["enrol_seconds"] = enrol_seconds_;
  j["campaign_id"] = campaign_.id();
  j["campaign_complete"] = complete_;
  j["campaign_seconds"] = campaign_seconds_;  // -1: incomplete
  j["campaign_waited_seconds"] = campaign_waited_;
  if (!real()) j["last_ack_seconds"] = last_ack_seconds_;
  j["reported"] = p.reported();
  j["targeted"] = p.targeted();
  j["refused"] = p.refused();
  j["rejected_by_curator"] = p.rejected();
  j["errors"] = f.errors;
  json e;
  if (fleet_) {
    e["enrol_failed"] = w.enrol_failed;
    e["task_streams_failed"] = w.subscribe_failed;
    e["report_streams_failed"] = w.report_failed;
    e["reports_rejected"] = w.rejected;
    e["other"] = w.errors - w.enrol_failed - w.subscribe_failed - w.report_failed - w.rejected;
  } else {
    e["agents_died"] = agent_errors_;
    e["reports_rejected"] = p.rejected();
  }
  e["nodes_refused"] = p.refused();
  e["admin_calls_failed"] = admin_errors_ + probe_->failures();
  j["error_counts"] = e;
  j["first_errors"] = f.messages;  // at most three of each kind
  for (const auto& fail : failures_) j["failures"].push_back(fail);
  j["curator"] = {{"cpu_seconds_total", f.cpu_total},
                  {"cpu_seconds_startup", at_ready_.ok ? at_ready_.cpu_seconds : -1},
                  {"cpu_seconds_enrolment", f.cpu_enrol},
                  {"cpu_seconds_campaign", f.cpu_campaign},
                  {"cpu_seconds_hold", f.cpu_hold},
                  {"rss_mib", Mib(at_done_.rss_kib)},
                  {"peak_rss_mib", Mib(at_done_.hwm_kib)},
                  {"rss_mib_at_start", Mib(at_ready_.rss_kib)},
                  {"threads", at_done_.threads},
                  {"threads_max_sampled", probe_->max_threads()},
                  {"threads_at_start", at_ready_.threads}};
  j["getstatus_ms"] = ToJson(f.all);
  j["getstatus_ms_enrolment"] = ToJson(f.enrol);
  j["getstatus_ms_campaign"] = ToJson(f.camp);
  j["getstatus_ms_hold"] = ToJson(f.hold);
  j["hold_seconds"] = o_.hold;
  j["getstatus_failed"] = probe_->failures();
  if (fleet_) j["workers_cpu_seconds"] = fleet_cpu_;
  if (real()) {
    j["agents"] = {{"cpu_seconds_total", f.agents_cpu},
                   {"rss_mib_total", Mib(f.agents_rss)},
                   {"peak_rss_mib_total", Mib(f.agents_hwm)},
                   {"rss_mib_max", Mib(f.agent_max_rss)},
                   {"pss_mib_total", Mib(f.agents_pss)},
                   {"private_mib_total", Mib(f.agents_private)},
                   {"rss_mib_each", f.per_agent}};
  }
  j["scenario"] = ScenarioJson();
  j["work_dir"] = (o_.keep || exit_code != 0 || !made_dir_) ? dir_ : "";
  return j;
}

std::string Run::Table(const Figures& f, bool show_dir) const {
  const auto& p = campaign_.progress();
  const WorkerCounters& w = f.w;
  auto secs = [](double s) { return s < 0 ? std::string("-") : absl::StrFormat("%.2f s", s); };
  std::ostringstream t;
  t << "\n== fleet_load: " << (real() ? "real agents" : "simulated hosts")
    << (o_.tls ? ", TLS" : ", plaintext") << " ==\n";
  auto row = [&](const std::string& k, const std::string& v) {
    t << absl::StrFormat("  %-30s %s\n", k, v);
  };
  row("hosts", absl::StrCat(hosts(), " x ", o_.nodes_per_host, " nodes = ", nodes(), " nodes",
                            real() ? "" : absl::StrCat(" (", o_.processes, " worker processes)")));
  row("subscribed (curator)",
      absl::StrCat(subscribed_, " task streams, ", enrolled_nodes_, " nodes enrolled"));
  row("enrolment", enrol_seconds_ < 0 ? "did not finish"
                   : fleet_ ? absl::StrCat(secs(enrol_seconds_), " (", w.enrolled, "/", o_.hosts,
                                           " hosts enrolled, ", w.enrol_failed, " failed)")
                            : secs(enrol_seconds_));
  row("campaign",
      absl::StrCat(campaign_.id().empty() ? "-" : campaign_.id(), " ", o_.attribute, ": ",
                   p.reported(), "/", p.targeted(), " reported, ",
                   complete_ ? absl::StrCat("complete in ", secs(campaign_seconds_))
                   : campaign_.id().empty()
                       ? std::string("not created")
                       : absl::StrCat("INCOMPLETE (gave up after ", secs(campaign_waited_), ")")));
  if (!real()) row("  last ack at", secs(last_ack_seconds_));
  if (o_.network() || o_.dropout > 0 || o_.campaign_deadline > 0) {
    row("scenario", ScenarioText());
  }
  if (fleet_) {
    row("errors",
        absl::StrCat(f.errors, " (enrol ", w.enrol_failed, ", task streams ", w.subscribe_failed,
                     ", report streams ", w.report_failed, ", rejected ", w.rejected, ", admin ",
                     admin_errors_ + probe_->failures(), ")"));
  } else {
    row("errors", absl::StrCat(f.errors, " (agents died ", agent_errors_, ", rejected ",
                               p.rejected(), ", refused ", p.refused(), ", admin ",
                               admin_errors_ + probe_->failures(), ")"));
  }
  auto cpu = [](double s) { return s < 0 ? std::string("-") : absl::StrFormat("%.2f", s); };
  row("curator CPU",
      absl::StrCat(cpu(f.cpu_total), " s total (startup ", cpu(at_ready_.cpu_seconds),
                   ", enrolment ", cpu(f.cpu_enrol), ", campaign ", cpu(f.cpu_campaign),
                   o_.hold > 0 ? absl::StrCat(", hold ", cpu(f.cpu_hold)) : "", ")"));
  row("curator RSS",
      absl::StrFormat("%.1f MiB now, %.1f MiB peak (%.1f at start)", Mib(at_done_.rss_kib),
                      Mib(at_done_.hwm_kib), Mib(at_ready_.rss_kib)));
  row("curator threads", absl::StrFormat("%d now, %d most seen (%d at start)", at_done_.threads,
                                         probe_->max_threads(), at_ready_.threads));
  auto lat = [&](const Percentiles& q) {
    return q.samples == 0 ? std::string("-")
                          : absl::StrFormat("p50 %.2f  p90 %.2f  p99 %.2f  max %.2f ms (%u calls)",
                                            q.p50, q.p90, q.p99, q.max, q.samples);
  };
  row("GetStatus, all", lat(f.all));
  row("GetStatus, enrolment", lat(f.enrol));
  row("GetStatus, campaign", lat(f.camp));
  if (o_.hold > 0) row("GetStatus, hold", lat(f.hold));
  if (fleet_) row("worker processes CPU", absl::StrFormat("%.2f s", fleet_cpu_));
  if (real()) {
    row("agents CPU", absl::StrFormat("%.2f s", f.agents_cpu));
    row("agents RSS", absl::StrFormat("%.1f MiB total, %.1f MiB largest, %.1f MiB peak total",
                                      Mib(f.agents_rss), Mib(f.agent_max_rss), Mib(f.agents_hwm)));
    const double n = std::max<size_t>(1, agent_stats_.size());
    row("agents PSS", absl::StrFormat(
                          "%.1f MiB total, %.1f MiB each (shared library "
                          "pages split among the agents)",
                          Mib(f.agents_pss), Mib(f.agents_pss) / n));
    row("agents private", absl::StrFormat("%.1f MiB total, %.1f MiB each",
                                          Mib(f.agents_private),
                                          Mib(f.agents_private) / n));
  }
  if (!failures_.empty()) {
    t << "  failures:\n";
    for (const auto& fail : failures_) t << "    " << OneLine(fail, 2000) << "\n";
  }
  if (!f.messages.empty()) {
    t << "  first errors:\n";
    for (const auto& m : f.messages) t << "    " << m << "\n";
  }
  if (show_dir) row("work folder", dir_);
  return t.str();
}

bool Run::StartScenario() {
  agent_target_ = target_;
  for (uint32_t v = 0; v < nodes(); ++v) offline_ += NodeOffline(o_, v);
  if (!o_.network()) return true;
  ldpgraph::net::FaultProxy::Options p;
  p.upstream = target_;
  p.latency = absl::Microseconds(std::llround(o_.latency_ms * 1000));
  p.jitter = absl::Microseconds(std::llround(o_.jitter_ms * 1000));
  p.loss = o_.loss;
  p.seed = ldpgraph::SeedMix(kScenarioSeed);
  auto proxy = ldpgraph::net::FaultProxy::Create(p);
  if (!proxy.ok()) {
    Fail(absl::StrCat("the network proxy: ", proxy.status().message()));
    return false;
  }
  proxy_ = *std::move(proxy);
  agent_target_ = absl::StrCat("127.0.0.1:", proxy_->port());
  progress_.Line(absl::StrFormat(
      "network: every host through a proxy on %s (latency %g ms, jitter %g ms, loss %g)",
      agent_target_, o_.latency_ms, o_.jitter_ms, o_.loss));
  return true;
}

int Run::OnlineHosts() const {
  if (o_.dropout <= 0) return hosts();
  int online = 0;
  for (int h = 0; h < hosts(); ++h) {
    const uint32_t first = static_cast<uint32_t>(h) * o_.nodes_per_host;
    for (uint32_t v = first; v < first + o_.nodes_per_host; ++v) {
      if (!NodeOffline(o_, v)) {
        ++online;
        break;
      }
    }
  }
  return online;
}

std::vector<std::string> Run::AgentScenarioArgs() const {
  if (o_.dropout <= 0) return {};
  return {"--offline", absl::StrCat(o_.dropout), "--offline-seed",
          absl::StrCat(kScenarioSeed)};
}

bool Run::WaitClosed() {
  if (o_.campaign_deadline <= 0) return true;
  progress_.Line(absl::StrFormat("waiting for campaign %s to close on its deadline (%g s)",
                                 campaign_.id(), o_.campaign_deadline));
  const double until = MonoSeconds() + o_.campaign_deadline + 30;
  while (!g_interrupted && MonoSeconds() < until) {
    if (campaign_.state() == v1::CAMPAIGN_STATE_CLOSED) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::GetCampaignRequest get;
    get.set_campaign_id(campaign_.id());
    v1::Campaign c;
    if (admin_->stub().GetCampaign(&ctx, get, &c).ok()) campaign_ = c;
  }
  Fail(absl::StrCat("campaign ", campaign_.id(), " did not close on its deadline"));
  return false;
}

json Run::ScenarioJson() const {
  json j = {{"latency_ms", o_.latency_ms},
            {"jitter_ms", o_.jitter_ms},
            {"loss", o_.loss},
            {"dropout", o_.dropout},
            {"offline_nodes", offline_},
            {"online_hosts", OnlineHosts()},
            {"campaign_deadline_seconds", o_.campaign_deadline},
            {"close_reason", campaign_.close_reason()}};
  if (proxy_) {
    const ldpgraph::net::FaultProxy::Stats s = proxy_->stats();
    j["proxy"] = {{"connections", s.connections},
                  {"connect_failures", s.connect_failures},
                  {"chunks", s.chunks},
                  {"injected_losses", s.injected_losses},
                  {"bytes_to_curator", s.bytes_to_upstream},
                  {"bytes_to_hosts", s.bytes_to_client},
                  {"max_delay_ms", absl::ToDoubleMilliseconds(s.max_delay)},
                  {"cpu_seconds", s.cpu_seconds}};
  }
  return j;
}

std::string Run::ScenarioText() const {
  std::string t;
  if (proxy_) {
    const ldpgraph::net::FaultProxy::Stats s = proxy_->stats();
    t = absl::StrFormat(
        "network %g ms +- %g ms, loss %g: %u connections, %u of %u chunks stalled, "
        "longest hold %.0f ms, proxy CPU %.2f s",
        o_.latency_ms, o_.jitter_ms, o_.loss, s.connections, s.injected_losses, s.chunks,
        absl::ToDoubleMilliseconds(s.max_delay), s.cpu_seconds);
  }
  if (o_.dropout > 0 || o_.campaign_deadline > 0) {
    absl::StrAppend(&t, t.empty() ? "" : "; ",
                    absl::StrFormat("dropout %g (%u nodes offline, %d hosts online), deadline "
                                    "%g s, closed on %s",
                                    o_.dropout, offline_, OnlineHosts(), o_.campaign_deadline,
                                    campaign_.close_reason().empty() ? "-"
                                                                     : campaign_.close_reason()));
  }
  return t;
}

void Run::Finish(int exit_code) {
  const Figures f = Gather();
  const json j = FiguresJson(f, exit_code);
  std::cerr << Table(f, !j["work_dir"].get<std::string>().empty()) << std::flush;
  std::cout << j.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto it = std::find(args.begin(), args.end(), "--check-in"); it != args.end()) {
    args.erase(it);
    if (ldpgraph::WantsHelp(args)) {
      std::cout << ldpgraph::bench::CheckInLoadUsage();
      return 0;
    }
    rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
      nofile.rlim_cur = nofile.rlim_max;
      setrlimit(RLIMIT_NOFILE, &nofile);
    }
    std::signal(SIGINT, OnInterrupt);
    std::signal(SIGTERM, OnInterrupt);
    std::signal(SIGPIPE, SIG_IGN);
    return ldpgraph::bench::RunCheckInLoad(args);
  }
  if (ldpgraph::WantsHelp(args)) {
    std::cout << kUsage;
    return 0;
  }
  auto options = ParseOptions(args);
  if (!options.ok()) {
    std::cerr << "fleet_load: " << options.status().message()
              << "\nRun fleet_load --help for the flags.\n";
    return 2;
  }
  // Every simulated host holds a socket here and one in the curator, which
  // inherits this limit.
  rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  getrlimit(RLIMIT_NOFILE, &nofile);
  const uint64_t per_worker =
      options->real_agents > 0 ? 0 : (options->hosts + options->processes - 1) / options->processes;
  if (options->real_agents == 0 && (options->hosts + 200 > static_cast<int64_t>(nofile.rlim_cur) ||
                                    per_worker + 200 > nofile.rlim_cur)) {
    std::cerr << "fleet_load: warning: open-file limit " << nofile.rlim_cur << " is tight for "
              << options->hosts << " hosts (the curator needs one per host)\n";
  }
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  std::signal(SIGPIPE, SIG_IGN);
  Run run(*std::move(options));
  return run.Main();
}

// fleet_load --check-in, driven (check_in_load.h): the work folder, the
// worker processes (their devices: check_in_load_worker.cc), the curator
// (and the edge), the campaign, the watch, the ledger's check and the report.
#include "tests/bench/check_in_load.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/dev_tls.h"
#include "server/ldpctl/pages.h"
#include "tests/bench/check_in_load_internal.h"
#include "tests/bench/load_util.h"

namespace ldpgraph::bench {
namespace {

using check_in::kTlsName;
using check_in::WorkerConfig;
using nlohmann::json;
namespace fs = std::filesystem;

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
  RETURN_IF_ERROR(GetIntFlag(a, "devices", &o.devices, 1, 10000000));
  RETURN_IF_ERROR(GetIntFlag(a, "processes", &o.processes, 1, 64));
  RETURN_IF_ERROR(GetIntFlag(a, "threads", &o.threads, 1, 1024));
  RETURN_IF_ERROR(GetIntFlag(a, "visits", &o.visits, 1, 1000));
  RETURN_IF_ERROR(GetIntFlag(a, "classes", &o.classes, 2, 1000));
  RETURN_IF_ERROR(GetIntFlag(a, "fleet-nice", &o.fleet_nice, 0, 19));
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

// --- the run ---------------------------------------------------------------------

// "fleet_load --check-in: <what>" on stderr; false, for a step to return.
bool Fail(const std::string& what) {
  std::cerr << "fleet_load --check-in: " << what << "\n";
  return false;
}

// A worker process as the parent holds it: its pid (-1 once reaped) and its
// ends of the two pipes.
struct Child {
  pid_t pid;
  int up, down;
};

// What the run watched while the devices came: GetStatus latencies, the
// curator's peaks, and when every report was stored (-1: never).
struct Watched {
  std::vector<double> status_ms;
  int peak_sockets = 0;
  long peak_rss = 0;
  double completed_at = -1;
};

// The workers' figures, summed (max_in_flight: the largest).
struct FleetFigures {
  json counters = json::object();
  std::vector<std::string> errors;
  double cpu = 0;
  Percentiles visit{};  // p50 and p99: the worst worker's
};

// Every node's spend from the ledger; status: whether it could be read.
struct Spend {
  double max_spent = 0, total_spent = 0;
  int64_t over = 0;  // nodes that spent more than the campaign's epsilon
  absl::Status status;
};

// The run's figures at its end, for the JSON object and the table.
struct Result {
  Watched watched;
  double elapsed = 0;
  ProcStats at_end, edge_at_end;
  FleetFigures fleet;
  Spend spend;
  double cpu = 0, edge_cpu = 0;  // the curator's and the edge's, since the go
  int64_t errors = 0;
  bool complete = false;
};

// One check-in run. A step that fails says why (Fail) and the run exits 1,
// its processes ending with it (PR_SET_PDEATHSIG) and its folder kept.
class CheckInRun {
 public:
  explicit CheckInRun(Options o) : o_(std::move(o)) {}
  // The run's exit code (RunCheckInLoad's).
  int Main();

 private:
  // The work folder, the secrets and the TLS material.
  bool PrepareFolder();
  // The workers, forked before this process touches gRPC.
  bool ForkWorkers();
  // The curator: served devices come back only after the run.
  bool StartCurator();
  // --edge: HAProxy in front of the curator; the devices go there, the
  // admin calls stay direct.
  bool StartEdgeIfAsked();
  bool CreateCampaign();
  // Tells the workers to start, at t0_.
  bool Go();
  // Watch: the curator's CPU, memory and sockets, GetStatus latency, and
  // progress, until the campaign completes and the workers are done.
  Watched Watch();
  FleetFigures CollectWorkers();
  // No extra epsilon: every node's spend from the ledger, page by page.
  Spend ReadLedger();
  json ResultJson(const Result& r) const;
  void PrintTable(const Result& r) const;

  // An admin call with the run's token, waiting for the curator up to
  // `seconds`.
  template <typename Method, typename Request, typename Response>
  grpc::Status Call(Method method, const Request& req, Response* resp, double seconds = 30) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + admin_hex_);
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
    return (admin_.get()->*method)(&ctx, req, resp);
  }

  const Options o_;
  std::string dir_;
  std::string node_key_, admin_hex_;
  std::string ca_pem_;
  std::vector<Child> workers_;
  pid_t curator_ = -1;
  std::string target_;         // the curator's address
  pid_t edge_ = -1;
  std::string device_target_;  // the edge's address, or target_
  std::unique_ptr<v1::AdminService::Stub> admin_;
  v1::Campaign campaign_;
  v1::CuratorStatus st_;  // the curator's latest status
  ProcStats at_go_, edge_at_go_;
  double t0_ = 0;
};

bool CheckInRun::PrepareFolder() {
  dir_ = o_.dir;
  if (dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/check_in_load.XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) return Fail("cannot create a work folder");
    dir_ = tmpl;
  } else {
    fs::create_directories(dir_);
  }
  auto secrets = WriteRunSecrets(dir_);
  if (!secrets.ok()) return Fail(std::string(secrets.status().message()));
  node_key_ = secrets->node_key;
  admin_hex_ = secrets->admin_hex;
  if (o_.tls) {
    auto tls = ldpctl::MakeDevTlsMaterial({kTlsName, "127.0.0.1"});
    if (!tls.ok()) return Fail(std::string(tls.status().message()));
    if (auto s = ldpctl::WriteDevTlsMaterial(*tls, dir_); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    ca_pem_ = tls->ca_cert_pem;
  }
  return true;
}

bool CheckInRun::ForkWorkers() {
  for (int w = 0; w < o_.processes; ++w) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return Fail("pipe failed");
    WorkerConfig c;
    c.first = static_cast<uint32_t>(int64_t{o_.devices} * w / o_.processes);
    c.end = static_cast<uint32_t>(int64_t{o_.devices} * (w + 1) / o_.processes);
    c.threads = o_.threads;
    c.visits = o_.visits;
    c.resume = o_.resume;
    c.window = o_.window;
    c.node_key = node_key_;
    c.ca_pem = ca_pem_;
    c.up_fd = up[1];
    c.down_fd = down[0];
    const pid_t pid = fork();
    if (pid < 0) return Fail("fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (o_.fleet_nice > 0) setpriority(PRIO_PROCESS, 0, o_.fleet_nice);
      close(up[0]);
      close(down[1]);
      check_in::RunWorker(std::move(c));
    }
    close(up[1]);
    close(down[0]);
    workers_.push_back({pid, up[0], down[1]});
  }
  return true;
}

bool CheckInRun::StartCurator() {
  const std::string ready = dir_ + "/curator.ready";
  std::vector<std::string> argv = {
      o_.curator_bin, "--listen", "127.0.0.1:0", "--http", "off", "--data-dir",
      dir_ + "/curator", "--admin-token", dir_ + "/admin.token", "--node-key",
      dir_ + "/node.key", "--nodes", absl::StrCat(o_.devices), "--ready-file", ready,
      "--check-in-interval",
      absl::StrCat(o_.visits > 1 ? o_.window / o_.visits : std::max(3600.0, 4 * o_.window)),
      "--check-in-rate", absl::StrCat(o_.rate)};
  if (o_.tls) {
    argv.insert(argv.end(),
                {"--tls-cert", dir_ + "/curator.pem", "--tls-key", dir_ + "/curator.key"});
  } else {
    argv.push_back("--insecure");
  }
  AppendCuratorArgs(o_.curator_args, &argv);
  curator_ = Spawn(argv, dir_ + "/curator.log");
  int port = 0;
  for (double until = MonoSeconds() + 60; port == 0;) {
    if (auto how = ExitedHow(curator_)) {
      return Fail(absl::StrCat("the curator ", *how, ":\n", LogTail(dir_ + "/curator.log")));
    }
    if (std::optional<int> p = ReadyFilePort(ready)) port = *p;
    if (MonoSeconds() > until) return Fail("the curator did not start within 60 s");
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  target_ = absl::StrCat("127.0.0.1:", port);
  return true;
}

bool CheckInRun::StartEdgeIfAsked() {
  device_target_ = target_;
  if (!o_.edge) return true;
  auto started = StartEdge(dir_, {target_}, kTlsName);
  if (!started.ok()) return Fail(std::string(started.status().message()));
  edge_ = started->pid;
  device_target_ = started->address;
  return true;
}

bool CheckInRun::CreateCampaign() {
  grpc::ChannelArguments admin_args;
  admin_args.SetMaxReceiveMessageSize(256 << 20);
  admin_ = v1::AdminService::NewStub(MakeChannel(target_, ca_pem_, kTlsName, admin_args));
  v1::CreateCampaignRequest create;
  create.set_attribute(v1::ATTRIBUTE_LABEL);
  create.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
  create.mutable_spec()->set_epsilon(o_.epsilon);
  create.mutable_spec()->set_dimension(o_.classes);
  create.mutable_nodes()->set_all(true);
  create.set_quorum(1);
  create.set_name("check-in load");
  if (auto s = Call(&v1::AdminService::Stub::CreateCampaign, create, &campaign_); !s.ok()) {
    return Fail(absl::StrCat("CreateCampaign: ", GrpcError(s)));
  }
  return true;
}

bool CheckInRun::Go() {
  at_go_ = ReadProc(curator_);
  edge_at_go_ = edge_ > 0 ? ReadProc(edge_) : ProcStats{};
  t0_ = MonoSeconds() + 0.2;
  for (const Child& w : workers_) {
    const std::string go = absl::StrCat(device_target_, " ", absl::StrFormat("%.6f", t0_), "\n");
    if (write(w.down, go.data(), go.size()) < 0) return Fail("cannot start a worker");
  }
  std::cerr << absl::StrFormat(
      "fleet_load --check-in: %d devices over %.0f s (%s, %d worker processes x %d visits), "
      "curator %s%s, campaign %s\n",
      o_.devices, o_.window, o_.tls ? (o_.resume ? "TLS, sessions resumed" : "TLS, no resumption")
                                    : "plaintext",
      o_.processes, o_.threads, target_,
      o_.edge ? absl::StrCat(" behind the edge at ", device_target_) : "", campaign_.id());
  return true;
}

Watched CheckInRun::Watch() {
  Watched w;
  int running = o_.processes;
  double last_line = 0;
  while (running > 0 && MonoSeconds() < t0_ + o_.timeout && !g_interrupted) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    w.peak_sockets = std::max(w.peak_sockets, CountSockets(curator_));
    const ProcStats p = ReadProc(curator_);
    w.peak_rss = std::max(w.peak_rss, p.hwm_kib);
    const double start = MonoSeconds();
    if (Call(&v1::AdminService::Stub::GetStatus, v1::GetStatusRequest(), &st_).ok()) {
      w.status_ms.push_back((MonoSeconds() - start) * 1000);
    }
    if (w.completed_at < 0 && st_.stored_reports() >= static_cast<uint64_t>(o_.devices)) {
      w.completed_at = MonoSeconds() - t0_;
    }
    running = 0;
    for (Child& c : workers_) {
      if (c.pid > 0 && ExitedHow(c.pid)) c.pid = -1;  // reaped
      if (c.pid > 0) ++running;
    }
    if (MonoSeconds() - last_line >= 10) {
      last_line = MonoSeconds();
      std::cerr << absl::StrFormat(
          "[%7.1fs] %d check-ins: %d served, %d paced, %d idle; %d reports stored; "
          "%d sockets open\n",
          MonoSeconds() - t0_, st_.check_ins(), st_.check_ins_served(), st_.check_ins_paced(),
          st_.check_ins_idle(), st_.stored_reports(), CountSockets(curator_));
    }
  }
  return w;
}

FleetFigures CheckInRun::CollectWorkers() {
  FleetFigures f;
  for (Child& w : workers_) {
    std::string text;
    char buf[4096];
    fcntl(w.up, F_SETFL, O_NONBLOCK);
    ssize_t n;
    while ((n = read(w.up, buf, sizeof(buf))) > 0) text.append(buf, n);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      f.errors.push_back("a worker process ended without its figures");
      continue;
    }
    for (auto& [k, v] : j.items()) {
      if (v.is_number_integer()) {
        f.counters[k] = k == "max_in_flight"
                            ? std::max(f.counters.value(k, int64_t{0}), v.get<int64_t>())
                            : f.counters.value(k, int64_t{0}) + v.get<int64_t>();
      }
    }
    f.cpu += j.value("cpu_seconds", 0.0);
    f.visit.p50 = std::max(f.visit.p50, j["visit_ms"].value("p50", 0.0));
    f.visit.p99 = std::max(f.visit.p99, j["visit_ms"].value("p99", 0.0));
    for (const auto& e : j["first_errors"]) f.errors.push_back(e.get<std::string>());
  }
  return f;
}

Spend CheckInRun::ReadLedger() {
  Spend s;
  v1::GetBudgetsRequest budgets;
  budgets.set_page_size(100000);
  s.status = ldpctl::ForEachPage(
      *admin_, &v1::AdminService::Stub::GetBudgets, budgets,
      [&](grpc::ClientContext* ctx) {
        ctx->AddMetadata("authorization", "Bearer " + admin_hex_);
        ctx->set_wait_for_ready(true);
        ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      },
      &ldpctl::GrpcToAbsl,
      [&](const v1::GetBudgetsResponse& page) {
        for (const auto& nb : page.budgets()) {
          s.max_spent = std::max(s.max_spent, nb.total_spent());
          s.total_spent += nb.total_spent();
          if (nb.total_spent() > o_.epsilon + 1e-9) ++s.over;
        }
        return absl::OkStatus();
      });
  return s;
}

int CheckInRun::Main() {
  if (!PrepareFolder() || !ForkWorkers() || !StartCurator() || !StartEdgeIfAsked() ||
      !CreateCampaign() || !Go()) {
    return 1;
  }
  Result r;
  r.watched = Watch();
  r.elapsed = MonoSeconds() - t0_;
  r.at_end = ReadProc(curator_);
  r.edge_at_end = edge_ > 0 ? ReadProc(edge_) : ProcStats{};
  r.fleet = CollectWorkers();
  for (Child& w : workers_) StopProcess(w.pid, 1);
  r.spend = ReadLedger();
  Call(&v1::AdminService::Stub::GetStatus, v1::GetStatusRequest(), &st_);
  StopProcess(curator_, 10);
  if (edge_ > 0) StopProcess(edge_, 5);

  r.cpu = r.at_end.cpu_seconds - at_go_.cpu_seconds;
  r.edge_cpu = r.edge_at_end.cpu_seconds - edge_at_go_.cpu_seconds;
  r.errors = r.fleet.counters.value("errors", int64_t{0}) +
             static_cast<int64_t>(!r.spend.status.ok());
  r.complete =
      st_.stored_reports() == static_cast<uint64_t>(o_.devices) &&
      st_.check_ins() - st_.check_ins_paced() == static_cast<uint64_t>(o_.devices) * o_.visits;
  const json j = ResultJson(r);
  PrintTable(r);
  std::cout << j.dump() << std::endl;
  if (!o_.keep) fs::remove_all(dir_);
  return r.complete && r.errors == 0 && r.spend.over == 0 ? 0 : 1;
}

json CheckInRun::ResultJson(const Result& r) const {
  const double cpu = r.cpu;
  json j;
  j["mode"] = "check-in";
  j["tls"] = o_.tls;
  j["tls_resumption"] = o_.tls && o_.resume;
  j["devices"] = o_.devices;
  j["visits_per_device"] = o_.visits;
  j["window_seconds"] = o_.window;
  j["check_in_rate"] = o_.rate;
  j["elapsed_seconds"] = r.elapsed;
  j["complete"] = r.complete;
  j["completed_seconds"] = r.watched.completed_at;
  j["curator"] = {{"check_ins", st_.check_ins()},
                  {"devices_seen", st_.devices_seen()},
                  {"served", st_.check_ins_served()},
                  {"idle", st_.check_ins_idle()},
                  {"paced", st_.check_ins_paced()},
                  {"stored_reports", st_.stored_reports()},
                  {"reports_duplicate", st_.reports_duplicate()},
                  {"cpu_seconds", cpu},
                  {"check_ins_per_cpu_second", cpu > 0 ? st_.check_ins() / cpu : 0.0},
                  {"peak_rss_mib", Mib(r.watched.peak_rss)},
                  {"peak_open_sockets", r.watched.peak_sockets}};
  if (edge_ > 0) {
    j["edge"] = {{"kind", "haproxy"},
                 {"cpu_seconds", r.edge_cpu},
                 {"cpu_ms_per_check_in",
                  st_.check_ins() > 0 ? 1000 * r.edge_cpu / st_.check_ins() : 0.0},
                 {"peak_rss_mib", Mib(r.edge_at_end.hwm_kib)}};
  }
  j["fleet"] = r.fleet.counters;
  j["fleet"]["cpu_seconds"] = r.fleet.cpu;
  j["visit_ms_worst_worker"] = {{"p50", r.fleet.visit.p50}, {"p99", r.fleet.visit.p99}};
  j["getstatus_ms"] = ToJson(Summarise(r.watched.status_ms));
  j["epsilon"] = {{"campaign", o_.epsilon}, {"max_spent", r.spend.max_spent},
                  {"total_spent", r.spend.total_spent}, {"nodes_over", r.spend.over}};
  j["errors"] = r.errors;
  j["first_errors"] = r.fleet.errors;
  j["work_dir"] = o_.keep ? dir_ : "";
  return j;
}

void CheckInRun::PrintTable(const Result& r) const {
  const double cpu = r.cpu;
  const Percentiles gs = Summarise(r.watched.status_ms);
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
      o_.devices, o_.window, o_.tls ? (o_.resume ? "TLS (resumed)" : "TLS") : "plaintext",
      st_.check_ins(), st_.check_ins_served(), st_.check_ins_idle(), st_.check_ins_paced(),
      st_.devices_seen(), st_.stored_reports(), o_.devices,
      r.watched.completed_at >= 0
          ? absl::StrFormat(" (complete at %.1f s)", r.watched.completed_at)
          : "",
      st_.reports_duplicate(), cpu, cpu > 0 ? st_.check_ins() / cpu : 0.0,
      Mib(r.watched.peak_rss), r.watched.peak_sockets, r.fleet.visit.p50, r.fleet.visit.p99,
      gs.p50, gs.p99, r.spend.max_spent, o_.epsilon, r.spend.over, r.errors);
  if (edge_ > 0) {
    std::cerr << absl::StrFormat(
        "  edge (HAProxy) CPU      %.2f s: %.3f ms per check-in; peak RSS %.1f MiB\n",
        r.edge_cpu, st_.check_ins() > 0 ? 1000 * r.edge_cpu / st_.check_ins() : 0.0,
        Mib(r.edge_at_end.hwm_kib));
  }
  for (const auto& e : r.fleet.errors) std::cerr << "    " << e << "\n";
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
  return CheckInRun(*parsed).Main();
}

}  // namespace ldpgraph::bench

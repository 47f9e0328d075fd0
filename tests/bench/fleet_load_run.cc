// fleet_load's run, driven (tests/bench/fleet_load_run.h): the work
// folder, the curator, the agents or workers, the scenario, enrolment, the
// campaign, the churn, the cleanup.
#include "tests/bench/fleet_load_run.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/hex.h"
#include "common/random/seed_mix.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/dev_tls.h"

namespace ldpgraph::bench::fleet {

namespace fs = std::filesystem;

bool Run::Prepare() {
  auto folder = MakeWorkFolder(o_.dir, "fleet_load");
  if (!folder.ok()) {
    Fail(std::string(folder.status().message()));
    return false;
  }
  dir_ = folder->path;
  made_dir_ = folder->made;
  auto secrets = WriteRunSecrets(dir_);
  if (!secrets.ok()) {
    Fail(std::string(secrets.status().message()));
    return false;
  }
  admin_hex_ = secrets->admin_hex;
  node_key_ = secrets->node_key;
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

std::vector<std::string> Run::CuratorCommonArgs() const {
  std::vector<std::string> argv = {"--http", "off", "--admin-token",
                                   dir_ + "/admin.token", "--node-key",
                                   dir_ + "/node.key"};
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
  if (postgres_ != nullptr) {
    argv.insert(argv.end(), {"--store", postgres_->url(), "--store-password-file",
                             postgres_->password_file()});
  }
  return argv;
}

int Run::WaitReady(pid_t pid, const std::string& ready, const std::string& log,
                   const std::string& what) {
  const double until = MonoSeconds() + 60;
  while (true) {
    if (auto how = ExitedHow(pid)) {
      Fail(absl::StrCat(what, " ", *how, "; last lines of ", log, ":\n", LogTail(log)));
      return 0;
    }
    if (std::optional<int> port = ReadyFilePort(ready)) return *port;
    if (MonoSeconds() > until || g_interrupted) {
      Fail(absl::StrCat(what, " did not write its ready file within 60 s"));
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool Run::StartPostgres() {
  // The server runs as an unprivileged user when fleet_load runs as root:
  // it must pass through the work folder (the secrets in it stay 0600).
  chmod(dir_.c_str(), 0711);
  ldpgraph::store::LocalPostgres::Options pg;
  pg.dir = dir_ + "/postgres";
  pg.fsync = false;  // a benchmark of connections, not of commits
  pg.max_connections = std::max(100, 8 * (o_.frontends + 1) + 20);
  progress_.Line("starting PostgreSQL (initdb)");
  auto started = ldpgraph::store::LocalPostgres::Start(pg);
  if (!started.ok()) {
    Fail(absl::StrCat("PostgreSQL: ", started.status().message()));
    return false;
  }
  postgres_ = std::move(*started);
  progress_.Line(absl::StrCat("PostgreSQL on 127.0.0.1:", postgres_->port()));
  return true;
}

bool Run::StartCurator() {
  if (o_.frontends > 0 && !StartPostgres()) return false;
  const std::string ready = dir_ + "/curator.ready";
  std::vector<std::string> argv = {o_.curator_bin, "--listen", "127.0.0.1:0",
                                   "--data-dir", dir_ + "/curator",
                                   "--ready-file", ready};
  for (const std::string& a : CuratorCommonArgs()) argv.push_back(a);
  if (o_.frontends > 0) argv.insert(argv.end(), {"--role", "operator"});
  AppendCuratorArgs(o_.curator_args, &argv);  // its --http replaces "--http off"
  progress_.Line(absl::StrCat("starting ", o_.curator_bin,
                              o_.frontends > 0 ? " (the operator)" : ""));
  curator_ = Spawn(argv, dir_ + "/curator.log");
  port_ = WaitReady(curator_, ready, dir_ + "/curator.log", "the curator");
  if (port_ == 0) {
    if (ExitedHow(curator_)) curator_ = -1;
    return false;
  }
  target_ = absl::StrCat("127.0.0.1:", port_);
  at_ready_ = ReadProc(curator_);
  progress_.Line(absl::StrCat("curator ready on ", target_, " (pid ", curator_, ", ",
                              at_ready_.threads, " threads, RSS ",
                              absl::StrFormat("%.1f", Mib(at_ready_.rss_kib)), " MiB)"));
  return o_.frontends == 0 || StartFrontends();
}

bool Run::StartFrontends() {
  for (int i = 0; i < o_.frontends; ++i) {
    const std::string ready = absl::StrCat(dir_, "/frontend-", i, ".ready");
    const std::string log = absl::StrCat(dir_, "/frontend-", i, ".log");
    std::vector<std::string> argv = {o_.curator_bin, "--role", "frontend", "--listen",
                                     "127.0.0.1:0", "--data-dir",
                                     absl::StrCat(dir_, "/frontend-", i), "--ready-file",
                                     ready};
    for (const std::string& a : CuratorCommonArgs()) argv.push_back(a);
    argv.insert(argv.end(), o_.curator_args.begin(), o_.curator_args.end());
    frontends_.push_back(Spawn(argv, log));
    const int port = WaitReady(frontends_.back(), ready, log, absl::StrCat("frontend ", i));
    if (port == 0) return false;
    frontend_targets_.push_back(absl::StrCat("127.0.0.1:", port));
    progress_.Line(absl::StrCat("frontend ", i, " ready on ", frontend_targets_.back(),
                                " (pid ", frontends_.back(), ")"));
  }
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
  for (size_t i = 0; i < frontends_.size(); ++i) {
    if (frontends_[i] <= 0) continue;
    if (auto how = ExitedHow(frontends_[i])) {
      frontends_[i] = -1;
      const std::string log = absl::StrCat(dir_, "/frontend-", i, ".log");
      return absl::StrCat("frontend ", i, " ", *how, "; last lines of ", log, ":\n",
                          LogTail(log));
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
      AdminFailed("GetStatus", g);
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

void Run::AdminFailed(const char* call, const grpc::Status& g) {
  ++admin_errors_;
  if (admin_messages_.size() < 3) {
    admin_messages_.push_back(absl::StrCat("admin: ", call, ": ", GrpcError(g)));
  }
}

v1::CreateCampaignRequest Run::CampaignRequest() const {
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
  return req;
}

void Run::RunCampaign() {
  const v1::CreateCampaignRequest req = CampaignRequest();
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
    if (PollCampaign(t0, until, &stalled_polls)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool Run::PollCampaign(double t0, double until, int64_t* stalled_polls) {
  if (auto died = SomethingDied()) {
    Fail(*died);  // its nodes will not answer
    return true;
  }
  grpc::ClientContext ctx;
  admin_->Prepare(&ctx);
  v1::GetCampaignRequest get;
  get.set_campaign_id(campaign_.id());
  v1::Campaign c;
  grpc::Status g = admin_->stub().GetCampaign(&ctx, get, &c);
  if (!g.ok()) {
    AdminFailed("GetCampaign", g);
    return false;
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
      if (++*stalled_polls > 25) {  // half a second, for stragglers in flight
        progress_.Line(line);
        Fail(absl::StrCat("campaign ", c.id(), " cannot complete: ", p.targeted() - answered,
                          " nodes belong to hosts that failed or were rejected"));
        return true;
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
    return true;
  }
  if (answered >= expected) {
    CampaignAnswered(p, expected, t0, line);
    return true;
  }
  progress_.Maybe(line);
  if (MonoSeconds() > until) {
    progress_.Line(line);
    Fail(absl::StrFormat("campaign %s incomplete after --timeout %.0f s", c.id(), o_.timeout));
    return true;
  }
  return false;
}

void Run::CampaignAnswered(const v1::CampaignProgress& p, uint64_t expected, double t0,
                           const std::string& line) {
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
  for (pid_t& f : frontends_) {
    if (f > 0) StopProcess(f, 15);
    f = -1;
  }
  if (curator_ > 0) StopProcess(curator_, 15);
  curator_ = -1;
  postgres_.reset();  // stops the server and removes its socket folder
  if (edge_ > 0) StopProcess(edge_, 5);
  edge_ = -1;
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
  if (edge_ > 0) edge_at_done_ = ReadProc(edge_);
  frontends_at_done_.clear();
  for (pid_t f : frontends_) frontends_at_done_.push_back(f > 0 ? ReadProc(f) : ProcStats());
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

bool Run::StartEdge() {
  // Every host's connection at once, and room for ldpctl-like callers.
  auto started = ldpgraph::bench::StartEdge(
      dir_, frontend_targets_.empty() ? std::vector<std::string>{target_} : frontend_targets_,
      kTlsName, hosts() + 1000);
  if (!started.ok()) {
    Fail(std::string(started.status().message()));
    return false;
  }
  edge_ = started->pid;
  agent_target_ = started->address;
  progress_.Line(absl::StrCat("edge: HAProxy on ", agent_target_, " (pid ", edge_,
                              ") in front of ",
                              frontend_targets_.empty()
                                  ? std::string("the curator")
                                  : absl::StrCat(frontend_targets_.size(), " frontends")));
  return true;
}

bool Run::StartScenario() {
  agent_target_ = target_;
  for (uint32_t v = 0; v < nodes(); ++v) offline_ += NodeOffline(o_, v);
  if (o_.edge) return StartEdge();
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

}  // namespace ldpgraph::bench::fleet

// The Simulation's outline and processes (internal/simulation.h): Run, the
// work folder, the dataset, TLS material and credentials (Prepare), the
// pipeline's configuration, starting the curator (or the operator and its
// frontends over a local PostgreSQL) and the agent hosts, watching them
// (Check), stopping them (StopAll), and --keep-running.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/dataset/prepare.h"
#include "common/files.h"
#include "common/hex.h"
#include "common/net/edge_config.h"
#include "common/net/free_port.h"
#include "common/status_macros.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/dev_tls.h"
#include "server/ldpctl/internal/simulation.h"
#include "server/ldpctl/process.h"
#include "server/pipeline/config.h"
#include "server/store/local_postgres.h"
#include "server/store/store.h"

namespace ldpgraph::ldpctl::internal {

namespace fs = std::filesystem;

absl::Status Simulation::Check() {
  if (Interrupts::interrupted()) {
    return absl::CancelledError(
        absl::StrCat("interrupted by signal ", Interrupts::signal()));
  }
  std::vector<ChildProcess*> all;
  if (curator_) all.push_back(curator_.get());
  if (standby_) all.push_back(standby_.get());
  if (edge_) all.push_back(edge_.get());
  for (auto& f : frontends_) {
    if (f) all.push_back(f.get());
  }
  for (auto& a : agents_) {
    if (a) all.push_back(a.get());  // null: down under --churn
  }
  for (ChildProcess* p : all) {
    if (auto how = p->Exited()) {
      failure_logs_ = absl::StrCat("last lines of ", p->log_path(), ":\n",
                                   p->LogTail(15));
      return absl::InternalError(absl::StrCat(p->name(), " ", *how));
    }
  }
  return absl::OkStatus();
}

absl::Status Simulation::Configure() {
  if (o_.task == v1::PIPELINE_TASK_NODE && data_.meta.classes < 2) {
    return absl::InvalidArgumentError(
        "node classification needs a dataset with labels (classes >= 2)");
  }
  ASSIGN_OR_RETURN(config_, ConfigOf(o_));
  pipeline::ResolveDatasetSettings(data_.meta, &config_);
  auto range = ScaledRange(config_.scaling, data_.meta);
  if (!range) {
    return absl::InvalidArgumentError(
        "the method's feature scaling needs a public range the dataset does not declare");
  }
  range_ = *range;
  online_nodes_ = CountOnlineNodes();
  return absl::OkStatus();
}

absl::Status Simulation::MakeWorkFolder() {
  if (o_.work_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/ldpctl-sim-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a work folder ",
                                              tmpl, ": ", std::strerror(errno)));
    }
    work_ = tmpl;
    created_work_ = true;
    made_work_ = true;
  } else {
    work_ = o_.work_dir;
    std::error_code ec;
    const bool existed = fs::exists(work_, ec);
    if (existed && !fs::is_empty(work_, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--work-dir ", work_, " is not empty: give an empty or new folder"));
    }
    fs::create_directories(work_, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create ", work_, ": ", ec.message()));
    }
    made_work_ = !existed;
  }
  owns_work_files_ = true;
  chmod(work_.c_str(), 0700);  // secrets live here
  return absl::OkStatus();
}

absl::Status Simulation::ReadOrGenerateData() {
  if (o_.dataset_dir.empty()) {
    progress_.Update("preparing", absl::StrCat("generating the default dataset (",
                                               o_.generated_nodes, " nodes)"));
    GeneratorOptions g = DefaultGeneratorOptions();
    g.nodes = o_.generated_nodes;
    ASSIGN_OR_RETURN(data_, GenerateDataset(g));
    dataset_dir_ = work_ + "/dataset";
    return WriteDataset(data_, dataset_dir_);
  }
  progress_.Update("preparing", absl::StrCat("loading ", o_.dataset_dir));
  dataset_dir_ = fs::absolute(o_.dataset_dir).string();
  ASSIGN_OR_RETURN(data_, LoadDataset(dataset_dir_));
  if (!DatasetPrepared(dataset_dir_, data_.meta, /*needs_schema=*/true)) {
    // The agents scale with a public schema and read their own records
    // through the device index: a copy with both (ldpgraph prepare).
    progress_.Update("preparing",
                     absl::StrCat(o_.dataset_dir,
                                  " declares no feature schema or has no "
                                  "device index: preparing a copy (the "
                                  "papers' central schema) in ",
                                  work_, "/dataset"));
    ASSIGN_OR_RETURN(PreparedDataset prepared,
                     PrepareDataset(dataset_dir_, work_ + "/dataset"));
    dataset_dir_ = work_ + "/dataset";
    data_.meta = std::move(prepared.meta);
  }
  return absl::OkStatus();
}

absl::Status Simulation::WriteSecrets() {
  // A throwaway CA, the curator's certificate for localhost and 127.0.0.1,
  // an admin token, a node key.
  progress_.Update("preparing", "TLS material and credentials");
  const std::string tls = work_ + "/tls";
  fs::create_directories(tls);
  ASSIGN_OR_RETURN(DevTlsMaterial m, MakeDevTlsMaterial({"localhost", "127.0.0.1"}));
  RETURN_IF_ERROR(WriteDevTlsMaterial(m, tls));
  ASSIGN_OR_RETURN(std::string token, NewSecretHex());
  ASSIGN_OR_RETURN(std::string node_key, NewSecretHex());
  RETURN_IF_ERROR(WriteNewFile(tls + "/admin.token", token + "\n", 0600));
  RETURN_IF_ERROR(WriteNewFile(tls + "/node.key", node_key + "\n", 0600));
  ASSIGN_OR_RETURN(std::string raw_key, FromHex(node_key));
  for (int h = 0; h < o_.hosts; ++h) {
    const auto [begin, end] = Shard(h);
    RETURN_IF_ERROR(WriteNewFile(absl::StrCat(work_, "/host-", h, ".credentials"),
                                 curator::CredentialsFileText(raw_key, begin, end),
                                 0600));
  }
  return absl::OkStatus();
}

absl::Status Simulation::Prepare() {
  if (o_.attach) {
    // Only the public description: the agents hold the records.
    ASSIGN_OR_RETURN(data_.meta, LoadDatasetMeta(o_.dataset_dir));
    return Configure();
  }
  RETURN_IF_ERROR(MakeWorkFolder());
  // The dataset: validated here, before any process starts.
  const auto t = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(ReadOrGenerateData());
  data_.features = SparseRows();  // the agents hold them, not ldpctl
  if (data_.meta.nodes < static_cast<size_t>(o_.hosts)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hosts ", o_.hosts, " exceeds the dataset's ", data_.meta.nodes, " nodes"));
  }
  RETURN_IF_ERROR(Configure());
  // Secrets and TLS.
  RETURN_IF_ERROR(WriteSecrets());
  Record("prepare", std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t).count());
  return absl::OkStatus();
}

std::vector<std::string> Simulation::StoreArgs() const {
  if (postgres_ == nullptr) return {};
  return {"--store", postgres_->url(), "--store-password-file",
          postgres_->password_file()};
}

absl::Status Simulation::StartPostgres() {
  progress_.Update("starting", "PostgreSQL (initdb)");
  // The server runs as an unprivileged user when ldpctl runs as root: it
  // must be able to pass through the work folder (the secrets in it stay
  // 0600), into a folder of its own.
  chmod(work_.c_str(), 0711);
  store::LocalPostgres::Options pg;
  pg.dir = work_ + "/postgres";
  pg.fsync = o_.sync == "full";
  pg.max_connections = std::max(100, 4 * (o_.frontends + 2) + 20);
  ASSIGN_OR_RETURN(postgres_, store::LocalPostgres::Start(pg));
  ASSIGN_OR_RETURN(observer_, store::CuratorStore::OpenUrl(
                                  postgres_->url(), postgres_->password_file(),
                                  "", {}));
  progress_.Note(absl::StrCat("PostgreSQL on 127.0.0.1:", postgres_->port(),
                              " (", pg.dir, ", log postgres.log)"));
  return absl::OkStatus();
}

absl::StatusOr<int> Simulation::WaitReady(ChildProcess* p, const std::string& ready,
                                          const std::string& what) {
  const absl::Time until = absl::Now() + absl::Seconds(o_.timeout_s);
  while (true) {
    RETURN_IF_ERROR(Check());
    if (auto how = p->Exited()) {
      failure_logs_ = absl::StrCat("last lines of ", p->log_path(), ":\n",
                                   p->LogTail(15));
      return absl::InternalError(absl::StrCat(p->name(), " ", *how));
    }
    if (fs::exists(ready)) {
      auto text = ReadFileToString(ready);
      if (text.ok()) {
        json j = json::parse(*text, nullptr, false);
        if (!j.is_discarded() && j.contains("grpc_port")) {
          return j["grpc_port"].get<int>();
        }
      }
    }
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(
          absl::StrCat("the ", what, " did not start in --timeout"));
    }
    progress_.Update("starting", what);
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status Simulation::StartFrontend(int i, int port) {
  const std::string tls = work_ + "/tls";
  const std::string ready = absl::StrCat(work_, "/frontend-", i, ".ready");
  std::error_code ec;
  fs::remove(ready, ec);
  std::vector<std::string> argv = {
      o_.bin_dir + "/ldpgraph-curator", "--role", "frontend", "--listen",
      absl::StrCat("127.0.0.1:", port), "--http", "off", "--data-dir",
      absl::StrCat(work_, "/frontend-", i), "--graph", dataset_dir_,
      "--admin-token", tls + "/admin.token", "--node-key", tls + "/node.key",
      "--tls-cert", tls + "/curator.pem", "--tls-key", tls + "/curator.key",
      "--sync", o_.sync, "--ready-file", ready};
  const std::vector<std::string> store = StoreArgs();
  argv.insert(argv.end(), store.begin(), store.end());
  if (o_.edges != "none") argv.push_back("--private-edges");
  const std::string log =
      frontend_restarts_[i] == 0
          ? absl::StrCat(work_, "/frontend-", i, ".log")
          : absl::StrCat(work_, "/frontend-", i, ".restart-",
                         frontend_restarts_[i], ".log");
  ASSIGN_OR_RETURN(frontends_[i],
                   ChildProcess::Start(absl::StrCat("frontend ", i),
                                       std::move(argv), log));
  ASSIGN_OR_RETURN(frontend_ports_[i],
                   WaitReady(frontends_[i].get(), ready,
                             absl::StrCat("frontend ", i)));
  return absl::OkStatus();
}

std::string Simulation::OperatorReady(int slot) const {
  return slot == 0 ? work_ + "/curator.ready"
                   : absl::StrCat(work_, "/operator-", slot, ".ready");
}

std::vector<std::string> Simulation::OperatorArgs(int slot,
                                                  const std::string& ready) const {
  const std::string tls = work_ + "/tls";
  std::vector<std::string> argv = {
      o_.bin_dir + "/ldpgraph-curator", "--listen",
      absl::StrCat("127.0.0.1:", operator_ports_[slot]), "--http", "off",
      "--data-dir", absl::StrCat(work_, slot == 0 ? "/curator" : "/operator-1"),
      "--graph", dataset_dir_, "--admin-token", tls + "/admin.token",
      "--node-key", tls + "/node.key", "--tls-cert", tls + "/curator.pem",
      "--tls-key", tls + "/curator.key", "--sync", o_.sync, "--max-threads",
      absl::StrCat(std::max(256, 4 * o_.hosts + 64)), "--pipeline-threads",
      absl::StrCat(o_.threads), "--ready-file", ready};
  const std::vector<std::string> store = StoreArgs();
  argv.insert(argv.end(), store.begin(), store.end());
  if (o_.frontends > 0) argv.insert(argv.end(), {"--role", "operator"});
  // The curator learns the graph from the agents' reports only.
  if (o_.edges != "none") argv.push_back("--private-edges");
  return argv;
}

absl::Status Simulation::StartOperator(int slot,
                                       std::unique_ptr<ChildProcess>* into) {
  const std::string ready = OperatorReady(slot);
  std::error_code ec;
  fs::remove(ready, ec);
  const std::string base =
      slot == 0 ? work_ + "/curator" : absl::StrCat(work_, "/operator-", slot);
  const int starts = operator_starts_[slot]++;
  const std::string log =
      starts == 0 ? base + ".log" : absl::StrCat(base, ".restart-", starts, ".log");
  const std::string name =
      o_.operator_kills > 0 ? absl::StrCat("operator ", slot)
                            : (o_.frontends > 0 ? "operator" : "curator");
  ASSIGN_OR_RETURN(*into, ChildProcess::Start(name, OperatorArgs(slot, ready), log));
  return absl::OkStatus();
}

absl::Status Simulation::StartCurator() {
  if (o_.attach) {
    admin_settings_ = o_.connection;
    admin_ = Connect(o_.connection);
    return absl::OkStatus();
  }
  if (o_.store == "postgres") RETURN_IF_ERROR(StartPostgres());
  // The curator's large matrices on transparent huge pages (glibc 2.35+:
  // malloc advises them for the chunks it maps), unless the caller set
  // glibc's tunables itself. Propagation reads rows of an n x d matrix at
  // random: with 4 KiB pages most reads miss the TLB once the matrix
  // passes a few hundred MB (16 KProp steps at 2M nodes: 41 s, 20 s with
  // huge pages). The processes started after this inherit it.
  if (std::getenv("GLIBC_TUNABLES") == nullptr) {
    setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 0);
  }
  if (o_.operator_kills > 0) {
    // Fixed ports: ldpctl's connection lists both operators.
    for (int& port : operator_ports_) {
      ASSIGN_OR_RETURN(port, net::FreeLoopbackPort());
    }
  }
  const std::string what = o_.frontends > 0 ? "operator" : "curator";
  RETURN_IF_ERROR(StartOperator(0, &curator_));
  ASSIGN_OR_RETURN(port_, WaitReady(curator_.get(), OperatorReady(0), what));
  frontends_.resize(o_.frontends);
  frontend_ports_.assign(o_.frontends, 0);
  frontend_restarts_.assign(o_.frontends, 0);
  for (int i = 0; i < o_.frontends; ++i) RETURN_IF_ERROR(StartFrontend(i, 0));
  if (o_.edge) RETURN_IF_ERROR(StartEdge());
  // --operator-kills: a standby beside the active operator, waiting for
  // the lease.
  if (o_.operator_kills > 0) RETURN_IF_ERROR(StartOperator(1, &standby_));
  const std::string tls = work_ + "/tls";
  const std::string address =
      o_.operator_kills > 0
          ? absl::StrCat("127.0.0.1:", operator_ports_[0], ",127.0.0.1:",
                         operator_ports_[1])
          : absl::StrCat("127.0.0.1:", port_);
  ConnectionSettings s;
  s.curator = address;
  s.server_name = "localhost";
  ASSIGN_OR_RETURN(s.ca_pem, ReadFileToString(tls + "/ca.pem"));
  ASSIGN_OR_RETURN(std::string token, ReadFileToString(tls + "/admin.token"));
  while (!token.empty() && (token.back() == '\n')) token.pop_back();
  s.admin_token_hex = token;
  admin_settings_ = s;
  admin_ = Connect(s);
  // For the operator: ldpctl --config WORK/ldpctl.conf <command>.
  return WriteNewFile(
      work_ + "/ldpctl.conf",
      absl::StrCat("# ldpctl --config ", work_, "/ldpctl.conf <command>\n",
                   "curator = ", address, "\n",
                   "server-name = localhost\n", "ca = tls/ca.pem\n",
                   "admin-token = tls/admin.token\n"),
      0644);
}

absl::Status Simulation::StartEdge() {
  progress_.Update("starting", "the edge (HAProxy)");
  ASSIGN_OR_RETURN(const std::string haproxy, net::FindHaproxy());
  const std::string tls = work_ + "/tls";
  // HAProxy reads the certificate and its key from one file.
  ASSIGN_OR_RETURN(std::string cert, ReadFileToString(tls + "/curator.pem"));
  ASSIGN_OR_RETURN(std::string key, ReadFileToString(tls + "/curator.key"));
  RETURN_IF_ERROR(WriteNewFile(tls + "/edge.pem", cert + key, 0600));
  ASSIGN_OR_RETURN(edge_port_, net::FreeLoopbackPort());
  net::EdgeConfig c;
  c.listen = absl::StrCat("127.0.0.1:", edge_port_);
  c.tls_pem = tls + "/edge.pem";
  if (frontend_ports_.empty()) {
    c.backends.push_back(absl::StrCat("127.0.0.1:", port_));
  } else {
    for (int p : frontend_ports_) c.backends.push_back(absl::StrCat("127.0.0.1:", p));
  }
  c.backend_ca = tls + "/ca.pem";
  c.backend_name = "localhost";
  ASSIGN_OR_RETURN(const std::string text, net::HaproxyConfigText(c));
  const std::string config = work_ + "/haproxy.cfg";
  RETURN_IF_ERROR(WriteNewFile(config, text, 0644));
  ASSIGN_OR_RETURN(edge_, ChildProcess::Start("edge", {haproxy, "-f", config, "-db"},
                                              work_ + "/edge.log"));
  // Ready once it accepts connections.
  const absl::Time until = absl::Now() + absl::Seconds(o_.timeout_s);
  while (true) {
    RETURN_IF_ERROR(Check());
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(edge_port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool up = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (fd >= 0) close(fd);
    if (up) break;
    if (absl::Now() > until) {
      return absl::DeadlineExceededError("the edge did not listen in --timeout");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  progress_.Note(absl::StrCat("edge: HAProxy on 127.0.0.1:", edge_port_, " in front of ",
                              c.backends.size(), frontend_ports_.empty() ? " curator" : " frontends",
                              " (", config, ", log edge.log)"));
  return absl::OkStatus();
}

absl::Status Simulation::StartAgents() {
  agents_.resize(o_.hosts);
  restarts_.assign(o_.hosts, 0);
  for (int h = 0; h < o_.hosts; ++h) RETURN_IF_ERROR(StartAgent(h));
  return absl::OkStatus();
}

absl::Status Simulation::StartAgent(int h) {
  {
    const auto [begin, end] = Shard(h);
    std::vector<std::string> argv = {
        o_.bin_dir + "/ldpgraph-agent", "--curator", AgentCuratorAddress(h),
        "--ca", work_ + "/tls/ca.pem",
        "--server-name", "localhost", "--credentials",
        absl::StrCat(work_, "/host-", h, ".credentials"), "--dataset",
        dataset_dir_, "--nodes", absl::StrCat(begin, "-", end), "--scaling",
        std::string(FeatureScalingName(config_.scaling)), "--state-dir",
        absl::StrCat(work_, "/agent-", h), "--http", "off", "--name",
        absl::StrCat("host-", h), "--cap-total", absl::StrCat(o_.cap)};
    if (o_.seed) {
      argv.push_back("--seed");
      argv.push_back(absl::StrCat(pipeline::NoiseSeed(*o_.seed, 0)));
    }
    if (o_.churn_on || o_.server_faults()) {
      argv.insert(argv.end(), {"--batch", absl::StrCat(o_.churn_batch)});
    }
    // Sealing keys serve neighbour substitution only: a run without it
    // does not make them (at 10M nodes, about 220 s of the two cores).
    if (o_.edges != "ns1" && o_.edges != "ns2") {
      argv.push_back("--no-sealing-keys");
    }
    if (o_.dropout > 0) {
      argv.insert(argv.end(), {"--offline", absl::StrCat(o_.dropout),
                               "--offline-seed", absl::StrCat(DropoutSeed())});
    }
    const std::vector<std::string> attack = AttackArgs();
    argv.insert(argv.end(), attack.begin(), attack.end());
    const std::string log =
        restarts_[h] == 0
            ? absl::StrCat(work_, "/agent-", h, ".log")
            : absl::StrCat(work_, "/agent-", h, ".restart-", restarts_[h], ".log");
    ASSIGN_OR_RETURN(agents_[h], ChildProcess::Start(absl::StrCat("agent host ", h),
                                                     argv, log));
  }
  return absl::OkStatus();
}

void Simulation::RemoveWorkFiles() {
  if (!owns_work_files_) return;
  std::error_code ec;
  if (made_work_) {
    fs::remove_all(work_, ec);
    return;
  }
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(work_, ec), end; !ec && it != end;
       it.increment(ec)) {
    entries.push_back(it->path());
  }
  for (const fs::path& p : entries) fs::remove_all(p, ec);
}

void Simulation::StopAll() {
  // Agents first, all at once, so that none reconnects to a curator on its
  // way down; then the admin channel (an open one holds the curator's
  // graceful shutdown until its grace period ends); then the curator.
  for (auto& a : agents_) {
    if (a) a->Terminate();
  }
  for (auto& a : agents_) {
    if (a) a->Stop(absl::Seconds(5));
  }
  proxies_.clear();
  if (edge_) edge_->Stop(absl::Seconds(5));
  admin_.reset();
  for (auto& f : frontends_) {
    if (f) f->Terminate();
  }
  for (auto& f : frontends_) {
    if (f) f->Stop(absl::Seconds(10));
  }
  if (standby_) standby_->Terminate();
  if (curator_) curator_->Stop(absl::Seconds(10));
  if (standby_) standby_->Stop(absl::Seconds(10));
  observer_.reset();
  if (postgres_) {
    if (absl::Status s = postgres_->Stop(); !s.ok()) {
      err_ << "ldpctl simulate: stopping PostgreSQL: " << s.message() << "\n";
    }
    postgres_.reset();
  }
}

absl::Status Simulation::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(Prepare());
  RETURN_IF_ERROR(StartCurator());
  if (!o_.attach) RETURN_IF_ERROR(StartNetwork());
  if (!o_.attach) RETURN_IF_ERROR(StartAgents());
  RETURN_IF_ERROR(WaitEnrolled());

  ASSIGN_OR_RETURN(const Campaigns campaigns, CollectAll());
  v1::StageResult estimate, evaluate;
  RETURN_IF_ERROR(Train(campaigns, &estimate, &evaluate));
  ASSIGN_OR_RETURN(const json j, Results(campaigns, estimate, evaluate, t0));
  Report(j);
  if (o_.keep_running) return ServeUntilInterrupted();
  return absl::OkStatus();
}

absl::Status Simulation::ServeUntilInterrupted() {
  progress_.Note(absl::StrCat(
      "\nThe deployment keeps running. In another shell:\n  ldpctl --config ",
      work_, "/ldpctl.conf status\nCtrl-C stops it."));
  while (true) {
    absl::Status s = Check();
    if (absl::IsCancelled(s)) return absl::OkStatus();  // asked to stop
    RETURN_IF_ERROR(s);
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace ldpgraph::ldpctl::internal

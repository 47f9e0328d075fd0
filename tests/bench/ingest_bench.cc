// The curator's ingest path, end to end over gRPC: reports per second per
// curator CPU-second, and bytes per report on the wire and in the store.
//
// The curator runs in a forked child (a real CuratorServer: TLS or
// plaintext, SQLite in WAL mode with synchronous FULL or NORMAL); the parent
// is the agent host: it enrols every node in one session and streams
// pre-perturbed reports in batches on one Report stream, with a window of
// batches in flight. The child's CPU time (user + system, getrusage) is
// measured across the ingest alone, so the figure is the curator's cost,
// not the client's.
//
// With --store postgres the curator's store is a PostgreSQL database on a
// server the benchmark starts (LocalPostgres, in the --dir folder); the
// curator's CPU is still its own process's (libpq's client side included),
// not the database server's, which the figure reports separately.
//
//   build/bench/ingest_bench --mechanism hds --nodes 100000 --batch 512
//   build/bench/ingest_bench --mechanism multibit --sync normal --tls
//   build/bench/ingest_bench --store postgres --nodes 100000
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/random/random.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/curator/server.h"
#include "server/store/local_postgres.h"

namespace {

namespace v1 = ldpgraph::v1;

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

// The file's bytes; empty if it cannot be read.
std::string Slurp(const std::string& path) {
  absl::StatusOr<std::string> bytes = ldpgraph::ReadFileToString(path);
  return bytes.ok() ? *std::move(bytes) : std::string();
}

int Fail(const std::string& what) {
  std::cerr << "ingest_bench: " << what << "\n";
  return 1;
}

struct Options {
  std::string mechanism;
  uint32_t nodes = 0;
  int batch = 0, window = 0;
  bool full = true, tls = false;
  std::string dir;
  bool own_dir = false;  // removed at the end
  std::string certs;
  bool own_certs = false;  // made by deploy/dev-certs.sh
  std::string store = "sqlite";  // or postgres
  std::string store_url, store_password_file;  // postgres: its server's
};

// The CPU seconds (user + system) of process `pid` and its threads so far,
// from /proc (0 if unreadable).
double ProcessCpuSeconds(pid_t pid) {
  const std::string stat = Slurp(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<std::string> f;
  size_t i = paren + 2;
  while (i < stat.size()) {
    const size_t j = stat.find(' ', i);
    f.push_back(stat.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  // Fields after the name: state is f[0]; utime f[11], stime f[12]; and
  // the reaped children's cutime f[13], cstime f[14] (postgres backends).
  if (f.size() < 15) return 0;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (std::stod(f[11]) + std::stod(f[12]) + std::stod(f[13]) +
          std::stod(f[14])) / tick;
}

// The CPU seconds of every process whose parent is `pid` (a postmaster's
// live backends and workers) plus its own.
double TreeCpuSeconds(pid_t pid) {
  double total = ProcessCpuSeconds(pid);
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = Slurp(e.path().string() + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    int ppid = 0;
    if (sscanf(stat.c_str() + paren + 2, "%*c %d", &ppid) == 1 && ppid == pid) {
      total += ProcessCpuSeconds(std::stoi(name));
    }
  }
  return total;
}

// The campaign's mechanism on cora's width: HDS over [-1, 1] or Multi-bit
// over [0, 1], both sampling 10 of 1433 dimensions at epsilon 1.
bool MechanismSpecOf(const std::string& name, ldpgraph::MechanismSpec* spec) {
  spec->epsilon = 1.0;
  spec->dimension = 1433;
  spec->sampled = 10;
  spec->beta = 1;
  if (name == "hds") {
    spec->kind = ldpgraph::MechanismKind::kHds;
    spec->alpha = -1;
  } else if (name == "multibit") {
    spec->kind = ldpgraph::MechanismKind::kMultiBit;
    spec->alpha = 0;
  } else {
    return false;
  }
  return true;
}

// Every node's report, perturbed up front; *wire_bytes their total size.
std::vector<v1::Report> PerturbedReports(const ldpgraph::MechanismSpec& spec,
                                         const ldpgraph::FeatureMechanism& mech,
                                         uint32_t nodes, size_t* wire_bytes) {
  ldpgraph::SeededRandomForTesting rng(1);
  std::vector<double> x(spec.dimension);
  std::vector<v1::Report> reports(nodes);
  *wire_bytes = 0;
  for (uint32_t v = 0; v < nodes; ++v) {
    for (auto& xi : x) xi = spec.alpha + rng.UniformDouble() * (spec.beta - spec.alpha);
    auto r = mech.Perturb(x, rng);
    reports[v].set_campaign_id("c1");
    reports[v].set_node_id(v);
    *reports[v].mutable_features() = ldpgraph::wire::EncodeFeatureReport(*r);
    *wire_bytes += reports[v].ByteSizeLong();
  }
  return reports;
}

// The curator, in a child process; returns its pid, *port its port (0 if
// it did not start). Pipes: child -> parent "port", then parent -> child
// "go" / "stop", child -> parent its CPU seconds across the two.
pid_t ForkCurator(const Options& o, const std::string& node_key,
                  const std::string& admin_token, const std::string& cert,
                  const std::string& key, int to_parent[2], int to_child[2],
                  int* port) {
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    ldpgraph::curator::ServerOptions so;
    so.data_dir = o.dir + "/curator";
    so.nodes = o.nodes;
    so.node_key = node_key;
    so.admin_token = ldpgraph::curator::ToHex(admin_token);
    so.insecure = !o.tls;
    so.tls_cert_pem = cert;
    so.tls_key_pem = key;
    so.synchronous_full = o.full;
    so.store_url = o.store_url;
    so.store_password_file = o.store_password_file;
    auto server = ldpgraph::curator::CuratorServer::Start(so);
    int p = server.ok() ? (*server)->port() : 0;
    if (!server.ok()) std::cerr << server.status() << "\n";
    (void)!write(to_parent[1], &p, sizeof p);
    char cmd;
    (void)!read(to_child[0], &cmd, 1);  // start of the measured ingest
    const double cpu0 = CpuSeconds();
    (void)!read(to_child[0], &cmd, 1);  // end
    const double cpu = CpuSeconds() - cpu0;
    (void)!write(to_parent[1], &cpu, sizeof cpu);
    (*server)->Shutdown(absl::Seconds(1));
    _exit(0);
  }
  *port = 0;
  if (read(to_parent[0], port, sizeof *port) != sizeof *port) *port = 0;
  return child;
}

// Creates the features campaign and enrols every node in one session;
// returns the session token, or an error message.
absl::StatusOr<std::string> CampaignAndSession(
    v1::AgentService::Stub& agent, v1::AdminService::Stub& admin,
    const ldpgraph::MechanismSpec& spec, uint32_t nodes,
    const std::string& node_key, const std::string& admin_token) {
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + ldpgraph::curator::ToHex(admin_token));
    v1::CreateCampaignRequest req;
    req.set_attribute(v1::ATTRIBUTE_FEATURES);
    *req.mutable_spec() = ldpgraph::wire::ToWire(spec);
    req.mutable_nodes()->set_all(true);
    v1::Campaign c;
    auto s = admin.CreateCampaign(&ctx, req, &c);
    if (!s.ok()) return absl::UnknownError("CreateCampaign: " + s.error_message());
  }
  grpc::ClientContext ctx;
  v1::EnrolRequest req;
  for (uint32_t v = 0; v < nodes; ++v) {
    auto* n = req.add_nodes();
    n->set_node_id(v);
    n->set_secret(ldpgraph::curator::NodeCredential(node_key, v));
  }
  v1::EnrolResponse resp;
  auto s = agent.Enrol(&ctx, req, &resp);
  if (!s.ok()) return absl::UnknownError("Enrol: " + s.error_message());
  return resp.session_token();
}

// What the measured ingest saw.
struct Ingested {
  size_t acked = 0, rejected = 0;
  double wall = 0;
  grpc::Status finish;
};

// Streams the batches on one Report stream with `window` batches in
// flight, reading acks as they come; false (and *error) if the stream broke.
bool StreamBatches(v1::AgentService::Stub& agent, const std::string& token,
                   const std::vector<v1::ReportBatch>& batches, int window,
                   Ingested* out, std::string* error) {
  const auto t0 = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  ctx.AddMetadata("ldpgraph-session", token);
  auto stream = agent.Report(&ctx);
  size_t in_flight = 0;
  auto read_ack = [&] {
    v1::ReportAck ack;
    if (!stream->Read(&ack)) return false;
    for (const auto& r : ack.results()) (r.code() == 0 ? out->acked : out->rejected)++;
    --in_flight;
    return true;
  };
  for (const auto& b : batches) {
    if (!stream->Write(b)) {
      *error = "stream broke";
      return false;
    }
    if (++in_flight >= static_cast<size_t>(window) && !read_ack()) {
      *error = "ack missing";
      return false;
    }
  }
  stream->WritesDone();
  while (in_flight > 0 && read_ack()) {
  }
  out->finish = stream->Finish();
  out->wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return true;
}

// Reads the flags; false (after printing the usage) for --help or a bad
// flag, *exit_code then the code to exit with.
bool ParseFlags(int argc, char** argv, Options* o, int* exit_code) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ldpgraph::CliArgs::Parse(
      args,
      {"mechanism", "nodes", "batch", "sync", "window", "certs", "dir", "store"},
      {"tls", "help"});
  if (!parsed.ok() || parsed->Flag("help")) {
    std::cerr << "usage: ingest_bench [--mechanism hds|multibit] [--nodes N] "
                 "[--batch B] [--window W] [--sync full|normal] [--tls "
                 "--certs DIR] [--dir TMP] [--store sqlite|postgres]\n";
    *exit_code = parsed.ok() ? 0 : 2;
    return false;
  }
  const auto& a = *parsed;
  o->mechanism = a.Get("mechanism").value_or("hds");
  o->nodes = static_cast<uint32_t>(a.GetUint("nodes").value().value_or(100000));
  o->batch = static_cast<int>(a.GetUint("batch").value().value_or(512));
  o->window = static_cast<int>(a.GetUint("window").value().value_or(4));
  o->full = a.Get("sync").value_or("full") == "full";
  o->tls = a.Flag("tls");
  o->dir = a.Get("dir").value_or("");
  o->store = a.Get("store").value_or("sqlite");
  if (o->store != "sqlite" && o->store != "postgres") {
    std::cerr << "ingest_bench: --store must be sqlite or postgres\n";
    *exit_code = 2;
    return false;
  }
  o->own_dir = !a.Has("dir");
  if (o->tls) {
    o->own_certs = !a.Has("certs");
    o->certs = a.Get("certs").value_or("");
  }
  return true;
}

// --store postgres: a server of its own in o->dir/pg (fsync as --sync);
// its URL and password file go in *o.
absl::StatusOr<std::unique_ptr<ldpgraph::store::LocalPostgres>> StartPostgres(Options* o) {
  chmod(o->dir.c_str(), 0755);  // the server may run as another user
  ldpgraph::store::LocalPostgres::Options po;
  po.dir = o->dir + "/pg";
  po.fsync = o->full;
  auto started = ldpgraph::store::LocalPostgres::Start(po);
  if (!started.ok()) return started.status();
  o->store_url = (*started)->url();
  o->store_password_file = (*started)->password_file();
  return started;
}

// --tls: the curator's certificate and key and the CA's certificate (PEM).
struct TlsFiles {
  std::string cert, key, ca;
};

// The TLS files from --certs, or made by deploy/dev-certs.sh in the work
// folder; an error saying what failed.
absl::StatusOr<TlsFiles> ReadTlsFiles(const Options& o) {
  const std::string certs = o.own_certs ? o.dir + "/certs" : o.certs;
  if (o.own_certs &&
      std::system(("bash deploy/dev-certs.sh " + certs + " >/dev/null").c_str()) != 0) {
    return absl::InternalError(
        "deploy/dev-certs.sh failed (run from the repository root, or give --certs)");
  }
  TlsFiles t;
  t.cert = Slurp(certs + "/curator.pem");
  t.key = Slurp(certs + "/curator.key");
  t.ca = Slurp(certs + "/ca.pem");
  if (t.cert.empty() || t.key.empty() || t.ca.empty()) {
    return absl::InternalError("no certificates in " + certs);
  }
  return t;
}

// The reports in batches of `batch`, numbered from 1.
std::vector<v1::ReportBatch> Batches(const std::vector<v1::Report>& reports, uint32_t nodes,
                                     int batch) {
  std::vector<v1::ReportBatch> batches;
  for (uint32_t first = 0; first < nodes; first += batch) {
    v1::ReportBatch b;
    b.set_batch_id(batches.size() + 1);
    for (uint32_t v = first; v < std::min<uint32_t>(nodes, first + batch); ++v) {
      *b.add_reports() = reports[v];
    }
    batches.push_back(std::move(b));
  }
  return batches;
}

// What the run measured besides the ingest itself.
struct Costs {
  double curator_cpu = 0;  // the curator process's, across the ingest
  double db_cpu = 0;       // the database server's (postgres)
  size_t wire_bytes = 0;   // every report's, serialized
};

// The figures as one JSON line on stdout; postgres: the store is not a
// file (its bytes -1).
void PrintFigures(const Options& o, const Ingested& in, const Costs& c, bool postgres) {
  const std::string db = o.dir + "/curator/curator.db";
  const long long db_bytes =
      static_cast<long long>(Slurp(db).size() + Slurp(db + "-wal").size());
  std::cout << absl::StrFormat(
      "{\"mechanism\":\"%s\",\"nodes\":%u,\"batch\":%d,\"window\":%d,"
      "\"sync\":\"%s\",\"tls\":%s,\"acked\":%u,\"rejected\":%u,"
      "\"wall_seconds\":%.3f,\"curator_cpu_seconds\":%.3f,"
      "\"reports_per_second\":%.0f,\"reports_per_curator_cpu_second\":%.0f,"
      "\"wire_bytes_per_report\":%.1f,\"store_bytes_per_report\":%.1f,"
      "\"store\":\"%s\",\"database_server_cpu_seconds\":%.3f}\n",
      o.mechanism, o.nodes, o.batch, o.window, o.full ? "full" : "normal",
      o.tls ? "true" : "false", in.acked, in.rejected, in.wall, c.curator_cpu,
      in.acked / in.wall, in.acked / c.curator_cpu, double(c.wire_bytes) / o.nodes,
      postgres ? -1.0 : double(db_bytes) / o.nodes, o.store, c.db_cpu);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int exit_code = 0;
  if (!ParseFlags(argc, argv, &o, &exit_code)) return exit_code;
  if (o.dir.empty()) {
    char tmpl[] = "/tmp/ingest_bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Fail("mkdtemp");
    o.dir = tmpl;
  }
  std::unique_ptr<ldpgraph::store::LocalPostgres> pg;
  if (o.store == "postgres") {
    auto started = StartPostgres(&o);
    if (!started.ok()) return Fail(std::string(started.status().message()));
    pg = *std::move(started);
  }
  ldpgraph::MechanismSpec spec;
  if (!MechanismSpecOf(o.mechanism, &spec)) {
    return Fail("--mechanism must be hds or multibit");
  }
  auto mech = ldpgraph::CreateFeatureMechanism(spec);
  if (!mech.ok()) return Fail(std::string(mech.status().message()));
  Costs costs;
  const std::vector<v1::Report> reports =
      PerturbedReports(spec, **mech, o.nodes, &costs.wire_bytes);

  const std::string node_key(32, 'k');
  const std::string admin_token(32, 'a');
  TlsFiles tls;
  if (o.tls) {
    auto files = ReadTlsFiles(o);
    if (!files.ok()) return Fail(std::string(files.status().message()));
    tls = *std::move(files);
  }

  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return Fail("pipe");
  int port = 0;
  const pid_t child =
      ForkCurator(o, node_key, admin_token, tls.cert, tls.key, to_parent, to_child, &port);
  if (port == 0) return Fail("the curator did not start");
  grpc::ChannelArguments cargs;
  cargs.SetMaxSendMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      o.tls ? grpc::SslCredentials({tls.ca, "", ""}) : grpc::InsecureChannelCredentials();
  auto channel =
      grpc::CreateCustomChannel(absl::StrCat("localhost:", port), creds, cargs);
  auto agent = v1::AgentService::NewStub(channel);
  auto admin = v1::AdminService::NewStub(channel);
  absl::StatusOr<std::string> token =
      CampaignAndSession(*agent, *admin, spec, o.nodes, node_key, admin_token);
  if (!token.ok()) return Fail(std::string(token.status().message()));

  // Batches built before the clock starts.
  const std::vector<v1::ReportBatch> batches = Batches(reports, o.nodes, o.batch);

  char go = 'g';
  const double db_cpu0 = pg ? TreeCpuSeconds(pg->pid()) : 0;
  (void)!write(to_child[1], &go, 1);
  Ingested in;
  std::string error;
  if (!StreamBatches(*agent, *token, batches, o.window, &in, &error)) {
    return Fail(error);
  }
  (void)!write(to_child[1], &go, 1);
  costs.db_cpu = pg ? TreeCpuSeconds(pg->pid()) - db_cpu0 : 0;
  (void)!read(to_parent[0], &costs.curator_cpu, sizeof costs.curator_cpu);
  waitpid(child, nullptr, 0);
  if (!in.finish.ok()) return Fail("Report: " + in.finish.error_message());

  PrintFigures(o, in, costs, pg != nullptr);
  pg.reset();
  if (o.own_dir) {
    std::system(("rm -rf " + o.dir).c_str());
  }
  return in.acked == o.nodes ? 0 : 1;
}

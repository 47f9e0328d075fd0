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
//   build/bench/ingest_bench --mechanism hds --nodes 100000 --batch 512
//   build/bench/ingest_bench --mechanism multibit --sync normal --tls
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/random.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/curator/server.h"

namespace {

namespace v1 = ldpgraph::v1;

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec * 1e-6;
}

std::string Slurp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return "";
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

int Fail(const std::string& what) {
  std::cerr << "ingest_bench: " << what << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = ldpgraph::CliArgs::Parse(
      args, {"mechanism", "nodes", "batch", "sync", "window", "certs", "dir"},
      {"tls", "help"});
  if (!parsed.ok() || parsed->Flag("help")) {
    std::cerr << "usage: ingest_bench [--mechanism hds|multibit] [--nodes N] "
                 "[--batch B] [--window W] [--sync full|normal] [--tls "
                 "--certs DIR] [--dir TMP]\n";
    return parsed.ok() ? 0 : 2;
  }
  const auto& a = *parsed;
  const std::string mechanism = a.Get("mechanism").value_or("hds");
  const uint32_t nodes =
      static_cast<uint32_t>(a.GetUint("nodes").value().value_or(100000));
  const int batch = static_cast<int>(a.GetUint("batch").value().value_or(512));
  const int window = static_cast<int>(a.GetUint("window").value().value_or(4));
  const bool full = a.Get("sync").value_or("full") == "full";
  const bool tls = a.Flag("tls");
  std::string dir = a.Get("dir").value_or("");
  if (dir.empty()) {
    char tmpl[] = "/tmp/ingest_bench.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Fail("mkdtemp");
    dir = tmpl;
  }

  // The campaign's mechanism, and every node's report, perturbed up front.
  ldpgraph::MechanismSpec spec;
  spec.epsilon = 1.0;
  if (mechanism == "hds") {
    spec.kind = ldpgraph::MechanismKind::kHds;
    spec.dimension = 1433;
    spec.sampled = 10;
    spec.alpha = -1;
  } else if (mechanism == "multibit") {
    spec.kind = ldpgraph::MechanismKind::kMultiBit;
    spec.dimension = 1433;
    spec.epsilon = 1.0;
    spec.sampled = 10;
    spec.alpha = 0;
  } else {
    return Fail("--mechanism must be hds or multibit");
  }
  spec.beta = 1;
  auto mech = ldpgraph::CreateFeatureMechanism(spec);
  if (!mech.ok()) return Fail(std::string(mech.status().message()));
  ldpgraph::SeededRandomForTesting rng(1);
  std::vector<double> x(spec.dimension);
  std::vector<v1::Report> reports(nodes);
  size_t wire_bytes = 0;
  for (uint32_t v = 0; v < nodes; ++v) {
    for (auto& xi : x) xi = spec.alpha + rng.UniformDouble() * (spec.beta - spec.alpha);
    auto r = (*mech)->Perturb(x, rng);
    reports[v].set_campaign_id("c1");
    reports[v].set_node_id(v);
    *reports[v].mutable_features() = ldpgraph::wire::EncodeFeatureReport(*r);
    wire_bytes += reports[v].ByteSizeLong();
  }

  const std::string node_key(32, 'k');
  const std::string admin_token(32, 'a');
  std::string cert, key, ca;
  if (tls) {
    const std::string certs = a.Get("certs").value_or(dir + "/certs");
    if (!a.Has("certs") &&
        std::system(("bash deploy/dev-certs.sh " + certs + " >/dev/null").c_str()) != 0) {
      return Fail("deploy/dev-certs.sh failed (run from the repository root, or give --certs)");
    }
    cert = Slurp(certs + "/curator.pem");
    key = Slurp(certs + "/curator.key");
    ca = Slurp(certs + "/ca.pem");
    if (cert.empty() || key.empty() || ca.empty()) return Fail("no certificates in " + certs);
  }

  // The curator, in a child process. Pipes: child -> parent "port", then
  // parent -> child "go" / "stop", child -> parent its CPU seconds.
  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return Fail("pipe");
  const pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    ldpgraph::curator::ServerOptions o;
    o.data_dir = dir + "/curator";
    o.nodes = nodes;
    o.node_key = node_key;
    o.admin_token = ldpgraph::curator::ToHex(admin_token);
    o.insecure = !tls;
    o.tls_cert_pem = cert;
    o.tls_key_pem = key;
    o.synchronous_full = full;
    auto server = ldpgraph::curator::CuratorServer::Start(o);
    int port = server.ok() ? (*server)->port() : 0;
    if (!server.ok()) std::cerr << server.status() << "\n";
    (void)!write(to_parent[1], &port, sizeof port);
    char cmd;
    (void)!read(to_child[0], &cmd, 1);  // start of the measured ingest
    const double cpu0 = CpuSeconds();
    (void)!read(to_child[0], &cmd, 1);  // end
    const double cpu = CpuSeconds() - cpu0;
    (void)!write(to_parent[1], &cpu, sizeof cpu);
    (*server)->Shutdown(absl::Seconds(1));
    _exit(0);
  }
  int port = 0;
  if (read(to_parent[0], &port, sizeof port) != sizeof port || port == 0) {
    return Fail("the curator did not start");
  }
  const std::string target = absl::StrCat("localhost:", port);
  grpc::ChannelArguments cargs;
  cargs.SetMaxSendMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds =
      tls ? grpc::SslCredentials({ca, "", ""}) : grpc::InsecureChannelCredentials();
  auto channel = grpc::CreateCustomChannel(target, creds, cargs);
  auto agent = v1::AgentService::NewStub(channel);
  auto admin = v1::AdminService::NewStub(channel);

  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + ldpgraph::curator::ToHex(admin_token));
    v1::CreateCampaignRequest req;
    req.set_attribute(v1::ATTRIBUTE_FEATURES);
    *req.mutable_spec() = ldpgraph::wire::ToWire(spec);
    req.mutable_nodes()->set_all(true);
    v1::Campaign c;
    auto s = agent ? admin->CreateCampaign(&ctx, req, &c) : grpc::Status();
    if (!s.ok()) return Fail("CreateCampaign: " + s.error_message());
  }
  std::string token;
  {
    grpc::ClientContext ctx;
    v1::EnrolRequest req;
    for (uint32_t v = 0; v < nodes; ++v) {
      auto* n = req.add_nodes();
      n->set_node_id(v);
      n->set_secret(ldpgraph::curator::NodeCredential(node_key, v));
    }
    v1::EnrolResponse resp;
    auto s = agent->Enrol(&ctx, req, &resp);
    if (!s.ok()) return Fail("Enrol: " + s.error_message());
    token = resp.session_token();
  }

  // Batches built before the clock starts.
  std::vector<v1::ReportBatch> batches;
  for (uint32_t first = 0; first < nodes; first += batch) {
    v1::ReportBatch b;
    b.set_batch_id(batches.size() + 1);
    for (uint32_t v = first; v < std::min<uint32_t>(nodes, first + batch); ++v) {
      *b.add_reports() = reports[v];
    }
    batches.push_back(std::move(b));
  }

  char go = 'g';
  (void)!write(to_child[1], &go, 1);
  const auto t0 = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  ctx.AddMetadata("ldpgraph-session", token);
  auto stream = agent->Report(&ctx);
  size_t acked = 0, rejected = 0, in_flight = 0;
  auto read_ack = [&] {
    v1::ReportAck ack;
    if (!stream->Read(&ack)) return false;
    for (const auto& r : ack.results()) (r.code() == 0 ? acked : rejected)++;
    --in_flight;
    return true;
  };
  for (const auto& b : batches) {
    if (!stream->Write(b)) return Fail("stream broke");
    if (++in_flight >= static_cast<size_t>(window) && !read_ack()) {
      return Fail("ack missing");
    }
  }
  stream->WritesDone();
  while (in_flight > 0 && read_ack()) {
  }
  auto finish = stream->Finish();
  const double wall = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
  (void)!write(to_child[1], &go, 1);
  double curator_cpu = 0;
  (void)!read(to_parent[0], &curator_cpu, sizeof curator_cpu);
  waitpid(child, nullptr, 0);
  if (!finish.ok()) return Fail("Report: " + finish.error_message());

  const std::string db = dir + "/curator/curator.db";
  const long long db_bytes =
      static_cast<long long>(Slurp(db).size() + Slurp(db + "-wal").size());
  std::cout << absl::StrFormat(
      "{\"mechanism\":\"%s\",\"nodes\":%u,\"batch\":%d,\"window\":%d,"
      "\"sync\":\"%s\",\"tls\":%s,\"acked\":%u,\"rejected\":%u,"
      "\"wall_seconds\":%.3f,\"curator_cpu_seconds\":%.3f,"
      "\"reports_per_second\":%.0f,\"reports_per_curator_cpu_second\":%.0f,"
      "\"wire_bytes_per_report\":%.1f,\"store_bytes_per_report\":%.1f}\n",
      mechanism, nodes, batch, window, full ? "full" : "normal",
      tls ? "true" : "false", acked, rejected, wall, curator_cpu,
      acked / wall, acked / curator_cpu, double(wire_bytes) / nodes,
      double(db_bytes) / nodes);
  if (!a.Has("dir")) {
    std::system(("rm -rf " + dir).c_str());
  }
  return acked == nodes ? 0 : 1;
}

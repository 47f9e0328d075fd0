// ldpgraph-curator: the curator process. Serves the agent and admin APIs
// over gRPC (TLS unless --insecure), keeps its state under --data-dir, and
// exposes /metrics, /healthz and /readyz over HTTP.
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "server/curator/credentials.h"
#include "server/curator/server.h"

namespace {

constexpr char kUsage[] = R"(ldpgraph-curator: the curator of an ldpgraph deployment.

Usage: ldpgraph-curator --data-dir DIR (--graph DATASET | --nodes N)
                        --admin-token FILE --node-key FILE
                        (--tls-cert FILE --tls-key FILE | --insecure) [flags]

The curator is untrusted for raw data: it holds the graph, runs collection
campaigns, stores the agents' perturbed reports durably (SQLite, WAL, under
--data-dir; or a PostgreSQL database shared by several curator processes),
keeps the privacy ledger and runs the learning pipeline. A restarted
curator resumes its open campaigns.

Flags:
  --listen ADDR        gRPC address (default 0.0.0.0:7443)
  --http ADDR          /metrics, /healthz, /readyz (default 0.0.0.0:9090;
                       "off" disables)
  --data-dir DIR       state directory (created if missing, with its parents)
  --graph DIR          dataset folder: the curator keeps its edges and
                       labels and drops the features on load
  --nodes N            node count, when there is no graph
  --private-edges      the nodes' edges are theirs to report (edge LDP):
                       keep the node count and labels of --graph, drop its
                       edges on load (status shows 0 edges); pipeline stages
                       then run over an edges campaign's assembled graph
                       (ldpctl pipeline ... --graph-campaign ID)
  --release-epsilon E  cap on the composed epsilon of the central-DP
                       embedding releases of each graph (default 10)
  --release-delta D    the delta releases are trained for and the ledger
                       composes at (default 1e-5)
  --admin-token FILE   hex secret the admin API requires (deploy/dev-certs.sh)
  --node-key FILE      hex secret node credentials derive from
  --tls-cert FILE      PEM certificate chain of the curator
  --tls-key FILE       PEM private key
  --insecure           plaintext gRPC: development only
  --store STORE        sqlite (default: curator.db under --data-dir) or
                       postgres://USER@HOST:PORT/DATABASE[?sslmode=...]: a
                       PostgreSQL database that several curator processes
                       share (see --role). Never put the password in it
  --store-password-file FILE
                       the database password (first line of FILE)
  --role ROLE          all (default: one process does everything),
                       frontend (serves agents only; run any number on one
                       postgres store) or operator (admin API, campaign
                       lifecycle, pipeline; one active at a time, holding a
                       lease in the store: a second one waits as a standby
                       and takes over when the first goes). An operator
                       that loses its lease exits with status 3
  --sync-interval S    how often a process on a shared store reads what the
                       others stored: new campaigns, closes, reports
                       (default 0.2)
  --sync MODE          full (default: every acknowledged report is on disk)
                       or normal (survives a crash of the process, not of
                       the machine; faster)
  --max-threads N      bound on the admin service's own threads (default
                       256, started as needed); agent hosts never take one
                       (their streams hold no thread), so this limits only
                       concurrent ldpctl/admin calls; more wait their turn
  --admin-page-bytes N the byte budget of a page of an admin listing
                       (campaigns, refusals, budgets, results, audit, ...;
                       default 4194304, at most 33554432: half the 64 MiB
                       message limit); ldpctl follows the pages
  --pipeline-threads N threads each pipeline stage (propagate, evaluate)
                       computes on; 0 (default) = every core. Results do
                       not depend on it
  --fleet-settle S     agent hosts started with --nodes from-curator get
                       their shards once no new one has asked for S seconds
                       (default 5); the plan is then fixed and stored
  --fleet-min-hosts N  and not before N hosts have asked (default 1): set it
                       to the fleet's size when it is known
  --fleet-lease S      a shard whose host has not renewed for S seconds
                       (default 30) goes to a spare host
  --check-in-rate R    devices in check-in mode (ldpgraph-agent --check-in)
                       served per second; beyond it a check-in is PACED:
                       told the next free slot of a queue that drains at R,
                       so paced devices return spread out (default 0: no
                       limit)
  --check-in-interval S  when a served or idle device checks in next
                       (default 60), jittered by --check-in-jitter
  --check-in-jitter F  each interval drawn from S x [1 - F, 1 + F], F in
                       [0, 1) (default 0.2), so devices told at once do not
                       return at once
  --check-in-session S how long a served check-in may Submit (default 60)
  --ready-file FILE    once serving, write {"grpc_port": P, "http_port": H,
                       "pid": N} to FILE (atomically: written beside it,
                       then renamed), so that a supervisor can use port 0
  -h, --help           this text

Stops gracefully on SIGINT or SIGTERM.
)";

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

std::string g_ready_file;

using ldpgraph::CliArgs;
using ldpgraph::curator::ServerOptions;

// ParseFlags, group by group: each reads its flags into o and checks them,
// naming the flag in its error.

// Where to listen and what graph to serve.
absl::Status ParseListenAndGraph(const CliArgs& a, ServerOptions& o) {
  o.listen = a.Get("listen").value_or("0.0.0.0:7443");
  o.http_listen = a.Get("http").value_or("0.0.0.0:9090");
  if (o.http_listen == "off") o.http_listen.clear();
  if (!a.Has("data-dir")) {
    return absl::InvalidArgumentError("--data-dir is required");
  }
  o.data_dir = *a.Get("data-dir");
  o.graph_dir = a.Get("graph").value_or("");
  ASSIGN_OR_RETURN(auto nodes, a.GetUint("nodes"));
  if (nodes) o.nodes = static_cast<uint32_t>(*nodes);
  if (o.graph_dir.empty() == !nodes) {
    return absl::InvalidArgumentError("give exactly one of --graph and --nodes");
  }
  o.private_edges = a.Flag("private-edges");
  if (o.private_edges && o.graph_dir.empty()) {
    return absl::InvalidArgumentError(
        "--private-edges applies to --graph (without a graph there are no "
        "edges to drop)");
  }
  return absl::OkStatus();
}

// The admin token, the node key and TLS (files read here).
absl::Status ParseSecretsAndTls(const CliArgs& a, ServerOptions& o) {
  for (const char* flag : {"admin-token", "node-key"}) {
    if (!a.Has(flag)) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
  }
  ASSIGN_OR_RETURN(std::string admin,
                   ldpgraph::curator::ReadHexSecretFile(*a.Get("admin-token")));
  o.admin_token = ldpgraph::curator::ToHex(admin);
  ASSIGN_OR_RETURN(o.node_key,
                   ldpgraph::curator::ReadHexSecretFile(*a.Get("node-key")));
  o.insecure = a.Flag("insecure");
  if (o.insecure && (a.Has("tls-cert") || a.Has("tls-key"))) {
    return absl::InvalidArgumentError(
        "--insecure and --tls-cert/--tls-key exclude each other");
  }
  if (!o.insecure) {
    if (!a.Has("tls-cert") || !a.Has("tls-key")) {
      return absl::InvalidArgumentError(
          "TLS needs --tls-cert and --tls-key (or --insecure, for "
          "development only)");
    }
    ASSIGN_OR_RETURN(o.tls_cert_pem, ldpgraph::ReadFileToString(*a.Get("tls-cert")));
    ASSIGN_OR_RETURN(o.tls_key_pem, ldpgraph::ReadFileToString(*a.Get("tls-key")));
  }
  return absl::OkStatus();
}

// The store, its durability, this process's role and how often it syncs.
absl::Status ParseStoreAndRole(const CliArgs& a, ServerOptions& o) {
  const std::string sync = a.Get("sync").value_or("full");
  if (sync != "full" && sync != "normal") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync must be full or normal, got '", sync, "'"));
  }
  o.synchronous_full = sync == "full";
  o.store_url = a.Get("store").value_or("");
  o.store_password_file = a.Get("store-password-file").value_or("");
  ASSIGN_OR_RETURN(o.role, ldpgraph::curator::ParseRole(
                               a.Get("role").value_or("all")));
  ASSIGN_OR_RETURN(auto sync_interval, a.GetDouble("sync-interval"));
  if (sync_interval) {
    if (!(*sync_interval >= 0.01 && *sync_interval <= 60)) {
      return absl::InvalidArgumentError(
          "--sync-interval must be in [0.01, 60] seconds");
    }
    o.sync_interval = absl::Seconds(*sync_interval);
  }
  return absl::OkStatus();
}

// An integer flag in [lo, hi] into *out, when given; the error says
// "--FLAG must be in [lo, hi]" and `why`.
absl::Status IntFlagIn(const CliArgs& a, const char* flag, int64_t lo,
                       int64_t hi, int* out, const char* why = "") {
  ASSIGN_OR_RETURN(auto v, a.GetInt(flag));
  if (!v) return absl::OkStatus();
  if (*v < lo || *v > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be in [", lo, ", ", hi, "]", why));
  }
  *out = static_cast<int>(*v);
  return absl::OkStatus();
}

// A duration flag in (0, 86400] seconds into *out, when given.
absl::Status SecondsFlag(const CliArgs& a, const char* flag,
                         absl::Duration* out) {
  ASSIGN_OR_RETURN(auto seconds, a.GetDouble(flag));
  if (!seconds) return absl::OkStatus();
  if (!(*seconds > 0 && *seconds <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be in (0, 86400] seconds"));
  }
  *out = absl::Seconds(*seconds);
  return absl::OkStatus();
}

// Threads and the admin API's page size.
absl::Status ParseLimits(const CliArgs& a, ServerOptions& o) {
  RETURN_IF_ERROR(IntFlagIn(a, "max-threads", 4, 100000, &o.max_threads));
  RETURN_IF_ERROR(IntFlagIn(a, "admin-page-bytes", 1024,
                            o.max_message_bytes / 2, &o.admin_page_bytes));
  return IntFlagIn(a, "pipeline-threads", 0, 4096, &o.pipeline_threads,
                   " (0 = every core)");
}

// The fleet planner's timing and the release budget.
absl::Status ParseFleetAndRelease(const CliArgs& a, ServerOptions& o) {
  RETURN_IF_ERROR(SecondsFlag(a, "fleet-settle", &o.fleet_settle));
  RETURN_IF_ERROR(SecondsFlag(a, "fleet-lease", &o.fleet_lease));
  RETURN_IF_ERROR(
      IntFlagIn(a, "fleet-min-hosts", 1, 100000, &o.fleet_min_hosts));
  ASSIGN_OR_RETURN(auto release_eps, a.GetDouble("release-epsilon"));
  if (release_eps) {
    if (!(*release_eps > 0) || !std::isfinite(*release_eps)) {
      return absl::InvalidArgumentError(
          "--release-epsilon must be finite and > 0");
    }
    o.release_budget.epsilon_cap = *release_eps;
  }
  ASSIGN_OR_RETURN(auto release_delta, a.GetDouble("release-delta"));
  if (release_delta) {
    if (!(*release_delta > 0 && *release_delta < 1)) {
      return absl::InvalidArgumentError("--release-delta must be in (0, 1)");
    }
    o.release_budget.delta = *release_delta;
  }
  return absl::OkStatus();
}

// Devices that check in: pacing, intervals, sessions.
absl::Status ParseCheckIns(const CliArgs& a, ServerOptions& o) {
  ASSIGN_OR_RETURN(auto rate, a.GetDouble("check-in-rate"));
  if (rate) o.check_in.max_per_second = *rate;
  ASSIGN_OR_RETURN(auto jitter, a.GetDouble("check-in-jitter"));
  if (jitter) o.check_in.jitter = *jitter;
  RETURN_IF_ERROR(SecondsFlag(a, "check-in-interval", &o.check_in.interval));
  RETURN_IF_ERROR(SecondsFlag(a, "check-in-session", &o.check_in.session_ttl));
  if (absl::Status s = o.check_in.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerOptions> ParseFlags(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(args,
                     {"listen", "http", "data-dir", "graph", "nodes",
                      "admin-token", "node-key", "tls-cert", "tls-key",
                      "sync", "max-threads", "ready-file", "fleet-settle",
                      "fleet-lease", "fleet-min-hosts", "release-epsilon",
                      "release-delta", "pipeline-threads", "check-in-rate",
                      "check-in-interval", "check-in-jitter",
                      "check-in-session", "store", "store-password-file",
                      "role", "sync-interval", "admin-page-bytes"},
                     {"insecure", "private-edges"}));
  ServerOptions o;
  RETURN_IF_ERROR(ParseListenAndGraph(a, o));
  RETURN_IF_ERROR(ParseSecretsAndTls(a, o));
  RETURN_IF_ERROR(ParseStoreAndRole(a, o));
  g_ready_file = a.Get("ready-file").value_or("");
  RETURN_IF_ERROR(ParseLimits(a, o));
  RETURN_IF_ERROR(ParseFleetAndRelease(a, o));
  RETURN_IF_ERROR(ParseCheckIns(a, o));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  auto options = ldpgraph::StartBinary("ldpgraph-curator", kUsage, argc,
                                       argv, ParseFlags, &exit_code);
  if (!options) return exit_code;
  {
    // One descriptor per connected agent host: lift the soft limit (often
    // 1024) to the hard one, so a fleet of thousands is not refused at the
    // 1,000th connection.
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
        nofile.rlim_cur < nofile.rlim_max) {
      nofile.rlim_cur = nofile.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &nofile);
    }
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < 16384) {
      std::cerr << "ldpgraph-curator: note: at most " << nofile.rlim_cur
                << " open files (ulimit -n): about that many agent hosts can "
                   "connect at once\n";
    }
  }
  if (options->insecure) {
    std::cerr << "ldpgraph-curator: WARNING: --insecure: plaintext gRPC, "
                 "for development only\n";
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  options->log = [](const std::string& line) {
    std::cerr << "ldpgraph-curator: " << line << std::endl;
  };
  options->cancelled = [] { return g_signal != 0; };
  auto server = ldpgraph::curator::CuratorServer::Start(*options);
  if (!server.ok()) {
    std::cerr << "ldpgraph-curator: " << server.status().message() << "\n";
    return 1;
  }
  std::cerr << "ldpgraph-curator: serving gRPC on port " << (*server)->port();
  if ((*server)->http_port() > 0) {
    std::cerr << ", HTTP on port " << (*server)->http_port();
  }
  ldpgraph::curator::OperatorSide& curator = (*server)->curator().operators();
  std::cerr << " (role " << ldpgraph::curator::RoleName(options->role) << ", "
            << curator.store().Describe() << ", "
            << curator.num_nodes() << " nodes, "
            << (options->private_edges ? "edges private, " : "")
            << curator.campaigns().open_campaigns() << " open campaigns)"
            << std::endl;
  if (!g_ready_file.empty()) {
    absl::Status written = ldpgraph::WriteFileAtomically(
        g_ready_file,
        absl::StrCat("{\"grpc_port\": ", (*server)->port(),
                     ", \"http_port\": ", (*server)->http_port(),
                     ", \"pid\": ", getpid(), "}\n"));
    if (!written.ok()) {
      std::cerr << "ldpgraph-curator: --ready-file: " << written.message() << "\n";
      (*server)->Shutdown(absl::Seconds(1));
      return 1;
    }
  }
  while (g_signal == 0 && !(*server)->lost_lease()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if ((*server)->lost_lease()) {
    std::cerr << "ldpgraph-curator: stopping: lost the operator lease"
              << std::endl;
    (*server)->Shutdown(absl::Seconds(1));
    return 3;
  }
  std::cerr << "ldpgraph-curator: signal " << g_signal << ", shutting down"
            << std::endl;
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}

// A running curator: store, core, pipeline stages, the gRPC server (agent
// and admin services, the standard health service and server reflection)
// and, optionally, the HTTP endpoint for metrics and probes. The curator
// binary is a flag parser around this; integration tests start it
// in-process on loopback.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "server/curator/curator.h"
#include "server/curator/roles.h"
#include "server/curator/stages.h"

namespace ldpgraph::curator {

struct ServerOptions {
  // gRPC address; port 0 picks a free one (see CuratorServer::port).
  std::string listen = "127.0.0.1:0";
  // Directory for curator.db and results/; created if missing.
  std::string data_dir;
  // The curator's graph: a dataset folder, of which only meta.json,
  // edges.txt and the labels of nodes.svm are kept (features are dropped
  // on load: the curator never holds them). Or, without a graph, the
  // number of nodes (no propagation or evaluation then).
  std::string graph_dir;
  uint32_t nodes = 0;
  // The curator does not know the graph (edge LDP): of graph_dir it keeps
  // the node count and labels and drops the edges at once, as it drops the
  // features. Propagation and evaluation then need an edges campaign's
  // assembled graph (graph_campaign_id).
  bool private_edges = false;
  // Cap and delta of each graph's release ledger (stages.h).
  ReleaseBudget release_budget;
  // Raw secrets (see credentials.h).
  std::string node_key;
  std::string admin_token;
  // TLS: PEM server certificate chain and key. insecure = plaintext, for
  // development only.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  bool insecure = false;
  // HTTP address of /metrics, /healthz and /readyz; empty: none.
  std::string http_listen;
  // Store durability (store.h).
  bool synchronous_full = true;
  // The store: empty or "sqlite" for curator.db under data_dir, or a
  // postgres:// URL (postgres_store.h) with its password in
  // store_password_file.
  std::string store_url;
  std::string store_password_file;
  // What this process does (roles.h), and how often a process on a shared
  // store brings in what the others stored (CampaignBook::Sync).
  Role role = Role::kAll;
  absl::Duration sync_interval = absl::Milliseconds(200);
  // An operator waiting for the lease logs this once, and is told when it
  // took it (for tests and the binary's log).
  std::function<void(const std::string&)> log;
  // A standby operator polls this while it waits for the lease; true ends
  // the wait (Start returns CANCELLED).
  std::function<bool()> cancelled;
  // Largest gRPC message accepted, bytes.
  int max_message_bytes = 64 << 20;
  // The byte budget of a page of an admin listing (listings.h): at least
  // 1 KiB and at most half of max_message_bytes, so that no admin reply
  // nears the message limit.
  int admin_page_bytes = 4 << 20;
  // Bound on the admin service's own threads, which run every admin call
  // that may wait on the store or compute (services.h); calls beyond it
  // queue. Agent streams hold no thread at all (gRPC's callback API), so no
  // agent load can take these.
  int max_threads = 256;
  // Threads each pipeline stage computes on (propagation today); 0 = every
  // core. Results do not depend on it.
  int pipeline_threads = 0;
  // Fleet shard plans (fleet.h): settle time and lease.
  absl::Duration fleet_settle = absl::Seconds(5);
  absl::Duration fleet_lease = absl::Seconds(30);
  // Fewest hosts a plan waits for (fleet.h).
  int fleet_min_hosts = 1;
  // Devices in check-in mode: pacing and intervals (check_ins.h).
  CheckInDesk::Options check_in;
  // Most nodes one Enrol call may list (Curator::Options::max_enrol);
  // lowered by tests of enrolment in parts.
  int max_enrol = 100000;
};

class CuratorServer {
 public:
  // Opens everything and starts serving. Errors name the file, flag or
  // address at fault.
  static absl::StatusOr<std::unique_ptr<CuratorServer>> Start(
      ServerOptions options);
  ~CuratorServer();

  int port() const { return port_; }
  int http_port() const;
  // Stops accepting, ends Subscribe streams, waits up to `grace` for
  // in-flight calls, then closes the store. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));
  // Blocks until Shutdown.
  void Wait();
  // An operator that found another process holds the lease it had
  // (roles.h): it must stop at once. The binary exits with status 3.
  bool lost_lease() const { return lost_lease_.load(); }

  // The core (curator.h: its agents() and operators() sides) and the
  // stages, for in-process callers such as tests.
  Curator& curator() { return *curator_; }
  Stages& stages() { return *stages_; }

 private:
  CuratorServer() = default;
  // Start's steps after validation and the store (server.cc, in order).
  absl::StatusOr<uint32_t> LoadPublicData();
  absl::Status BuildServices();
  absl::Status RegisterMetrics();
  absl::Status RegisterIngestMetrics();
  absl::Status RegisterStoreMetrics();
  absl::Status RegisterCheckInMetrics();
  absl::Status RegisterLedgerMetrics();
  absl::Status ListenGrpc();
  absl::Status StartHttp();
  void StartBackground();
  void StartLeaseWatch();
  void StartTicker();
  struct Internals;
  ServerOptions options_;
  Dataset public_data_;
  std::unique_ptr<Curator> curator_;
  std::unique_ptr<Stages> stages_;
  std::unique_ptr<Internals> internals_;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> lost_lease_{false};
  int port_ = 0;
};

}  // namespace ldpgraph::curator

#include "server/curator/server.h"

#include <sys/stat.h>

#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/observability/http_endpoint.h"
#include "common/observability/metrics.h"
#include "server/curator/services.h"

namespace ldpgraph::curator {

struct CuratorServer::Internals {
  observability::MetricsRegistry metrics;
  observability::Histogram* rpc_seconds = nullptr;
  observability::Counter* rpc_total = nullptr;
  std::unique_ptr<observability::HttpEndpoint> http;
  std::unique_ptr<AgentServiceImpl> agent;
  std::unique_ptr<AdminServiceImpl> admin;
  std::thread ticker;
  absl::Notification stop_ticker;
  absl::Notification shut_down;
};

static absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create directory ", path,
                                            ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CuratorServer>> CuratorServer::Start(
    ServerOptions options) {
  if (options.data_dir.empty()) {
    return absl::InvalidArgumentError("the curator needs a data directory");
  }
  if (options.admin_token.size() < 16) {
    return absl::InvalidArgumentError(
        "the admin token must hold at least 16 bytes");
  }
  if (!options.insecure &&
      (options.tls_cert_pem.empty() || options.tls_key_pem.empty())) {
    return absl::InvalidArgumentError(
        "TLS needs a certificate and a key (or, for development only, "
        "--insecure)");
  }
  std::unique_ptr<CuratorServer> s(new CuratorServer());
  s->options_ = options;
  RETURN_IF_ERROR(MakeDirs(options.data_dir));
  const std::string results = options.data_dir + "/results";
  RETURN_IF_ERROR(MakeDir(results));

  uint32_t nodes = options.nodes;
  if (!options.graph_dir.empty()) {
    ASSIGN_OR_RETURN(s->public_data_, LoadDataset(options.graph_dir));
    // The curator never holds the nodes' features: drop them at once.
    s->public_data_.features = SparseRows();
    s->public_data_.features.cols = s->public_data_.meta.features;
    nodes = static_cast<uint32_t>(s->public_data_.graph.num_nodes());
    if (options.private_edges) {
      // Nor the edges, when they are the nodes' to report.
      ASSIGN_OR_RETURN(s->public_data_.graph, Graph::FromEdges(nodes, {}));
      s->public_data_.meta.edges = 0;
    }
  } else if (nodes > 0) {
    s->public_data_.meta.nodes = nodes;
  }
  if (nodes == 0) {
    return absl::InvalidArgumentError(
        "the curator needs its graph (a dataset folder) or a node count");
  }

  store::CuratorStore::Options so;
  so.synchronous_full = options.synchronous_full;
  ASSIGN_OR_RETURN(auto store, store::CuratorStore::Open(options.data_dir, so));
  Curator::Options co;
  co.num_nodes = nodes;
  co.node_key = options.node_key;
  co.fleet_settle = options.fleet_settle;
  co.fleet_lease = options.fleet_lease;
  co.fleet_min_hosts = static_cast<size_t>(options.fleet_min_hosts);
  ASSIGN_OR_RETURN(s->curator_, Curator::Open(std::move(store), co));
  s->stages_ = std::make_unique<Stages>(s->curator_.get(), &s->public_data_,
                                        results, options.private_edges,
                                        options.release_budget);

  s->internals_ = std::make_unique<Internals>();
  RETURN_IF_ERROR(s->RegisterMetrics());
  Internals* metrics_of = s->internals_.get();
  RpcObserver observer = [metrics_of](absl::string_view method,
                                      double seconds, int code) {
    const std::string m(method);
    metrics_of->rpc_seconds->With({m})->Observe(seconds);
    metrics_of->rpc_total
        ->With({m, absl::StatusCodeToString(static_cast<absl::StatusCode>(code))})
        ->Increment();
  };
  s->internals_->agent =
      std::make_unique<AgentServiceImpl>(s->curator_.get(), observer);
  v1::CuratorStatus base_status;
  base_status.set_started_unix_ms(absl::ToUnixMillis(absl::Now()));
  base_status.set_graph_edges(s->public_data_.graph.num_edges());
  base_status.set_classes(static_cast<uint32_t>(
      std::max(0, s->public_data_.meta.classes)));
  base_status.set_insecure(options.insecure);
  s->internals_->admin = std::make_unique<AdminServiceImpl>(
      s->curator_.get(), s->stages_.get(), options.admin_token, observer,
      std::move(base_status), options.max_threads);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options.insecure) {
    creds = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options.tls_key_pem, options.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(options.listen, creds, &s->port_);
  builder.RegisterService(s->internals_->agent.get());
  builder.RegisterService(s->internals_->admin.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  grpc::ResourceQuota quota("ldpgraph-curator");
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen));
  }
  if (!options.http_listen.empty()) {
    auto http = SplitHostPort(options.http_listen);
    if (!http.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP address: ", http.status().message()));
    }
    CuratorServer* self = s.get();
    ASSIGN_OR_RETURN(
        s->internals_->http,
        observability::HttpEndpoint::Start(
            http->first, http->second,
            &s->internals_->metrics, [self]() -> absl::Status {
              if (self->stopping_.load()) {
                return absl::UnavailableError("shutting down");
              }
              return absl::OkStatus();
            }));
  }
  // Campaign deadlines are enforced on every report; this closes them in
  // the store too, so that operators and subscribers see the transition.
  Internals* in = s->internals_.get();
  Curator* curator = s->curator_.get();
  in->ticker = std::thread([in, curator] {
    while (!in->stop_ticker.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      curator->CloseExpired(absl::Now()).IgnoreError();
    }
  });
  return s;
}

int CuratorServer::http_port() const {
  return internals_->http ? internals_->http->port() : 0;
}

absl::Status CuratorServer::RegisterMetrics() {
  observability::MetricsRegistry& m = internals_->metrics;
  ASSIGN_OR_RETURN(internals_->rpc_seconds,
                   m.AddHistogram("ldpgraph_curator_rpc_seconds",
                                  "Latency of RPCs (a Report stream: per batch).",
                                  {"method"},
                                  observability::LatencySecondsBuckets()));
  ASSIGN_OR_RETURN(internals_->rpc_total,
                   m.AddCounter("ldpgraph_curator_rpcs_total",
                                "RPCs by method and status code.",
                                {"method", "code"}));
  const IngestCounters* c = &curator_->counters();
  auto add = [&](const char* name, const char* help,
                 const std::atomic<uint64_t>* v) {
    return m.AddGaugeCallback(name, help,
                              [v] { return static_cast<double>(v->load()); });
  };
  RETURN_IF_ERROR(add("ldpgraph_curator_reports_accepted",
                      "Reports stored (monotonic).", &c->reports_accepted));
  RETURN_IF_ERROR(add("ldpgraph_curator_reports_duplicate",
                      "Resent reports acknowledged again (monotonic).",
                      &c->reports_duplicate));
  RETURN_IF_ERROR(add("ldpgraph_curator_refusals",
                      "Refusals recorded (monotonic).", &c->refusals));
  RETURN_IF_ERROR(add("ldpgraph_curator_report_bytes",
                      "Bytes of stored reports and refusals (monotonic).",
                      &c->report_bytes));
  for (int code = 1; code <= 16; ++code) {
    const std::string name = absl::StrCat(
        "ldpgraph_curator_reports_rejected_",
        absl::AsciiStrToLower(
            absl::StatusCodeToString(static_cast<absl::StatusCode>(code))));
    RETURN_IF_ERROR(add(name.c_str(),
                        "Reports rejected with this status code (monotonic).",
                        &c->rejected[code]));
  }
  Curator* curator = curator_.get();
  RETURN_IF_ERROR(m.AddGaugeCallback(
      "ldpgraph_curator_open_campaigns", "Campaigns accepting reports.",
      [curator] { return static_cast<double>(curator->open_campaigns()); }));
  return absl::OkStatus();
}

void CuratorServer::Shutdown(absl::Duration grace) {
  if (stopping_.exchange(true)) return;
  internals_->stop_ticker.Notify();
  if (internals_->ticker.joinable()) internals_->ticker.join();
  internals_->agent->Stop();  // ends the Subscribe streams
  server_->Shutdown(std::chrono::system_clock::now() +
                    absl::ToChronoSeconds(grace));
  server_->Wait();
  if (internals_->http) internals_->http->Stop();
  internals_->shut_down.Notify();
}

void CuratorServer::Wait() { internals_->shut_down.WaitForNotification(); }

CuratorServer::~CuratorServer() {
  if (server_ != nullptr) Shutdown(absl::Seconds(1));
}

}  // namespace ldpgraph::curator

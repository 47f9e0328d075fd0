#include "server/curator/server.h"

#include <unistd.h>

#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/observability/http_endpoint.h"
#include "common/observability/metrics.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"
#include "server/curator/services.h"

namespace ldpgraph::curator {

struct CuratorServer::Internals {
  observability::MetricsRegistry metrics;
  observability::Histogram* rpc_seconds = nullptr;
  observability::Counter* rpc_total = nullptr;
  // Nodes at a cap, as the last scrape found them (RegisterMetrics).
  std::atomic<uint32_t> nodes_at_cap{0};
  std::unique_ptr<observability::HttpEndpoint> http;
  std::unique_ptr<AgentServiceImpl> agent;
  std::unique_ptr<AdminServiceImpl> admin;
  std::thread ticker;
  std::thread lease_watch;  // an operator on a shared store only
  absl::Notification stop_ticker;
  absl::Notification shut_down;
};

namespace {

// Whether the store is shared with other curator processes (a postgres://
// URL), not this process's SQLite file.
bool SharedStore(const ServerOptions& options) {
  return !(options.store_url.empty() || options.store_url == "sqlite");
}

// Waits until this process holds the operator lease (roles.h), retrying
// every 250 ms through errors (a database that is away); CANCELLED when
// options.cancelled says so.
absl::Status WaitForLease(store::CuratorStore& store,
                          const ServerOptions& options) {
  bool said = false;
  while (true) {
    absl::StatusOr<bool> held = store.TryOperatorLease();
    if (held.ok() && *held) break;
    if (!said && options.log) {
      options.log(held.ok() ? "standby: another operator holds the lease; "
                              "waiting for it"
                            : absl::StrCat("standby: ", held.status().message()));
      said = true;
    }
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError("stopped while waiting for the operator lease");
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  if (said && options.log) options.log("took the operator lease");
  return absl::OkStatus();
}

// The curator over its store, the lease taken first by a process that
// serves the admin API. Over a shared store a database that cannot be
// reached -- at start, or gone while the state loads -- is waited for:
// every step is tried again from a new connection, after 250 ms doubling
// to 5 s, with one log line per outage, until options.cancelled. (The
// store and its lease are given up between tries: a standby may take over
// meanwhile, which is what it is for.)
absl::StatusOr<std::unique_ptr<Curator>> OpenCurator(
    const ServerOptions& options, bool shared, const Curator::Options& co) {
  store::CuratorStore::Options so;
  so.synchronous_full = options.synchronous_full;
  absl::Duration backoff = absl::Milliseconds(250);
  bool said = false;
  while (true) {
    absl::Status failed;
    auto store = store::CuratorStore::OpenUrl(
        options.store_url, options.store_password_file, options.data_dir, so);
    if (store.ok()) {
      if (ServesAdmin(options.role)) {
        RETURN_IF_ERROR(WaitForLease(**store, options));
      }
      auto curator = Curator::Open(std::move(*store), co);
      if (curator.ok()) {
        if (said && options.log) options.log("the store answers: starting");
        return curator;
      }
      failed = curator.status();
    } else {
      failed = store.status();
    }
    if (!shared || failed.code() != absl::StatusCode::kUnavailable) {
      return failed;
    }
    if (!said && options.log) {
      options.log(absl::StrCat("waiting for the store (retried every ",
                               "0.25-5 s): ", failed.message()));
      said = true;
    }
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError(absl::StrCat(
          "stopped while waiting for the store: ", failed.message()));
    }
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, absl::Seconds(5));
  }
}

}  // namespace

// Start, step by step: validate the options, make the data folders, load
// the public data, open the curator over its store (waiting for the lease
// and the database where that applies), build the services, listen, serve
// HTTP, start the background threads. Each step is a function of its own;
// an error stops the start there.

namespace {

// A step of Start: the options that need no I/O to check.
absl::Status ValidateServerOptions(const ServerOptions& options) {
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
  if (options.admin_page_bytes < 1024 ||
      options.admin_page_bytes > options.max_message_bytes / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the admin page byte budget must be in [1024, ",
        options.max_message_bytes / 2,
        "] (at most half of the largest message), got ",
        options.admin_page_bytes));
  }
  if (!SharedStore(options) && options.role != Role::kAll) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--role ", RoleName(options.role),
        " needs a store shared with the other roles (--store postgres://...); "
        "over SQLite one process does everything (--role all)"));
  }
  return absl::OkStatus();
}

// A step of Start: what the curator's parts are told (curator.h).
Curator::Options CuratorOptionsFor(const ServerOptions& options,
                                   uint32_t nodes) {
  Curator::Options co;
  co.shared_store = SharedStore(options);
  co.close_on_quorum = options.role != Role::kFrontend;
  co.add_frontend_status = options.role == Role::kOperator;
  co.num_nodes = nodes;
  co.node_key = options.node_key;
  co.fleet_settle = options.fleet_settle;
  co.fleet_lease = options.fleet_lease;
  co.fleet_min_hosts = static_cast<size_t>(options.fleet_min_hosts);
  co.check_in = options.check_in;
  co.max_enrol = options.max_enrol;
  return co;
}

// The gRPC server's builder settings beyond the services (ListenGrpc).
void ConfigureBuilder(const ServerOptions& options, grpc::ServerBuilder& builder,
                      grpc::ResourceQuota& quota) {
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // A connection that has not finished its handshake in 10 s is dropped
  // (gRPC's default: 120 s). A fleet starting at once on a loaded machine
  // retries handshakes its clients gave up on; each abandoned one held a
  // socket here until its own timeout, and 1,000 TLS agents starting on two
  // cores ran the curator out of file descriptors ("accept4: Too many open
  // files") with 129 of them enrolled.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 10000);
  // TLS records of at most 4 KiB (gRPC's default: 16 KiB): each connection's
  // frame protector holds buffers of this size; at 10,000 connected hosts
  // the curator's peak went from 1,117 to 1,066 MiB (docs/benchmarks.md,
  // "Fleet scale"). Reports travel in batches of many records either way.
  builder.AddChannelArgument(GRPC_ARG_TSI_MAX_FRAME_SIZE, 4096);
  quota.SetMaxThreads(options.max_threads);
  builder.SetResourceQuota(quota);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CuratorServer>> CuratorServer::Start(
    ServerOptions options) {
  RETURN_IF_ERROR(ValidateServerOptions(options));
  std::unique_ptr<CuratorServer> s(new CuratorServer());
  s->options_ = options;
  const std::string results = options.data_dir + "/results";
  RETURN_IF_ERROR(MakeDirs(options.data_dir));
  RETURN_IF_ERROR(MakeDirs(results));
  ASSIGN_OR_RETURN(const uint32_t nodes, s->LoadPublicData());
  ASSIGN_OR_RETURN(s->curator_,
                   OpenCurator(options, SharedStore(options),
                               CuratorOptionsFor(options, nodes)));
  s->stages_ = std::make_unique<Stages>(&s->curator_->operators(),
                                        &s->public_data_,
                                        results, options.private_edges,
                                        options.release_budget,
                                        options.pipeline_threads);
  RETURN_IF_ERROR(s->BuildServices());
  RETURN_IF_ERROR(s->ListenGrpc());
  RETURN_IF_ERROR(s->StartHttp());
  s->StartBackground();
  return s;
}

// A step of Start: the public graph and labels (never the nodes' features;
// nor the edges when the nodes report them), or only a node count. Returns
// the number of nodes.
absl::StatusOr<uint32_t> CuratorServer::LoadPublicData() {
  uint32_t nodes = options_.nodes;
  if (!options_.graph_dir.empty()) {
    ASSIGN_OR_RETURN(public_data_, LoadDataset(options_.graph_dir));
    // The curator never holds the nodes' features: drop them at once.
    public_data_.features = SparseRows();
    public_data_.features.cols = public_data_.meta.features;
    nodes = static_cast<uint32_t>(public_data_.graph.num_nodes());
    if (options_.private_edges) {
      // Nor the edges, when they are the nodes' to report.
      ASSIGN_OR_RETURN(public_data_.graph, Graph::FromEdges(nodes, {}));
      public_data_.meta.edges = 0;
    }
  } else if (nodes > 0) {
    public_data_.meta.nodes = nodes;
  }
  if (nodes == 0) {
    return absl::InvalidArgumentError(
        "the curator needs its graph (a dataset folder) or a node count");
  }
  return nodes;
}

// A step of Start: the metrics and both gRPC services over the curator's
// sides.
absl::Status CuratorServer::BuildServices() {
  internals_ = std::make_unique<Internals>();
  RETURN_IF_ERROR(RegisterMetrics());
  Internals* metrics_of = internals_.get();
  RpcObserver observer = [metrics_of](absl::string_view method,
                                      double seconds, int code) {
    const std::string m(method);
    metrics_of->rpc_seconds->With({m})->Observe(seconds);
    metrics_of->rpc_total
        ->With({m, absl::StatusCodeToString(static_cast<absl::StatusCode>(code))})
        ->Increment();
  };
  internals_->agent =
      std::make_unique<AgentServiceImpl>(&curator_->agents(), observer);
  v1::CuratorStatus base_status;
  base_status.set_started_unix_ms(absl::ToUnixMillis(absl::Now()));
  base_status.set_graph_edges(public_data_.graph.num_edges());
  base_status.set_classes(
      static_cast<uint32_t>(std::max(0, public_data_.meta.classes)));
  base_status.set_insecure(options_.insecure);
  internals_->admin = std::make_unique<AdminServiceImpl>(
      &curator_->operators(), stages_.get(), options_.admin_token, observer,
      std::move(base_status), options_.max_threads,
      Listings::Options{.page_bytes =
                            static_cast<size_t>(options_.admin_page_bytes)});
  // A frontend answers GetStatus too (its sessions and streams, which only
  // it knows), and nothing else of the admin API.
  if (!ServesAdmin(options_.role)) internals_->admin->ServeStatusOnly();
  return absl::OkStatus();
}

// A step of Start: the gRPC server on options_.listen (TLS unless
// insecure), with the services the role serves.
absl::Status CuratorServer::ListenGrpc() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options_.insecure) {
    creds = grpc::InsecureServerCredentials();
  } else {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options_.tls_key_pem, options_.tls_cert_pem});
    creds = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(options_.listen, creds, &port_);
  if (ServesAgents(options_.role)) {
    builder.RegisterService(internals_->agent.get());
  }
  builder.RegisterService(internals_->admin.get());
  grpc::ResourceQuota quota("ldpgraph-curator");
  ConfigureBuilder(options_, builder, quota);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.listen));
  }
  return absl::OkStatus();
}

// A step of Start: /metrics, /healthz and /readyz on options_.http_listen
// (none when it is empty).
absl::Status CuratorServer::StartHttp() {
  if (options_.http_listen.empty()) return absl::OkStatus();
  auto http = SplitHostPort(options_.http_listen);
  if (!http.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP address: ", http.status().message()));
  }
  ASSIGN_OR_RETURN(internals_->http,
                   observability::HttpEndpoint::Start(
                       http->first, http->second, &internals_->metrics,
                       [this]() -> absl::Status {
                         if (stopping_.load()) {
                           return absl::UnavailableError("shutting down");
                         }
                         return absl::OkStatus();
                       }));
  return absl::OkStatus();
}

// A step of Start: the threads that run beside the services.
void CuratorServer::StartBackground() {
  if (SharedStore(options_) && ServesAdmin(options_.role)) StartLeaseWatch();
  StartTicker();
}

// The operator's lease, checked every 500 ms on a thread of its own: a
// sync stuck connecting to a database that is away must not delay it, or a
// standby would take the lease when the database returns (the holder takes
// it back at once, a standby only after its grace: store.h).
void CuratorServer::StartLeaseWatch() {
  Internals* in = internals_.get();
  OperatorSide* curator = &curator_->operators();
  in->lease_watch = std::thread([in, curator, this, log = options_.log] {
    while (!in->stop_ticker.WaitForNotificationWithTimeout(
        absl::Milliseconds(500))) {
      absl::StatusOr<bool> held = curator->store().TryOperatorLease();
      if (held.ok() && !*held) {
        if (log) log("lost the operator lease: another operator holds it");
        lost_lease_.store(true);
        return;
      }
    }
  });
}

// Campaign deadlines are enforced on every report; the ticker closes them
// in the store too, so that operators and subscribers see the transition.
// On a shared store, every sync_interval: what the other processes stored;
// the operator then closes quorate campaigns, and a frontend publishes its
// status under a name of its own, this process's (a restarted one is a new
// row, the old one goes stale).
void CuratorServer::StartTicker() {
  Internals* in = internals_.get();
  OperatorSide* curator = &curator_->operators();
  const bool shared = SharedStore(options_);
  const absl::Duration tick =
      shared ? std::min(options_.sync_interval, absl::Seconds(1))
             : absl::Seconds(1);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string name = absl::StrCat(host, " pid ", getpid());
  in->ticker = std::thread([in, curator, tick, shared, name,
                            role = options_.role, log = options_.log] {
    absl::Time last_close = absl::InfinitePast();
    bool failing = false;  // logged once when syncs start and stop failing
    while (!in->stop_ticker.WaitForNotificationWithTimeout(tick)) {
      const absl::Time now = absl::Now();
      if (shared) {
        // What the other processes stored; the operator then closes the
        // campaigns that reached their quorum.
        absl::Status synced = curator->campaigns().Sync().status();
        if (synced.ok() && ServesAdmin(role)) {
          synced = curator->campaigns().CloseQuorate(absl::Now()).status();
        }
        if (!synced.ok() && !failing && log) {
          log(absl::StrCat("sync failing (retried every interval): ",
                           synced.message()));
        } else if (synced.ok() && failing && log) {
          log("sync: the store answers again");
        }
        if (synced.ok() && role == Role::kFrontend) {
          synced = curator->PublishStatus(name);
        }
        failing = !synced.ok();
      }
      if (ServesAdmin(role) && now - last_close >= absl::Seconds(1)) {
        curator->campaigns().CloseExpired(now).IgnoreError();
        last_close = now;
      }
    }
  });
}

int CuratorServer::http_port() const {
  return internals_->http ? internals_->http->port() : 0;
}

namespace {

// The campaign gauges: open campaigns and their progress, read from
// `campaigns` (which must outlive `registry`) at every scrape.
absl::Status RegisterCampaignMetrics(observability::MetricsRegistry& registry,
                                     CampaignDesk campaigns) {
  RETURN_IF_ERROR(registry.AddGaugeCallback(
      "ldpgraph_curator_open_campaigns", "Campaigns accepting reports.",
      [campaigns] {
        return static_cast<double>(campaigns.open_campaigns());
      }));
  // The open campaigns' progress: (reports + refusals) / targets is the
  // share of their questions answered. A campaign leaves all three when it
  // closes.
  auto progress = [&registry, campaigns](const char* name, const char* help,
                                         uint64_t CampaignBook::Tally::*field) {
    return registry.AddGaugeCallback(name, help, [campaigns, field] {
      return static_cast<double>(campaigns.Count().*field);
    });
  };
  RETURN_IF_ERROR(progress("ldpgraph_curator_open_campaign_targets",
                           "Nodes the open campaigns target (a node once per "
                           "campaign).",
                           &CampaignBook::Tally::open_targeted));
  RETURN_IF_ERROR(progress("ldpgraph_curator_open_campaign_reports",
                           "Reports stored for the open campaigns.",
                           &CampaignBook::Tally::open_reports));
  return progress("ldpgraph_curator_open_campaign_refusals",
                  "Refusals stored for the open campaigns.",
                  &CampaignBook::Tally::open_refusals);
}

}  // namespace

absl::Status CuratorServer::RegisterMetrics() {
  using observability::MetricsRegistry;
  MetricsRegistry& m = internals_->metrics;
  ASSIGN_OR_RETURN(internals_->rpc_seconds,
                   m.AddHistogram("ldpgraph_curator_rpc_seconds",
                                  "Latency of RPCs (a Report stream: per batch).",
                                  {"method"},
                                  observability::LatencySecondsBuckets()));
  ASSIGN_OR_RETURN(internals_->rpc_total,
                   m.AddCounter("ldpgraph_curator_rpcs_total",
                                "RPCs by method and status code.",
                                {"method", "code"}));
  RETURN_IF_ERROR(RegisterIngestMetrics());
  RETURN_IF_ERROR(RegisterCampaignMetrics(m, curator_->operators().campaigns()));
  RETURN_IF_ERROR(RegisterStoreMetrics());
  RETURN_IF_ERROR(RegisterCheckInMetrics());
  return RegisterLedgerMetrics();
}

// Reports stored, resent, refused and rejected (IngestCounters).
absl::Status CuratorServer::RegisterIngestMetrics() {
  using observability::MetricsRegistry;
  MetricsRegistry& m = internals_->metrics;
  OperatorSide* curator = &curator_->operators();
  const IngestCounters* c = &curator->campaigns().counters();
  auto counter = [&](const char* name, const char* help,
                     const std::atomic<uint64_t>* v) {
    return m.AddCounterCallback(
        name, help, [v] { return static_cast<double>(v->load()); });
  };
  RETURN_IF_ERROR(counter("ldpgraph_curator_reports_accepted_total",
                          "Reports stored.", &c->reports_accepted));
  RETURN_IF_ERROR(counter("ldpgraph_curator_reports_duplicate_total",
                          "Resent reports acknowledged again.",
                          &c->reports_duplicate));
  RETURN_IF_ERROR(counter("ldpgraph_curator_report_bytes_total",
                          "Bytes of stored reports and refusals.",
                          &c->report_bytes));
  // Every reason of v1::RefusalReason but UNSPECIFIED (never stored),
  // lower-case without the prefix, always rendered (a reason this build
  // does not know is rejected at ingest, never stored).
  std::vector<std::pair<int, std::string>> reasons;
  for (int r = v1::RefusalReason_MIN; r <= v1::RefusalReason_MAX; ++r) {
    if (r == v1::REFUSAL_REASON_UNSPECIFIED || !v1::RefusalReason_IsValid(r)) {
      continue;
    }
    reasons.emplace_back(
        r, absl::AsciiStrToLower(absl::StripPrefix(
               v1::RefusalReason_Name(static_cast<v1::RefusalReason>(r)),
               "REFUSAL_REASON_")));
  }
  RETURN_IF_ERROR(m.AddCounterCallback(
      "ldpgraph_curator_refusals_total", "Refusals stored, by reason.",
      {"reason"}, [c, reasons] {
        MetricsRegistry::CounterSamples out;
        for (const auto& [r, name] : reasons) {
          out.push_back({{name}, double(c->refusals_by_reason[r].load())});
        }
        return out;
      }));
  // All 16 codes a report can be rejected with, always rendered, as
  // lower-case names (invalid_argument, ...).
  std::vector<std::string> codes(17);
  for (int code = 1; code <= 16; ++code) {
    codes[code] = absl::AsciiStrToLower(
        absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
  }
  RETURN_IF_ERROR(m.AddCounterCallback(
      "ldpgraph_curator_reports_rejected_total",
      "Reports rejected, by status code.", {"code"}, [c, codes] {
        MetricsRegistry::CounterSamples out;
        for (int code = 1; code <= 16; ++code) {
          out.push_back({{codes[code]}, double(c->rejected[code].load())});
        }
        return out;
      }));
  return absl::OkStatus();
}

absl::Status CuratorServer::RegisterStoreMetrics() {
  using observability::MetricsRegistry;
  MetricsRegistry& m = internals_->metrics;
  OperatorSide* curator = &curator_->operators();
  // Group commit (store.h): the store's writes and the commits that wrote
  // them; their ratio is the mean group (SQLite; PostgreSQL reports 0).
  RETURN_IF_ERROR(m.AddCounterCallback(
      "ldpgraph_store_writes_total",
      "Writes of answers, caps and audit rows to the store (SQLite; grouped "
      "into commits: see ldpgraph_store_commits_total).",
      [curator] { return double(curator->store().write_counts().writes); }));
  RETURN_IF_ERROR(m.AddCounterCallback(
      "ldpgraph_store_commits_total",
      "Transactions (syncs to disk) that wrote those writes: concurrent writes "
      "share one (group commit).",
      [curator] { return double(curator->store().write_counts().commits); }));
  return absl::OkStatus();
}

absl::Status CuratorServer::RegisterCheckInMetrics() {
  using observability::MetricsRegistry;
  MetricsRegistry& m = internals_->metrics;
  OperatorSide* curator = &curator_->operators();
  // Devices in check-in mode (check_ins.h): check-ins by outcome, distinct
  // devices seen, check-in sessions live.
  RETURN_IF_ERROR(m.AddCounterCallback(
      "ldpgraph_curator_check_ins_total",
      "Device check-ins, by outcome: served (tasks given), idle (nothing "
      "waited), paced (told to come back later: the curator at its rate).",
      {"outcome"}, [curator] {
        const CheckInDesk::Counters c = curator->check_ins().counters();
        return MetricsRegistry::CounterSamples{{{"served"}, double(c.served)},
                                               {{"idle"}, double(c.idle)},
                                               {{"paced"}, double(c.paced)}};
      }));
  RETURN_IF_ERROR(m.AddGaugeCallback(
      "ldpgraph_curator_devices_seen",
      "Distinct devices (nodes) that checked in since start.", [curator] {
        return double(curator->check_ins().counters().devices_seen);
      }));
  return absl::OkStatus();
}

absl::Status CuratorServer::RegisterLedgerMetrics() {
  using observability::HistogramSnapshot;
  using observability::MetricsRegistry;
  MetricsRegistry& m = internals_->metrics;
  OperatorSide* curator = &curator_->operators();
  // The ledger, in one pass per scrape (Ledger::Summary): the
  // histogram's callback takes the summary and leaves the at-cap count for
  // the gauge registered right after it, which the registry renders right
  // after it. Every attribute is rendered, spent on or not.
  std::vector<std::string> attributes;
  for (const auto& v : wire::kAttributeNames.values()) {
    attributes.emplace_back(v.name);
  }
  std::atomic<uint32_t>* at_cap = &internals_->nodes_at_cap;
  const std::vector<double> bounds = {0.1, 0.25, 0.5, 1, 2, 4, 8, 16};
  RETURN_IF_ERROR(m.AddHistogramCallback(
      "ldpgraph_curator_epsilon_spent",
      "Epsilon each node has spent on an attribute, from the ledger at "
      "scrape time: one observation per node that has spent on it.",
      {"attribute"}, bounds, [curator, at_cap, attributes, bounds] {
        LedgerSummary summary = curator->ledger().Summary();
        at_cap->store(summary.nodes_at_cap);
        for (const std::string& a : attributes) summary.spent[a];
        MetricsRegistry::HistogramSamples out;
        for (const auto& [attribute, spent] : summary.spent) {
          out.push_back({{attribute}, HistogramSnapshot::Of(bounds, spent)});
        }
        return out;
      }));
  RETURN_IF_ERROR(m.AddGaugeCallback(
      "ldpgraph_curator_nodes_at_cap",
      "Nodes whose total cap, or the cap of an attribute, is spent.",
      [at_cap] { return static_cast<double>(at_cap->load()); }));
  return absl::OkStatus();
}

void CuratorServer::Shutdown(absl::Duration grace) {
  if (stopping_.exchange(true)) return;
  internals_->stop_ticker.Notify();
  if (internals_->ticker.joinable()) internals_->ticker.join();
  if (internals_->lease_watch.joinable()) internals_->lease_watch.join();
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

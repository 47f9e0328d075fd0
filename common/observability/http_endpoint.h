// The plain-HTTP side door of a curator or agent host process: Prometheus
// scrapes /metrics, Kubernetes probes /healthz and /readyz
// (docs/operators.md, "Metrics and health"; deploy/k8s/README.md).
//
//   GET /metrics  200, MetricsRegistry::Render(), Content-Type
//                 "text/plain; version=0.0.4; charset=utf-8"
//   GET /healthz  200 "ok\n" as long as the process serves HTTP at all
//   GET /readyz   200 "ready\n" if the readiness check returns OK, otherwise
//                 503 with the check's message and a newline
// Any other path is 404; HEAD works wherever GET does.
//
// It carries no secrets and accepts no input beyond the request line, so it
// is plaintext HTTP: bind it to an address that only the scraper and the
// kubelet reach. Requests are bounded (bodies of at most 4 KiB, 5 s read
// and write timeouts, idle keep-alive connections closed after 1 s) and
// served by a pool of 2 threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/observability/metrics.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ldpgraph::observability {

// A running HTTP server for /metrics, /healthz and /readyz on a thread of its
// own. Stop() and the destructor shut it down; both are safe to call from any
// thread and more than once. Does not own the registry.
class HttpEndpoint {
 public:
  // Answers /readyz: OK when the process can take work. Called on the
  // server's threads, possibly concurrently: it must be thread-safe, quick
  // and must not block on this endpoint.
  using ReadinessCheck = std::function<absl::Status()>;

  // Binds host:port (port 0: an ephemeral port, see port()) and starts
  // serving before it returns. registry must outlive the endpoint; an empty
  // ready means always ready.
  // INVALID_ARGUMENT if registry is null or port is not in [0, 65535];
  // UNAVAILABLE, naming host:port and the reason, if the address cannot be
  // bound (in use, not local) or the server fails to start.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& host, int port, const MetricsRegistry* registry,
      ReadinessCheck ready);

  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // Stops accepting, lets requests in flight finish and joins the server's
  // threads. An idle keep-alive connection can hold it up to about 1 s.
  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_);

  const std::string& host() const { return host_; }
  // The port bound, never 0.
  int port() const { return port_; }

 private:
  HttpEndpoint(std::string host, int port,
               std::unique_ptr<httplib::Server> server);

  const std::string host_;
  const int port_;
  const std::unique_ptr<httplib::Server> server_;
  absl::Mutex stop_mu_;
  std::thread thread_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace ldpgraph::observability

#include "common/observability/http_endpoint.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ldpgraph::observability {
namespace {

constexpr char kMetricsContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";
constexpr char kTextContentType[] = "text/plain; charset=utf-8";
constexpr size_t kThreads = 2;
constexpr size_t kMaxPayloadBytes = 4096;
constexpr time_t kReadWriteTimeoutSeconds = 5;
constexpr time_t kKeepAliveTimeoutSeconds = 1;

// host:port, with brackets around an IPv6 literal.
std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

HttpEndpoint::HttpEndpoint(std::string host, int port,
                           std::unique_ptr<httplib::Server> server)
    : host_(std::move(host)), port_(port), server_(std::move(server)) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& host, int port, const MetricsRegistry* registry,
    ReadinessCheck ready) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("HttpEndpoint: no metrics registry");
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HttpEndpoint: port ", port, " is not in [0, 65535]"));
  }

  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  // httplib's default sets SO_REUSEPORT, which would let a second process
  // bind the same port and split the scrapes with us. SO_REUSEADDR alone
  // still allows a restart while old connections sit in TIME_WAIT.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->set_payload_max_length(kMaxPayloadBytes);
  server->set_read_timeout(kReadWriteTimeoutSeconds, 0);
  server->set_write_timeout(kReadWriteTimeoutSeconds, 0);
  server->set_keep_alive_timeout(kKeepAliveTimeoutSeconds);

  server->Get("/metrics",
              [registry](const httplib::Request&, httplib::Response& res) {
                res.set_content(registry->Render(), kMetricsContentType);
              });
  server->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", kTextContentType);
  });
  server->Get("/readyz", [ready = std::move(ready)](const httplib::Request&,
                                                    httplib::Response& res) {
    const absl::Status status = ready ? ready() : absl::OkStatus();
    if (status.ok()) {
      res.set_content("ready\n", kTextContentType);
      return;
    }
    res.status = 503;
    res.set_content(absl::StrCat(status.message().empty()
                                     ? "not ready"
                                     : std::string(status.message()),
                                 "\n"),
                    kTextContentType);
  });

  errno = 0;
  int bound = -1;
  if (port == 0) {
    bound = server->bind_to_any_port(host);
  } else if (server->bind_to_port(host, port)) {
    bound = port;
  }
  if (bound <= 0) {
    const int error = errno;
    return absl::UnavailableError(absl::StrCat(
        "HttpEndpoint: cannot bind ", HostPort(host, port),
        error != 0 ? absl::StrCat(": ", std::strerror(error))
                   : ": the host does not resolve to a local address"));
  }

  std::unique_ptr<HttpEndpoint> endpoint(
      new HttpEndpoint(host, bound, std::move(server)));
  auto finished = std::make_shared<std::atomic<bool>>(false);
  {
    absl::MutexLock lock(&endpoint->stop_mu_);
    endpoint->thread_ =
        std::thread([server = endpoint->server_.get(), finished] {
          server->listen_after_bind();
          finished->store(true);
        });
  }
  // httplib's stop() does nothing until the listening loop has begun, so do
  // not hand out an endpoint whose Stop() could miss it.
  while (!endpoint->server_->is_running() && !finished->load()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!endpoint->server_->is_running()) {
    endpoint->Stop();
    return absl::UnavailableError(absl::StrCat(
        "HttpEndpoint: the server on ", HostPort(host, bound),
        " stopped as it started"));
  }
  return endpoint;
}

void HttpEndpoint::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace ldpgraph::observability

#include "common/net/edge_config.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net/route_header.h"

namespace ldpgraph::net {

namespace {

// The sections of haproxy.cfg whose text does not depend on the config.
constexpr char kFileHeader[] =
    "# Written by ldpgraph (common/net/edge_config.h): TLS for clients,\n"
    "# their calls spread over the frontends by the route header.\n"
    "global\n";
constexpr char kGlobalTls[] =
    "  tune.ssl.default-dh-param 2048\n"
    "  ssl-default-bind-options ssl-min-ver TLSv1.2\n"
    "\n";
constexpr char kResolversSection[] =
    "resolvers dns\n"
    "  parse-resolv-conf\n"
    "  hold valid 5s\n"
    "  hold nx 5s\n"
    "  timeout resolve 1s\n"
    "  timeout retry 1s\n"
    "\n";

// INVALID_ARGUMENT for what HaproxyConfigText refuses, in the order its
// contract lists the checks (the backends' HOST:PORT form last).
absl::Status ValidateEdgeConfig(const EdgeConfig& c) {
  int port = 0;
  if (c.listen.rfind(':') == std::string::npos ||
      !absl::SimpleAtoi(c.listen.substr(c.listen.rfind(':') + 1), &port) ||
      port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the edge's listen address must be HOST:PORT with a port in "
        "[1, 65535], got '", c.listen, "'"));
  }
  if (c.tls_pem.empty()) {
    return absl::InvalidArgumentError(
        "the edge needs a certificate and key (one PEM file)");
  }
  if (c.backends.empty() == c.backends_from_dns.empty()) {
    return absl::InvalidArgumentError(
        c.backends.empty()
            ? "the edge needs at least one frontend"
            : "the edge's frontends: a list or a DNS name, not both");
  }
  if (!c.backends_from_dns.empty() &&
      (c.backends_from_dns.rfind(':') == std::string::npos ||
       c.max_backends < 1 || c.max_backends > 1000)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the edge's frontends by DNS want NAME:PORT and at most 1..1000 of "
        "them, got '", c.backends_from_dns, "' and ", c.max_backends));
  }
  for (size_t i = 0; i < c.backends.size(); ++i) {
    const std::string& b = c.backends[i];
    if (b.rfind(':') == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the edge's frontend ", i, " must be HOST:PORT, got '", b, "'"));
    }
  }
  return absl::OkStatus();
}

// The header comment, `global` (the connection cap, threads, TLS settings)
// and, when backends are resolved at run time, the resolvers section.
std::string GlobalSections(const EdgeConfig& c, bool dns) {
  return absl::StrCat(
      kFileHeader,
      c.max_connections > 0
          ? absl::StrCat("  maxconn ", c.max_connections,
                         "\n"
                         "  # One descriptor a client: the frontends' "
                         "connections are shared.\n"
                         "  no strict-limits\n")
          : "",
      c.threads > 0 ? absl::StrCat("  nbthread ", c.threads, "\n") : "",
      kGlobalTls, dns ? kResolversSection : "");
}

// `defaults` (timeouts) and the `frontend clients` that terminates TLS.
std::string DefaultsAndFrontend(const EdgeConfig& c) {
  const int64_t idle_ms = absl::ToInt64Milliseconds(c.idle_timeout);
  return absl::StrCat(
      "defaults\n"
      "  mode http\n"
      "  timeout connect 5s\n"
      "  timeout client ", idle_ms, "ms\n",
      "  timeout server ", idle_ms, "ms\n",
      "  timeout tunnel ", idle_ms, "ms\n",
      "  timeout http-request 10s\n"
      "  timeout check 5s\n"
      "  timeout http-keep-alive ", idle_ms, "ms\n",
      "\n"
      "frontend clients\n"
      "  bind ", c.listen, " ssl crt ", c.tls_pem, " alpn h2\n",
      c.max_connections > 0 ? absl::StrCat("  maxconn ", c.max_connections, "\n")
                            : "",
      "  default_backend frontends\n"
      "\n");
}

// `backend frontends`: routing by the route header, how every frontend is
// reached and watched, and the frontends themselves.
std::string BackendSection(const EdgeConfig& c, bool dns) {
  std::string text = absl::StrCat(
      "backend frontends\n"
      "  # One client's calls to one frontend (its sessions live there);\n"
      "  # calls without the header are spread round robin.\n"
      "  balance hdr(", kRouteHeader, ")\n"
      "  hash-type consistent\n"
      "  # Streams of many clients share each connection to a frontend.\n"
      "  http-reuse always\n");
  // How every frontend is reached and watched: TLS checked against the CA
  // (or plaintext HTTP/2), marked down at the first failed connection of a
  // client's call (a killed frontend refuses them at once), and by a health
  // check every 2 s after three in a row fail (a check's TLS handshake,
  // given at most the 2 s interval, can wait behind a busy frontend's work:
  // 1 s marked a loaded curator down under 10,000 hosts and the edge
  // answered 503 meanwhile).
  absl::StrAppend(
      &text, "  default-server",
      c.backend_ca.empty()
          ? " proto h2"
          : absl::StrCat(" ssl verify required ca-file ", c.backend_ca,
                         " verifyhost ", c.backend_name, " sni str(",
                         c.backend_name, ") alpn h2"),
      " check inter 2s fall 3 rise 1 observe layer4 error-limit 1"
      " on-error mark-down",
      dns ? " resolvers dns resolve-prefer ipv4 init-addr last,libc,none" : "",
      "\n");
  if (!c.backends_from_dns.empty()) {
    absl::StrAppend(&text, "  server-template f ", c.max_backends, " ",
                    c.backends_from_dns, "\n");
    return text;
  }
  for (size_t i = 0; i < c.backends.size(); ++i) {
    absl::StrAppend(&text, "  server f", i, " ", c.backends[i], "\n");
  }
  return text;
}

}  // namespace

absl::StatusOr<std::string> HaproxyConfigText(const EdgeConfig& c) {
  if (absl::Status s = ValidateEdgeConfig(c); !s.ok()) return s;
  const bool dns = c.resolve_at_run_time || !c.backends_from_dns.empty();
  return absl::StrCat(GlobalSections(c, dns), DefaultsAndFrontend(c),
                      BackendSection(c, dns));
}

absl::StatusOr<std::string> FindHaproxy() {
  if (const char* env = std::getenv("LDPGRAPH_HAPROXY"); env && *env) {
    if (access(env, X_OK) == 0) return std::string(env);
    return absl::FailedPreconditionError(absl::StrCat(
        "$LDPGRAPH_HAPROXY is ", env, ", which is not an executable"));
  }
  if (const char* path = std::getenv("PATH")) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string candidate = absl::StrCat(dir, "/haproxy");
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  if (access("/usr/sbin/haproxy", X_OK) == 0) return std::string("/usr/sbin/haproxy");
  return absl::FailedPreconditionError(
      "the edge needs HAProxy: apt-get install haproxy (or set "
      "$LDPGRAPH_HAPROXY to its binary)");
}

}  // namespace ldpgraph::net

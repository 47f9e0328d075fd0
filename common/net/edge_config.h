// The edge in front of curator frontends: HAProxy (Debian's haproxy
// package), terminating the clients' TLS and spreading their calls over the
// frontends on a few kept-alive HTTP/2 connections each.
//
// Why an edge: with TLS on the curator every device's visit is a full
// handshake and a gRPC connection set up on the curator itself (about
// 1.6 ms of its CPU per check-in; 10,000 connected hosts hold 1 GiB of its
// memory). Behind an edge the curator sees a handful of long-lived
// connections, multiplexed, and spends its CPU on the reports.
// Why HAProxy and not nginx: HAProxy multiplexes many clients' streams on
// one HTTP/2 connection to a backend (nginx's grpc_pass opens an upstream
// connection per concurrent stream, and a fleet's task streams are all
// concurrent), balances by a request header with consistent hashing (the
// route header that keeps a client on one frontend, route_header.h), and
// health-checks its backends so a dead frontend's clients move at once.
//
// Per-node credentials stay end to end: they are in the messages (Enrol,
// CheckIn), not in TLS, so the edge learns nothing it could act as a node
// with. The edge-to-frontend hop is TLS too, checked against the
// deployment's CA, unless the caller says the network is private.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ldpgraph::net {

struct EdgeConfig {
  // Where the edge listens for clients: HOST:PORT.
  std::string listen;
  // A PEM file of the edge's certificate (chain) followed by its key.
  std::string tls_pem;
  // The frontends, HOST:PORT each; at least one (or backends_from_dns).
  std::vector<std::string> backends;
  // Instead of the list: NAME:PORT, every address NAME resolves to (a
  // Kubernetes headless Service of the frontends), up to max_backends,
  // resolved again every few seconds as frontends come and go.
  std::string backends_from_dns;
  int max_backends = 16;
  // Resolve the backends' names at run time too (containers, whose
  // addresses change when they restart), from /etc/resolv.conf; a name
  // that does not resolve yet leaves its server down instead of failing the
  // start. Implied by backends_from_dns.
  bool resolve_at_run_time = false;
  // The CA the frontends' certificates are checked against, and the name
  // they must carry (also sent as SNI). An empty CA: plaintext to the
  // frontends (a private network only).
  std::string backend_ca;
  std::string backend_name = "localhost";
  // HAProxy's threads (0: its default, one per CPU).
  int threads = 0;
  // How long an idle stream or connection may stay open: task streams and
  // devices' connections are long-lived.
  absl::Duration idle_timeout = absl::Hours(1);
  // Clients the edge holds at once; 0: what its descriptor limit allows
  // (HAProxy's own choice, about half of `ulimit -n`: it budgets two
  // descriptors a client, one for the client and one for a server
  // connection). Set, the config says `no strict-limits`: the clients'
  // streams share a few server connections (http-reuse always), so a
  // client needs one descriptor, and HAProxy starts with this maxconn under
  // a limit that covers one a client (with a warning that it could not
  // raise the limit to two a client).
  int max_connections = 0;
};

// The haproxy.cfg text for `c`. INVALID_ARGUMENT for a missing listen
// address, certificate or backend (or both a list and a DNS name), a
// backend that is not HOST:PORT, or max_backends outside [1, 1000].
absl::StatusOr<std::string> HaproxyConfigText(const EdgeConfig& c);

// The haproxy binary: $LDPGRAPH_HAPROXY, else `haproxy` on PATH, else
// /usr/sbin/haproxy. FAILED_PRECONDITION saying `apt-get install haproxy`
// when there is none.
absl::StatusOr<std::string> FindHaproxy();

}  // namespace ldpgraph::net

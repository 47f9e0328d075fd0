// A fault-injecting TCP proxy on loopback: the network of a simulated
// deployment. Every connection accepted on the proxy's port is forwarded to
// one upstream address (the curator), with a one-way latency, jitter and
// segment loss added in each direction.
//
// Why a proxy in user space rather than the kernel's netem: netem needs root
// (CAP_NET_ADMIN) and, to leave the rest of the machine alone, a network
// namespace; a proxy runs unprivileged, in CI and in containers. It forwards
// bytes only: TLS stays end to end (agents still verify the curator's
// certificate and server name through it).
//
// Delay model. Each chunk read from one side (whatever one read(2) returns,
// at most 64 KiB) is released to the other side at
//   max(the previous release in that direction,
//       now + latency + U(-jitter, +jitter) clipped at 0),
// so bytes never reorder, as on a TCP connection. Jitter larger than the
// latency is allowed: the draw is clipped at zero delay.
//
// Loss. TCP does not lose bytes: a lost segment is retransmitted, and what
// the application sees is a stall. So with probability `loss` per chunk the
// chunk is held an extra retransmission timeout,
//   RTO = max(200 ms, 2 x latency + 4 x jitter)
// (200 ms being Linux's minimum RTO; the second term the RFC 6298 estimate
// srtt + 4 x rttvar with rtt = 2 x latency and its deviation = jitter), and
// everything behind it in that direction waits too (head-of-line blocking,
// from the max() above). A stall is counted in Stats::injected_losses.
//
// Close. An orderly EOF on one side is forwarded as shutdown(SHUT_WR) of the
// other once the bytes before it have been released (the FIN is delayed like
// a chunk); a connection is closed once both directions have ended. A read
// or write error (a reset) closes both sides at once, the other with a reset
// too, dropping what was pending. An upstream that refuses the connection
// closes the accepted one (Stats::connect_failures).
//
// Randomness: a std::mt19937_64 seeded from Options::seed. Network
// simulation, not privacy noise: reproducible draws are what a simulation
// wants (though which chunk gets which draw depends on how the kernel splits
// the byte stream into reads, so delays are not replayed exactly).
//
// Threads and scale: one thread runs an epoll loop with a timer queue over
// non-blocking sockets, so thousands of connections need no more threads.
// Buffering is bounded: a side is no longer read while more than
// Options::max_pending_bytes of it wait to be released (backpressure reaches
// the sender through TCP's own flow control). Out of file descriptors, the
// proxy stops accepting for 100 ms at a time (new connections wait in the
// listen backlog) rather than spin.
//
// Thread safety: port(), stats() and Stop() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ldpgraph::net {

class FaultProxy {
 public:
  struct Options {
    // Where accepted connections are forwarded: "host:port" (a name is
    // resolved once, at Create). Required.
    std::string upstream;
    // Where the proxy listens: "ip:port", port 0 for any free port.
    std::string listen = "127.0.0.1:0";
    // Added one-way delay, in each direction; >= 0.
    absl::Duration latency = absl::ZeroDuration();
    // Half-width of the uniform jitter around the latency; >= 0.
    absl::Duration jitter = absl::ZeroDuration();
    // Probability in [0, 1) that a chunk is "lost" (held one RTO).
    double loss = 0;
    // Seed of the delay and loss draws.
    uint64_t seed = 1;
    // Bytes waiting in one direction of one connection beyond which that
    // side is not read; > 0.
    size_t max_pending_bytes = size_t{4} << 20;
  };

  // Counters since Create. Bytes and chunks count what was released to the
  // receiving side.
  struct Stats {
    uint64_t connections = 0;       // accepted
    uint64_t open_connections = 0;  // accepted and not yet closed
    uint64_t connect_failures = 0;  // the upstream refused or failed
    uint64_t bytes_to_upstream = 0;
    uint64_t bytes_to_client = 0;
    uint64_t chunks = 0;           // chunks read, both directions
    uint64_t injected_losses = 0;  // chunks held an extra RTO
    absl::Duration max_delay;      // the longest hold of a chunk
    double cpu_seconds = 0;        // the proxy thread's CPU time
  };

  // Validates the options (INVALID_ARGUMENT naming the option), resolves
  // the upstream, binds and listens, and starts the proxy thread.
  // UNAVAILABLE if the listen address cannot be bound.
  static absl::StatusOr<std::unique_ptr<FaultProxy>> Create(Options options);

  // The retransmission timeout a lost chunk waits: see the header comment.
  static absl::Duration RetransmissionTimeout(absl::Duration latency,
                                              absl::Duration jitter);

  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // The bound port.
  int port() const { return port_; }
  const Options& options() const { return options_; }
  Stats stats() const;

  // Stops the thread and closes every socket (pending bytes are dropped).
  // Idempotent; the destructor calls it.
  void Stop();

 private:
  class Loop;
  FaultProxy(Options options, int port, std::unique_ptr<Loop> loop);

  const Options options_;
  const int port_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
};

}  // namespace ldpgraph::net

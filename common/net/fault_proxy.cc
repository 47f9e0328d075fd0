#include "common/net/fault_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/random/seed_mix.h"

namespace ldpgraph::net {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadSize = 64 * 1024;
// epoll tokens: the listener, the wake-up eventfd, then (id << 1 | side).
constexpr uint64_t kListenToken = 0;
constexpr uint64_t kWakeToken = 1;

std::string ErrnoText() { return std::strerror(errno); }

// "host:port" into its parts; the port in [0, 65535].
absl::Status SplitHostPort(const std::string& address, const char* option,
                           std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  uint32_t p = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &p) || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, " must be host:port, got '", address, "'"));
  }
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  *port = static_cast<int>(p);
  return absl::OkStatus();
}

absl::StatusOr<sockaddr_storage> Resolve(const std::string& address,
                                         const char* option, socklen_t* len) {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(address, option, &host, &port); !s.ok()) {
    return s;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(),
                             &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, " '", address, "' does not resolve: ", gai_strerror(rc)));
  }
  sockaddr_storage out{};
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Closes fd with a reset rather than a FIN.
void CloseWithReset(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

}  // namespace

// The proxy thread's state. Only Run() and what it calls touch the
// connections; the counters are atomics read by stats().
class FaultProxy::Loop {
 public:
  Loop(const Options& o, int listen_fd, int epoll_fd, int wake_fd,
       sockaddr_storage upstream, socklen_t upstream_len)
      : o_(o),
        listen_fd_(listen_fd),
        epoll_fd_(epoll_fd),
        wake_fd_(wake_fd),
        upstream_(upstream),
        upstream_len_(upstream_len),
        rng_(SeedMix(o.seed)),
        latency_(absl::ToInt64Nanoseconds(o.latency)),
        jitter_(absl::ToInt64Nanoseconds(o.jitter)),
        rto_(absl::ToInt64Nanoseconds(
            RetransmissionTimeout(o.latency, o.jitter))) {}
  ~Loop();

  void Run();
  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
  Stats Snapshot() const;

 private:
  struct Chunk {
    Clock::time_point release;
    std::string data;  // empty: the EOF marker
    size_t offset = 0;
  };
  // Bytes read from side `d` on their way to side 1 - d (side 0: the
  // accepted client, side 1: the upstream).
  struct Direction {
    std::deque<Chunk> queue;
    size_t pending = 0;
    Clock::time_point last_release{};
    bool eof_read = false;     // the sender's EOF was read
    bool shut_written = false;  // ... and forwarded
  };
  struct Conn {
    uint64_t id = 0;
    int fd[2] = {-1, -1};
    uint32_t mask[2] = {0, 0};  // the epoll interest registered
    bool registered[2] = {false, false};
    Direction dir[2];
    bool connecting = true;  // the upstream connect is in progress
  };
  struct Timer {
    Clock::time_point at;
    uint64_t id;
    int direction;
    bool operator>(const Timer& t) const { return at > t.at; }
  };

  void Accept();
  void OnEvent(uint64_t token, uint32_t events);
  // Reads side s of c into its direction's queue; false if c was closed.
  bool ReadSide(Conn& c, int s);
  // Writes what is due of direction d; false if c was closed.
  bool Flush(Conn& c, int d);
  void Enqueue(Conn& c, int d, std::string data);
  void UpdateInterest(Conn& c);
  void CloseConn(Conn& c, bool reset);
  void FireTimers();
  int TimeoutMs() const;

  const Options o_;
  const int listen_fd_, epoll_fd_, wake_fd_;
  const sockaddr_storage upstream_;
  const socklen_t upstream_len_;
  std::mt19937_64 rng_;
  const int64_t latency_, jitter_, rto_;  // nanoseconds
  uint64_t next_id_ = 1;  // 0: the listener's timer
  absl::flat_hash_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  bool stopping_ = false;
  std::vector<char> read_buffer_ = std::vector<char>(kReadSize);

  std::atomic<uint64_t> connections_{0}, open_{0}, connect_failures_{0},
      bytes_[2] = {0, 0}, chunks_{0}, losses_{0};
  std::atomic<int64_t> max_delay_ns_{0}, cpu_ns_{0};
};

FaultProxy::Loop::~Loop() {
  for (auto& [id, c] : conns_) {
    for (int fd : c->fd) {
      if (fd >= 0) close(fd);
    }
  }
  close(listen_fd_);
  close(wake_fd_);
  close(epoll_fd_);
}

FaultProxy::Stats FaultProxy::Loop::Snapshot() const {
  Stats s;
  s.connections = connections_.load();
  s.open_connections = open_.load();
  s.connect_failures = connect_failures_.load();
  s.bytes_to_upstream = bytes_[0].load();
  s.bytes_to_client = bytes_[1].load();
  s.chunks = chunks_.load();
  s.injected_losses = losses_.load();
  s.max_delay = absl::Nanoseconds(max_delay_ns_.load());
  s.cpu_seconds = cpu_ns_.load() * 1e-9;
  return s;
}

int FaultProxy::Loop::TimeoutMs() const {
  if (timers_.empty()) return -1;
  const auto wait = timers_.top().at - Clock::now();
  if (wait <= Clock::duration::zero()) return 0;
  // Rounded up: a chunk is never released before its time.
  return static_cast<int>(
      std::chrono::ceil<std::chrono::milliseconds>(wait).count());
}

void FaultProxy::Loop::Run() {
  std::vector<epoll_event> events(256);
  while (!stopping_) {
    const int n = epoll_wait(epoll_fd_, events.data(),
                             static_cast<int>(events.size()), TimeoutMs());
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) OnEvent(events[i].data.u64, events[i].events);
    FireTimers();
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    cpu_ns_.store(int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec);
  }
}

void FaultProxy::Loop::OnEvent(uint64_t token, uint32_t events) {
  if (token == kWakeToken) {
    stopping_ = true;
    return;
  }
  if (token == kListenToken) {
    Accept();
    return;
  }
  const auto it = conns_.find(token >> 1);
  if (it == conns_.end()) return;  // closed earlier in this batch
  Conn& c = *it->second;
  const int s = static_cast<int>(token & 1);
  if (s == 1 && c.connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c.fd[1], SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      ++connect_failures_;
      CloseConn(c, /*reset=*/true);
      return;
    }
    c.connecting = false;
    if (!Flush(c, 0)) return;
    UpdateInterest(c);
    return;
  }
  if (events & EPOLLERR) {
    CloseConn(c, /*reset=*/true);
    return;
  }
  // A hang-up is read too (it returns the last bytes, then EOF), even
  // under backpressure, so that it is not reported again and again.
  if ((events & (EPOLLIN | EPOLLHUP)) && !c.dir[s].eof_read) {
    if (!ReadSide(c, s)) return;
  }
  // Writable: the direction towards side s has bytes that are due.
  if (events & EPOLLOUT) {
    if (!Flush(c, 1 - s)) return;
  }
  UpdateInterest(c);
}

void FaultProxy::Loop::Accept() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        // Out of descriptors: the pending connection would wake the loop
        // again and again. Stop listening a while (timer id 0 re-arms).
        epoll_event ev{};
        ev.data.u64 = kListenToken;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
        timers_.push(Timer{Clock::now() + std::chrono::milliseconds(100), 0, 0});
      }
      return;  // EAGAIN: nothing more to accept
    }
    ++connections_;
    const int up = socket(upstream_.ss_family,
                          SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (up < 0) {
      ++connect_failures_;
      CloseWithReset(fd);
      continue;
    }
    SetNoDelay(fd);
    SetNoDelay(up);
    auto c = std::make_unique<Conn>();
    c->id = next_id_++;
    c->fd[0] = fd;
    c->fd[1] = up;
    const int rc = connect(up, reinterpret_cast<const sockaddr*>(&upstream_),
                           upstream_len_);
    if (rc < 0 && errno != EINPROGRESS) {
      ++connect_failures_;
      CloseWithReset(fd);
      close(up);
      continue;
    }
    c->connecting = rc < 0;
    ++open_;
    Conn& ref = *c;
    conns_.emplace(c->id, std::move(c));
    UpdateInterest(ref);
  }
}

bool FaultProxy::Loop::ReadSide(Conn& c, int s) {
  // A few reads per event, each its own chunk, so one busy connection does
  // not starve the others.
  for (int i = 0; i < 4 && c.dir[s].pending <= o_.max_pending_bytes; ++i) {
    const ssize_t n = read(c.fd[s], read_buffer_.data(), read_buffer_.size());
    if (n > 0) {
      // A chunk holds what was read, not the whole buffer.
      Enqueue(c, s, std::string(read_buffer_.data(), static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) {
      c.dir[s].eof_read = true;
      Enqueue(c, s, std::string());  // the FIN, delayed like a chunk
      return true;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
    CloseConn(c, /*reset=*/true);
    return false;
  }
  return true;
}

void FaultProxy::Loop::Enqueue(Conn& c, int d, std::string data) {
  Direction& dir = c.dir[d];
  const Clock::time_point now = Clock::now();
  int64_t delay = latency_;
  if (jitter_ > 0) {
    std::uniform_int_distribution<int64_t> u(-jitter_, jitter_);
    delay = std::max<int64_t>(0, delay + u(rng_));
  }
  if (!data.empty()) {
    ++chunks_;
    if (o_.loss > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) <
                           o_.loss) {
      delay += rto_;
      ++losses_;
    }
  }
  const Clock::time_point release =
      std::max(dir.last_release, now + std::chrono::nanoseconds(delay));
  dir.last_release = release;
  const int64_t held =
      std::chrono::duration_cast<std::chrono::nanoseconds>(release - now)
          .count();
  if (held > max_delay_ns_.load(std::memory_order_relaxed)) {
    max_delay_ns_.store(held, std::memory_order_relaxed);
  }
  dir.pending += data.size();
  dir.queue.push_back(Chunk{release, std::move(data), 0});
  timers_.push(Timer{release, c.id, d});
}

bool FaultProxy::Loop::Flush(Conn& c, int d) {
  Direction& dir = c.dir[d];
  const int to = c.fd[1 - d];
  if (d == 0 && c.connecting) return true;
  const Clock::time_point now = Clock::now();
  while (!dir.queue.empty() && dir.queue.front().release <= now) {
    Chunk& ch = dir.queue.front();
    if (ch.data.empty()) {  // the EOF marker
      shutdown(to, SHUT_WR);
      dir.shut_written = true;
      dir.queue.pop_front();
      if (c.dir[1 - d].shut_written) {
        CloseConn(c, /*reset=*/false);
        return false;
      }
      continue;
    }
    const ssize_t n = send(to, ch.data.data() + ch.offset,
                           ch.data.size() - ch.offset, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      CloseConn(c, /*reset=*/true);
      return false;
    }
    ch.offset += static_cast<size_t>(n);
    dir.pending -= static_cast<size_t>(n);
    bytes_[d] += static_cast<uint64_t>(n);
    if (ch.offset == ch.data.size()) dir.queue.pop_front();
  }
  return true;
}

void FaultProxy::Loop::UpdateInterest(Conn& c) {
  const Clock::time_point now = Clock::now();
  for (int s = 0; s < 2; ++s) {
    const bool connecting = s == 1 && c.connecting;
    uint32_t want = 0;
    if (!connecting && !c.dir[s].eof_read &&
        c.dir[s].pending <= o_.max_pending_bytes) {
      want |= EPOLLIN;
    }
    // Writable wanted while connecting, or while bytes towards side s are
    // due but unwritten (Flush found the socket full).
    const Direction& in = c.dir[1 - s];
    if (connecting ||
        (!in.queue.empty() && in.queue.front().release <= now)) {
      want |= EPOLLOUT;
    }
    if (c.registered[s] && want == c.mask[s]) continue;
    epoll_event ev{};
    ev.events = want;  // errors and hang-ups are reported regardless
    ev.data.u64 = (c.id << 1) | static_cast<uint64_t>(s);
    epoll_ctl(epoll_fd_, c.registered[s] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD,
              c.fd[s], &ev);
    c.mask[s] = want;
    c.registered[s] = true;
  }
}

void FaultProxy::Loop::CloseConn(Conn& c, bool reset) {
  for (int fd : c.fd) {
    if (fd < 0) continue;
    if (reset) {
      CloseWithReset(fd);
    } else {
      close(fd);
    }
  }
  --open_;
  conns_.erase(c.id);  // c is gone from here on
}

void FaultProxy::Loop::FireTimers() {
  const Clock::time_point now = Clock::now();
  while (!timers_.empty() && timers_.top().at <= now) {
    const Timer t = timers_.top();
    timers_.pop();
    if (t.id == 0) {  // listen again after running out of descriptors
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenToken;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
      continue;
    }
    const auto it = conns_.find(t.id);
    if (it == conns_.end()) continue;
    Conn& c = *it->second;
    if (!Flush(c, t.direction)) continue;
    UpdateInterest(c);
  }
}

absl::Duration FaultProxy::RetransmissionTimeout(absl::Duration latency,
                                                 absl::Duration jitter) {
  return std::max(absl::Milliseconds(200), 2 * latency + 4 * jitter);
}

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Create(Options o) {
  if (o.latency < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "latency must be >= 0, got ", absl::FormatDuration(o.latency)));
  }
  if (o.jitter < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "jitter must be >= 0, got ", absl::FormatDuration(o.jitter)));
  }
  if (!(o.loss >= 0 && o.loss < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss must be in [0, 1), got ", o.loss));
  }
  if (o.max_pending_bytes == 0) {
    return absl::InvalidArgumentError("max_pending_bytes must be > 0");
  }
  if (o.upstream.empty()) {
    return absl::InvalidArgumentError("upstream is required (host:port)");
  }
  socklen_t up_len = 0, listen_len = 0;
  auto up = Resolve(o.upstream, "upstream", &up_len);
  if (!up.ok()) return up.status();
  auto at = Resolve(o.listen, "listen", &listen_len);
  if (!at.ok()) return at.status();

  const int lfd = socket(at->ss_family,
                         SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (lfd < 0) return absl::InternalError(absl::StrCat("socket: ", ErrnoText()));
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(lfd, reinterpret_cast<const sockaddr*>(&*at), listen_len) != 0 ||
      listen(lfd, 4096) != 0) {
    const std::string why = ErrnoText();
    close(lfd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o.listen, ": ", why));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const int port = ntohs(bound.ss_family == AF_INET6
                             ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int efd = epoll_create1(EPOLL_CLOEXEC);
  const int wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0 || wfd < 0) {
    const std::string why = ErrnoText();
    close(lfd);
    if (efd >= 0) close(efd);
    if (wfd >= 0) close(wfd);
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", why));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenToken;
  epoll_ctl(efd, EPOLL_CTL_ADD, lfd, &ev);
  ev.data.u64 = kWakeToken;
  epoll_ctl(efd, EPOLL_CTL_ADD, wfd, &ev);
  auto loop = std::make_unique<Loop>(o, lfd, efd, wfd, *up, up_len);
  return std::unique_ptr<FaultProxy>(
      new FaultProxy(std::move(o), port, std::move(loop)));
}

FaultProxy::FaultProxy(Options options, int port, std::unique_ptr<Loop> loop)
    : options_(std::move(options)), port_(port), loop_(std::move(loop)) {
  thread_ = std::thread([l = loop_.get()] { l->Run(); });
}

FaultProxy::~FaultProxy() { Stop(); }

void FaultProxy::Stop() {
  if (stopped_.exchange(true)) return;
  loop_->Wake();
  if (thread_.joinable()) thread_.join();
}

FaultProxy::Stats FaultProxy::stats() const {
  return loop_->Snapshot();
}

}  // namespace ldpgraph::net

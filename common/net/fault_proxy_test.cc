#include "common/net/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::net {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// A TCP server on 127.0.0.1 with a thread per connection running `serve`
// on the connected socket (which it must not close).
class Server {
 public:
  explicit Server(std::function<void(int)> serve) : serve_(std::move(serve)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 1024);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] {
      while (true) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        absl::MutexLock l(&mu_);
        workers_.emplace_back([this, c] {
          serve_(c);
          close(c);
        });
      }
    });
  }
  ~Server() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    accept_.join();
    absl::MutexLock l(&mu_);
    for (auto& t : workers_) t.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::function<void(int)> serve_;
  int fd_ = -1;
  int port_ = 0;
  std::thread accept_;
  absl::Mutex mu_;
  std::vector<std::thread> workers_;
};

// Echoes until EOF, then returns (the socket is closed after it).
void Echo(int fd) {
  char buf[16384];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return;
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = write(fd, buf + off, n - off);
      if (w <= 0) return;
      off += w;
    }
  }
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Everything until EOF (or an error).
std::string ReadToEof(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string ReadExactly(int fd, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, out.data() + got, n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(g());
  return s;
}

std::unique_ptr<FaultProxy> MakeProxy(const std::string& upstream,
                                      int latency_ms, int jitter_ms,
                                      double loss) {
  FaultProxy::Options o;
  o.upstream = upstream;
  o.latency = absl::Milliseconds(latency_ms);
  o.jitter = absl::Milliseconds(jitter_ms);
  o.loss = loss;
  o.seed = 7;
  auto p = FaultProxy::Create(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

// Sends `data` in random-sized pieces, half-closes, and returns what came
// back until EOF.
std::string EchoThrough(int port, const std::string& data, uint64_t seed) {
  const int fd = Connect(port);
  if (fd < 0) return "connect failed";
  std::thread writer([&] {
    std::mt19937_64 g(seed);
    size_t off = 0;
    while (off < data.size()) {
      const size_t n = std::min<size_t>(data.size() - off, 1 + g() % 100000);
      if (!WriteAll(fd, data.data() + off, n)) break;
      off += n;
    }
    shutdown(fd, SHUT_WR);
  });
  std::string back = ReadToEof(fd);
  writer.join();
  close(fd);
  return back;
}

TEST(FaultProxyTest, RejectsInvalidOptions) {
  FaultProxy::Options o;
  o.upstream = "127.0.0.1:1";
  auto bad = [&](auto edit, const std::string& needle) {
    FaultProxy::Options x = o;
    edit(x);
    auto p = FaultProxy::Create(x);
    ASSERT_FALSE(p.ok()) << needle;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(needle));
  };
  bad([](auto& x) { x.latency = absl::Milliseconds(-1); }, "latency must be >= 0");
  bad([](auto& x) { x.jitter = absl::Milliseconds(-1); }, "jitter must be >= 0");
  bad([](auto& x) { x.loss = 1.0; }, "loss must be in [0, 1)");
  bad([](auto& x) { x.loss = -0.1; }, "loss must be in [0, 1)");
  bad([](auto& x) { x.loss = std::nan(""); }, "loss must be in [0, 1)");
  bad([](auto& x) { x.upstream = ""; }, "upstream is required");
  bad([](auto& x) { x.upstream = "127.0.0.1"; }, "upstream must be host:port");
  bad([](auto& x) { x.upstream = "127.0.0.1:99999"; }, "upstream must be host:port");
  bad([](auto& x) { x.listen = "nowhere"; }, "listen must be host:port");
  bad([](auto& x) { x.max_pending_bytes = 0; }, "max_pending_bytes");
  // Jitter above the latency is allowed (delays clip at zero).
  FaultProxy::Options ok = o;
  ok.latency = absl::Milliseconds(1);
  ok.jitter = absl::Milliseconds(5);
  EXPECT_TRUE(FaultProxy::Create(ok).ok());
}

TEST(FaultProxyTest, RetransmissionTimeout) {
  EXPECT_EQ(FaultProxy::RetransmissionTimeout(absl::ZeroDuration(),
                                              absl::ZeroDuration()),
            absl::Milliseconds(200));
  EXPECT_EQ(FaultProxy::RetransmissionTimeout(absl::Milliseconds(200),
                                              absl::Milliseconds(20)),
            absl::Milliseconds(480));
}

TEST(FaultProxyTest, BytesArriveIntactAndInOrder) {
  Server server(Echo);
  auto proxy = MakeProxy(server.address(), 1, 1, 0);
  ASSERT_NE(proxy, nullptr);
  const std::string data = RandomBytes(4 << 20, 1);
  const std::string back = EchoThrough(proxy->port(), data, 2);
  EXPECT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data) << "the echo differs from what was sent";
  const FaultProxy::Stats s = proxy->stats();
  EXPECT_EQ(s.connections, 1u);
  EXPECT_EQ(s.bytes_to_upstream, data.size());
  EXPECT_EQ(s.bytes_to_client, data.size());
  EXPECT_GE(s.chunks, 2u);
  EXPECT_EQ(s.injected_losses, 0u);
}

TEST(FaultProxyTest, RoundTripIsNoShorterThanTwiceTheLatency) {
  Server server(Echo);
  auto proxy = MakeProxy(server.address(), 50, 0, 0);
  ASSERT_NE(proxy, nullptr);
  const int fd = Connect(proxy->port());
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 3; ++i) {
    const auto t = Clock::now();
    ASSERT_TRUE(WriteAll(fd, "x", 1));
    ASSERT_EQ(ReadExactly(fd, 1), "x");
    EXPECT_GE(Clock::now() - t, std::chrono::milliseconds(100));
  }
  close(fd);
  EXPECT_GE(proxy->stats().max_delay, absl::Milliseconds(50));
}

TEST(FaultProxyTest, JitterKeepsEachDirectionAboveLatencyMinusJitter) {
  Server server(Echo);
  auto proxy = MakeProxy(server.address(), 40, 20, 0);
  ASSERT_NE(proxy, nullptr);
  const int fd = Connect(proxy->port());
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 5; ++i) {
    const auto t = Clock::now();
    ASSERT_TRUE(WriteAll(fd, "ab", 2));
    ASSERT_EQ(ReadExactly(fd, 2), "ab");
    EXPECT_GE(Clock::now() - t, std::chrono::milliseconds(40));
  }
  close(fd);
  EXPECT_LE(proxy->stats().max_delay, absl::Milliseconds(61));
}

TEST(FaultProxyTest, LossStallsButDeliversEverything) {
  Server server(Echo);
  auto proxy = MakeProxy(server.address(), 0, 0, 0.9);
  ASSERT_NE(proxy, nullptr);
  const int fd = Connect(proxy->port());
  ASSERT_GE(fd, 0);
  bool saw_stall = false;
  for (int i = 0; i < 4; ++i) {
    const std::string msg = RandomBytes(1000, 10 + i);
    const auto t = Clock::now();
    ASSERT_TRUE(WriteAll(fd, msg.data(), msg.size()));
    ASSERT_EQ(ReadExactly(fd, msg.size()), msg);
    saw_stall |= Clock::now() - t >= std::chrono::milliseconds(200);
  }
  close(fd);
  const FaultProxy::Stats s = proxy->stats();
  EXPECT_GT(s.injected_losses, 0u);
  EXPECT_TRUE(saw_stall);
  EXPECT_GE(s.max_delay, absl::Milliseconds(200));
  // And a bulk transfer under loss is intact.
  const std::string data = RandomBytes(256 << 10, 3);
  EXPECT_TRUE(EchoThrough(proxy->port(), data, 4) == data);
}

TEST(FaultProxyTest, ManyConcurrentConnectionsAllEchoCorrectly) {
  Server server(Echo);
  auto proxy = MakeProxy(server.address(), 5, 5, 0.05);
  ASSERT_NE(proxy, nullptr);
  constexpr int kConns = 200;
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kConns; ++i) {
    clients.emplace_back([&, i] {
      const std::string data = RandomBytes(10000 + i, 100 + i);
      if (EchoThrough(proxy->port(), data, i) == data) ++good;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), kConns);
  // Every connection closes once both directions have ended.
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (proxy->stats().open_connections > 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const FaultProxy::Stats s = proxy->stats();
  EXPECT_EQ(s.connections, static_cast<uint64_t>(kConns));
  EXPECT_EQ(s.open_connections, 0u);
}

TEST(FaultProxyTest, ServerCloseReachesTheClientAfterItsBytes) {
  Server server([](int fd) { WriteAll(fd, "bye", 3); });
  auto proxy = MakeProxy(server.address(), 30, 0, 0);
  ASSERT_NE(proxy, nullptr);
  const int fd = Connect(proxy->port());
  ASSERT_GE(fd, 0);
  const auto t = Clock::now();
  EXPECT_EQ(ReadToEof(fd), "bye");  // then EOF, not a hang
  EXPECT_GE(Clock::now() - t, std::chrono::milliseconds(30));
  close(fd);
}

TEST(FaultProxyTest, RefusedUpstreamClosesTheClient) {
  // A port nothing listens on: bind one, note it, close it.
  int port = 0;
  {
    Server gone(Echo);
    port = std::stoi(gone.address().substr(10));
  }
  auto proxy = MakeProxy("127.0.0.1:" + std::to_string(port), 0, 0, 0);
  ASSERT_NE(proxy, nullptr);
  const int fd = Connect(proxy->port());
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadToEof(fd), "");
  close(fd);
  EXPECT_EQ(proxy->stats().connect_failures, 1u);
}

TEST(FaultProxyTest, ASilentReceiverStopsTheProxyReading) {
  absl::Notification release;
  Server server([&release](int fd) {
    release.WaitForNotification();  // reads nothing until told
  });
  FaultProxy::Options o;
  o.upstream = server.address();
  o.max_pending_bytes = 1 << 20;
  auto proxy = FaultProxy::Create(o);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  const int fd = Connect((*proxy)->port());
  ASSERT_GE(fd, 0);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  // Without backpressure the proxy would take all of it.
  constexpr size_t kOffered = size_t{256} << 20;
  const std::string block(1 << 16, 'z');
  size_t sent = 0;
  auto idle_since = Clock::now();
  while (sent < kOffered && Clock::now() - idle_since < std::chrono::seconds(1)) {
    const ssize_t n = send(fd, block.data(), block.size(), MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      idle_since = Clock::now();
    } else {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 50);
    }
  }
  EXPECT_LT(sent, kOffered);
  release.Notify();
  close(fd);
}

}  // namespace
}  // namespace ldpgraph::net

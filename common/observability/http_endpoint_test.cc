#include "common/observability/http_endpoint.h"

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::observability {
namespace {

using ::testing::HasSubstr;

constexpr char kLoopback[] = "127.0.0.1";

class HttpEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto counter = registry_.AddCounter("ldpgraph_test_total", "A test.",
                                        {"mechanism"});
    ASSERT_TRUE(counter.ok()) << counter.status();
    (*counter)->With({"hds"})->Increment(7);
  }

  MetricsRegistry registry_;
};

TEST_F(HttpEndpointTest, ServesMetricsHealthAndReadiness) {
  std::atomic<bool> ready{false};
  auto endpoint = HttpEndpoint::Start(
      kLoopback, 0, &registry_, [&ready]() -> absl::Status {
        if (ready.load()) return absl::OkStatus();
        return absl::UnavailableError("campaign store still loading");
      });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  EXPECT_GT(port, 0);
  EXPECT_EQ((*endpoint)->host(), kLoopback);

  httplib::Client client(kLoopback, port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);

  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metrics->body, registry_.Render());
  EXPECT_THAT(metrics->body,
              HasSubstr("ldpgraph_test_total{mechanism=\"hds\"} 7\n"));

  auto health = client.Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");

  auto not_ready = client.Get("/readyz");
  ASSERT_TRUE(not_ready) << httplib::to_string(not_ready.error());
  EXPECT_EQ(not_ready->status, 503);
  EXPECT_EQ(not_ready->body, "campaign store still loading\n");

  ready.store(true);
  auto now_ready = client.Get("/readyz");
  ASSERT_TRUE(now_ready) << httplib::to_string(now_ready.error());
  EXPECT_EQ(now_ready->status, 200);
  EXPECT_EQ(now_ready->body, "ready\n");

  auto missing = client.Get("/nothing-here");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(HttpEndpointTest, MetricsReflectUpdatesAfterStart) {
  auto gauge = registry_.AddGauge("ldpgraph_late", "Added late.", {});
  ASSERT_TRUE(gauge.ok());
  auto endpoint = HttpEndpoint::Start(kLoopback, 0, &registry_, nullptr);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  (*gauge)->With({})->Set(3);
  httplib::Client client(kLoopback, (*endpoint)->port());
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("\nldpgraph_late 3\n"));
  // No readiness check: always ready.
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
}

TEST_F(HttpEndpointTest, SecondStartOnTheSamePortIsUnavailable) {
  auto first = HttpEndpoint::Start(kLoopback, 0, &registry_, nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = HttpEndpoint::Start(kLoopback, port, &registry_, nullptr);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(std::string(kLoopback) + ":" + std::to_string(port)));
}

TEST_F(HttpEndpointTest, StopClosesThePortAndIsIdempotent) {
  auto endpoint = HttpEndpoint::Start(kLoopback, 0, &registry_, nullptr);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  (*endpoint)->Stop();
  (*endpoint)->Stop();
  httplib::Client client(kLoopback, port);
  client.set_connection_timeout(1);
  EXPECT_FALSE(client.Get("/healthz"));
  // The port is free again.
  auto again = HttpEndpoint::Start(kLoopback, port, &registry_, nullptr);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(HttpEndpointTest, RejectsLargeBodies) {
  auto endpoint = HttpEndpoint::Start(kLoopback, 0, &registry_, nullptr);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  httplib::Client client(kLoopback, (*endpoint)->port());
  // Just over the 4 KiB limit, small enough to sit in the socket buffers
  // while the server answers without reading it.
  auto response =
      client.Post("/metrics", std::string(8192, 'x'), "text/plain");
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 413);
}

TEST_F(HttpEndpointTest, StartsAndStopsRepeatedly) {
  for (int i = 0; i < 20; ++i) {
    auto endpoint = HttpEndpoint::Start(kLoopback, 0, &registry_, nullptr);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  }
}

TEST_F(HttpEndpointTest, RejectsNullRegistry) {
  auto endpoint = HttpEndpoint::Start(kLoopback, 0, nullptr, nullptr);
  EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(endpoint.status().message(), HasSubstr("registry"));
}

TEST_F(HttpEndpointTest, RejectsPortOutOfRange) {
  for (int port : {-1, 65536}) {
    auto endpoint = HttpEndpoint::Start(kLoopback, port, &registry_, nullptr);
    EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument)
        << port;
    EXPECT_THAT(endpoint.status().message(), HasSubstr("[0, 65535]"));
  }
}

TEST_F(HttpEndpointTest, UnbindableAddressIsUnavailable) {
  // 192.0.2.1 (TEST-NET-1) is never a local address.
  auto endpoint = HttpEndpoint::Start("192.0.2.1", 0, &registry_, nullptr);
  EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(endpoint.status().message(), HasSubstr("192.0.2.1:0"));
}

}  // namespace
}  // namespace ldpgraph::observability

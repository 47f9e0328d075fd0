#include "common/net/edge_config.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

EdgeConfig Valid() {
  EdgeConfig c;
  c.listen = "127.0.0.1:8443";
  c.tls_pem = "/secrets/edge.pem";
  c.backends = {"f0.internal:7443", "f1.internal:7443"};
  c.backend_ca = "/secrets/ca.pem";
  c.backend_name = "ldpgraph-curator";
  return c;
}

TEST(HaproxyConfigTextTest, TerminatesTlsAndKeepsAClientOnOneFrontend) {
  auto text = HaproxyConfigText(Valid());
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("bind 127.0.0.1:8443 ssl crt /secrets/edge.pem alpn h2"));
  // Calls are routed by the header every client sends, consistently.
  EXPECT_THAT(*text, HasSubstr("balance hdr(ldpgraph-route)"));
  EXPECT_THAT(*text, HasSubstr("hash-type consistent"));
  EXPECT_THAT(*text, HasSubstr("http-reuse always"));
  // Each frontend over TLS checked against the CA, by name, HTTP/2.
  EXPECT_THAT(*text, HasSubstr("default-server ssl verify required ca-file "
                               "/secrets/ca.pem verifyhost ldpgraph-curator "
                               "sni str(ldpgraph-curator) alpn h2 check"));
  EXPECT_THAT(*text, HasSubstr("server f0 f0.internal:7443\n"));
  EXPECT_THAT(*text, HasSubstr("server f1 f1.internal:7443\n"));
  EXPECT_THAT(*text, Not(HasSubstr("resolvers")));
  // Long-lived task streams are not cut after HAProxy's defaults.
  EXPECT_THAT(*text, HasSubstr("timeout tunnel 3600000ms"));
  // No connection cap unless asked: the descriptor limit decides.
  EXPECT_THAT(*text, Not(HasSubstr("maxconn")));
  EdgeConfig capped = Valid();
  capped.max_connections = 5000;
  capped.threads = 2;
  auto capped_text = HaproxyConfigText(capped);
  ASSERT_TRUE(capped_text.ok());
  EXPECT_THAT(*capped_text, HasSubstr("maxconn 5000"));
  // One descriptor a client: HAProxy must not refuse to start for want of
  // two.
  EXPECT_THAT(*capped_text, HasSubstr("no strict-limits"));
  EXPECT_THAT(*text, Not(HasSubstr("strict-limits")));
  EXPECT_THAT(*capped_text, HasSubstr("nbthread 2"));
}

TEST(HaproxyConfigTextTest, PlaintextToFrontendsOnlyWhenNoCaIsGiven) {
  EdgeConfig c = Valid();
  c.backend_ca.clear();
  auto text = HaproxyConfigText(c);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("default-server proto h2 check"));
  EXPECT_THAT(*text, Not(HasSubstr("verify")));
}

// Containers: names resolved again at run time; Kubernetes: every address of
// a headless Service.
TEST(HaproxyConfigTextTest, FrontendsByDnsForContainersAndKubernetes) {
  EdgeConfig c = Valid();
  c.resolve_at_run_time = true;
  auto text = HaproxyConfigText(c);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("resolvers dns\n  parse-resolv-conf"));
  EXPECT_THAT(*text, HasSubstr("resolvers dns resolve-prefer ipv4 init-addr last,libc,none"));
  EXPECT_THAT(*text, HasSubstr("server f1 f1.internal:7443\n"));
  c = Valid();
  c.backends.clear();
  c.backends_from_dns = "frontends.ldpgraph.svc:7443";
  c.max_backends = 10;
  text = HaproxyConfigText(c);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("server-template f 10 frontends.ldpgraph.svc:7443"));
  EXPECT_THAT(*text, HasSubstr("resolvers dns"));
  c.backends = {"f0:7443"};
  EXPECT_THAT(HaproxyConfigText(c).status().message(), HasSubstr("not both"));
  c.backends.clear();
  c.max_backends = 0;
  EXPECT_THAT(HaproxyConfigText(c).status().message(), HasSubstr("1..1000"));
}

TEST(HaproxyConfigTextTest, RefusesWhatHaproxyCouldNotServe) {
  EdgeConfig c = Valid();
  c.listen = "8443";
  EXPECT_THAT(HaproxyConfigText(c).status().message(),
              HasSubstr("HOST:PORT with a port in [1, 65535], got '8443'"));
  c.listen = "127.0.0.1:0";  // HAProxy binds no port 0
  EXPECT_FALSE(HaproxyConfigText(c).ok());
  c = Valid();
  c.tls_pem.clear();
  EXPECT_THAT(HaproxyConfigText(c).status().message(), HasSubstr("certificate and key"));
  c = Valid();
  c.backends.clear();
  EXPECT_THAT(HaproxyConfigText(c).status().message(), HasSubstr("at least one frontend"));
  c = Valid();
  c.backends = {"f0.internal:7443", "f1.internal"};
  EXPECT_THAT(HaproxyConfigText(c).status().message(),
              HasSubstr("frontend 1 must be HOST:PORT, got 'f1.internal'"));
}

TEST(FindHaproxyTest, HonoursTheEnvironmentAndSaysHowToInstall) {
  setenv("LDPGRAPH_HAPROXY", "/nonexistent/haproxy", 1);
  auto found = FindHaproxy();
  EXPECT_EQ(found.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(found.status().message(), HasSubstr("not an executable"));
  setenv("LDPGRAPH_HAPROXY", "/bin/true", 1);
  EXPECT_EQ(*FindHaproxy(), "/bin/true");
  unsetenv("LDPGRAPH_HAPROXY");
  const char* path = std::getenv("PATH");
  const std::string saved = path ? path : "";
  setenv("PATH", "/nonexistent", 1);
  found = FindHaproxy();
  setenv("PATH", saved.c_str(), 1);
  if (!found.ok()) {
    EXPECT_THAT(found.status().message(), HasSubstr("apt-get install haproxy"));
  } else {
    EXPECT_EQ(*found, "/usr/sbin/haproxy");  // Debian's place, off PATH
  }
}

}  // namespace
}  // namespace ldpgraph::net

#include "server/ldpctl/connection.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::ldpctl {
namespace {

using ::testing::HasSubstr;

void Write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

CliArgs Args(const std::vector<std::string>& args) {
  auto a = CliArgs::Parse(args,
                          {"curator", "admin-token", "ca", "server-name", "config"},
                          {"insecure"});
  EXPECT_TRUE(a.ok()) << a.status();
  return *a;
}

// Clears every variable ResolveConnection reads, and points HOME and
// XDG_CONFIG_HOME at an empty folder so no user file is picked up.
class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"LDPCTL_CURATOR", "LDPCTL_ADMIN_TOKEN_FILE",
                          "LDPCTL_ADMIN_TOKEN", "LDPCTL_CA", "LDPCTL_SERVER_NAME",
                          "LDPCTL_INSECURE", "LDPCTL_CONFIG"}) {
      unsetenv(v);
    }
    setenv("HOME", dir_.path().c_str(), 1);
    setenv("XDG_CONFIG_HOME", (dir_.path() + "/xdg").c_str(), 1);
    Write(dir_.File("token"), "00112233445566778899aabbccddeeff\n");
    Write(dir_.File("other-token"), "ffeeddccbbaa99887766554433221100\n");
    Write(dir_.File("ca.pem"), "CA-FROM-FILE");
    Write(dir_.File("other-ca.pem"), "OTHER-CA");
  }
  TempFolder dir_;
};

TEST_F(ConnectionTest, FlagsAlone) {
  auto s = ResolveConnection(Args({"--curator", "h:1", "--admin-token",
                                   dir_.File("token"), "--ca", dir_.File("ca.pem"),
                                   "--server-name", "curator"}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->curator, "h:1");
  EXPECT_EQ(s->admin_token_hex, "00112233445566778899aabbccddeeff");
  EXPECT_EQ(s->ca_pem, "CA-FROM-FILE");
  EXPECT_EQ(s->server_name, "curator");
  EXPECT_FALSE(s->insecure);
}

TEST_F(ConnectionTest, FlagBeatsEnvironmentBeatsConfigFile) {
  Write(dir_.File("conf"),
        "# a deployment\ncurator = from-config:1\nadmin-token = token\n"
        "ca = ca.pem   # relative to the file\nserver-name = cfg\n");
  setenv("LDPCTL_CURATOR", "from-env:2", 1);
  setenv("LDPCTL_CA", dir_.File("other-ca.pem").c_str(), 1);
  auto s = ResolveConnection(
      Args({"--config", dir_.File("conf"), "--server-name", "flag"}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->curator, "from-env:2");
  EXPECT_EQ(s->ca_pem, "OTHER-CA");
  EXPECT_EQ(s->server_name, "flag");
  EXPECT_EQ(s->admin_token_hex, "00112233445566778899aabbccddeeff");
  EXPECT_THAT(s->origin["admin-token"], HasSubstr("config"));
  EXPECT_EQ(s->origin["curator"], "$LDPCTL_CURATOR");

  // The token itself in the environment beats the config file's file.
  setenv("LDPCTL_ADMIN_TOKEN", "FFEEDDCCBBAA99887766554433221100", 1);
  s = ResolveConnection(Args({"--config", dir_.File("conf")}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->admin_token_hex, "ffeeddccbbaa99887766554433221100");
}

TEST_F(ConnectionTest, ConfigFromEnvironmentAndPerUserFile) {
  Write(dir_.File("conf"), "admin-token = token\ninsecure = true\n");
  setenv("LDPCTL_CONFIG", dir_.File("conf").c_str(), 1);
  auto s = ResolveConnection(Args({}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->insecure);
  EXPECT_EQ(s->curator, "127.0.0.1:7443");
  unsetenv("LDPCTL_CONFIG");

  std::filesystem::create_directories(dir_.path() + "/xdg/ldpctl");
  Write(dir_.path() + "/xdg/ldpctl/config",
        "curator = per-user:3\nadmin-token = " + dir_.File("token") +
            "\ninsecure = yes\n");
  s = ResolveConnection(Args({}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->curator, "per-user:3");
}

TEST_F(ConnectionTest, ErrorsNameWhatIsWrongAndWhere) {
  auto s = ResolveConnection(Args({"--ca", dir_.File("ca.pem")}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("no admin token"));

  s = ResolveConnection(Args({"--admin-token", dir_.File("token")}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("no CA"));

  s = ResolveConnection(Args({"--admin-token", dir_.File("token"), "--insecure",
                              "--ca", dir_.File("ca.pem")}));
  EXPECT_THAT(s.status().message(), HasSubstr("exclude"));

  s = ResolveConnection(
      Args({"--admin-token", dir_.File("missing"), "--insecure"}));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("--admin-token"));
  EXPECT_THAT(s.status().message(), HasSubstr("missing"));

  Write(dir_.File("bad.conf"), "curator = a:1\n\ncolour = blue\n");
  s = ResolveConnection(Args({"--config", dir_.File("bad.conf")}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("bad.conf:3: unknown key 'colour'"));

  Write(dir_.File("bad2.conf"), "curator a:1\n");
  s = ResolveConnection(Args({"--config", dir_.File("bad2.conf")}));
  EXPECT_THAT(s.status().message(), HasSubstr("bad2.conf:1: expected 'key = value'"));

  setenv("LDPCTL_ADMIN_TOKEN", "not hex", 1);
  s = ResolveConnection(Args({"--insecure"}));
  EXPECT_THAT(s.status().message(), HasSubstr("LDPCTL_ADMIN_TOKEN"));
}

// An operator and its standby: a list, checked when the settings resolve.
TEST_F(ConnectionTest, AListOfOperators) {
  auto s = ResolveConnection(Args({"--curator", "127.0.0.1:7444,127.0.0.1:7445",
                                   "--admin-token", dir_.File("token"), "--insecure"}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->curator, "127.0.0.1:7444,127.0.0.1:7445");
  s = ResolveConnection(Args({"--curator", "127.0.0.1:7444,standby",
                              "--admin-token", dir_.File("token"), "--insecure"}));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(),
              HasSubstr("--curator: 'standby' has no port (want HOST:PORT,HOST:PORT,...)"));
}

TEST(ExitCodeTest, DocumentedCodes) {
  EXPECT_EQ(ExitCodeOf(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeOf(absl::InternalError("")), 1);
  EXPECT_EQ(ExitCodeOf(absl::InvalidArgumentError("")), 2);
  EXPECT_EQ(ExitCodeOf(absl::UnauthenticatedError("")), 3);
  EXPECT_EQ(ExitCodeOf(absl::PermissionDeniedError("")), 3);
  EXPECT_EQ(ExitCodeOf(absl::UnavailableError("")), 4);
  EXPECT_EQ(ExitCodeOf(absl::NotFoundError("")), 5);
  EXPECT_EQ(ExitCodeOf(absl::FailedPreconditionError("")), 6);
  EXPECT_EQ(ExitCodeOf(absl::AlreadyExistsError("")), 6);
  EXPECT_EQ(ExitCodeOf(absl::DeadlineExceededError("")), 7);
  EXPECT_EQ(ExitCodeOf(absl::CancelledError("")), 130);
}

}  // namespace
}  // namespace ldpgraph::ldpctl

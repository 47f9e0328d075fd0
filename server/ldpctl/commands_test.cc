// `ldpctl release` end to end: usage errors before any connection, then
// against a curator served in this process (plaintext on loopback): a
// release, the ledger, the export of its rows, and the refusal of a release
// over the cap (exit code 6). And how ldpctl shows enum values it does not
// know, against a stand-in admin service that returns them.
#include "server/ldpctl/commands.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/dataset/generator.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/linalg/npy.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/curator/server.h"
#include "server/ldpctl/dev_tls.h"
#include "common/net/edge_config.h"

namespace ldpgraph::ldpctl {
namespace {

using ::testing::HasSubstr;

struct Result {
  int code;
  std::string out, err;
};

Result Ldpctl(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunLdpctl(args, "ldpctl", out, err);
  return {code, out.str(), err.str()};
}

TEST(LdpctlReleaseTest, UsageErrorsComeBeforeTheConnection) {
  Result r = Ldpctl({"release", "create", "--epsilon", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs --method se-privgemb or dpne"));
  r = Ldpctl({"release", "create", "--method", "dpne"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs --epsilon"));
  r = Ldpctl({"release", "publish"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown subcommand 'publish' (create, ledger)"));
  r = Ldpctl({"release", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("release ledger"));
}

// `campaign create --mechanism edge-substitution` without substitution
// flags asks for the library's defaults, and its help states them.
TEST(LdpctlCampaignTest, SubstitutionDefaultsAreTheLibrarys) {
  auto args = CliArgs::Parse(
      {"--feature-epsilon", "2", "--feature-dimension", "8"},
      {"approach", "similarity", "top-k", "max-dummies", "dummy-mean",
       "dummy-std", "round-timeout-ms", "feature-mechanism", "feature-epsilon",
       "feature-dimension", "feature-sampled", "feature-range"},
      {});
  ASSERT_TRUE(args.ok()) << args.status();
  v1::MechanismSpec spec;
  ASSERT_TRUE(SubstitutionFromFlags(*args, &spec).ok());
  v1::SubstitutionSpec got = spec.substitution();
  EXPECT_EQ(got.features().epsilon(), 2);
  got.clear_features();
  EXPECT_EQ(got.DebugString(), edges::DefaultSubstitutionSpec().DebugString());

  const edges::SubstitutionParams defaults;
  const std::string help = LdpctlHelp("campaign");
  EXPECT_THAT(help, HasSubstr(absl::StrCat("per dropped neighbour (default ",
                                           defaults.top_k, ")")));
  EXPECT_THAT(help, HasSubstr(absl::StrCat("per relay (default ",
                                           defaults.max_dummies, ")")));
  EXPECT_THAT(help, HasSubstr(absl::StrCat("(defaults ", defaults.dummy_mean,
                                           ", ", defaults.dummy_std, ")")));
  EXPECT_THAT(help, HasSubstr(absl::StrCat(
                        "(default ", edges::kDefaultRoundTimeoutMs, ")")));
}

// Blink's flags: checked before any connection, and documented.
TEST(LdpctlBlinkTest, UsageErrorsComeBeforeTheConnection) {
  Result r = Ldpctl({"pipeline", "evaluate", "r1", "--blink-variant", "topk"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--blink-variant needs --graph-campaign"));
  r = Ldpctl({"pipeline", "propagate", "r1", "--graph-campaign", "c1",
              "--blink-variant", "soft"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(
                         "--blink-variant must be one of hard, topk, hybrid"));
  r = Ldpctl({"release", "create", "--method", "dpne", "--epsilon", "1",
              "--blink-variant", "hard"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--blink-variant needs --graph-campaign"));
  EXPECT_EQ(*ParseMechanismKind("edge-blink"), v1::MECHANISM_KIND_EDGE_BLINK);
  EXPECT_THAT(LdpctlHelp("campaign"),
              HasSubstr(absl::StrCat("(default ", edges::BlinkParams().delta,
                                     ")")));
  EXPECT_THAT(LdpctlHelp("pipeline"), HasSubstr("--blink-variant V"));
  EXPECT_THAT(LdpctlHelp("release"), HasSubstr("--blink-variant V"));
}

// The pipeline's --defence: screen for the estimate, robust for the
// evaluate stage; what a stage does not apply is a usage error before any
// connection.
TEST(LdpctlPipelineDefenceTest, UsageErrorsComeBeforeTheConnection) {
  Result r = Ldpctl({"pipeline", "estimate", "c1", "--defence", "robust"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--defence robust applies to pipeline evaluate "
                               "and run"));
  r = Ldpctl({"pipeline", "evaluate", "r1", "--defence", "screen",
              "--screen-alpha", "0.01"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("--screen-alpha applies to pipeline estimate and run"));
  r = Ldpctl({"pipeline", "run", "c1", "--defence", "edge-consistency"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--defence edge-consistency screens edge "
                               "reports: it needs --graph-campaign"));
  r = Ldpctl({"pipeline", "estimate", "c1", "--defence", "edge-consistency"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--defence edge-consistency applies to "
                               "pipeline evaluate and run"));
  r = Ldpctl({"pipeline", "run", "c1", "--defence", "filter"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("got 'filter'"));
  r = Ldpctl({"pipeline", "run", "c1", "--screen-alpha", "0.01"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--screen-alpha needs --defence screen"));
  EXPECT_THAT(LdpctlHelp("pipeline"), HasSubstr("--defence D[,D]"));
}

TEST(LdpctlReleaseTest, CreateLedgerAndExportAgainstACurator) {
  TempFolder dir;
  GeneratorOptions g = DefaultGeneratorOptions();
  g.nodes = 200;
  g.features = 8;
  g.classes = 3;
  auto data = GenerateDataset(g);
  ASSERT_TRUE(data.ok()) << data.status();
  const std::string graph = dir.path() + "/graph";
  ASSERT_TRUE(WriteDataset(*data, graph).ok());
  const std::string token(32, 'a');  // hex
  const std::string token_file = dir.path() + "/admin.token";
  std::ofstream(token_file) << token << "\n";

  curator::ServerOptions o;
  o.listen = "127.0.0.1:0";
  // Under a parent that does not exist yet, as in docs/operators.md's recipe
  // (--data-dir state/curator on a fresh clone): the curator creates both.
  o.data_dir = dir.path() + "/state/curator";
  o.graph_dir = graph;
  o.node_key = std::string(32, 'k');
  o.admin_token = token;
  o.insecure = true;
  o.http_listen.clear();
  o.release_budget.epsilon_cap = 2;
  auto server = curator::CuratorServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(std::filesystem::status(o.data_dir).permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  const std::vector<std::string> conn = {
      "--curator", absl::StrCat("127.0.0.1:", (*server)->port()), "--insecure",
      "--admin-token", token_file};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), conn.begin(), conn.end());
    return Ldpctl(args);
  };

  Result r = with({"release", "create", "--method", "dpne", "--epsilon", "1",
                   "--dim", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("release"));
  r = with({"release", "ledger"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cap epsilon 2 per graph"));
  EXPECT_THAT(r.out, HasSubstr("curator"));
  EXPECT_THAT(r.out, HasSubstr("r1"));
  const std::string npy = dir.path() + "/w.npy";
  r = with({"export", "r1", "--out", npy});
  ASSERT_EQ(r.code, 0) << r.err;
  auto w = ReadNpy(npy);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->rows, 200u);
  EXPECT_EQ(w->cols, 4u);
  // 1 spent of 2: a release of 1.5 would pass the cap.
  r = with({"release", "create", "--method", "dpne", "--epsilon", "1.5",
            "--dim", "4"});
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_THAT(r.err, HasSubstr("over the cap of 2"));

  // A Blink campaign (c1) carries its delta; a release of its hybrid graph
  // is refused by the curator (it embeds no weights).
  r = with({"campaign", "create", "--attribute", "edges", "--mechanism",
            "edge-blink", "--epsilon", "4", "--blink-delta", "0.25",
            "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("MECHANISM_KIND_EDGE_BLINK"));
  EXPECT_THAT(r.out, HasSubstr(R"("degree_share": 0.25)"));
  EXPECT_THAT(r.out, HasSubstr(R"("dimension": 200)"));
  r = with({"campaign", "create", "--attribute", "edges", "--mechanism",
            "edge-rr", "--epsilon", "1", "--blink-delta", "0.2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("--blink-delta applies to --mechanism edge-blink only"));
  r = with({"release", "create", "--method", "dpne", "--epsilon", "0.5",
            "--graph-campaign", "c1", "--blink-variant", "hybrid"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("blink_variant 'hybrid'"));
  (*server)->Shutdown(absl::Seconds(1));
}

// An admin service that answers ListRefusals and ListCampaigns with enum
// numbers outside the proto: what a newer curator sends, or what an older
// one stored before it checked refusal reasons.
class UnknownEnumsAdmin final : public v1::AdminService::Service {
 public:
  grpc::Status ListRefusals(grpc::ServerContext*,
                            const v1::ListRefusalsRequest* req,
                            v1::ListRefusalsResponse* out) override {
    EXPECT_EQ(req->campaign_id(), "c1");
    v1::RefusalRecord* r = out->add_refusals();
    r->set_node_id(7);
    r->set_reason(v1::REFUSAL_REASON_NO_DATA);
    r->set_message("no label");
    r = out->add_refusals();
    r->set_node_id(8);
    r->set_reason(static_cast<v1::RefusalReason>(99));
    r->set_message("from elsewhere");
    return grpc::Status::OK;
  }
  grpc::Status ListCampaigns(grpc::ServerContext*, const v1::ListCampaignsRequest*,
                             v1::ListCampaignsResponse* out) override {
    v1::Campaign* c = out->add_campaigns();
    c->set_id("c1");
    c->set_state(static_cast<v1::CampaignState>(13));
    c->set_attribute(v1::ATTRIBUTE_FEATURES);
    c->mutable_spec()->set_kind(static_cast<v1::MechanismKind>(5000));
    c->mutable_spec()->set_epsilon(1);
    return grpc::Status::OK;
  }
};

// `ldpctl edge-config` writes what HAProxy itself accepts (`haproxy -c`,
// with a real certificate), and says what is missing.
TEST(LdpctlEdgeConfigTest, HaproxyAcceptsWhatItWrites) {
  // deploy/install-deps.sh installs it; without it there is nothing to check.
  auto haproxy = net::FindHaproxy();
  if (!haproxy.ok()) GTEST_SKIP() << haproxy.status().message();
  TempFolder dir;
  auto tls = MakeDevTlsMaterial({"curator", "localhost"});
  ASSERT_TRUE(tls.ok()) << tls.status();
  ASSERT_TRUE(WriteNewFile(dir.File("edge.pem"),
                           tls->server_cert_pem + tls->server_key_pem, 0600).ok());
  ASSERT_TRUE(WriteNewFile(dir.File("ca.pem"), tls->ca_cert_pem, 0644).ok());
  for (const std::vector<std::string>& frontends :
       {std::vector<std::string>{"--frontends", "127.0.0.1:7001,127.0.0.1:7002"},
        std::vector<std::string>{"--frontends", "localhost:7001", "--resolve"},
        std::vector<std::string>{"--frontends-from-dns", "localhost:7001",
                                 "--max-frontends", "4"},
        std::vector<std::string>{"--frontends", "127.0.0.1:7001",
                                 "--max-connections", "12000"}}) {
    std::vector<std::string> args = {"edge-config", "--tls-pem", dir.File("edge.pem"),
                                     "--ca", dir.File("ca.pem"), "--server-name",
                                     "curator", "--listen", "127.0.0.1:17443"};
    args.insert(args.end(), frontends.begin(), frontends.end());
    Result r = Ldpctl(args);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("balance hdr(ldpgraph-route)"));
    const std::string cfg = dir.File("haproxy.cfg");
    std::filesystem::remove(cfg);
    ASSERT_TRUE(WriteNewFile(cfg, r.out, 0644).ok());
    const int rc = std::system(absl::StrCat(*haproxy, " -c -f ", cfg, " > ",
                                            dir.File("check.log"), " 2>&1")
                                   .c_str());
    std::ifstream log(dir.File("check.log"));
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_EQ(rc, 0) << frontends[0] << ":\n" << r.out << "\n" << text.str();
  }
  Result r = Ldpctl({"edge-config", "--tls-pem", dir.File("edge.pem"), "--ca",
                     dir.File("ca.pem")});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs --frontends"));
  r = Ldpctl({"edge-config", "--tls-pem", dir.File("edge.pem"), "--frontends", "f:1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--ca FILE"));
}

TEST(LdpctlDisplayTest, UnknownEnumValuesAreShownAsUnknownWithTheirNumber) {
  TempFolder dir;
  const std::string token_file = dir.path() + "/admin.token";
  std::ofstream(token_file) << std::string(32, 'a') << "\n";
  UnknownEnumsAdmin service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> conn = {
      "--curator", absl::StrCat("127.0.0.1:", port), "--insecure",
      "--admin-token", token_file};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), conn.begin(), conn.end());
    return Ldpctl(args);
  };

  Result r = with({"campaign", "refusals", "c1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("7        no_data            no label"));
  EXPECT_THAT(r.out, HasSubstr("8        unknown(99)        from elsewhere"));

  r = with({"campaign", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("c1     unknown(13) features  unknown(5000)"));
  server->Shutdown();
}

}  // namespace
}  // namespace ldpgraph::ldpctl

// ldpctl: the curator's admin CLI, over the authenticated admin API.
// Every command but `credentials` talks to a running curator.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/cli_args.h"
#include "common/npy.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/curator/credentials.h"

namespace {

namespace v1 = ldpgraph::v1;
using ldpgraph::CliArgs;

constexpr char kUsage[] = R"(ldpctl: administer an ldpgraph curator.

Usage: ldpctl <command> [ID] [flags]

Campaigns:
  campaign create     open a collection campaign (see flags below)
  campaign list       every campaign, newest first, with progress
  campaign show ID    one campaign
  campaign wait ID    show progress until the campaign closes or every
                      targeted node has answered (--timeout SECONDS)
  campaign close ID   stop accepting reports
  campaign refusals ID  the nodes that refused, and why
  budgets             what the ledger knows: caps and epsilon spent per node
                      (--nodes A-B to restrict)
Pipeline:
  estimate ID         estimate a features campaign's reports -> result rN
  propagate ID        propagate an estimate result (--method ppr|kprop)
  evaluate ID         train and test on an estimate result (--task node|link,
                      --method privge|lpgnn, --labels CAMPAIGN, --seed S)
  results             every stage result
  export ID --out F   write an estimate or propagate result as .npy
Other:
  audit               the audit log (--after SEQ, --limit N)
  credentials         print node credentials: --node-key FILE --nodes A-B
                      [--out FILE]; offline, for provisioning agent hosts

Connection flags (every command but credentials):
  --curator ADDR      curator address (default 127.0.0.1:7443)
  --admin-token FILE  the admin credential (hex; deploy/dev-certs.sh)
  --ca FILE           CA certificate that signed the curator's
  --server-name NAME  name to check the curator's certificate against
  --insecure          plaintext: development only
  --json              machine-readable output (protobuf JSON)

campaign create flags:
  --attribute A       features, label or edges
  --mechanism M       hds, square-wave, multibit, onebit, piecewise, laplace,
                      label-rr, edge-rr
  --epsilon E         the budget one report spends
  --dimension D       features: d; label: classes; edges: number of nodes
  --sampled K         k or m sampled dimensions (default: the mechanism's)
  --range LO,HI       public feature range (default -1,1)
  --nodes SEL         all (default), A-B (nodes A..B-1) or a list 1,5,9
  --quorum Q          close once this fraction answered (default 1; 0: never)
  --deadline S        close after S seconds (default: none)
  --name NAME         a label for people
)";

constexpr int kUsageError = 2;

struct Connection {
  std::unique_ptr<v1::AdminService::Stub> stub;
  std::string token;
  bool json = false;
  void Prepare(grpc::ClientContext* ctx) const {
    ctx->AddMetadata("authorization", "Bearer " + token);
  }
};

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

const std::set<std::string> kConnectionFlags = {
    "curator", "admin-token", "ca", "server-name"};

absl::StatusOr<Connection> Connect(const CliArgs& a) {
  Connection c;
  c.json = a.Flag("json");
  if (!a.Has("admin-token")) {
    return absl::InvalidArgumentError("--admin-token is required");
  }
  ASSIGN_OR_RETURN(std::string raw,
                   ldpgraph::curator::ReadHexSecretFile(*a.Get("admin-token")));
  c.token = ldpgraph::curator::ToHex(raw);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (a.Flag("insecure")) {
    if (a.Has("ca")) {
      return absl::InvalidArgumentError("--insecure and --ca exclude each other");
    }
    creds = grpc::InsecureChannelCredentials();
  } else {
    if (!a.Has("ca")) {
      return absl::InvalidArgumentError(
          "give --ca (TLS) or --insecure (development only)");
    }
    grpc::SslCredentialsOptions ssl;
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ldpgraph::ReadFileToString(*a.Get("ca")));
    creds = grpc::SslCredentials(ssl);
    if (a.Has("server-name")) {
      args.SetSslTargetNameOverride(*a.Get("server-name"));
    }
  }
  c.stub = v1::AdminService::NewStub(grpc::CreateCustomChannel(
      a.Get("curator").value_or("127.0.0.1:7443"), creds, args));
  return c;
}

void PrintJson(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  std::cout << out;
}

// "CAMPAIGN_STATE_OPEN" -> "open".
std::string Short(const std::string& enum_name, absl::string_view prefix) {
  absl::string_view name(enum_name);
  absl::ConsumePrefix(&name, prefix);
  return absl::AsciiStrToLower(name);
}

void PrintCampaignHeader() {
  std::cout << absl::StrFormat("%-6s %-8s %-9s %-12s %8s %8s %8s %8s %8s  %s\n",
                               "id", "state", "attribute", "mechanism",
                               "epsilon", "targeted", "reported", "refused",
                               "rejected", "name");
}

void PrintCampaignRow(const v1::Campaign& c) {
  std::cout << absl::StrFormat(
      "%-6s %-8s %-9s %-12s %8g %8u %8u %8u %8u  %s\n", c.id(),
      Short(v1::CampaignState_Name(c.state()), "CAMPAIGN_STATE_"),
      Short(v1::Attribute_Name(c.attribute()), "ATTRIBUTE_"),
      Short(v1::MechanismKind_Name(c.spec().kind()), "MECHANISM_KIND_"),
      c.spec().epsilon(), c.progress().targeted(), c.progress().reported(),
      c.progress().refused(), c.progress().rejected(), c.name());
}

// One campaign as JSON, or as a table with a header line.
void PrintCampaign(const v1::Campaign& c, bool json) {
  if (json) {
    PrintJson(c);
    return;
  }
  PrintCampaignHeader();
  PrintCampaignRow(c);
  if (!c.close_reason().empty()) std::cout << "closed: " << c.close_reason() << "\n";
}

absl::StatusOr<std::pair<uint32_t, uint32_t>> ParseRange(absl::string_view t,
                                                         const char* flag) {
  std::vector<absl::string_view> p = absl::StrSplit(t, '-');
  uint32_t a = 0, b = 0;
  if (p.size() != 2 || !absl::SimpleAtoi(p[0], &a) ||
      !absl::SimpleAtoi(p[1], &b) || b <= a) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " must be A-B with A < B (nodes A..B-1), got '", t, "'"));
  }
  return std::make_pair(a, b);
}

absl::StatusOr<v1::MechanismKind> ParseKind(absl::string_view name) {
  static const std::pair<const char*, v1::MechanismKind> kKinds[] = {
      {"hds", v1::MECHANISM_KIND_HDS},
      {"square-wave", v1::MECHANISM_KIND_SQUARE_WAVE},
      {"multibit", v1::MECHANISM_KIND_MULTIBIT},
      {"onebit", v1::MECHANISM_KIND_ONEBIT},
      {"piecewise", v1::MECHANISM_KIND_PIECEWISE},
      {"laplace", v1::MECHANISM_KIND_LAPLACE},
      {"label-rr", v1::MECHANISM_KIND_LABEL_RR},
      {"edge-rr", v1::MECHANISM_KIND_EDGE_RR}};
  for (const auto& [n, k] : kKinds) {
    if (name == n) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--mechanism must be hds, square-wave, multibit, onebit, piecewise, "
      "laplace, label-rr or edge-rr, got '", name, "'"));
}

absl::Status CreateCampaign(const CliArgs& a, const Connection& c) {
  v1::CreateCampaignRequest req;
  req.set_name(a.Get("name").value_or(""));
  const std::string attribute = a.Get("attribute").value_or("features");
  if (attribute == "features") {
    req.set_attribute(v1::ATTRIBUTE_FEATURES);
  } else if (attribute == "label") {
    req.set_attribute(v1::ATTRIBUTE_LABEL);
  } else if (attribute == "edges") {
    req.set_attribute(v1::ATTRIBUTE_EDGES);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--attribute must be features, label or edges, got '", attribute, "'"));
  }
  if (!a.Has("mechanism") || !a.Has("epsilon") || !a.Has("dimension")) {
    return absl::InvalidArgumentError(
        "campaign create needs --mechanism, --epsilon and --dimension");
  }
  v1::MechanismSpec* spec = req.mutable_spec();
  ASSIGN_OR_RETURN(v1::MechanismKind kind, ParseKind(*a.Get("mechanism")));
  spec->set_kind(kind);
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  spec->set_epsilon(*eps);
  ASSIGN_OR_RETURN(auto d, a.GetUint("dimension"));
  spec->set_dimension(static_cast<uint32_t>(*d));
  ASSIGN_OR_RETURN(auto k, a.GetUint("sampled"));
  if (k) spec->set_sampled(static_cast<uint32_t>(*k));
  ASSIGN_OR_RETURN(auto range, a.GetDoubleList("range"));
  if (range && range->size() != 2) {
    return absl::InvalidArgumentError("--range must be LO,HI");
  }
  spec->set_range_low(range ? (*range)[0] : -1.0);
  spec->set_range_high(range ? (*range)[1] : 1.0);
  const std::string nodes = a.Get("nodes").value_or("all");
  if (nodes == "all") {
    req.mutable_nodes()->set_all(true);
  } else if (nodes.find('-') != std::string::npos) {
    ASSIGN_OR_RETURN(auto r, ParseRange(nodes, "nodes"));
    req.mutable_nodes()->set_range_begin(r.first);
    req.mutable_nodes()->set_range_end(r.second);
  } else {
    for (absl::string_view item : absl::StrSplit(nodes, ',')) {
      uint32_t v = 0;
      if (!absl::SimpleAtoi(item, &v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--nodes must be all, A-B or a list of ids, got '", nodes, "'"));
      }
      req.mutable_nodes()->add_node_ids(v);
    }
  }
  ASSIGN_OR_RETURN(auto quorum, a.GetDouble("quorum"));
  req.set_quorum(quorum.value_or(1.0));
  ASSIGN_OR_RETURN(auto deadline, a.GetDouble("deadline"));
  if (deadline) {
    if (*deadline <= 0) {
      return absl::InvalidArgumentError("--deadline must be > 0 seconds");
    }
    req.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now()) +
                             static_cast<int64_t>(*deadline * 1000));
  }
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::Campaign out;
  RETURN_IF_ERROR(FromGrpc(c.stub->CreateCampaign(&ctx, req, &out)));
  PrintCampaign(out, c.json);
  return absl::OkStatus();
}

absl::StatusOr<v1::Campaign> GetCampaign(const Connection& c,
                                         const std::string& id) {
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::GetCampaignRequest req;
  req.set_campaign_id(id);
  v1::Campaign out;
  RETURN_IF_ERROR(FromGrpc(c.stub->GetCampaign(&ctx, req, &out)));
  return out;
}

// Shows a progress line on stderr until the campaign closes or every
// targeted node has answered.
absl::Status WaitCampaign(const CliArgs& a, const Connection& c,
                          const std::string& id) {
  ASSIGN_OR_RETURN(auto timeout, a.GetDouble("timeout"));
  const absl::Time until =
      timeout ? absl::Now() + absl::Seconds(*timeout) : absl::InfiniteFuture();
  v1::Campaign campaign;
  while (true) {
    ASSIGN_OR_RETURN(campaign, GetCampaign(c, id));
    const auto& p = campaign.progress();
    const uint32_t answered = p.reported() + p.refused();
    std::cerr << absl::StrFormat(
        "\r%s: %u/%u answered (%u reported, %u refused, %u rejected) %5.1f%%",
        id, answered, p.targeted(), p.reported(), p.refused(), p.rejected(),
        p.targeted() ? 100.0 * answered / p.targeted() : 100.0);
    if (campaign.state() == v1::CAMPAIGN_STATE_CLOSED ||
        answered >= p.targeted()) {
      break;
    }
    if (absl::Now() >= until) {
      std::cerr << "\n";
      return absl::DeadlineExceededError(
          absl::StrCat(id, " still open after --timeout"));
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  std::cerr << "\n";
  if (c.json) PrintJson(campaign);
  return absl::OkStatus();
}

void PrintResult(const v1::StageResult& r, bool json) {
  if (json) {
    PrintJson(r);
    return;
  }
  std::cout << absl::StrFormat("%-5s %-9s %-6s %7u x %-6u %9.4f %8.2fs  %s\n",
                               r.id(), r.stage(), r.input(), r.rows(), r.cols(),
                               r.metric(), r.seconds(), r.details_json());
}

absl::Status Credentials(const CliArgs& a) {
  if (!a.Has("node-key") || !a.Has("nodes")) {
    return absl::InvalidArgumentError(
        "credentials needs --node-key FILE and --nodes A-B");
  }
  ASSIGN_OR_RETURN(std::string key,
                   ldpgraph::curator::ReadHexSecretFile(*a.Get("node-key")));
  ASSIGN_OR_RETURN(auto range, ParseRange(*a.Get("nodes"), "nodes"));
  std::ostringstream out;
  out << "# ldpgraph node credentials: node<TAB>secret. Each line lets its\n"
      << "# holder report as that node; give a host only its own shard's.\n";
  for (uint32_t v = range.first; v < range.second; ++v) {
    out << v << '\t'
        << ldpgraph::curator::ToHex(ldpgraph::curator::NodeCredential(key, v))
        << '\n';
  }
  if (a.Has("out")) {
    const std::string path = *a.Get("out");
    std::ofstream f(path, std::ios::trunc);
    f << out.str();
    f.close();
    if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
    std::cerr << "ldpctl: wrote " << range.second - range.first
              << " credentials to " << path << "\n";
  } else {
    std::cout << out.str();
  }
  return absl::OkStatus();
}

absl::Status Run(const std::string& command, const std::string& sub,
                 const std::string& id, const CliArgs& a) {
  if (command == "credentials") return Credentials(a);
  ASSIGN_OR_RETURN(Connection c, Connect(a));
  auto need_id = [&]() -> absl::Status {
    if (id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(command, " ", sub, " needs an id"));
    }
    return absl::OkStatus();
  };
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  if (command == "campaign") {
    if (sub == "create") return CreateCampaign(a, c);
    if (sub == "list") {
      v1::ListCampaignsResponse out;
      RETURN_IF_ERROR(FromGrpc(
          c.stub->ListCampaigns(&ctx, v1::ListCampaignsRequest(), &out)));
      if (c.json) {
        PrintJson(out);
      } else {
        PrintCampaignHeader();
        for (const auto& x : out.campaigns()) PrintCampaignRow(x);
      }
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(need_id());
    if (sub == "show") {
      ASSIGN_OR_RETURN(v1::Campaign out, GetCampaign(c, id));
      PrintCampaign(out, c.json);
      return absl::OkStatus();
    }
    if (sub == "wait") return WaitCampaign(a, c, id);
    if (sub == "close") {
      v1::CloseCampaignRequest req;
      req.set_campaign_id(id);
      v1::Campaign out;
      RETURN_IF_ERROR(FromGrpc(c.stub->CloseCampaign(&ctx, req, &out)));
      PrintCampaign(out, c.json);
      return absl::OkStatus();
    }
    if (sub == "refusals") {
      v1::ListRefusalsRequest req;
      req.set_campaign_id(id);
      v1::ListRefusalsResponse out;
      RETURN_IF_ERROR(FromGrpc(c.stub->ListRefusals(&ctx, req, &out)));
      if (c.json) {
        PrintJson(out);
      } else {
        std::cout << absl::StrFormat("%-8s %-18s %s\n", "node", "reason",
                                     "message");
        for (const auto& r : out.refusals()) {
          std::cout << absl::StrFormat(
              "%-8u %-18s %s\n", r.node_id(),
              Short(v1::RefusalReason_Name(r.reason()), "REFUSAL_REASON_"),
              r.message());
        }
      }
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "campaign: unknown subcommand '", sub,
        "' (create, list, show, wait, close, refusals)"));
  }
  if (command == "budgets") {
    v1::GetBudgetsRequest req;
    if (a.Has("nodes")) {
      ASSIGN_OR_RETURN(auto r, ParseRange(*a.Get("nodes"), "nodes"));
      for (uint32_t v = r.first; v < r.second; ++v) req.add_node_ids(v);
    }
    v1::GetBudgetsResponse out;
    RETURN_IF_ERROR(FromGrpc(c.stub->GetBudgets(&ctx, req, &out)));
    if (c.json) {
      PrintJson(out);
      return absl::OkStatus();
    }
    std::cout << absl::StrFormat("%-8s %10s %10s  %s\n", "node", "cap",
                                 "spent", "per attribute");
    for (const auto& b : out.budgets()) {
      std::string per;
      for (const auto& [attr, eps] : b.spent()) {
        absl::StrAppend(&per, attr, "=", eps, " ");
      }
      std::cout << absl::StrFormat(
          "%-8u %10s %10g  %s\n", b.node_id(),
          b.caps_known() ? absl::StrCat(b.caps().total()) : "unknown",
          b.total_spent(), per);
    }
    return absl::OkStatus();
  }
  if (command == "estimate" || command == "propagate" ||
      command == "evaluate") {
    RETURN_IF_ERROR(need_id());
    v1::StageResult out;
    // Long stages: no deadline; say what is happening.
    std::cerr << "ldpctl: " << command << " " << id << " ..." << std::endl;
    if (command == "estimate") {
      v1::EstimateRequest req;
      req.set_campaign_id(id);
      RETURN_IF_ERROR(FromGrpc(c.stub->Estimate(&ctx, req, &out)));
    } else if (command == "propagate") {
      v1::PropagateRequest req;
      req.set_input(id);
      req.set_method(a.Get("method").value_or("ppr"));
      ASSIGN_OR_RETURN(auto alpha, a.GetDouble("alpha"));
      if (alpha) req.set_alpha(*alpha);
      ASSIGN_OR_RETURN(auto steps, a.GetUint("steps"));
      if (steps) req.set_steps(static_cast<uint32_t>(*steps));
      RETURN_IF_ERROR(FromGrpc(c.stub->Propagate(&ctx, req, &out)));
    } else {
      v1::EvaluateRequest req;
      req.set_input(id);
      req.set_task(a.Get("task").value_or("node"));
      req.set_method(a.Get("method").value_or("privge"));
      req.set_label_campaign_id(a.Get("labels").value_or(""));
      ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
      req.set_seed(seed.value_or(1));
      RETURN_IF_ERROR(FromGrpc(c.stub->Evaluate(&ctx, req, &out)));
    }
    PrintResult(out, c.json);
    return absl::OkStatus();
  }
  if (command == "results") {
    v1::ListResultsResponse out;
    RETURN_IF_ERROR(
        FromGrpc(c.stub->ListResults(&ctx, v1::ListResultsRequest(), &out)));
    if (c.json) {
      PrintJson(out);
    } else {
      for (const auto& r : out.results()) PrintResult(r, false);
    }
    return absl::OkStatus();
  }
  if (command == "export") {
    RETURN_IF_ERROR(need_id());
    if (!a.Has("out")) return absl::InvalidArgumentError("export needs --out");
    v1::ExportEmbeddingsRequest req;
    req.set_result_id(id);
    auto reader = c.stub->ExportEmbeddings(&ctx, req);
    v1::EmbeddingChunk chunk;
    ldpgraph::DenseMatrix m;
    while (reader->Read(&chunk)) {
      if (m.data.empty()) m = ldpgraph::DenseMatrix(chunk.rows(), chunk.cols());
      const size_t offset = size_t{chunk.first_row()} * chunk.cols();
      if (offset + chunk.values_size() > m.data.size()) {
        return absl::DataLossError("export: a chunk overruns the matrix");
      }
      std::copy(chunk.values().begin(), chunk.values().end(),
                m.data.begin() + offset);
    }
    RETURN_IF_ERROR(FromGrpc(reader->Finish()));
    RETURN_IF_ERROR(ldpgraph::WriteNpy(*a.Get("out"), m));
    std::cerr << "ldpctl: wrote " << m.rows << " x " << m.cols << " to "
              << *a.Get("out") << "\n";
    return absl::OkStatus();
  }
  if (command == "audit") {
    v1::ListAuditRequest req;
    ASSIGN_OR_RETURN(auto after, a.GetUint("after"));
    req.set_after_sequence(after.value_or(0));
    ASSIGN_OR_RETURN(auto limit, a.GetUint("limit"));
    req.set_limit(static_cast<uint32_t>(limit.value_or(1000)));
    v1::ListAuditResponse out;
    RETURN_IF_ERROR(FromGrpc(c.stub->ListAudit(&ctx, req, &out)));
    if (c.json) {
      PrintJson(out);
    } else {
      for (const auto& e : out.entries()) {
        std::cout << absl::StrFormat(
            "%6u %s %-16s %-16s %s\n", e.sequence(),
            absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                             absl::FromUnixMillis(e.unix_ms()),
                             absl::UTCTimeZone()),
            e.actor(), e.action(), e.details_json());
      }
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown command '", command, "'"));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" ||
      args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? kUsageError : 0;
  }
  if (ldpgraph::WantsHelp(args)) {
    std::cout << kUsage;
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  std::string sub, id;
  if (command == "campaign") {
    if (args.empty() || args[0].rfind("--", 0) == 0) {
      std::cerr << "ldpctl: campaign needs a subcommand (create, list, show, "
                   "wait, close, refusals)\n";
      return kUsageError;
    }
    sub = args[0];
    args.erase(args.begin());
  }
  if (!args.empty() && args[0].rfind("--", 0) != 0) {
    id = args[0];
    args.erase(args.begin());
  }
  std::set<std::string> value_flags = kConnectionFlags;
  for (const char* f :
       {"attribute", "mechanism", "epsilon", "dimension", "sampled",
        "range", "nodes", "quorum", "deadline", "name", "timeout",
        "method", "alpha", "steps", "task", "labels", "seed",
        "out", "after", "limit", "node-key"}) {
    value_flags.insert(f);
  }
  auto parsed = CliArgs::Parse(args, value_flags, {"insecure", "json"});
  if (!parsed.ok()) {
    std::cerr << "ldpctl: " << parsed.status().message()
              << "\nRun ldpctl --help for the commands and flags.\n";
    return kUsageError;
  }
  absl::Status s = Run(command, sub, id, *parsed);
  if (!s.ok()) {
    std::cerr << "ldpctl " << command << (sub.empty() ? "" : " ") << sub
              << ": " << absl::StatusCodeToString(s.code()) << ": "
              << s.message() << "\n";
    return s.code() == absl::StatusCode::kInvalidArgument ? kUsageError : 1;
  }
  return 0;
}

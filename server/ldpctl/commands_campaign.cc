// `ldpctl campaign` (internal/commands.h): create (with the mechanism names
// and edge-substitution flags of commands.h), list, show, wait, close and
// refusals, and the campaign table.
#include <cstdint>
#include <set>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cli_args.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/commands.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/commands.h"

namespace ldpgraph::ldpctl {
namespace {

// --<flag> LO,HI into spec's public range (default [-1, 1]).
absl::Status RangeFromFlag(const CliArgs& a, const char* flag,
                           v1::MechanismSpec* spec) {
  ASSIGN_OR_RETURN(auto range, a.GetDoubleList(flag));
  if (range && range->size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be LO,HI"));
  }
  spec->set_range_low(range ? (*range)[0] : -1.0);
  spec->set_range_high(range ? (*range)[1] : 1.0);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::MechanismKind> ParseMechanismKind(absl::string_view name) {
  // Every kind is accepted; the message lists the feature kinds first.
  if (auto kind = wire::kMechanismKindNames.Parse(name); kind.ok()) {
    return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--mechanism must be ",
      wire::kMechanismKindNames.ChoicesOr(
          {v1::MECHANISM_KIND_HDS, v1::MECHANISM_KIND_SQUARE_WAVE,
           v1::MECHANISM_KIND_MULTIBIT, v1::MECHANISM_KIND_ONEBIT,
           v1::MECHANISM_KIND_PIECEWISE, v1::MECHANISM_KIND_LAPLACE,
           v1::MECHANISM_KIND_LABEL_RR, v1::MECHANISM_KIND_EDGE_RR,
           v1::MECHANISM_KIND_EDGE_SUBSTITUTION,
           v1::MECHANISM_KIND_EDGE_BLINK}),
      ", got '", name, "'"));
}

absl::Status SubstitutionFromFlags(const CliArgs& a, v1::MechanismSpec* spec) {
  v1::SubstitutionSpec* s = spec->mutable_substitution();
  *s = edges::DefaultSubstitutionSpec();
  ASSIGN_OR_RETURN(auto approach, a.GetUint("approach"));
  if (approach) s->set_approach(static_cast<uint32_t>(*approach));
  if (a.Has("similarity")) s->set_similarity(*a.Get("similarity"));
  ASSIGN_OR_RETURN(auto top_k, a.GetUint("top-k"));
  if (top_k) s->set_top_k(static_cast<uint32_t>(*top_k));
  ASSIGN_OR_RETURN(auto dummies, a.GetUint("max-dummies"));
  if (dummies) s->set_max_dummies(static_cast<uint32_t>(*dummies));
  ASSIGN_OR_RETURN(auto mean, a.GetDouble("dummy-mean"));
  if (mean) s->set_dummy_mean(*mean);
  ASSIGN_OR_RETURN(auto std_dev, a.GetDouble("dummy-std"));
  if (std_dev) s->set_dummy_std(*std_dev);
  ASSIGN_OR_RETURN(auto timeout, a.GetUint("round-timeout-ms"));
  if (timeout) s->set_round_timeout_ms(static_cast<uint32_t>(*timeout));
  if (!a.Has("feature-epsilon") || !a.Has("feature-dimension")) {
    return absl::InvalidArgumentError(
        "edge-substitution needs --feature-epsilon and --feature-dimension: "
        "the feature question whose reports the agents exchange");
  }
  v1::MechanismSpec* f = s->mutable_features();
  ASSIGN_OR_RETURN(v1::MechanismKind kind,
                   ParseMechanismKind(a.Get("feature-mechanism").value_or("multibit")));
  f->set_kind(kind);
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("feature-epsilon"));
  f->set_epsilon(*eps);
  ASSIGN_OR_RETURN(auto d, a.GetUint("feature-dimension"));
  f->set_dimension(static_cast<uint32_t>(*d));
  ASSIGN_OR_RETURN(auto k, a.GetUint("feature-sampled"));
  if (k) f->set_sampled(static_cast<uint32_t>(*k));
  return RangeFromFlag(a, "feature-range", f);
}

namespace internal {
namespace {

// "CAMPAIGN_STATE_OPEN" -> "open". enum_name is the generated *_Name() of
// value, which is empty for a number this ldpctl does not know (proto3 enums
// are open: a newer curator's value, or one an older curator stored without
// checking it): shown as "unknown(<value>)", never blank.
std::string Short(const std::string& enum_name, absl::string_view prefix,
                  int value) {
  if (enum_name.empty()) return absl::StrCat("unknown(", value, ")");
  absl::string_view name(enum_name);
  absl::ConsumePrefix(&name, prefix);
  return absl::AsciiStrToLower(name);
}

void CampaignHeader(std::ostream& out) {
  out << absl::StrFormat("%-6s %-8s %-9s %-17s %8s %8s %8s %8s %8s  %s\n",
                         "id", "state", "attribute", "mechanism", "epsilon",
                         "targeted", "reported", "refused", "rejected", "name");
}

void CampaignRow(std::ostream& out, const v1::Campaign& c) {
  out << absl::StrFormat(
      "%-6s %-8s %-9s %-17s %8g %8u %8u %8u %8u  %s\n", c.id(),
      Short(v1::CampaignState_Name(c.state()), "CAMPAIGN_STATE_", c.state()),
      Short(v1::Attribute_Name(c.attribute()), "ATTRIBUTE_", c.attribute()),
      Short(v1::MechanismKind_Name(c.spec().kind()), "MECHANISM_KIND_",
            c.spec().kind()),
      c.spec().epsilon(), c.progress().targeted(), c.progress().reported(),
      c.progress().refused(), c.progress().rejected(), c.name());
}

void PrintCampaign(const Output& o, const v1::Campaign& c) {
  if (o.json) return o.Json(c);
  CampaignHeader(o.out);
  CampaignRow(o.out, c);
  if (!c.close_reason().empty()) o.out << "closed: " << c.close_reason() << "\n";
}

// --attribute into req (default features).
absl::Status AttributeFromFlags(const CliArgs& a, v1::CreateCampaignRequest* req) {
  const std::string attribute = a.Get("attribute").value_or("features");
  auto parsed = wire::kAttributeNames.Parse(attribute);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--attribute must be ", wire::kAttributeNames.ChoicesOr(),
                     ", got '", attribute, "'"));
  }
  req->set_attribute(*parsed);
  return absl::OkStatus();
}

// --dimension into spec; without it (an edges campaign), the curator's
// number of nodes.
absl::Status DimensionFromFlags(const CliArgs& a, const Connection& c,
                                v1::MechanismSpec* spec) {
  ASSIGN_OR_RETURN(auto d, a.GetUint("dimension"));
  if (d) {
    spec->set_dimension(static_cast<uint32_t>(*d));
    return absl::OkStatus();
  }
  // Edges: the number of nodes, which is the curator's.
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::CuratorStatus status;
  RETURN_IF_ERROR(FromGrpc(
      c.stub->GetStatus(&ctx, v1::GetStatusRequest(), &status), c.address));
  spec->set_dimension(status.graph_nodes());
  return absl::OkStatus();
}

// The edge mechanisms' own flags: --blink-delta for edge-blink, the
// substitution's for edge-substitution; INVALID_ARGUMENT for either given
// to another mechanism.
absl::Status EdgeMechanismFromFlags(const CliArgs& a, v1::MechanismKind kind,
                                    v1::MechanismSpec* spec) {
  if (kind == v1::MECHANISM_KIND_EDGE_BLINK) {
    ASSIGN_OR_RETURN(auto delta, a.GetDouble("blink-delta"));
    spec->mutable_blink()->set_degree_share(
        delta.value_or(edges::BlinkParams().delta));
  } else if (a.Has("blink-delta")) {
    return absl::InvalidArgumentError(
        "--blink-delta applies to --mechanism edge-blink only");
  }
  if (kind == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    return SubstitutionFromFlags(a, spec);
  }
  for (const char* flag :
       {"approach", "similarity", "top-k", "max-dummies", "dummy-mean",
        "dummy-std", "feature-mechanism", "feature-epsilon",
        "feature-dimension", "feature-sampled", "feature-range",
        "round-timeout-ms"}) {
    if (a.Has(flag)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " applies to --mechanism edge-substitution only"));
    }
  }
  return absl::OkStatus();
}

// The mechanism: --mechanism, --epsilon, --dimension, the edge mechanisms'
// flags, --sampled and --range into req's spec (its attribute set).
absl::Status SpecFromFlags(const CliArgs& a, const Connection& c,
                           v1::CreateCampaignRequest* req) {
  const bool edges = req->attribute() == v1::ATTRIBUTE_EDGES;
  if (!a.Has("mechanism") || !a.Has("epsilon") ||
      (!a.Has("dimension") && !edges)) {
    return absl::InvalidArgumentError(
        "campaign create needs --mechanism, --epsilon and --dimension");
  }
  v1::MechanismSpec* spec = req->mutable_spec();
  ASSIGN_OR_RETURN(v1::MechanismKind kind, ParseMechanismKind(*a.Get("mechanism")));
  spec->set_kind(kind);
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  spec->set_epsilon(*eps);
  RETURN_IF_ERROR(DimensionFromFlags(a, c, spec));
  RETURN_IF_ERROR(EdgeMechanismFromFlags(a, kind, spec));
  ASSIGN_OR_RETURN(auto k, a.GetUint("sampled"));
  if (k) spec->set_sampled(static_cast<uint32_t>(*k));
  return RangeFromFlag(a, "range", spec);
}

// --nodes (all, A-B or a list of ids) into req.
absl::Status NodesFromFlags(const CliArgs& a, v1::CreateCampaignRequest* req) {
  const std::string nodes = a.Get("nodes").value_or("all");
  if (nodes == "all") {
    req->mutable_nodes()->set_all(true);
  } else if (nodes.find('-') != std::string::npos) {
    ASSIGN_OR_RETURN(auto r, ParseNodeRange(nodes, "nodes"));
    req->mutable_nodes()->set_range_begin(r.first);
    req->mutable_nodes()->set_range_end(r.second);
  } else {
    for (absl::string_view item : absl::StrSplit(nodes, ',')) {
      uint32_t v = 0;
      if (!absl::SimpleAtoi(item, &v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--nodes must be all, A-B or a list of ids, got '", nodes, "'"));
      }
      req->mutable_nodes()->add_node_ids(v);
    }
  }
  return absl::OkStatus();
}

// --quorum (default 1) and --deadline (seconds from now) into req.
absl::Status ClosingFromFlags(const CliArgs& a, v1::CreateCampaignRequest* req) {
  ASSIGN_OR_RETURN(auto quorum, a.GetDouble("quorum"));
  req->set_quorum(quorum.value_or(1.0));
  ASSIGN_OR_RETURN(auto deadline, a.GetDouble("deadline"));
  if (deadline) {
    if (*deadline <= 0) {
      return absl::InvalidArgumentError("--deadline must be > 0 seconds");
    }
    req->set_deadline_unix_ms(absl::ToUnixMillis(absl::Now()) +
                              static_cast<int64_t>(*deadline * 1000));
  }
  return absl::OkStatus();
}

absl::Status CreateCampaign(const CliArgs& a, const Connection& c,
                            const Output& o) {
  v1::CreateCampaignRequest req;
  req.set_name(a.Get("name").value_or(""));
  RETURN_IF_ERROR(AttributeFromFlags(a, &req));
  RETURN_IF_ERROR(SpecFromFlags(a, c, &req));
  RETURN_IF_ERROR(NodesFromFlags(a, &req));
  RETURN_IF_ERROR(ClosingFromFlags(a, &req));
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::Campaign out;
  RETURN_IF_ERROR(FromGrpc(c.stub->CreateCampaign(&ctx, req, &out), c.address));
  PrintCampaign(o, out);
  return absl::OkStatus();
}

absl::StatusOr<v1::Campaign> GetCampaign(const Connection& c,
                                         const std::string& id) {
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::GetCampaignRequest req;
  req.set_campaign_id(id);
  v1::Campaign out;
  RETURN_IF_ERROR(FromGrpc(c.stub->GetCampaign(&ctx, req, &out), c.address));
  return out;
}

absl::Status WaitCampaign(const CliArgs& a, const Connection& c,
                          const std::string& id, const Output& o) {
  ASSIGN_OR_RETURN(auto timeout, a.GetDouble("timeout"));
  const absl::Time until =
      timeout ? absl::Now() + absl::Seconds(*timeout) : absl::InfiniteFuture();
  v1::Campaign campaign;
  while (true) {
    ASSIGN_OR_RETURN(campaign, GetCampaign(c, id));
    const auto& p = campaign.progress();
    const uint32_t answered = p.reported() + p.refused();
    o.err << absl::StrFormat(
        "\r%s: %u/%u answered (%u reported, %u refused, %u rejected) %5.1f%%",
        id, answered, p.targeted(), p.reported(), p.refused(), p.rejected(),
        p.targeted() ? 100.0 * answered / p.targeted() : 100.0);
    o.err.flush();
    if (campaign.state() == v1::CAMPAIGN_STATE_CLOSED ||
        answered >= p.targeted()) {
      break;
    }
    if (absl::Now() >= until) {
      o.err << "\n";
      return absl::DeadlineExceededError(
          absl::StrCat(id, " still open after --timeout"));
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  o.err << "\n";
  if (o.json) o.Json(campaign);
  return absl::OkStatus();
}

}  // namespace

absl::Status Campaign(const std::string& sub, const std::string& id,
                      const CliArgs& a, const Connection& c, const Output& o) {
  if (sub == "create") return CreateCampaign(a, c, o);
  if (sub == "list") {
    // Every page; the table row by row, the JSON as one message.
    v1::ListCampaignsResponse all;
    if (!o.json) CampaignHeader(o.out);
    RETURN_IF_ERROR(c.ForEachPage(
        &v1::AdminService::Stub::ListCampaigns, v1::ListCampaignsRequest(),
        [&](const v1::ListCampaignsResponse& page) {
          for (const auto& x : page.campaigns()) {
            if (o.json) {
              *all.add_campaigns() = x;
            } else {
              CampaignRow(o.out, x);
            }
          }
          return absl::OkStatus();
        }));
    if (o.json) o.Json(all);
    return absl::OkStatus();
  }
  const std::set<std::string> with_id = {"show", "wait", "close", "refusals"};
  if (with_id.count(sub) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "campaign: unknown subcommand '", sub,
        "' (create, list, show, wait, close, refusals)"));
  }
  if (id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", sub, " needs a campaign id (e.g. c1)"));
  }
  if (sub == "show") {
    ASSIGN_OR_RETURN(v1::Campaign out, GetCampaign(c, id));
    PrintCampaign(o, out);
    return absl::OkStatus();
  }
  if (sub == "wait") return WaitCampaign(a, c, id, o);
  if (sub == "close") {
    grpc::ClientContext ctx;
    c.Prepare(&ctx);
    v1::CloseCampaignRequest req;
    req.set_campaign_id(id);
    v1::Campaign out;
    RETURN_IF_ERROR(FromGrpc(c.stub->CloseCampaign(&ctx, req, &out), c.address));
    PrintCampaign(o, out);
    return absl::OkStatus();
  }
  v1::ListRefusalsRequest req;
  req.set_campaign_id(id);
  v1::ListRefusalsResponse all;
  if (!o.json) {
    o.out << absl::StrFormat("%-8s %-18s %s\n", "node", "reason", "message");
  }
  RETURN_IF_ERROR(c.ForEachPage(
      &v1::AdminService::Stub::ListRefusals, req,
      [&](const v1::ListRefusalsResponse& page) {
        for (const auto& r : page.refusals()) {
          if (o.json) {
            *all.add_refusals() = r;
            continue;
          }
          o.out << absl::StrFormat(
              "%-8u %-18s %s\n", r.node_id(),
              Short(v1::RefusalReason_Name(r.reason()), "REFUSAL_REASON_",
                    r.reason()),
              r.message());
        }
        return absl::OkStatus();
      }));
  if (o.json) o.Json(all);
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ldpgraph::ldpctl

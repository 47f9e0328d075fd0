#include "server/ldpctl/commands.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>
#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/cli_args.h"
#include "common/dataset/dataset.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/npy.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/dev_tls.h"
#include "server/ldpctl/simulate.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::ldpctl {
namespace {

namespace fs = std::filesystem;

constexpr char kOverview[] = R"(ldpctl: the admin CLI of an ldpgraph curator, and a whole simulated deployment
in one command.

Usage: ldpctl <command> [ARGS] [flags]        ldpctl <command> --help

Start here:
  simulate            start a curator and agent hosts on this machine (TLS on
                      loopback), collect, estimate, train, print a results
                      table; cleans up after itself

Against a running curator:
  run                 on a deployment started elsewhere (compose, Kubernetes):
                      wait for the agents, collect, estimate, evaluate, print
                      the results table of simulate
  status              the curator at a glance: graph, hosts, campaigns, traffic
  campaign            create, list, show, wait, close, refusals
  budget show         epsilon spent per node and its summary (the ledger)
  pipeline            run (estimate + evaluate), estimate, propagate, evaluate
  release             create (a structure embedding under central DP:
                      se-privgemb or dpne, charged to the graph's release
                      ledger), ledger (what each graph's releases cost)
  results             every recorded pipeline result
  export              an estimate, embedding or release as .npy, with its
                      node ids
  audit               the audit log

Offline:
  credentials         derive node credentials to provision agent hosts
  secrets             everything a containerised deployment needs: a
                      development CA and curator certificate, an admin token,
                      a node key and every node's credential

Connection (every command against a curator; flag > environment > config):
  --curator ADDR      curator address (default 127.0.0.1:7443; $LDPCTL_CURATOR)
  --admin-token FILE  the admin token, hex ($LDPCTL_ADMIN_TOKEN_FILE, or the
                      token itself in $LDPCTL_ADMIN_TOKEN)
  --ca FILE           CA certificate that signed the curator's ($LDPCTL_CA)
  --server-name NAME  name to check the curator's certificate against
                      ($LDPCTL_SERVER_NAME)
  --insecure          plaintext gRPC, development only ($LDPCTL_INSECURE=1)
  --config FILE       "key = value" lines: curator, admin-token, ca,
                      server-name, insecure ($LDPCTL_CONFIG; default
                      ~/.config/ldpctl/config if it exists)
  --format F          table (default) or json (--json is short for it)

Exit codes:
  0 success            4 curator unreachable        7 timed out (--timeout)
  1 failed             5 no such campaign/result    130 interrupted (Ctrl-C)
  2 usage error        6 refused (ledger, state, conflict)
  3 not authorised

Example:
  ldpctl simulate                                  # the quick start
  ldpctl simulate --keep-running                   # then, in another shell:
  ldpctl --config /tmp/ldpctl-sim-XXXX/ldpctl.conf status
)";

struct CommandHelp {
  const char* name;
  const char* text;
};

constexpr CommandHelp kHelp[] = {
    {"status", R"(ldpctl status: the curator at a glance

Usage: ldpctl status [connection flags] [--format table|json]

Shows the curator's graph (nodes, edges, classes), the agent hosts connected
(enrolment sessions, nodes enrolled, task streams open), campaigns by state,
answers stored (reports and refusals), reports accepted, duplicated and
rejected since the curator started, the bytes of reports received, and the
results recorded.

Examples:
  ldpctl status --curator curator:7443 --ca certs/ca.pem --admin-token certs/admin.token
  ldpctl status --config deploy.conf --format json | jq .enrolled_nodes
)"},
    {"campaign", R"(ldpctl campaign: collection campaigns

Usage:
  ldpctl campaign create --attribute A --mechanism M --epsilon E --dimension D [flags]
  ldpctl campaign list
  ldpctl campaign show ID
  ldpctl campaign wait ID [--timeout SECONDS]
  ldpctl campaign close ID
  ldpctl campaign refusals ID

A campaign asks every targeted node one question. Its agent answers with a
perturbed report (spending epsilon from its own budget) or refuses, with a
reason. The curator refuses to open a campaign some node could not afford.
`wait` shows progress on stderr until the campaign closes or every targeted
node has answered.

create flags:
  --attribute A       features (default), label or edges
  --mechanism M       hds, square-wave, multibit, onebit, piecewise, laplace,
                      label-rr, edge-rr, edge-substitution, edge-blink
  --epsilon E         the budget one report spends (edges: eps_e; edge-blink:
                      the node's total, bits and degree)
  --dimension D       features: d; label: classes; edges: number of nodes
                      (default for edges: the curator's node count)
  --sampled K         k or m sampled dimensions (default: the mechanism's)
  --range LO,HI       public feature range (default -1,1)
  --nodes SEL         all (default), A-B (nodes A..B-1) or a list 1,5,9
  --quorum Q          close once this fraction answered (default 1; 0: never)
  --deadline S        close after S seconds (default: none)
  --name NAME         a label for people

edge-substitution (neighbour substitution, the edge LDP thesis): agents
exchange sealed messages with their graph neighbours through the curator's
relay, then report their perturbed neighbour lists. Each node also answers
the feature question below (its privatized features, shared with its
neighbours): the same question as a features campaign with that spec, so
a node that answers both spends its feature epsilon once.
  --approach 1|2          1: candidates relayed by neighbours, with dummies;
                          2: similarity queries (default 1)
  --similarity S          cosine (default) or l2
  --top-k K               candidates tried per dropped neighbour (default 10)
  --max-dummies F         approach 1: most dummies per relay (default 5)
  --dummy-mean M          approach 1: dummies' raw values ~ N(M, S^2),
  --dummy-std S           clipped to the feature range (defaults 0.5, 0.5)
  --feature-mechanism M   the feature mechanism (default multibit)
  --feature-epsilon X     its epsilon (required; finite: raw features never
                          leave an agent)
  --feature-dimension D   the feature count d (required)
  --feature-sampled K     its k or m (default: the mechanism's)
  --feature-range LO,HI   its public range (default -1,1)
  --round-timeout-ms T    a neighbour silent this long in a round counts as
                          absent (default 30000)

edge-blink (Blink, Zhu et al., CCS 2023): each node reports its neighbour
bits by randomized response at (1 - delta) eps and its degree with Laplace
noise at delta eps; the curator estimates the graph from both (pipeline
--graph-campaign, with --blink-variant).
  --blink-delta D         delta, the degree's share of eps, in (0, 1)
                          (default 0.1)

Examples:
  ldpctl campaign create --attribute features --mechanism hds --epsilon 1 --dimension 1433 --sampled 10
  ldpctl campaign create --attribute label --mechanism label-rr --epsilon 1 --dimension 7 --nodes 0-1000
  ldpctl campaign create --attribute edges --mechanism edge-rr --epsilon 4
  ldpctl campaign create --attribute edges --mechanism edge-blink --epsilon 4 --blink-delta 0.1
  ldpctl campaign create --attribute edges --mechanism edge-substitution --epsilon 1 \
      --approach 1 --similarity cosine --top-k 10 --max-dummies 5 \
      --feature-mechanism multibit --feature-epsilon 2 --feature-dimension 1433 \
      --feature-range 0,1 --round-timeout-ms 30000
  ldpctl campaign wait c1 --timeout 600 && ldpctl campaign show c1 --format json
  ldpctl campaign refusals c2
)"},
    {"budget", R"(ldpctl budget show: the privacy ledger

Usage: ldpctl budget show [--nodes A-B] [--per-node] [--format table|json]

The curator's ledger mirrors what each node spent: the epsilon of every
distinct question it answered, per attribute, beside the caps it declared.
(The agent is the authority on its budget; the ledger is what the curator
can prove from the reports it holds.) Prints a summary (nodes, caps known,
spent min / mean / max, per attribute); --per-node or --nodes adds one row
per node.

Examples:
  ldpctl budget show
  ldpctl budget show --nodes 0-20
  ldpctl budget show --format json | jq .summary.spent_max
)"},
    {"pipeline", R"(ldpctl pipeline: estimate, propagate, evaluate collected reports

Usage:
  ldpctl pipeline run CAMPAIGN [--task node|link] [--method privge|lpgnn]
                               [--labels CAMPAIGN] [--graph-campaign CAMPAIGN]
                               [--blink-variant V] [--seed S]
                               [--defence D[,D]] [--screen-alpha A]
  ldpctl pipeline estimate CAMPAIGN [--defence screen] [--screen-alpha A]
  ldpctl pipeline propagate RESULT [--method ppr|kprop] [--alpha A] [--steps K]
                                   [--graph-campaign CAMPAIGN]
                                   [--blink-variant V]
  ldpctl pipeline evaluate RESULT [--task ...] [--method ...] [--labels ...]
                                  [--graph-campaign ...] [--blink-variant V]
                                  [--seed S] [--defence D[,D]]

`run` estimates a features campaign's reports and evaluates the method's
curator-side pipeline on the estimate (propagation, training, test), in one
go. Each stage records a result (r1, r2, ...) that `results` lists and
`export` writes out. Post-processing: no stage spends budget.
  --task T        node (classification, default) or link (prediction)
  --method M      privge (default: PPR or 16 KProp steps, whichever
                  validates better on the node task; PPR for links; MLP)
                  or lpgnn (KProp + GraphSAGE)
  --labels C      a label campaign whose reports replace the curator's
                  training labels (LPGNN's label randomized response)
  --graph-campaign C
                  an edges campaign (edge-rr, edge-substitution or
                  edge-blink): propagate and train over the graph assembled
                  from its reports instead of the curator's (needed when
                  the curator runs with --private-edges); the result's
                  details name it. An edge-blink graph is estimated over
                  the nodes that reported; the others are isolated
  --blink-variant V
                  an edge-blink graph campaign only: hard (posterior > 1/2,
                  default), topk (the expected number of edges) or hybrid
                  (topk weighted by the posteriors; lpgnn only: PPR and
                  releases read no weights)
  --seed S        seed of the split and model initialisation (default 1)
  --defence D[,D] the curator's defences against poisoned reports, a comma
                  list of none, screen, robust (default none). screen: the
                  estimate screens the feature reports' sampled dimensions
                  (--screen-alpha A, default 1e-3) and the nodes it flags
                  are left out of training; robust: evaluate (node task)
                  trains, leaves out the training and validation nodes
                  whose label the first model contradicts, and trains
                  again. `pipeline evaluate --defence screen` checks that
                  its input estimate was screened

Examples:
  ldpctl pipeline run c1
  ldpctl pipeline run c1 --method lpgnn --labels c2 --defence screen,robust
  ldpctl pipeline run c1 --method lpgnn --labels c2 --format json
  ldpctl pipeline run c2 --method lpgnn --graph-campaign c1
  ldpctl pipeline run c2 --method lpgnn --graph-campaign c3 --blink-variant hybrid
  ldpctl pipeline estimate c1 && ldpctl pipeline propagate r1 --method ppr
)"},
    {"release", R"(ldpctl release: structure embeddings released under central DP

Usage:
  ldpctl release create --method se-privgemb|dpne --epsilon E
                        [--graph-campaign C] [--blink-variant V]
                        [--seed S] [--dim D]
                        [--noise-multiplier S] [--max-epochs N]
                        [--proximity deepwalk|degree|uniform] [--batch B]
  ldpctl release ledger

`create` trains an embedding of the curator's graph (or of an edges
campaign's assembled graph) with the method's central-DP noise, drawn from
the curator's secure generator, and records it as a result that `export`
writes out. Each graph has a release ledger: the composition (RDP) of its
releases, at the curator's delta, must stay within the curator's cap
(ldpgraph-curator --release-epsilon, --release-delta); a release that would
pass it is refused, and one found over it after training is discarded.
  --method M         se-privgemb (DP skip-gram, SE-PrivGEmb: trains until one
                     more step would pass (E, delta)) or dpne (objective
                     perturbation, DPNE: E-DP by its paper's analysis)
  --epsilon E        the release's budget
  --graph-campaign C release the graph assembled from edges campaign C
  --blink-variant V  an edge-blink campaign C's graph: hard (default) or topk
  --seed S           seed of the public initialisation (default 1)
  --dim D            dimension (se-privgemb 128, dpne 100)
  --noise-multiplier S --max-epochs N --proximity P --batch B
                     se-privgemb: noise std S times the clip (5), epoch cap
                     (50), negatives' proximity (deepwalk), edges per step
                     (16)
What each method's guarantee covers, and where the papers' analyses fall
short, is in server/embedding/README.md.

`ledger` lists every graph's releases, their composed epsilon at the
ledger's delta, and the plain sums for reference.

Examples:
  ldpctl release create --method dpne --epsilon 1
  ldpctl release create --method se-privgemb --epsilon 2 --format json
  ldpctl release ledger
  ldpctl export r3 --out release.npy
)"},
    {"results", R"(ldpctl results: every recorded pipeline result, newest first

Usage: ldpctl results [--format table|json]

Columns: id, stage, input, shape, metric (evaluate: accuracy or ROC-AUC),
seconds, and the stage's parameters.

Example:
  ldpctl results --format json | jq '.results[] | select(.stage=="evaluate")'
)"},
    {"export", R"(ldpctl export: an estimate or embedding as .npy

Usage: ldpctl export RESULT --out FILE.npy [--ids FILE]

Writes the result's matrix as float32 (rows x cols) and its node ids as a
1-D int64 array (row i holds node ids[i]), by default beside it as
FILE.ids.npy. In Python: z = numpy.load('z.npy'); ids = numpy.load('z.ids.npy').

Example:
  ldpctl export r2 --out z.npy
)"},
    {"audit", R"(ldpctl audit: the audit log, oldest first

Usage: ldpctl audit [--after SEQ] [--limit N] [--format table|json]

Every enrolment, campaign transition and pipeline stage, with who did it.

Example:
  ldpctl audit --after 100 --limit 50
)"},
    {"credentials", R"(ldpctl credentials: node credentials for agent hosts (offline)

Usage: ldpctl credentials --node-key FILE --nodes A-B [--out FILE]

Each node's credential is HMAC-SHA256(node key, node id); a host given a
shard's lines can report as those nodes and no others. Give each host only
its own shard's file (mode 600).

Example:
  ldpctl credentials --node-key certs/node.key --nodes 0-1000 --out host0.tsv
)"},
    {"secrets", R"(ldpctl secrets: the secrets of a development deployment (offline)

Usage: ldpctl secrets --out DIR (--dataset DIR | --nodes A-B)
                      [--tls-names NAME,...] [--keep-existing]

Writes into DIR (created if missing; files mode 600, certificates 644):
  ca.pem, ca.key          a throwaway development CA (keep ca.key out of
                          every container and Secret)
  curator.pem, .key       the curator's certificate for --tls-names (default
                          localhost,127.0.0.1): every name agents and ldpctl
                          dial, e.g. curator for docker compose or the
                          Service's DNS names in Kubernetes
  admin.token             the admin API's bearer token
  node.key                the key node credentials derive from
  nodes.credentials       the credential of every node of --dataset (its
                          meta.json) or of --nodes A-B
docker-compose.yml and deploy/k8s/make-secrets.sh run it. A production
deployment brings its own PKI, and each device holds only its own credential.
--keep-existing: if DIR already holds node.key, keep everything and succeed.

Example:
  ldpctl secrets --out secrets --dataset data/default --tls-names curator,localhost
)"},
};

// The value flags of the commands (connection flags added by the parser).
const std::set<std::string>& CommandValueFlags() {
  static const auto* flags = new std::set<std::string>{
      "attribute", "mechanism", "epsilon", "dimension", "sampled", "range",
      "nodes", "quorum", "deadline", "name", "timeout", "method", "alpha",
      "steps", "task", "labels", "seed", "out", "ids", "after", "limit",
      "node-key", "dataset", "tls-names", "approach", "similarity", "top-k",
      "max-dummies", "dummy-mean", "dummy-std", "feature-mechanism",
      "feature-epsilon", "feature-dimension", "feature-sampled",
      "feature-range", "round-timeout-ms", "graph-campaign", "dim",
      "noise-multiplier", "max-epochs", "proximity", "batch", "blink-delta",
      "blink-variant", "defence", "screen-alpha"};
  return *flags;
}

struct Output {
  std::ostream& out;
  std::ostream& err;
  bool json = false;
  void Json(const google::protobuf::Message& m) const {
    std::string text;
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    o.preserve_proto_field_names = true;
    o.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(m, &text, o);
    out << text;
  }
};

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

void ResultRow(std::ostream& out, const v1::StageResult& r) {
  out << absl::StrFormat("%-5s %-9s %-6s %7u x %-6u %9.4f %8.2fs  %s\n", r.id(),
                         r.stage(), r.input(), r.rows(), r.cols(), r.metric(),
                         r.seconds(), r.details_json());
}

void PrintResult(const Output& o, const v1::StageResult& r) {
  if (o.json) return o.Json(r);
  ResultRow(o.out, r);
}

}  // namespace

absl::StatusOr<v1::MechanismKind> ParseMechanismKind(absl::string_view name) {
  if (name == "label-rr") return v1::MECHANISM_KIND_LABEL_RR;
  if (name == "edge-rr") return v1::MECHANISM_KIND_EDGE_RR;
  if (name == "edge-substitution") return v1::MECHANISM_KIND_EDGE_SUBSTITUTION;
  if (name == "edge-blink") return v1::MECHANISM_KIND_EDGE_BLINK;
  if (auto feature = ParseMechanismName(name); feature.ok()) {
    return wire::ToWireKind(*feature);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--mechanism must be hds, square-wave, multibit, onebit, piecewise, "
      "laplace, label-rr, edge-rr, edge-substitution or edge-blink, got '",
      name, "'"));
}

absl::StatusOr<std::string> BlinkVariantFromFlags(const CliArgs& a) {
  if (!a.Has("blink-variant")) return std::string();
  if (!a.Has("graph-campaign")) {
    return absl::InvalidArgumentError(
        "--blink-variant needs --graph-campaign (an edge-blink campaign)");
  }
  ASSIGN_OR_RETURN(edges::BlinkVariant v,
                   edges::kBlinkVariantNames.Parse(*a.Get("blink-variant"),
                                                   "--blink-variant"));
  return std::string(edges::kBlinkVariantNames.Name(v));
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
  ASSIGN_OR_RETURN(auto range, a.GetDoubleList("feature-range"));
  if (range && range->size() != 2) {
    return absl::InvalidArgumentError("--feature-range must be LO,HI");
  }
  f->set_range_low(range ? (*range)[0] : -1.0);
  f->set_range_high(range ? (*range)[1] : 1.0);
  return absl::OkStatus();
}

namespace {

absl::Status CreateCampaign(const CliArgs& a, const Connection& c,
                            const Output& o) {
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
  const bool edges = req.attribute() == v1::ATTRIBUTE_EDGES;
  if (!a.Has("mechanism") || !a.Has("epsilon") ||
      (!a.Has("dimension") && !edges)) {
    return absl::InvalidArgumentError(
        "campaign create needs --mechanism, --epsilon and --dimension");
  }
  v1::MechanismSpec* spec = req.mutable_spec();
  ASSIGN_OR_RETURN(v1::MechanismKind kind, ParseMechanismKind(*a.Get("mechanism")));
  spec->set_kind(kind);
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  spec->set_epsilon(*eps);
  ASSIGN_OR_RETURN(auto d, a.GetUint("dimension"));
  if (d) {
    spec->set_dimension(static_cast<uint32_t>(*d));
  } else {
    // Edges: the number of nodes, which is the curator's.
    grpc::ClientContext ctx;
    c.Prepare(&ctx);
    v1::CuratorStatus status;
    RETURN_IF_ERROR(FromGrpc(
        c.stub->GetStatus(&ctx, v1::GetStatusRequest(), &status), c.address));
    spec->set_dimension(status.graph_nodes());
  }
  if (kind == v1::MECHANISM_KIND_EDGE_BLINK) {
    ASSIGN_OR_RETURN(auto delta, a.GetDouble("blink-delta"));
    spec->mutable_blink()->set_degree_share(
        delta.value_or(edges::BlinkParams().delta));
  } else if (a.Has("blink-delta")) {
    return absl::InvalidArgumentError(
        "--blink-delta applies to --mechanism edge-blink only");
  }
  if (kind == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    RETURN_IF_ERROR(SubstitutionFromFlags(a, spec));
  } else {
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
  }
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
    ASSIGN_OR_RETURN(auto r, ParseNodeRange(nodes, "nodes"));
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

absl::Status Status(const Connection& c, const Output& o) {
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::CuratorStatus s;
  RETURN_IF_ERROR(
      FromGrpc(c.stub->GetStatus(&ctx, v1::GetStatusRequest(), &s), c.address));
  if (o.json) {
    o.Json(s);
    return absl::OkStatus();
  }
  const double up =
      absl::ToDoubleSeconds(absl::Now() - absl::FromUnixMillis(s.started_unix_ms()));
  auto row = [&](const std::string& k, const std::string& v) {
    o.out << absl::StrFormat("%-22s %s\n", k, v);
  };
  row("curator", absl::StrCat(c.address, s.insecure() ? " (PLAINTEXT)" : " (TLS)",
                              ", up ", absl::StrFormat("%.0f", up), " s"));
  row("graph", absl::StrCat(s.graph_nodes(), " nodes, ", s.graph_edges(),
                            " edges, ", s.classes(), " classes"));
  row("agent hosts", absl::StrCat(s.sessions(), " sessions, ", s.task_streams(),
                                  " task streams open"));
  if (s.fleet_shards() > 0) {
    row("fleet", absl::StrCat("plan of ", s.fleet_shards(),
                              " shards (hosts started with --nodes from-curator)"));
  } else if (s.fleet_gathering() > 0) {
    row("fleet", absl::StrCat(s.fleet_gathering(),
                              " hosts asked for shards; the plan is not fixed yet"));
  }
  row("nodes enrolled", absl::StrFormat("%u of %u (%.1f%%)", s.enrolled_nodes(),
                                        s.graph_nodes(),
                                        s.graph_nodes() ? 100.0 * s.enrolled_nodes() / s.graph_nodes() : 0.0));
  if (s.check_ins() > 0) {
    row("devices (check-in)",
        absl::StrCat(s.devices_seen(), " seen; ", s.check_ins(),
                     " check-ins: ", s.check_ins_served(), " served, ",
                     s.check_ins_idle(), " idle, ", s.check_ins_paced(),
                     " paced; ", s.check_in_sessions(), " sessions live"));
  }
  row("campaigns", absl::StrCat(s.open_campaigns(), " open, ",
                                s.closed_campaigns(), " closed"));
  row("answers stored", absl::StrCat(s.stored_reports(), " reports, ",
                                     s.stored_refusals(), " refusals"));
  row("since start", absl::StrCat(s.reports_accepted(), " accepted, ",
                                  s.reports_duplicate(), " duplicates, ",
                                  s.reports_rejected(), " rejected"));
  row("report bytes", absl::StrCat(s.report_bytes_received(), " received"));
  row("results", absl::StrCat(s.results()));
  return absl::OkStatus();
}

absl::Status BudgetShow(const CliArgs& a, const Connection& c, const Output& o) {
  v1::GetBudgetsRequest req;
  if (a.Has("nodes")) {
    ASSIGN_OR_RETURN(auto r, ParseNodeRange(*a.Get("nodes"), "nodes"));
    for (uint32_t v = r.first; v < r.second; ++v) req.add_node_ids(v);
  }
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::GetBudgetsResponse resp;
  RETURN_IF_ERROR(FromGrpc(c.stub->GetBudgets(&ctx, req, &resp), c.address));
  // The summary.
  size_t caps_known = 0;
  double lo = 0, hi = 0, sum = 0;
  std::map<std::string, std::pair<double, double>> per_attr;  // max, sum
  for (int i = 0; i < resp.budgets_size(); ++i) {
    const auto& b = resp.budgets(i);
    caps_known += b.caps_known() ? 1 : 0;
    lo = i == 0 ? b.total_spent() : std::min(lo, b.total_spent());
    hi = std::max(hi, b.total_spent());
    sum += b.total_spent();
    for (const auto& [attr, eps] : b.spent()) {
      auto& s = per_attr[attr];
      s.first = std::max(s.first, eps);
      s.second += eps;
    }
  }
  const size_t n = resp.budgets_size();
  const bool per_node = a.Flag("per-node") || a.Has("nodes");
  if (o.json) {
    // {"summary": {...}, "budgets": [...]} (budgets with --per-node/--nodes,
    // in protobuf's JSON mapping, as every other command prints them).
    nlohmann::json j;
    j["summary"] = {{"nodes", n},
                    {"caps_known", caps_known},
                    {"spent_min", lo},
                    {"spent_mean", n ? sum / n : 0.0},
                    {"spent_max", hi},
                    {"per_attribute", nlohmann::json::object()}};
    for (const auto& [attr, s] : per_attr) {
      j["summary"]["per_attribute"][attr] = {{"max", s.first},
                                             {"mean", n ? s.second / n : 0.0}};
    }
    j["budgets"] = nlohmann::json::array();
    if (per_node) {
      google::protobuf::util::JsonPrintOptions po;
      po.preserve_proto_field_names = true;
      po.always_print_primitive_fields = true;
      std::string all;
      (void)google::protobuf::util::MessageToJsonString(resp, &all, po);
      nlohmann::json parsed = nlohmann::json::parse(all);
      if (parsed.contains("budgets")) j["budgets"] = std::move(parsed["budgets"]);
    }
    o.out << j.dump() << "\n";
    return absl::OkStatus();
  }
  o.out << absl::StrFormat("%-22s %u (caps known for %u)\n", "nodes in ledger", n,
                           caps_known);
  o.out << absl::StrFormat("%-22s min %g, mean %g, max %g\n",
                           "epsilon spent", lo, n ? sum / n : 0.0, hi);
  for (const auto& [attr, s] : per_attr) {
    o.out << absl::StrFormat("%-22s mean %g, max %g\n", "  " + attr,
                             n ? s.second / n : 0.0, s.first);
  }
  if (!per_node) return absl::OkStatus();
  o.out << "\n"
        << absl::StrFormat("%-8s %10s %10s  %s\n", "node", "cap", "spent",
                           "per attribute");
  for (const auto& b : resp.budgets()) {
    std::string per;
    for (const auto& [attr, eps] : b.spent()) {
      absl::StrAppend(&per, attr, "=", eps, " ");
    }
    o.out << absl::StrFormat(
        "%-8u %10s %10g  %s\n", b.node_id(),
        b.caps_known() ? absl::StrCat(b.caps().total()) : "unknown",
        b.total_spent(), per);
  }
  return absl::OkStatus();
}

// --defence and --screen-alpha of `pipeline run`, `estimate` or
// `evaluate` (sub): the screen goes to the estimate stage, robust to the
// evaluate stage. INVALID_ARGUMENT naming the flag for a bad list,
// edge-consistency (no stage applies it), robust for `estimate` alone,
// --screen-alpha for `evaluate` (the estimate's screen has its level).
absl::StatusOr<pipeline::Defences> PipelineDefences(const CliArgs& a,
                                                    const std::string& sub,
                                                    double* alpha) {
  pipeline::Defences d;
  *alpha = pipeline::kDefaultScreenAlpha;
  RETURN_IF_ERROR(pipeline::ParseDefenceFlags(a, &d, alpha));
  if (d.edge_consistency) {
    return absl::InvalidArgumentError(
        "--defence edge-consistency: the curator's stages apply screen "
        "(estimate) and robust (evaluate), not edge-consistency");
  }
  if (sub == "estimate" && d.robust) {
    return absl::InvalidArgumentError(
        "--defence robust applies to pipeline evaluate and run (the evaluate "
        "stage); an estimate applies the screen only");
  }
  if (sub == "evaluate" && a.Has("screen-alpha")) {
    return absl::InvalidArgumentError(
        "--screen-alpha applies to pipeline estimate and run: evaluate reads "
        "the screen of its input estimate");
  }
  return d;
}

// The request of `pipeline estimate` (and run) on campaign, from the flags
// alone (PipelineDefences' errors).
absl::StatusOr<v1::EstimateRequest> EstimateRequestFromFlags(
    const CliArgs& a, const std::string& sub, const std::string& campaign) {
  double alpha = 0;
  ASSIGN_OR_RETURN(const pipeline::Defences d, PipelineDefences(a, sub, &alpha));
  v1::EstimateRequest req;
  req.set_campaign_id(campaign);
  if (d.screen) {
    req.set_defence("screen");
    req.set_screen_alpha(alpha);
  }
  return req;
}

absl::StatusOr<v1::StageResult> Estimate(const CliArgs& a, const std::string& sub,
                                         const Connection& c,
                                         const std::string& campaign) {
  ASSIGN_OR_RETURN(const v1::EstimateRequest req,
                   EstimateRequestFromFlags(a, sub, campaign));
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::StageResult out;
  RETURN_IF_ERROR(FromGrpc(c.stub->Estimate(&ctx, req, &out), c.address));
  return out;
}

// The request of `pipeline evaluate` (and run: sub) on input, from the
// flags alone: INVALID_ARGUMENT for a --task or --method it does not take,
// and PipelineDefences' errors.
absl::StatusOr<v1::EvaluateRequest> EvaluateRequestFromFlags(
    const CliArgs& a, const std::string& sub, const std::string& input) {
  double alpha = 0;
  ASSIGN_OR_RETURN(const pipeline::Defences d, PipelineDefences(a, sub, &alpha));
  v1::EvaluateRequest req;
  if (d.any()) req.set_defence(pipeline::DefencesName(d));
  req.set_input(input);
  ASSIGN_OR_RETURN(
      const pipeline::Task task,
      pipeline::kTaskNames.Parse(a.Get("task").value_or("node"), "--task"));
  ASSIGN_OR_RETURN(
      const pipeline::Method method,
      pipeline::kMethodNames.Parse(
          a.Get("method").value_or("privge"), "--method",
          {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN}));
  req.set_pipeline_task(task);
  req.set_pipeline_method(method);
  req.set_label_campaign_id(a.Get("labels").value_or(""));
  req.set_graph_campaign_id(a.Get("graph-campaign").value_or(""));
  ASSIGN_OR_RETURN(*req.mutable_blink_variant(), BlinkVariantFromFlags(a));
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  req.set_seed(seed.value_or(1));
  return req;
}

absl::StatusOr<v1::StageResult> Evaluate(const CliArgs& a, const std::string& sub,
                                         const Connection& c,
                                         const std::string& input) {
  ASSIGN_OR_RETURN(const v1::EvaluateRequest req,
                   EvaluateRequestFromFlags(a, sub, input));
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::StageResult out;
  RETURN_IF_ERROR(FromGrpc(c.stub->Evaluate(&ctx, req, &out), c.address));
  return out;
}

absl::Status Pipeline(const std::string& sub, const std::string& id,
                      const CliArgs& a, const Connection& c, const Output& o) {
  if (id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline ", sub, " needs ",
        sub == "run" || sub == "estimate" ? "a campaign id" : "a result id"));
  }
  o.err << "ldpctl: pipeline " << sub << " " << id << " ..." << std::endl;
  if (sub == "run") {
    ASSIGN_OR_RETURN(v1::StageResult est, Estimate(a, sub, c, id));
    if (!o.json) ResultRow(o.out, est);
    ASSIGN_OR_RETURN(v1::StageResult ev, Evaluate(a, sub, c, est.id()));
    if (o.json) {
      v1::ListResultsResponse both;
      *both.add_results() = est;
      *both.add_results() = ev;
      o.Json(both);
    } else {
      ResultRow(o.out, ev);
    }
    return absl::OkStatus();
  }
  if (sub == "estimate") {
    ASSIGN_OR_RETURN(v1::StageResult r, Estimate(a, sub, c, id));
    PrintResult(o, r);
    return absl::OkStatus();
  }
  if (sub == "evaluate") {
    ASSIGN_OR_RETURN(v1::StageResult r, Evaluate(a, sub, c, id));
    PrintResult(o, r);
    return absl::OkStatus();
  }
  if (sub == "propagate") {
    v1::PropagateRequest req;
    req.set_input(id);
    req.set_method(a.Get("method").value_or("ppr"));
    ASSIGN_OR_RETURN(auto alpha, a.GetDouble("alpha"));
    if (alpha) req.set_alpha(*alpha);
    ASSIGN_OR_RETURN(auto steps, a.GetUint("steps"));
    if (steps) req.set_steps(static_cast<uint32_t>(*steps));
    req.set_graph_campaign_id(a.Get("graph-campaign").value_or(""));
    ASSIGN_OR_RETURN(*req.mutable_blink_variant(), BlinkVariantFromFlags(a));
    grpc::ClientContext ctx;
    c.Prepare(&ctx);
    v1::StageResult out;
    RETURN_IF_ERROR(FromGrpc(c.stub->Propagate(&ctx, req, &out), c.address));
    PrintResult(o, out);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "pipeline: unknown subcommand '", sub,
      "' (run, estimate, propagate, evaluate)"));
}

// The request of `release create`, from the flags alone (checked before
// any connection, so a usage error says what is wrong with the command).
absl::StatusOr<v1::ReleaseRequest> ReleaseRequestFromFlags(const CliArgs& a) {
  if (!a.Has("method")) {
    return absl::InvalidArgumentError(
        "release create needs --method se-privgemb or dpne");
  }
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  if (!eps) return absl::InvalidArgumentError("release create needs --epsilon");
  v1::ReleaseRequest req;
  ASSIGN_OR_RETURN(
      const pipeline::Method method,
      pipeline::kMethodNames.Parse(
          *a.Get("method"), "--method",
          {v1::PIPELINE_METHOD_SE_PRIVGEMB, v1::PIPELINE_METHOD_DPNE}));
  req.set_pipeline_method(method);
  req.set_epsilon(*eps);
  req.set_graph_campaign_id(a.Get("graph-campaign").value_or(""));
  ASSIGN_OR_RETURN(*req.mutable_blink_variant(), BlinkVariantFromFlags(a));
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  req.set_seed(seed.value_or(1));
  ASSIGN_OR_RETURN(auto dim, a.GetUint("dim"));
  if (dim) req.set_dim(static_cast<uint32_t>(*dim));
  ASSIGN_OR_RETURN(auto sigma, a.GetDouble("noise-multiplier"));
  if (sigma) req.set_noise_multiplier(*sigma);
  ASSIGN_OR_RETURN(auto epochs, a.GetUint("max-epochs"));
  if (epochs) req.set_max_epochs(static_cast<uint32_t>(*epochs));
  ASSIGN_OR_RETURN(auto batch, a.GetUint("batch"));
  if (batch) req.set_batch_size(static_cast<uint32_t>(*batch));
  req.set_proximity(a.Get("proximity").value_or(""));
  return req;
}

absl::Status Release(const std::string& sub, const CliArgs& a,
                     const Connection& c, const Output& o) {
  if (sub == "ledger") {
    grpc::ClientContext ctx;
    c.Prepare(&ctx);
    v1::ReleaseLedger out;
    RETURN_IF_ERROR(FromGrpc(c.stub->GetReleaseLedger(
                                 &ctx, v1::GetReleaseLedgerRequest(), &out),
                             c.address));
    if (o.json) {
      o.Json(out);
      return absl::OkStatus();
    }
    o.out << absl::StrFormat("cap epsilon %g per graph, at delta %g\n",
                             out.epsilon_cap(), out.delta());
    o.out << absl::StrFormat("%-18s %-9s %-10s %-12s %s\n", "graph",
                             "releases", "epsilon", "sum of eps", "results");
    for (const auto& g : out.graphs()) {
      o.out << absl::StrFormat("%-18s %-9d %-10.4g %-12.4g %s\n", g.graph(),
                               g.result_ids_size(), g.epsilon(),
                               g.epsilon_sum(),
                               absl::StrJoin(g.result_ids(), ","));
    }
    if (out.graphs_size() == 0) o.out << "(no releases yet)\n";
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(v1::ReleaseRequest req, ReleaseRequestFromFlags(a));
  o.err << "ldpctl: release " << pipeline::MethodName(req.pipeline_method())
        << " at epsilon " << req.epsilon() << " ..." << std::endl;
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::StageResult out;
  RETURN_IF_ERROR(FromGrpc(c.stub->Release(&ctx, req, &out), c.address));
  PrintResult(o, out);
  return absl::OkStatus();
}

absl::Status Export(const std::string& id, const CliArgs& a, const Connection& c,
                    const Output& o) {
  if (id.empty()) return absl::InvalidArgumentError("export needs a result id");
  if (!a.Has("out")) return absl::InvalidArgumentError("export needs --out FILE.npy");
  const std::string path = *a.Get("out");
  std::string ids_path = a.Get("ids").value_or("");
  if (ids_path.empty()) {
    absl::string_view stem(path);
    absl::ConsumeSuffix(&stem, ".npy");
    ids_path = absl::StrCat(stem, ".ids.npy");
  }
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::ExportEmbeddingsRequest req;
  req.set_result_id(id);
  auto reader = c.stub->ExportEmbeddings(&ctx, req);
  v1::EmbeddingChunk chunk;
  DenseMatrix m;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (first) {
      m = DenseMatrix(chunk.rows(), chunk.cols());
      first = false;
    }
    const size_t offset = size_t{chunk.first_row()} * chunk.cols();
    if (chunk.rows() != m.rows || chunk.cols() != m.cols ||
        offset + chunk.values_size() > m.data.size()) {
      ctx.TryCancel();
      return absl::DataLossError("export: a chunk disagrees with the matrix shape");
    }
    std::copy(chunk.values().begin(), chunk.values().end(),
              m.data.begin() + offset);
  }
  RETURN_IF_ERROR(FromGrpc(reader->Finish(), c.address));
  // Row i of a result is node i of the curator's graph.
  std::vector<int64_t> ids(m.rows);
  for (size_t i = 0; i < m.rows; ++i) ids[i] = static_cast<int64_t>(i);
  RETURN_IF_ERROR(WriteNpy(path, m));
  RETURN_IF_ERROR(WriteNpyInt64(ids_path, ids));
  o.err << "ldpctl: wrote " << m.rows << " x " << m.cols << " to " << path
        << " and the node ids to " << ids_path << "\n";
  return absl::OkStatus();
}

absl::Status Audit(const CliArgs& a, const Connection& c, const Output& o) {
  v1::ListAuditRequest req;
  ASSIGN_OR_RETURN(auto after, a.GetUint("after"));
  req.set_after_sequence(after.value_or(0));
  ASSIGN_OR_RETURN(auto limit, a.GetUint("limit"));
  req.set_limit(static_cast<uint32_t>(limit.value_or(1000)));
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::ListAuditResponse out;
  RETURN_IF_ERROR(FromGrpc(c.stub->ListAudit(&ctx, req, &out), c.address));
  if (o.json) {
    o.Json(out);
    return absl::OkStatus();
  }
  for (const auto& e : out.entries()) {
    o.out << absl::StrFormat(
        "%6u %s %-16s %-16s %s\n", e.sequence(),
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(e.unix_ms()),
                         absl::UTCTimeZone()),
        e.actor(), e.action(), e.details_json());
  }
  return absl::OkStatus();
}

absl::Status Credentials(const CliArgs& a, const Output& o) {
  if (!a.Has("node-key") || !a.Has("nodes")) {
    return absl::InvalidArgumentError(
        "credentials needs --node-key FILE and --nodes A-B");
  }
  ASSIGN_OR_RETURN(std::string key, curator::ReadHexSecretFile(*a.Get("node-key")));
  ASSIGN_OR_RETURN(auto range, ParseNodeRange(*a.Get("nodes"), "nodes"));
  const std::string text =
      curator::CredentialsFileText(key, range.first, range.second);
  if (!a.Has("out")) {
    o.out << text;
    return absl::OkStatus();
  }
  const std::string path = *a.Get("out");
  RETURN_IF_ERROR(WriteNewFile(path, text, 0600));
  o.err << "ldpctl: wrote " << range.second - range.first << " credentials to "
        << path << "\n";
  return absl::OkStatus();
}

absl::Status Secrets(const CliArgs& a, const Output& o) {
  if (!a.Has("out")) return absl::InvalidArgumentError("secrets needs --out DIR");
  if (a.Has("dataset") == a.Has("nodes")) {
    return absl::InvalidArgumentError(
        "give the nodes to issue credentials for: --dataset DIR or --nodes A-B");
  }
  const std::string dir = *a.Get("out");
  if (a.Flag("keep-existing") && fs::exists(dir + "/node.key")) {
    o.err << "ldpctl: " << dir << " already holds a deployment's secrets; kept\n";
    return absl::OkStatus();
  }
  std::pair<uint32_t, uint32_t> range;
  if (a.Has("dataset")) {
    ASSIGN_OR_RETURN(DatasetMeta meta, LoadDatasetMeta(*a.Get("dataset")));
    range = {0, static_cast<uint32_t>(meta.nodes)};
  } else {
    ASSIGN_OR_RETURN(range, ParseNodeRange(*a.Get("nodes"), "nodes"));
  }
  std::vector<std::string> names = {"localhost", "127.0.0.1"};
  if (a.Has("tls-names")) {
    names = absl::StrSplit(*a.Get("tls-names"), ',', absl::SkipEmpty());
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  for (const char* f : {"node.key", "admin.token", "ca.pem"}) {
    if (fs::exists(fs::path(dir) / f)) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, " already holds ", f, ": give a new folder, or --keep-existing "
          "to keep what is there"));
    }
  }
  ASSIGN_OR_RETURN(DevTlsMaterial m, MakeDevTlsMaterial(names));
  ASSIGN_OR_RETURN(std::string token, NewSecretHex());
  ASSIGN_OR_RETURN(std::string node_key, NewSecretHex());
  ASSIGN_OR_RETURN(std::string raw_key, curator::FromHex(node_key));
  // node.key last: --keep-existing takes its presence for a finished run.
  RETURN_IF_ERROR(WriteDevTlsMaterial(m, dir));
  RETURN_IF_ERROR(WriteNewFile(dir + "/admin.token", token + "\n", 0600));
  RETURN_IF_ERROR(WriteNewFile(
      dir + "/nodes.credentials",
      curator::CredentialsFileText(raw_key, range.first, range.second), 0600));
  RETURN_IF_ERROR(WriteNewFile(dir + "/node.key", node_key + "\n", 0600));
  o.err << "ldpctl: wrote a development CA, a curator certificate for "
        << absl::StrJoin(names, ",") << ", an admin token, a node key and "
        << range.second - range.first << " node credentials to " << dir << "\n";
  return absl::OkStatus();
}

// One connected or offline admin command, args already split.
absl::Status RunAdmin(const std::string& command, const std::string& sub,
                      const std::string& id, const CliArgs& a, const Output& o) {
  if (command == "credentials") return Credentials(a, o);
  if (command == "secrets") return Secrets(a, o);
  if (command == "release") {
    // Usage errors before any connection setting is looked at.
    if (sub != "create" && sub != "ledger") {
      return absl::InvalidArgumentError(absl::StrCat(
          "release: unknown subcommand '", sub, "' (create, ledger)"));
    }
    if (sub == "create") RETURN_IF_ERROR(ReleaseRequestFromFlags(a).status());
  }
  if (command == "pipeline" && (sub == "run" || sub == "evaluate")) {
    RETURN_IF_ERROR(EvaluateRequestFromFlags(a, sub, id).status());
  }
  if (command == "pipeline" && sub == "estimate") {
    RETURN_IF_ERROR(EstimateRequestFromFlags(a, sub, id).status());
  }
  if (command == "pipeline" && sub == "propagate") {
    RETURN_IF_ERROR(BlinkVariantFromFlags(a).status());
  }
  ASSIGN_OR_RETURN(ConnectionSettings settings, ResolveConnection(a));
  const Connection c = Connect(settings);
  if (command == "status") return Status(c, o);
  if (command == "campaign") {
    if (sub == "create") return CreateCampaign(a, c, o);
    if (sub == "list") {
      grpc::ClientContext ctx;
      c.Prepare(&ctx);
      v1::ListCampaignsResponse out;
      RETURN_IF_ERROR(FromGrpc(
          c.stub->ListCampaigns(&ctx, v1::ListCampaignsRequest(), &out), c.address));
      if (o.json) {
        o.Json(out);
      } else {
        CampaignHeader(o.out);
        for (const auto& x : out.campaigns()) CampaignRow(o.out, x);
      }
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
    grpc::ClientContext ctx;
    c.Prepare(&ctx);
    if (sub == "close") {
      v1::CloseCampaignRequest req;
      req.set_campaign_id(id);
      v1::Campaign out;
      RETURN_IF_ERROR(FromGrpc(c.stub->CloseCampaign(&ctx, req, &out), c.address));
      PrintCampaign(o, out);
      return absl::OkStatus();
    }
    v1::ListRefusalsRequest req;
    req.set_campaign_id(id);
    v1::ListRefusalsResponse out;
    RETURN_IF_ERROR(FromGrpc(c.stub->ListRefusals(&ctx, req, &out), c.address));
    if (o.json) {
      o.Json(out);
      return absl::OkStatus();
    }
    o.out << absl::StrFormat("%-8s %-18s %s\n", "node", "reason", "message");
    for (const auto& r : out.refusals()) {
      o.out << absl::StrFormat(
          "%-8u %-18s %s\n", r.node_id(),
          Short(v1::RefusalReason_Name(r.reason()), "REFUSAL_REASON_",
                r.reason()),
          r.message());
    }
    return absl::OkStatus();
  }
  if (command == "budget") {
    if (sub != "show") {
      return absl::InvalidArgumentError(
          absl::StrCat("budget: unknown subcommand '", sub, "' (show)"));
    }
    return BudgetShow(a, c, o);
  }
  if (command == "pipeline") return Pipeline(sub, id, a, c, o);
  if (command == "results") {
    grpc::ClientContext ctx;
    c.Prepare(&ctx);
    v1::ListResultsResponse out;
    RETURN_IF_ERROR(FromGrpc(
        c.stub->ListResults(&ctx, v1::ListResultsRequest(), &out), c.address));
    if (o.json) {
      o.Json(out);
    } else {
      for (const auto& r : out.results()) ResultRow(o.out, r);
    }
    return absl::OkStatus();
  }
  if (command == "export") return Export(id, a, c, o);
  if (command == "release") return Release(sub, a, c, o);
  if (command == "audit") return Audit(a, c, o);
  return absl::InvalidArgumentError(absl::StrCat("unknown command '", command, "'"));
}

const std::set<std::string>& CommandsWithSub() {
  static const auto* s = new std::set<std::string>{"campaign", "budget", "pipeline",
                                                   "release"};
  return *s;
}

const std::set<std::string>& KnownCommands() {
  static const auto* s = new std::set<std::string>{
      "simulate", "run", "secrets", "status", "campaign", "budget", "pipeline", "release", "results",
      "export", "audit", "credentials"};
  return *s;
}

}  // namespace

std::string LdpctlHelp(const std::string& command) {
  if (command.empty()) return kOverview;
  if (command == "simulate") return SimulateHelp();
  if (command == "run") return RunHelp();
  for (const auto& h : kHelp) {
    if (command == h.name) return h.text;
  }
  return "";
}

int RunLdpctl(const std::vector<std::string>& all_args,
              const std::string& self_path, std::ostream& out,
              std::ostream& err) {
  std::vector<std::string> args = all_args;
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (args.size() >= 2 && !LdpctlHelp(args[1]).empty()) {
      out << LdpctlHelp(args[1]);
      return kExitOk;
    }
    out << kOverview;
    return args.empty() ? kExitUsage : kExitOk;
  }
  // Connection flags may come before the command (ldpctl --config F status):
  // they move behind it.
  std::vector<std::string> leading;
  while (!args.empty() && args[0].rfind("--", 0) == 0 && args[0] != "--help") {
    const std::string flag = args[0].substr(2);
    const bool takes_value =
        flag.find('=') == std::string::npos &&
        std::any_of(std::begin(kConnectionValueFlags), std::end(kConnectionValueFlags),
                    [&](const char* f) { return flag == f; });
    const size_t n = takes_value && args.size() >= 2 ? 2 : 1;
    leading.insert(leading.end(), args.begin(), args.begin() + n);
    args.erase(args.begin(), args.begin() + n);
  }
  if (args.empty()) {
    err << "ldpctl: no command after the flags. Run ldpctl --help for the commands.\n";
    return kExitUsage;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  args.insert(args.end(), leading.begin(), leading.end());
  if (KnownCommands().count(command) == 0) {
    err << "ldpctl: unknown command '" << command
        << "'. Run ldpctl --help for the commands.\n";
    return kExitUsage;
  }
  if (WantsHelp(args)) {
    out << LdpctlHelp(command);
    return kExitOk;
  }
  if (command == "simulate") return RunSimulate(args, self_path, out, err);
  if (command == "run") return RunAttached(args, out, err);
  std::string sub, id;
  if (CommandsWithSub().count(command) > 0) {
    if (args.empty() || args[0].rfind("--", 0) == 0) {
      err << "ldpctl: " << command << " needs a subcommand. Run ldpctl "
          << command << " --help.\n";
      return kExitUsage;
    }
    sub = args[0];
    args.erase(args.begin());
  }
  if (!args.empty() && args[0].rfind("--", 0) != 0) {
    id = args[0];
    args.erase(args.begin());
  }
  std::set<std::string> value_flags = CommandValueFlags();
  for (const char* f : kConnectionValueFlags) value_flags.insert(f);
  auto parsed = CliArgs::Parse(args, value_flags,
                               {"insecure", "json", "per-node", "keep-existing"});
  const std::string name = absl::StrCat(command, sub.empty() ? "" : " ", sub);
  if (!parsed.ok()) {
    err << "ldpctl " << name << ": " << parsed.status().message()
        << "\nRun ldpctl " << command << " --help for its flags.\n";
    return kExitUsage;
  }
  Output o{out, err};
  const std::string format = parsed->Get("format").value_or(
      parsed->Flag("json") ? "json" : "table");
  if (format != "table" && format != "json") {
    err << "ldpctl " << name << ": --format must be table or json, got '"
        << format << "'\n";
    return kExitUsage;
  }
  o.json = format == "json";
  absl::Status s = RunAdmin(command, sub, id, *parsed, o);
  if (!s.ok()) {
    err << "ldpctl " << name << ": " << absl::StatusCodeToString(s.code())
        << ": " << s.message() << "\n";
  }
  return ExitCodeOf(s);
}

}  // namespace ldpgraph::ldpctl

// The flags of `ldpctl simulate` and `ldpctl run`: parsing and validation
// into Options, one function per group of flags (the data and pipeline,
// the graph, the processes, the scenarios, the network, the attacker), and
// the pipeline configuration the options select
// (internal/simulate_options.h). The help texts are in simulate.cc.
#include "server/ldpctl/internal/simulate_options.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/status_macros.h"

namespace ldpgraph::ldpctl::internal {
namespace {

namespace fs = std::filesystem;

// A campaign's deadline under --dropout when neither --quorum below 1 nor
// --campaign-deadline says when to stop waiting for the silent nodes.
constexpr double kDropoutDeadlineSeconds = 30;

// --edges blink's --blink-delta and --blink-variant (after --edge-epsilon).
absl::Status ParseBlinkFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  for (const char* flag : {"blink-delta", "blink-variant"}) {
    if (a.Has(flag) && o.edges != "blink") {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " applies to --edges blink"));
    }
  }
  ASSIGN_OR_RETURN(auto delta, a.GetDouble("blink-delta"));
  if (delta) o.blink_delta = *delta;
  if (a.Has("blink-variant")) {
    ASSIGN_OR_RETURN(o.blink_variant,
                     edges::kBlinkVariantNames.Parse(*a.Get("blink-variant"),
                                                     "--blink-variant"));
  }
  if (o.edges != "blink") return absl::OkStatus();
  return edges::BlinkParams{.epsilon = o.edge_epsilon, .delta = o.blink_delta}
      .Validate();
}

// --edges and the edge mechanism's --edge-epsilon, --round-timeout-ms and
// Blink's flags.
absl::Status ParseEdgeFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  o.edges = a.Get("edges").value_or("none");
  if (o.edges != "none" && o.edges != "rr" && o.edges != "blink" &&
      o.edges != "ns1" && o.edges != "ns2") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--edges must be none, rr, blink, ns1 or ns2, got '", o.edges, "'"));
  }
  ASSIGN_OR_RETURN(auto edge_eps, a.GetDouble("edge-epsilon"));
  if (edge_eps) {
    if (o.edges == "none") {
      return absl::InvalidArgumentError(
          "--edge-epsilon applies to --edges rr, blink, ns1 or ns2");
    }
    o.edge_epsilon = *edge_eps;
  }
  RETURN_IF_ERROR(ParseBlinkFlags(a, options));
  ASSIGN_OR_RETURN(auto round_timeout, a.GetUint("round-timeout-ms"));
  if (round_timeout) {
    if (o.edges != "ns1" && o.edges != "ns2") {
      return absl::InvalidArgumentError(
          "--round-timeout-ms applies to --edges ns1 or ns2");
    }
    o.round_timeout_ms = static_cast<uint32_t>(*round_timeout);
  }
  return absl::OkStatus();
}

// The deployment's size: --hosts and --cap.
absl::Status ParseHostFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  ASSIGN_OR_RETURN(auto hosts, a.GetInt("hosts"));
  if (hosts) {
    if (*hosts < 1 || *hosts > 256) {
      return absl::InvalidArgumentError("--hosts must be in [1, 256]");
    }
    o.hosts = static_cast<int>(*hosts);
  }
  ASSIGN_OR_RETURN(auto cap, a.GetDouble("cap"));
  if (cap) {
    // The agent hosts refuse such a cap at start-up: say so here, before any
    // process starts, rather than as an agent host's exit.
    if (*cap <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cap must be > 0, got ", *cap,
          " (each node's total epsilon: a node with none can answer nothing)"));
    }
    o.cap = *cap;
  }
  return absl::OkStatus();
}

// The curator's side: --store, --frontends, --frontend-kills, --edge,
// --database-restarts and --operator-kills.
absl::Status ParseStoreFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  o.store = a.Get("store").value_or("sqlite");
  if (o.store != "sqlite" && o.store != "postgres") {
    return absl::InvalidArgumentError(
        absl::StrCat("--store must be sqlite or postgres, got '", o.store, "'"));
  }
  ASSIGN_OR_RETURN(auto frontends, a.GetInt("frontends"));
  if (frontends) {
    if (*frontends < 0 || *frontends > 64) {
      return absl::InvalidArgumentError("--frontends must be in [0, 64]");
    }
    if (o.store != "postgres" && *frontends > 0) {
      return absl::InvalidArgumentError(
          "--frontends needs --store postgres (frontends share its database)");
    }
    o.frontends = static_cast<int>(*frontends);
  }
  ASSIGN_OR_RETURN(auto kills, a.GetInt("frontend-kills"));
  if (kills) {
    if (*kills < 0 || *kills > 1000 || (*kills > 0 && o.frontends < 2)) {
      return absl::InvalidArgumentError(
          "--frontend-kills must be in [0, 1000], with --frontends 2 or more "
          "(the agents need a live one to move to)");
    }
    o.frontend_kills = static_cast<int>(*kills);
  }
  o.edge = a.Flag("edge");
  ASSIGN_OR_RETURN(auto restarts, a.GetInt("database-restarts"));
  if (restarts) {
    if (*restarts < 0 || *restarts > 100 ||
        (*restarts > 0 && o.store != "postgres")) {
      return absl::InvalidArgumentError(
          "--database-restarts must be in [0, 100], with --store postgres");
    }
    o.database_restarts = static_cast<int>(*restarts);
  }
  ASSIGN_OR_RETURN(auto operator_kills, a.GetInt("operator-kills"));
  if (operator_kills) {
    if (*operator_kills < 0 || *operator_kills > 100 ||
        (*operator_kills > 0 && o.frontends < 1)) {
      return absl::InvalidArgumentError(
          "--operator-kills must be in [0, 100], with --store postgres and "
          "--frontends 1 or more (an operator and a standby beside them)");
    }
    o.operator_kills = static_cast<int>(*operator_kills);
  }
  return absl::OkStatus();
}

// How the run goes and reports: --sync, --threads, --timeout, --bin-dir,
// --work-dir, --keep, --keep-running, --format.
absl::Status ParseRunFlags(const CliArgs& a, const std::string& self_path,
                           Options* options) {
  Options& o = *options;
  o.sync = a.Get("sync").value_or("full");
  if (o.sync != "full" && o.sync != "normal") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync must be full or normal, got '", o.sync, "'"));
  }
  ASSIGN_OR_RETURN(auto threads, a.GetInt("threads"));
  if (threads) {
    if (*threads < 0 || *threads > 4096) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--threads must be in [0, 4096] (0 = every core), got ", *threads));
    }
    o.threads = static_cast<int>(*threads);
  }
  ASSIGN_OR_RETURN(auto timeout, a.GetDouble("timeout"));
  if (timeout) {
    if (*timeout <= 0) return absl::InvalidArgumentError("--timeout must be > 0");
    o.timeout_s = *timeout;
  }
  o.bin_dir = a.Get("bin-dir").value_or(fs::path(self_path).parent_path().string());
  o.work_dir = a.Get("work-dir").value_or("");
  o.keep = a.Flag("keep");
  o.keep_running = a.Flag("keep-running");
  const std::string format = a.Get("format").value_or(a.Flag("json") ? "json" : "table");
  if (format != "table" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format must be table or json, got '", format, "'"));
  }
  o.json = format == "json";
  return absl::OkStatus();
}

// The deployment's processes and output: ParseHostFlags, ParseStoreFlags,
// ParseRunFlags, in this order.
absl::Status ParseProcessFlags(const CliArgs& a, const std::string& self_path,
                               Options* options) {
  RETURN_IF_ERROR(ParseHostFlags(a, options));
  RETURN_IF_ERROR(ParseStoreFlags(a, options));
  return ParseRunFlags(a, self_path, options);
}

// --churn and --churn-down.
absl::Status ParseChurnFlags(const CliArgs& a, Options* options) {
  ASSIGN_OR_RETURN(auto churn, a.GetDouble("churn"));
  if (churn) {
    if (!(*churn >= 0 && *churn <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--churn must be in [0, 1], got ", *churn));
    }
    options->churn = *churn;
    options->churn_on = true;
  }
  ASSIGN_OR_RETURN(auto down, a.GetDouble("churn-down"));
  if (down) {
    if (!(*down >= 0 && *down < options->timeout_s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--churn-down must be >= 0 seconds and below --timeout, got ", *down));
    }
    if (!options->churn_on) {
      return absl::InvalidArgumentError("--churn-down applies to --churn F");
    }
    options->churn_down_s = *down;
  }
  ASSIGN_OR_RETURN(auto batch, a.GetInt("churn-batch"));
  if (batch) {
    if (*batch < 1 || *batch > 65536 ||
        !(options->churn_on || options->server_faults())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--churn-batch must be in [1, 65536], with --churn, "
          "--frontend-kills, --database-restarts or --operator-kills; got ",
          *batch));
    }
    options->churn_batch = static_cast<int>(*batch);
  }
  return absl::OkStatus();
}

// --dropout, --quorum and --campaign-deadline (after --timeout: a deadline
// past it would never be reached).
absl::Status ParseScenarioFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  ASSIGN_OR_RETURN(auto dropout, a.GetDouble("dropout"));
  if (dropout) {
    if (!(*dropout >= 0 && *dropout < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dropout must be in [0, 1), got ", *dropout));
    }
    o.dropout = *dropout;
  }
  ASSIGN_OR_RETURN(auto quorum, a.GetDouble("quorum"));
  if (quorum) {
    if (!(*quorum > 0 && *quorum <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--quorum must be in (0, 1], got ", *quorum));
    }
    o.quorum = *quorum;
  }
  ASSIGN_OR_RETURN(auto deadline, a.GetDouble("campaign-deadline"));
  if (deadline) {
    if (!(*deadline > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--campaign-deadline must be > 0 seconds, got ", *deadline));
    }
    o.deadline_s = *deadline;
  } else if (o.dropout > 0 && o.quorum >= 1.0) {
    // Nodes that never answer would hold every campaign open.
    o.deadline_s = kDropoutDeadlineSeconds;
  }
  if (o.deadline_s >= o.timeout_s) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--campaign-deadline (", o.deadline_s, " s) must be below --timeout (",
        o.timeout_s, " s)"));
  }
  return ParseChurnFlags(a, options);
}

// --latency, --jitter and --loss: the network scenario.
absl::Status ParseNetworkFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  ASSIGN_OR_RETURN(auto latency, a.GetDouble("latency"));
  ASSIGN_OR_RETURN(auto jitter, a.GetDouble("jitter"));
  ASSIGN_OR_RETURN(auto loss, a.GetDouble("loss"));
  constexpr double kMaxMs = 600000;  // ten minutes, one way
  for (const auto& [flag, v] :
       {std::pair{"--latency", latency}, std::pair{"--jitter", jitter}}) {
    if (v && !(*v >= 0 && *v <= kMaxMs)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " must be in [0, ", kMaxMs, "] milliseconds, got ", *v));
    }
  }
  if (loss && !(*loss >= 0 && *loss < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--loss must be in [0, 1), got ", *loss));
  }
  o.latency_ms = latency.value_or(0);
  o.jitter_ms = jitter.value_or(0);
  o.loss = loss.value_or(0);
  if (o.edge && (o.latency_ms > 0 || o.jitter_ms > 0 || o.loss > 0)) {
    return absl::InvalidArgumentError(
        "--edge with --latency, --jitter or --loss: the network scenario puts "
        "a proxy per host in front of the curator, where the edge is; choose "
        "one");
  }
  return absl::OkStatus();
}

// --malicious, --attack, --attack-class, --attack-dims and --attack-edges
// (after the edge flags).
absl::Status ParseAttackFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  ASSIGN_OR_RETURN(o.malicious, a.GetDouble("malicious"));
  ASSIGN_OR_RETURN(auto cls, a.GetInt("attack-class"));
  ASSIGN_OR_RETURN(auto dims, a.GetInt("attack-dims"));
  if (!o.malicious) {
    for (const char* flag :
         {"attack", "attack-class", "attack-dims", "attack-edges"}) {
      if (a.Has(flag)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " applies to --malicious F"));
      }
    }
    return absl::OkStatus();
  }
  if (auto kind = a.Get("attack")) {
    ASSIGN_OR_RETURN(o.attack_kind,
                     poisoning::kAttackNames.Parse(*kind, "--attack"));
  }
  const bool fake_edges = o.attack_kind == poisoning::AttackKind::kFakeEdges;
  if (fake_edges && o.edges != "rr" && o.edges != "blink") {
    return absl::InvalidArgumentError(
        "--attack fake-edges crafts edge reports: it needs --edges rr or "
        "blink");
  }
  ASSIGN_OR_RETURN(auto victims, a.GetInt("attack-edges"));
  if (victims) {
    if (!fake_edges) {
      return absl::InvalidArgumentError(
          "--attack-edges applies to --attack fake-edges (with --malicious F)");
    }
    if (*victims < 1 || *victims > 1 << 30) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-edges must be >= 1, got ", *victims));
    }
    o.attack_edges = static_cast<int>(*victims);
  }
  if (cls) o.attack_class = static_cast<int>(std::clamp<int64_t>(*cls, -1, 1 << 30));
  if (dims) o.attack_dims = static_cast<int>(std::clamp<int64_t>(*dims, 0, 1 << 30));
  absl::Status s = poisoning::AttackSettings{*o.malicious, o.attack_class,
                                             o.attack_dims, o.attack_kind}
                       .Validate();
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--malicious: ", s.message()));
  }
  return absl::OkStatus();
}

// The flags `ldpctl simulate` (or with attach, `ldpctl run`) accepts:
// the value flags into *values, the others into *flags.
void AcceptedFlags(bool attach, std::set<std::string>* values,
                   std::set<std::string>* flags) {
  *values = {"dataset", "method", "task", "mechanism",
             "epsilon", "sampled", "label-epsilon", "seed",
             "timeout", "format", "edges", "edge-epsilon",
             "blink-delta", "blink-variant",
             "round-timeout-ms", "quorum",
             "campaign-deadline", "defence",
             "screen-alpha", "baselines"};
  *flags = {"json"};
  if (attach) {
    for (const char* f : kConnectionValueFlags) values->insert(f);
    flags->insert("insecure");
  } else {
    values->insert(
        {"nodes", "hosts", "cap", "sync", "bin-dir", "work-dir", "threads",
         "dropout", "latency", "jitter", "loss", "churn", "churn-down",
         "churn-batch", "malicious", "attack", "attack-class", "attack-dims",
         "attack-edges", "store",
         "frontends", "frontend-kills", "database-restarts",
         "operator-kills"});
    flags->insert({"keep", "keep-running", "edge"});
  }
}

// The data: with o->attach the connection settings (ResolveConnection) and
// the required --dataset; --dataset, or --nodes for the generated one.
absl::Status ParseDataFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  if (o.attach) {
    ASSIGN_OR_RETURN(o.connection, ResolveConnection(a));
    if (!a.Has("dataset")) {
      return absl::InvalidArgumentError(
          "--dataset DIR is required: the deployment's dataset folder, whose "
          "meta.json gives the feature count, classes and public range");
    }
  }
  o.dataset_dir = a.Get("dataset").value_or("");
  ASSIGN_OR_RETURN(auto nodes, a.GetUint("nodes"));
  if (nodes) {
    if (!o.dataset_dir.empty()) {
      return absl::InvalidArgumentError(
          "--nodes sizes the generated dataset; it does not apply to --dataset");
    }
    o.generated_nodes = *nodes;
  }
  return absl::OkStatus();
}

// The pipeline: --method, --task, --mechanism, --epsilon, --sampled and
// --label-epsilon.
absl::Status ParsePipelineFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  if (auto m = a.Get("method")) {
    ASSIGN_OR_RETURN(
        o.method, pipeline::kMethodNames.Parse(
                      *m, "--method",
                      {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN,
                       v1::PIPELINE_METHOD_UPGNET}));
  }
  if (auto t = a.Get("task")) {
    ASSIGN_OR_RETURN(o.task, pipeline::kTaskNames.Parse(*t, "--task"));
  }
  o.mechanism = a.Get("mechanism").value_or("");
  if (o.mechanism == "none") {
    return absl::InvalidArgumentError(
        "--mechanism none would send raw features: an LDP deployment never "
        "does (ldpgraph eval --mechanism none gives the non-private baseline)");
  }
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  if (eps) o.epsilon = *eps;
  ASSIGN_OR_RETURN(auto sampled, a.GetInt("sampled"));
  if (sampled) o.sampled = static_cast<int>(*sampled);
  ASSIGN_OR_RETURN(o.label_epsilon, a.GetDouble("label-epsilon"));
  return absl::OkStatus();
}

// --defence, --screen-alpha and --baselines (after the task and the edge
// flags they are checked against).
absl::Status ParseDefenceAndBaselineFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  RETURN_IF_ERROR(pipeline::ParseDefenceFlags(a, &o.defences, &o.screen_alpha));
  if (auto list = a.Get("baselines")) {
    o.baselines_given = true;
    ASSIGN_OR_RETURN(o.baselines,
                     pipeline::ParseDeployedBaselines(*list, "--baselines"));
  }
  if (o.task != v1::PIPELINE_TASK_NODE) {
    if (a.Get("baselines") && !o.baselines.empty()) {
      return absl::InvalidArgumentError(
          "--baselines applies to the node task");
    }
    o.baselines.clear();
  }
  if (o.defences.edge_consistency && o.edges != "rr" && o.edges != "blink") {
    return absl::InvalidArgumentError(
        "--defence edge-consistency screens edge reports: it needs --edges "
        "rr or blink");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args,
                                     const std::string& self_path, bool attach) {
  std::set<std::string> values, flags;
  AcceptedFlags(attach, &values, &flags);
  ASSIGN_OR_RETURN(CliArgs a, CliArgs::Parse(args, values, flags));
  Options o;
  o.attach = attach;
  RETURN_IF_ERROR(ParseDataFlags(a, &o));
  RETURN_IF_ERROR(ParsePipelineFlags(a, &o));
  RETURN_IF_ERROR(ParseEdgeFlags(a, &o));
  ASSIGN_OR_RETURN(o.seed, a.GetUint("seed"));
  RETURN_IF_ERROR(ParseProcessFlags(a, self_path, &o));
  RETURN_IF_ERROR(ParseScenarioFlags(a, &o));
  if (!attach) RETURN_IF_ERROR(ParseNetworkFlags(a, &o));
  if (o.network() && o.frontends > 0) {
    return absl::InvalidArgumentError(
        "--latency, --jitter and --loss put one proxy per host in front of "
        "one curator; they do not combine with --frontends");
  }
  RETURN_IF_ERROR(ParseAttackFlags(a, &o));
  RETURN_IF_ERROR(ParseDefenceAndBaselineFlags(a, &o));
  return o;
}

// The library's configuration of the run the deployment performs: what
// `ldpgraph eval` would use with the same flags.
absl::StatusOr<pipeline::PipelineConfig> ConfigOf(const Options& o) {
  pipeline::PipelineConfig c = pipeline::DefaultConfig(o.method, o.task);
  if (!o.mechanism.empty()) c.mechanism = o.mechanism;
  c.epsilon = o.epsilon;
  if (o.sampled) c.sampled = o.sampled;
  c.label_epsilon = o.label_epsilon;
  c.secure_noise = !o.seed.has_value();
  c.threads = o.threads;
  if (o.malicious) {
    c.attack_fraction = *o.malicious;
    c.attack_class = o.attack_class;
    c.attack_dims = o.attack_dims;
    c.attack_kind = o.attack_kind;
  }
  c.defences = o.defences;
  c.screen_alpha = o.screen_alpha;
  RETURN_IF_ERROR(pipeline::ValidateConfig(c));
  return c;
}

}  // namespace ldpgraph::ldpctl::internal

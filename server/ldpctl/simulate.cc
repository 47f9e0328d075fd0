#include "server/ldpctl/simulate.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/attacks/edge_poisoning.h"
#include "common/attacks/poisoning.h"
#include "common/cli_args.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/dataset/prepare.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/hex.h"
#include "common/net/fault_proxy.h"
#include "common/random.h"
#include "common/seed_mix.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/ldpctl/churn.h"
#include "server/ldpctl/commands.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/dev_tls.h"
#include "server/ldpctl/process.h"
#include "server/pipeline/pipeline.h"
#include "server/store/local_postgres.h"
#include "server/store/store.h"

namespace ldpgraph::ldpctl {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kHelp[] = R"(ldpctl simulate: a whole LDP deployment on this machine, in one command

Usage: ldpctl simulate [--dataset DIR | --nodes N] [--hosts H] [flags]

Starts a curator (ldpgraph-curator) and H agent host processes
(ldpgraph-agent) on 127.0.0.1 with TLS from a throwaway CA, gives each host
a contiguous shard of the nodes, and runs the pipeline as an operator would:
every node enrols; a features campaign (then, with --label-epsilon, a label
campaign) collects perturbed reports through gRPC into the curator's
durable store; the curator estimates, propagates, trains and tests. Progress
goes to stderr; the results table (or --format json) to stdout: the metric,
epsilon spent per node, reports, bytes on the wire, seconds per stage. Every
process is stopped at the end, on failure and on Ctrl-C.

Data:
  --dataset DIR       a dataset folder (README "Datasets"), e.g.
                      ../shared/datasets/cora; default: the generated
                      default dataset (ldpgraph generate), written into the
                      work folder
  --nodes N           size of the generated dataset (default 3000)
Pipeline (the defaults of ldpgraph eval):
  --method M          privge (HDS, PPR, MLP; default) or lpgnn (Multi-bit,
                      KProp, GraphSAGE, LPGNN's published label denoising)
  --task T            node (classification, default) or link (prediction,
                      privge only)
  --mechanism M       the features mechanism (default: the method's)
  --epsilon E         features budget per node (default 1)
  --sampled K         k or m sampled dimensions (default: the mechanism's)
  --label-epsilon E   lpgnn: collect labels by randomized response with E
  --edges G           the graph the curator learns over: none (default: the
                      curator knows the graph), rr (edge randomized
                      response), blink (Blink: the bits and a noisy degree,
                      the graph estimated by Bayesian posteriors), ns1 or
                      ns2 (neighbour substitution, approach 1 or 2, the
                      agents exchanging sealed messages through the
                      curator's relay). With rr/blink/ns the curator
                      starts with --private-edges, an edges campaign runs
                      first (ns shares the features campaign's question, so
                      each node spends its feature epsilon once), and the
                      pipeline runs over the graph assembled from it.
                      --seed does not reach the exchange: its randomness
                      comes from each node's key (secure, not replayable)
  --edge-epsilon E    eps_e of the edges campaign (default 1; blink: each
                      node's total, bits and degree)
  --blink-delta D     blink: the degree's share of --edge-epsilon, in (0, 1)
                      (default 0.1)
  --blink-variant V   blink: the graph from the posteriors: hard (q > 1/2;
                      default), topk (the expected number of edges) or hybrid
                      (topk weighted by q; lpgnn only, PPR reads no
                      weights). Estimated over the nodes that reported: the
                      others (dropouts) are isolated in the graph
  --round-timeout-ms T  ns: a silent neighbour's timeout per round
                      (default 30000)
  --seed S            seeded noise: reproducible and NOT private; gives
                      exactly the metric of `ldpgraph eval --seed S --runs 1`
                      with the same flags. Without it, agents use OpenSSL's
                      generator and the split/model seed is 1.
Deployment:
  --hosts H           agent host processes (default 4)
  --cap E             each node's total budget cap, > 0 (default 8)
  --sync MODE         curator durability: full (default) or normal
  --threads N         threads the curator's pipeline stages compute on
                      (its --pipeline-threads); 0 (default) = every core.
                      Results do not depend on it
  --timeout S         longest wait for enrolment or a campaign (default 600)
  --bin-dir DIR       where ldpgraph-curator and ldpgraph-agent are
                      (default: beside ldpctl)
  --work-dir DIR      work folder, empty or new; kept afterwards (default: a
                      new one under $TMPDIR, removed at the end). It holds
                      the logs, certificates, stores and ldpctl.conf
  --keep              keep the default work folder (kept anyway on a failure
                      once processes have started)
  --keep-running      after the table, leave the deployment up for ldpctl
                      (ldpctl --config WORK/ldpctl.conf status) until Ctrl-C
  --format F          table (default) or json: one object with the fields of
                      `ldpgraph eval --format json` plus the deployment's

Scenarios (default: off):
  --dropout F         a fraction F in [0, 1) of the nodes never comes online:
                      each node on its own with probability F, drawn from
                      --seed (or 1) and its id. They never enrol nor answer;
                      the pipeline learns from the nodes that answered (a
                      silent node's estimated features are an empty row, and
                      a node without a label report is left out of the
                      training and validation sets)
  --quorum Q          a campaign closes once a fraction Q in (0, 1] of its
                      nodes answered (default 1)
  --campaign-deadline S  ... or S seconds after it opened (default: none;
                      30 with --dropout and --quorum 1)
  --latency MS        the network: each agent host reaches the curator
                      through its own fault-injecting TCP proxy on
                      127.0.0.1 that delays every chunk of bytes by MS
                      milliseconds each way (default 0: no proxy). A proxy
                      in user space, so no root nor netem; it forwards
                      bytes, so TLS stays end to end. The admin channel
                      stays direct
  --jitter MS         plus a uniform draw in [-MS, +MS] per chunk, clipped
                      at zero delay; bytes never reorder (default 0)
  --loss P            per-chunk probability P in [0, 1) of a lost segment:
                      TCP retransmits, so the chunk and everything behind it
                      stall one RTO, max(200 ms, 2 x latency + 4 x jitter)
                      (default 0). Delays are drawn from --seed (or 1) and
                      the host's index; they change when answers arrive,
                      never what they are
  --churn F           a fraction F in [0, 1] of the agent hosts (ceil(F x H),
                      drawn anew for every campaign from --seed or 1) is
                      killed with SIGKILL once in every campaign: when its
                      answers pass a fraction drawn in [0.1, 0.6] of its
                      nodes, or during a neighbour-substitution exchange
                      (--edges ns1/ns2), a delay drawn in [0.05, 0.5] s after
                      it opened. Each is restarted with the same arguments
                      and state folder (its log: agent-H.restart-K.log).
                      Reported under scenario.churn: kills and restarts; the
                      acknowledged reports lost (nodes the curator's store
                      held for the campaign just before a kill, missing from
                      it at the end); the epsilon spent beyond what the
                      campaigns asked, per the curator's ledger and per the
                      hosts' memos (agent.db). Default 0: off
  --churn-down S      seconds a killed host stays down (default 1)
  --store KIND        sqlite (default: the curator's embedded store) or
                      postgres: a PostgreSQL server started for the run
                      (initdb into WORK/postgres, as a non-root user, stopped
                      at the end), shared by the curator processes
  --frontends N       with --store postgres: N frontends serve the agents
                      (each host lists them all, starting at a different
                      one) and an operator serves ldpctl (default 0: one
                      curator of role all)
  --frontend-kills K  SIGKILL a frontend K times during the features
                      campaign (round robin, when its answers pass
                      k/(K+1) of the nodes), each restarted at once on its
                      port. Reported under scenario.frontend_kills as
                      --churn's: acknowledged reports lost, extra epsilon
                      (ledger, agents' memos). Hosts send --churn-batch
                      reports per batch
  --churn-batch N     under --churn the hosts send N reports per batch
                      (default 16; else 512), so that a kill lands between
                      batches as it would on a host whose nodes report one
                      by one. --churn 0 gives the baseline: no kill, the
                      same batches
  --malicious F       a fraction F in [0, 1) of the nodes is an attacker's
                      (drawn like --dropout from --seed or 1, independently;
                      a node both is offline): their agents send what
                      --attack says for their features (and, with
                      --label-epsilon, labels) through the same budget; the
                      table and JSON add target_rate, the test nodes of
                      other classes predicted --attack-class. Default: off.
                      Seeded, equal to `ldpgraph eval` with the same flags
                      but --edges (the agents' edge answers draw from their
                      own noise streams, not from those of eval's offline
                      edges campaign; so does fake-edges, which needs
                      --edges rr or blink and crafts them)
  --attack-class C    the class the attacker wants predicted (default 0)
  --attack-dims R     its target feature dimensions (default 10)
  --attack-edges V    --attack fake-edges: the victims each malicious node
                      claims an edge to (default 50)
)";
// After kHelp and the --attack text ldpgraph eval shares
// (poisoning::kAttackHelp): what simulate's adaptive attacker assumes.
constexpr char kAttackAlphaHelp[] =
    R"(                         (adaptive: the agents assume the screen's
                         --screen-alpha, or 1e-3 without the screen)
)";
// The rest of simulate's help, after the Defence section (SimulateHelp).
constexpr char kHelpTail[] = R"(On failure: once the curator or an agent host has started, the work folder
is kept and named (its logs say what went wrong). A run that fails or is
interrupted before that (the dataset, the binaries, the work folder) has no
log to read: what it wrote is removed, with the folder unless it existed
before, and the error names only the cause. --keep and --keep-running keep
the folder anyway.

Examples:
  ldpctl simulate
  ldpctl simulate --dataset ../shared/datasets/cora --hosts 4 --epsilon 1
  ldpctl simulate --method lpgnn --epsilon 2 --label-epsilon 1 --format json
  ldpctl simulate --task link --seed 7
  ldpctl simulate --nodes 100000 --hosts 4
  ldpctl simulate --method lpgnn --label-epsilon 1 --dropout 0.3 --campaign-deadline 10
  ldpctl simulate --hosts 4 --latency 200 --jitter 20 --loss 0.05
  ldpctl simulate --hosts 10 --churn 0.1 --dropout 0.3
  ldpctl simulate --store postgres --frontends 3 --frontend-kills 10
  ldpctl simulate --method lpgnn --epsilon 3 --label-epsilon 3 --malicious 0.1 --defence screen
  ldpctl simulate --method lpgnn --mechanism multibit --epsilon 2 --edges ns1 --edge-epsilon 1
)";

// Progress on stderr: one line rewritten in place on a terminal, a line
// per change of stage (and every few seconds) otherwise.
class Progress {
 public:
  explicit Progress(std::ostream& err)
      : err_(err), tty_(isatty(STDERR_FILENO) == 1), start_(absl::Now()) {}
  double elapsed() const { return absl::ToDoubleSeconds(absl::Now() - start_); }
  void Update(const std::string& stage, const std::string& detail) {
    const std::string line =
        absl::StrFormat("[%6.1fs] %s%s%s", elapsed(), stage,
                        detail.empty() ? "" : ": ", detail);
    if (tty_) {
      err_ << "\r\033[K" << line << std::flush;
      open_line_ = true;
      return;
    }
    if (stage != last_stage_ || absl::Now() - last_print_ > absl::Seconds(5)) {
      err_ << line << "\n" << std::flush;
      last_print_ = absl::Now();
      last_stage_ = stage;
    }
  }
  // Ends the stage with a final line.
  void Done(const std::string& stage, const std::string& detail) {
    if (tty_ && open_line_) err_ << "\r\033[K";
    err_ << absl::StrFormat("[%6.1fs] %s%s%s\n", elapsed(), stage,
                            detail.empty() ? "" : ": ", detail)
         << std::flush;
    open_line_ = false;
    last_stage_.clear();
  }
  void Note(const std::string& text) {
    if (tty_ && open_line_) err_ << "\r\033[K";
    err_ << text << "\n" << std::flush;
    open_line_ = false;
  }

 private:
  std::ostream& err_;
  const bool tty_;
  const absl::Time start_;
  bool open_line_ = false;
  std::string last_stage_;
  absl::Time last_print_ = absl::InfinitePast();
};

constexpr char kRunHelp[] = R"(ldpctl run: a campaign and the pipeline on a running deployment

Usage: ldpctl run --dataset DIR [connection flags] [flags]

What `ldpctl simulate` does once its processes are up, against a curator
and agent hosts started elsewhere (docker compose, Kubernetes, by hand):
waits until every node of the curator's graph is enrolled, runs a features
campaign (then, with --label-epsilon, a label campaign), estimates and
evaluates on the curator, and prints the same results table (or --format
json). It starts and stops nothing. The deployment's job in
docker-compose.yml and deploy/k8s runs it.

  --dataset DIR       the deployment's dataset folder; only its meta.json is
                      read (feature count, classes, public feature range)
  --method, --task, --mechanism, --epsilon, --sampled, --label-epsilon,
  --edges, --edge-epsilon, --blink-delta, --blink-variant, --round-timeout-ms:
                      as for ldpctl simulate (the curator's own graph is the
                      deployment's: --private-edges is its flag)
  --seed S            the split and model seed (default 1); the agents' noise
                      is theirs: seeded only if they were started with --seed
  --timeout S         longest wait for enrolment or a campaign (default 600)
  --quorum Q, --campaign-deadline S: when a campaign closes, as for ldpctl
                      simulate (hosts that never come online hold a quorum
                      of 1 open: give one of them)
  --format F          table (default) or json
Connection: --curator, --admin-token, --ca, --server-name, --insecure,
--config, as for every command against a curator (ldpctl --help).

Examples:
  ldpctl run --dataset /dataset --config ldpctl.conf
  LDPCTL_CURATOR=curator:7443 LDPCTL_CA=/secrets/ca.pem \
    LDPCTL_ADMIN_TOKEN_FILE=/secrets/admin.token ldpctl run --dataset /dataset
)";

// A campaign's deadline under --dropout when neither --quorum below 1 nor
// --campaign-deadline says when to stop waiting for the silent nodes.
constexpr double kDropoutDeadlineSeconds = 30;

struct Options {
  // ldpctl run: attach to a running deployment through `connection`
  // instead of starting one.
  bool attach = false;
  ConnectionSettings connection;
  std::string dataset_dir;  // empty: generate
  size_t generated_nodes = 3000;
  pipeline::Method method = v1::PIPELINE_METHOD_PRIVGE;
  pipeline::Task task = v1::PIPELINE_TASK_NODE;
  std::string mechanism;  // empty: the method's
  double epsilon = 1.0;
  std::optional<int> sampled;
  std::optional<double> label_epsilon;
  // The graph: "none" (the curator's), "rr", "blink", "ns1", "ns2".
  std::string edges = "none";
  double edge_epsilon = 1.0;
  // --edges blink: delta and the curator's variant.
  double blink_delta = edges::BlinkParams().delta;
  edges::BlinkVariant blink_variant = edges::BlinkVariant::kHard;
  uint32_t round_timeout_ms = edges::kDefaultRoundTimeoutMs;
  std::optional<uint64_t> seed;
  int hosts = 4;
  double cap = 8.0;
  std::string sync = "full";
  int threads = 0;  // the curator's pipeline threads; 0 = every core
  double timeout_s = 600;
  // Scenarios. dropout: the fraction of nodes whose agents never come
  // online; quorum and deadline_s: when a campaign closes without them.
  double dropout = 0;
  double quorum = 1.0;
  double deadline_s = 0;  // 0: no deadline
  // The network between agent hosts and curator (--latency, --jitter,
  // --loss); all zero: direct connections, no proxy.
  double latency_ms = 0;
  double jitter_ms = 0;
  double loss = 0;
  bool network() const { return latency_ms > 0 || jitter_ms > 0 || loss > 0; }
  // churn: the fraction of hosts killed and restarted in every campaign,
  // down churn_down_s seconds each time.
  bool churn_on = false;  // --churn given, even 0
  double churn = 0;
  double churn_down_s = 1;
  int churn_batch = 16;
  // The server side: "sqlite" (one curator, its embedded store) or
  // "postgres" (a local PostgreSQL server, an operator and `frontends`
  // frontends; none: one curator of role all on PostgreSQL), and SIGKILLs
  // of frontends during the features campaign.
  std::string store = "sqlite";
  int frontends = 0;
  int frontend_kills = 0;
  // Simulated poisoning (--malicious): unset is off.
  std::optional<double> malicious;
  int attack_class = 0;
  int attack_dims = 10;
  poisoning::AttackKind attack_kind = poisoning::AttackKind::kMaximalGain;
  int attack_edges = poisoning::kDefaultAttackEdges;  // fake-edges' victims
  // The curator's defences against poisoning (--defence, --screen-alpha):
  // the estimate stage's report screen, the evaluate stage's robust
  // retraining.
  pipeline::Defences defences;
  double screen_alpha = pipeline::kDefaultScreenAlpha;
  std::string bin_dir;
  std::string work_dir;
  bool keep = false;
  bool keep_running = false;
  bool json = false;
};

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

// The deployment's processes and output: --hosts, --cap, --sync, --threads,
// --timeout, --bin-dir, --work-dir, --keep, --keep-running, --format.
absl::Status ParseProcessFlags(const CliArgs& a, const std::string& self_path,
                               Options* options) {
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
        !(options->churn_on || options->frontend_kills > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--churn-batch must be in [1, 65536], with --churn or "
          "--frontend-kills; got ", *batch));
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

// --defence and --screen-alpha into the estimate request: the screen.
void SetDefence(const Options& o, v1::EstimateRequest* req) {
  if (!o.defences.screen) return;
  req->set_defence("screen");
  req->set_screen_alpha(o.screen_alpha);
}

// --defence into the evaluate request: the whole list, of which evaluate
// applies robust (screen there asserts that the estimate was screened).
void SetDefence(const Options& o, v1::EvaluateRequest* req) {
  if (o.defences.any()) req->set_defence(pipeline::DefencesName(o.defences));
}

// Adds to figures (a screen's or the robust defence's) how many of the
// attacker's nodes (ascending) its node list `list_key` holds, under
// "malicious" and `caught_key`: ldpctl knows them, the curator does not.
void CountMalicious(const std::vector<uint32_t>& malicious,
                    const char* list_key, const char* caught_key,
                    json* figures) {
  if (!figures->contains(list_key)) return;
  uint32_t caught = 0;
  for (const json& v : (*figures)[list_key]) {
    caught += std::binary_search(malicious.begin(), malicious.end(),
                                 v.get<uint32_t>());
  }
  (*figures)["malicious"] = malicious.size();
  (*figures)[caught_key] = caught;
}

// deployment.scenario.defence: the defences, what the estimate stage's
// screen found (its details: "screen", "overreported_dims",
// "flagged_nodes", "flagged"), and under "robust" what the evaluate
// stage's robust retraining left out (its details' "robust": "dropped",
// "dropped_nodes", ...). With an attacker (malicious: its nodes,
// ascending; empty without), how many of its nodes each caught.
json DefenceJson(const Options& o, const v1::StageResult& estimate,
                 const v1::StageResult& evaluate,
                 const std::vector<uint32_t>& malicious) {
  json d = {{"kind", pipeline::DefencesName(o.defences)}};
  if (o.defences.screen) {
    d["alpha"] = o.screen_alpha;
    const json e = json::parse(estimate.details_json(), nullptr, false);
    if (e.is_object()) {
      for (const char* k : {"screen", "overreported_dims", "overreported",
                            "flagged_nodes", "flagged"}) {
        if (e.contains(k)) d[k] = e[k];
      }
    }
    if (o.malicious) CountMalicious(malicious, "flagged", "malicious_flagged", &d);
  }
  if (o.defences.robust) {
    const json e = json::parse(evaluate.details_json(), nullptr, false);
    if (e.is_object() && e.contains("robust")) {
      d["robust"] = e["robust"];
      if (o.malicious) {
        CountMalicious(malicious, "dropped_nodes", "malicious_dropped",
                       &d["robust"]);
      }
    }
  }
  return d;
}

// The table's defence line.
std::string DefenceRow(const json& d) {
  std::vector<std::string> parts;
  if (d.contains("alpha")) {  // the screen
    if (d.value("screen", "") != "applied") {
      parts.push_back(
          "report screen: not applicable (the mechanism samples no "
          "dimensions)");
    } else {
      std::string row = absl::StrFormat(
          "report screen (alpha %g): %u nodes flagged, %u dimensions "
          "over-reported",
          d["alpha"].get<double>(), d["flagged_nodes"].get<uint32_t>(),
          d["overreported_dims"].get<uint32_t>());
      if (d.contains("malicious_flagged")) {
        absl::StrAppendFormat(&row, ", %u of the %u malicious nodes caught",
                              d["malicious_flagged"].get<uint32_t>(),
                              d["malicious"].get<uint32_t>());
      }
      parts.push_back(row);
    }
  }
  if (d.contains("robust")) {
    const json& r = d["robust"];
    std::string row = absl::StrFormat(
        "robust: %u nodes dropped (%u training, %u validation)",
        r.value("dropped", 0u), r.value("dropped_train", 0u),
        r.value("dropped_validation", 0u));
    if (r.contains("malicious_dropped")) {
      absl::StrAppendFormat(&row, ", %u of the %u malicious nodes among them",
                            r["malicious_dropped"].get<uint32_t>(),
                            r["malicious"].get<uint32_t>());
    }
    absl::StrAppend(&row, r.value("retrained", true) ? ", retrained"
                                                     : ", not retrained");
    parts.push_back(row);
  }
  if (parts.empty()) return d["kind"].get<std::string>();
  return absl::StrJoin(parts, "; ");
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args,
                                     const std::string& self_path, bool attach) {
  std::set<std::string> values = {"dataset", "method", "task", "mechanism",
                                  "epsilon", "sampled", "label-epsilon", "seed",
                                  "timeout", "format", "edges", "edge-epsilon",
                                  "blink-delta", "blink-variant",
                                  "round-timeout-ms", "quorum",
                                  "campaign-deadline", "defence",
                                  "screen-alpha"};
  std::set<std::string> flags = {"json"};
  if (attach) {
    for (const char* f : kConnectionValueFlags) values.insert(f);
    flags.insert("insecure");
  } else {
    values.insert(
        {"nodes", "hosts", "cap", "sync", "bin-dir", "work-dir", "threads",
         "dropout", "latency", "jitter", "loss", "churn", "churn-down",
         "churn-batch", "malicious", "attack", "attack-class", "attack-dims",
         "attack-edges", "store",
         "frontends", "frontend-kills"});
    flags.insert({"keep", "keep-running"});
  }
  ASSIGN_OR_RETURN(CliArgs a, CliArgs::Parse(args, values, flags));
  Options o;
  o.attach = attach;
  if (attach) {
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
  if (auto m = a.Get("method")) {
    ASSIGN_OR_RETURN(
        o.method, pipeline::kMethodNames.Parse(
                      *m, "--method",
                      {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN}));
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
  RETURN_IF_ERROR(pipeline::ParseDefenceFlags(a, &o.defences, &o.screen_alpha));
  if (o.defences.edge_consistency) {
    return absl::InvalidArgumentError(
        "--defence edge-consistency: a deployment's curator applies screen "
        "(its estimate stage) and robust (its evaluate stage), not "
        "edge-consistency");
  }
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


// The running deployment and everything the run measured.
class Simulation {
 public:
  Simulation(Options o, std::ostream& out, std::ostream& err)
      : o_(std::move(o)), out_(out), err_(err), progress_(err) {}
  ~Simulation() { StopAll(); }

  absl::Status Run();
  // Stops agents (first) and the curator; idempotent.
  void StopAll();
  const std::string& work_dir() const { return work_; }
  bool created_work_dir() const { return created_work_; }
  // Whether a child process was started: its log is in the work folder.
  bool started_processes() const { return curator_ != nullptr; }
  // Removes everything this run wrote into the work folder, and the folder
  // itself if this run made it; a no-op unless the folder was new or empty
  // when the run began (so a non-empty --work-dir is never touched). For a
  // run that failed before any process started, which leaves nothing worth
  // keeping. Errors are ignored.
  void RemoveWorkFiles();
  // The log tail of a process that died, for the error message.
  std::string failure_logs() const { return failure_logs_; }

 private:
  // Host h's nodes [begin, end): contiguous, sizes differing by at most 1.
  std::pair<uint32_t, uint32_t> Shard(int h) const {
    const uint64_t n = data_.meta.nodes;
    return {static_cast<uint32_t>(n * h / o_.hosts),
            static_cast<uint32_t>(n * (h + 1) / o_.hosts)};
  }
  absl::Status Prepare();
  // The pipeline's configuration and the public feature range, from the
  // options and data_.meta.
  absl::Status Configure();
  absl::Status StartCurator();
  absl::Status StartAgents();
  // --latency/--jitter/--loss: one FaultProxy per agent host in front of
  // the curator (none without them), the address host h is given, and what
  // the proxies did, for deployment.scenario.network.
  absl::Status StartNetwork();
  std::string AgentCuratorAddress(int h) const;
  json NetworkJson() const;
  std::string NetworkText(const json& network) const;
  // Starts agent host h into agents_[h], its log agent-h.log (or
  // agent-h.restart-K.log for its K-th restart under --churn).
  absl::Status StartAgent(int h);
  // --churn: the driver of one campaign's kills (its plan the run's
  // next), with hooks that kill and restart agents_[h].
  absl::StatusOr<ChurnDriver> ChurnFor(const std::string& campaign_id,
                                       bool exchange);
  absl::Status WaitEnrolled();
  // --dropout: the seed of the offline draw (--seed, else 1), and how many
  // nodes it leaves online.
  uint64_t DropoutSeed() const { return o_.seed.value_or(1); }
  uint32_t CountOnlineNodes() const {
    const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
    if (o_.dropout == 0) return n;
    uint32_t online = 0;
    for (uint32_t v = 0; v < n; ++v) {
      online += !SimulatedOffline(DropoutSeed(), v, o_.dropout);
    }
    return online;
  }
  // --malicious: the agent hosts' attack flags, and the nodes the attacker
  // holds (drawn from DropoutSeed(), less the offline ones).
  std::vector<std::string> AttackArgs() const;
  std::vector<uint32_t> MaliciousNodes() const {
    return poisoning::MaliciousNodes(
        static_cast<uint32_t>(data_.meta.nodes), DropoutSeed(),
        o_.malicious.value_or(0),
        [&](uint32_t v) { return SimulatedOffline(DropoutSeed(), v, o_.dropout); });
  }
  // --malicious: the attack's measure on the evaluate stage's confusion.
  void AddTargetRate(const json& details, json* run) const;
  absl::StatusOr<v1::Campaign> Collect(v1::CreateCampaignRequest req,
                                       const std::string& what);
  absl::Status Stage(const std::string& what,
                     const std::function<grpc::Status(grpc::ClientContext*)>& call);
  void Record(const std::string& stage, double seconds) {
    stage_seconds_.emplace_back(stage, seconds);
  }
  absl::Status Check();  // interrupted? a child died?
  void Report(const json& j);
  // The table's rows of the scenarios (dropout and closing, network, churn,
  // poisoning, defence) from the JSON's deployment d; none when all are off.
  using TableRow = std::function<void(const std::string&, const std::string&)>;
  void ScenarioRows(const json& d, const TableRow& row) const;
  absl::Status ServeUntilInterrupted();

  // What the run's campaigns collected: every campaign in the order it ran,
  // and those the stages read.
  struct Campaigns {
    std::vector<v1::Campaign> all;
    v1::Campaign features;
    std::optional<v1::Campaign> graph;  // the edges campaign, if any
    std::string label_campaign;         // empty: the curator's labels
  };
  // Collects the graph (with --edges), the features, and the labels (with
  // a label budget), each campaign to quorum.
  absl::StatusOr<Campaigns> CollectAll();
  // --churn: the figures of scenario.churn once every campaign ran.
  absl::StatusOr<json> ChurnFigures(const Campaigns& c);
  // The curator's estimate and evaluate stages on what was collected.
  absl::Status Train(const Campaigns& c, v1::StageResult* estimate,
                     v1::StageResult* evaluate);
  // The ledger's spending per node ({min, mean, max}), and the curator's
  // status into *status.
  absl::StatusOr<json> Spending(v1::CuratorStatus* status);
  // The ledger: every node's spending (admin GetBudgets).
  absl::StatusOr<v1::GetBudgetsResponse> Budgets();
  // The results as `ldpgraph eval --format json` prints them, with the
  // deployment's figures under "deployment".
  absl::StatusOr<json> Results(const Campaigns& c,
                               const v1::StageResult& estimate,
                               const v1::StageResult& evaluate,
                               std::chrono::steady_clock::time_point t0);
  json Deployment(const Campaigns& c, const json& details,
                  const v1::CuratorStatus& status, const json& spent,
                  const v1::StageResult& estimate,
                  const v1::StageResult& evaluate, double total) const;

  Options o_;
  std::ostream& out_;
  std::ostream& err_;
  Progress progress_;
  std::string work_, dataset_dir_;
  bool created_work_ = false;  // the default folder under $TMPDIR
  // Everything in work_ is this run's (it was new or empty), and whether
  // this run made the folder itself (the default, or a new --work-dir).
  bool owns_work_files_ = false;
  bool made_work_ = false;
  Dataset data_;  // meta, graph and labels (features dropped once sharded)
  pipeline::PipelineConfig config_;
  std::pair<double, double> range_{-1.0, 1.0};
  std::unique_ptr<ChildProcess> curator_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
  std::vector<std::unique_ptr<net::FaultProxy>> proxies_;  // one per host
  int port_ = 0;
  int hosts_ = 0;  // agent hosts subscribed when enrolment finished
  std::optional<Connection> admin_;
  std::string failure_logs_;
  std::vector<std::pair<std::string, double>> stage_seconds_;
  // The nodes --dropout leaves online (all of them without it), and per
  // campaign the seconds until every one of them had answered (a campaign
  // that waits for its deadline stays open after that).
  uint32_t online_nodes_ = 0;
  std::map<std::string, double> all_online_seconds_;
  // --churn: the campaigns churned so far, each host's restarts, and per
  // campaign its kills with what the store held just before each.
  struct ChurnedCampaign {
    std::string id;
    std::vector<ChurnKill> kills;
    std::vector<std::vector<uint32_t>> stored_before_kill;  // per kill
    std::vector<uint32_t> acked_before_kill;  // GetCampaign's reported
  };
  std::vector<ChurnedCampaign> churned_;
  std::vector<int> restarts_;
  json churn_figures_;  // null without --churn

  // --store postgres: the server, a store on it that ldpctl reads the
  // stored reporters from (as it reads curator.db for --churn), the
  // frontends and their fixed ports; --frontend-kills: each kill.
  std::unique_ptr<store::LocalPostgres> postgres_;
  std::unique_ptr<store::CuratorStore> observer_;
  std::vector<std::unique_ptr<ChildProcess>> frontends_;
  std::vector<int> frontend_ports_;
  std::vector<int> frontend_restarts_;
  struct FrontendKill {
    int frontend = 0;
    double after_seconds = 0;
    uint32_t answered_at_kill = 0;
    uint32_t acked_before_kill = 0;
    std::vector<uint32_t> stored_before_kill;
    double restart_seconds = 0;
  };
  std::string killed_campaign_;
  std::vector<FrontendKill> frontend_kills_;
  json frontend_figures_;  // null without --frontend-kills
  // The curator processes' arguments for the store (--store ... or none).
  std::vector<std::string> StoreArgs() const;
  absl::Status StartPostgres();
  // Starts frontend i (on `port`, 0: any) and waits until it serves.
  absl::Status StartFrontend(int i, int port);
  // Waits for a curator process's ready file; its gRPC port.
  absl::StatusOr<int> WaitReady(ChildProcess* p, const std::string& ready,
                                const std::string& what);
  // The nodes that reported to campaign `id`, from the store.
  absl::StatusOr<std::vector<uint32_t>> Reporters(const std::string& id);
  // --frontend-kills: kills due at `answered` of `targeted`.
  absl::Status KillFrontends(const v1::Campaign& c, absl::Duration since_open);
  absl::StatusOr<json> FrontendFigures(const Campaigns& c);
  // What --churn and --frontend-kills check of the spending, for the
  // campaigns' final reporters: the most any node spent beyond what it was
  // asked, by the curator's ledger and by the hosts' memos, and what a host
  // charged for answers the curator never received.
  absl::StatusOr<json> SpendingChecks(const std::vector<CampaignAnswers>& answers);
  // How many of `stored` are not in `final_set` (ascending).
  static uint64_t MissingFrom(const std::vector<uint32_t>& stored,
                              const std::vector<uint32_t>& final_set);
};

absl::Status Simulation::Check() {
  if (Interrupts::interrupted()) {
    return absl::CancelledError(
        absl::StrCat("interrupted by signal ", Interrupts::signal()));
  }
  std::vector<ChildProcess*> all;
  if (curator_) all.push_back(curator_.get());
  for (auto& f : frontends_) {
    if (f) all.push_back(f.get());
  }
  for (auto& a : agents_) {
    if (a) all.push_back(a.get());  // null: down under --churn
  }
  for (ChildProcess* p : all) {
    if (auto how = p->Exited()) {
      failure_logs_ = absl::StrCat("last lines of ", p->log_path(), ":\n",
                                   p->LogTail(15));
      return absl::InternalError(absl::StrCat(p->name(), " ", *how));
    }
  }
  return absl::OkStatus();
}

absl::Status Simulation::Configure() {
  if (o_.task == v1::PIPELINE_TASK_NODE && data_.meta.classes < 2) {
    return absl::InvalidArgumentError(
        "node classification needs a dataset with labels (classes >= 2)");
  }
  ASSIGN_OR_RETURN(config_, ConfigOf(o_));
  pipeline::ResolveDatasetSettings(data_.meta, &config_);
  auto range = ScaledRange(config_.scaling, data_.meta);
  if (!range) {
    return absl::InvalidArgumentError(
        "the method's feature scaling needs a public range the dataset does not declare");
  }
  range_ = *range;
  online_nodes_ = CountOnlineNodes();
  return absl::OkStatus();
}

absl::Status Simulation::Prepare() {
  if (o_.attach) {
    // Only the public description: the agents hold the records.
    ASSIGN_OR_RETURN(data_.meta, LoadDatasetMeta(o_.dataset_dir));
    return Configure();
  }
  if (o_.work_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/ldpctl-sim-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a work folder ",
                                              tmpl, ": ", std::strerror(errno)));
    }
    work_ = tmpl;
    created_work_ = true;
    made_work_ = true;
  } else {
    work_ = o_.work_dir;
    std::error_code ec;
    const bool existed = fs::exists(work_, ec);
    if (existed && !fs::is_empty(work_, ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--work-dir ", work_, " is not empty: give an empty or new folder"));
    }
    fs::create_directories(work_, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot create ", work_, ": ", ec.message()));
    }
    made_work_ = !existed;
  }
  owns_work_files_ = true;
  chmod(work_.c_str(), 0700);  // secrets live here

  // The dataset: validated here, before any process starts.
  const auto t = std::chrono::steady_clock::now();
  if (o_.dataset_dir.empty()) {
    progress_.Update("preparing", absl::StrCat("generating the default dataset (",
                                               o_.generated_nodes, " nodes)"));
    GeneratorOptions g = DefaultGeneratorOptions();
    g.nodes = o_.generated_nodes;
    ASSIGN_OR_RETURN(data_, GenerateDataset(g));
    dataset_dir_ = work_ + "/dataset";
    RETURN_IF_ERROR(WriteDataset(data_, dataset_dir_));
  } else {
    progress_.Update("preparing", absl::StrCat("loading ", o_.dataset_dir));
    dataset_dir_ = fs::absolute(o_.dataset_dir).string();
    ASSIGN_OR_RETURN(data_, LoadDataset(dataset_dir_));
    if (!DatasetPrepared(dataset_dir_, data_.meta, /*needs_schema=*/true)) {
      // The agents scale with a public schema and read their own records
      // through the device index: a copy with both (ldpgraph prepare).
      progress_.Update("preparing",
                       absl::StrCat(o_.dataset_dir,
                                    " declares no feature schema or has no "
                                    "device index: preparing a copy (the "
                                    "papers' central schema) in ",
                                    work_, "/dataset"));
      ASSIGN_OR_RETURN(PreparedDataset prepared,
                       PrepareDataset(dataset_dir_, work_ + "/dataset"));
      dataset_dir_ = work_ + "/dataset";
      data_.meta = std::move(prepared.meta);
    }
  }
  data_.features = SparseRows();  // the agents hold them, not ldpctl
  if (data_.meta.nodes < static_cast<size_t>(o_.hosts)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hosts ", o_.hosts, " exceeds the dataset's ", data_.meta.nodes, " nodes"));
  }
  RETURN_IF_ERROR(Configure());

  // Secrets and TLS: a throwaway CA, the curator's certificate for
  // localhost and 127.0.0.1, an admin token, a node key.
  progress_.Update("preparing", "TLS material and credentials");
  const std::string tls = work_ + "/tls";
  fs::create_directories(tls);
  ASSIGN_OR_RETURN(DevTlsMaterial m, MakeDevTlsMaterial({"localhost", "127.0.0.1"}));
  RETURN_IF_ERROR(WriteDevTlsMaterial(m, tls));
  ASSIGN_OR_RETURN(std::string token, NewSecretHex());
  ASSIGN_OR_RETURN(std::string node_key, NewSecretHex());
  RETURN_IF_ERROR(WriteNewFile(tls + "/admin.token", token + "\n", 0600));
  RETURN_IF_ERROR(WriteNewFile(tls + "/node.key", node_key + "\n", 0600));
  ASSIGN_OR_RETURN(std::string raw_key, FromHex(node_key));
  for (int h = 0; h < o_.hosts; ++h) {
    const auto [begin, end] = Shard(h);
    RETURN_IF_ERROR(WriteNewFile(absl::StrCat(work_, "/host-", h, ".credentials"),
                                 curator::CredentialsFileText(raw_key, begin, end),
                                 0600));
  }
  Record("prepare", std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - t).count());
  return absl::OkStatus();
}

std::vector<std::string> Simulation::StoreArgs() const {
  if (postgres_ == nullptr) return {};
  return {"--store", postgres_->url(), "--store-password-file",
          postgres_->password_file()};
}

absl::Status Simulation::StartPostgres() {
  progress_.Update("starting", "PostgreSQL (initdb)");
  // The server runs as an unprivileged user when ldpctl runs as root: it
  // must be able to pass through the work folder (the secrets in it stay
  // 0600), into a folder of its own.
  chmod(work_.c_str(), 0711);
  store::LocalPostgres::Options pg;
  pg.dir = work_ + "/postgres";
  pg.fsync = o_.sync == "full";
  pg.max_connections = std::max(100, 4 * (o_.frontends + 2) + 20);
  ASSIGN_OR_RETURN(postgres_, store::LocalPostgres::Start(pg));
  ASSIGN_OR_RETURN(observer_, store::CuratorStore::OpenUrl(
                                  postgres_->url(), postgres_->password_file(),
                                  "", {}));
  progress_.Note(absl::StrCat("PostgreSQL on 127.0.0.1:", postgres_->port(),
                              " (", pg.dir, ", log postgres.log)"));
  return absl::OkStatus();
}

absl::StatusOr<int> Simulation::WaitReady(ChildProcess* p, const std::string& ready,
                                          const std::string& what) {
  const absl::Time until = absl::Now() + absl::Seconds(o_.timeout_s);
  while (true) {
    RETURN_IF_ERROR(Check());
    if (auto how = p->Exited()) {
      failure_logs_ = absl::StrCat("last lines of ", p->log_path(), ":\n",
                                   p->LogTail(15));
      return absl::InternalError(absl::StrCat(p->name(), " ", *how));
    }
    if (fs::exists(ready)) {
      auto text = ReadFileToString(ready);
      if (text.ok()) {
        json j = json::parse(*text, nullptr, false);
        if (!j.is_discarded() && j.contains("grpc_port")) {
          return j["grpc_port"].get<int>();
        }
      }
    }
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(
          absl::StrCat("the ", what, " did not start in --timeout"));
    }
    progress_.Update("starting", what);
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status Simulation::StartFrontend(int i, int port) {
  const std::string tls = work_ + "/tls";
  const std::string ready = absl::StrCat(work_, "/frontend-", i, ".ready");
  std::error_code ec;
  fs::remove(ready, ec);
  std::vector<std::string> argv = {
      o_.bin_dir + "/ldpgraph-curator", "--role", "frontend", "--listen",
      absl::StrCat("127.0.0.1:", port), "--http", "off", "--data-dir",
      absl::StrCat(work_, "/frontend-", i), "--graph", dataset_dir_,
      "--admin-token", tls + "/admin.token", "--node-key", tls + "/node.key",
      "--tls-cert", tls + "/curator.pem", "--tls-key", tls + "/curator.key",
      "--sync", o_.sync, "--ready-file", ready};
  const std::vector<std::string> store = StoreArgs();
  argv.insert(argv.end(), store.begin(), store.end());
  if (o_.edges != "none") argv.push_back("--private-edges");
  const std::string log =
      frontend_restarts_[i] == 0
          ? absl::StrCat(work_, "/frontend-", i, ".log")
          : absl::StrCat(work_, "/frontend-", i, ".restart-",
                         frontend_restarts_[i], ".log");
  ASSIGN_OR_RETURN(frontends_[i],
                   ChildProcess::Start(absl::StrCat("frontend ", i),
                                       std::move(argv), log));
  ASSIGN_OR_RETURN(frontend_ports_[i],
                   WaitReady(frontends_[i].get(), ready,
                             absl::StrCat("frontend ", i)));
  return absl::OkStatus();
}

absl::Status Simulation::StartCurator() {
  if (o_.attach) {
    admin_ = Connect(o_.connection);
    return absl::OkStatus();
  }
  if (o_.store == "postgres") RETURN_IF_ERROR(StartPostgres());
  const std::string tls = work_ + "/tls";
  const std::string ready = work_ + "/curator.ready";
  std::vector<std::string> argv = {
      o_.bin_dir + "/ldpgraph-curator", "--listen", "127.0.0.1:0", "--http",
      "off", "--data-dir", work_ + "/curator", "--graph", dataset_dir_,
      "--admin-token", tls + "/admin.token", "--node-key", tls + "/node.key",
      "--tls-cert", tls + "/curator.pem", "--tls-key", tls + "/curator.key",
      "--sync", o_.sync, "--max-threads",
      absl::StrCat(std::max(256, 4 * o_.hosts + 64)), "--pipeline-threads",
      absl::StrCat(o_.threads), "--ready-file", ready};
  const std::vector<std::string> store = StoreArgs();
  argv.insert(argv.end(), store.begin(), store.end());
  if (o_.frontends > 0) argv.insert(argv.end(), {"--role", "operator"});
  // The curator learns the graph from the agents' reports only.
  if (o_.edges != "none") argv.push_back("--private-edges");
  const std::string what = o_.frontends > 0 ? "operator" : "curator";
  ASSIGN_OR_RETURN(curator_, ChildProcess::Start(what, std::move(argv),
                                                 work_ + "/curator.log"));
  ASSIGN_OR_RETURN(port_, WaitReady(curator_.get(), ready, what));
  frontends_.resize(o_.frontends);
  frontend_ports_.assign(o_.frontends, 0);
  frontend_restarts_.assign(o_.frontends, 0);
  for (int i = 0; i < o_.frontends; ++i) RETURN_IF_ERROR(StartFrontend(i, 0));
  ConnectionSettings s;
  s.curator = absl::StrCat("127.0.0.1:", port_);
  s.server_name = "localhost";
  ASSIGN_OR_RETURN(s.ca_pem, ReadFileToString(tls + "/ca.pem"));
  ASSIGN_OR_RETURN(std::string token, ReadFileToString(tls + "/admin.token"));
  while (!token.empty() && (token.back() == '\n')) token.pop_back();
  s.admin_token_hex = token;
  admin_ = Connect(s);
  // For the operator: ldpctl --config WORK/ldpctl.conf <command>.
  return WriteNewFile(
      work_ + "/ldpctl.conf",
      absl::StrCat("# ldpctl --config ", work_, "/ldpctl.conf <command>\n",
                   "curator = 127.0.0.1:", port_, "\n",
                   "server-name = localhost\n", "ca = tls/ca.pem\n",
                   "admin-token = tls/admin.token\n"),
      0644);
}

absl::Status Simulation::StartAgents() {
  agents_.resize(o_.hosts);
  restarts_.assign(o_.hosts, 0);
  for (int h = 0; h < o_.hosts; ++h) RETURN_IF_ERROR(StartAgent(h));
  return absl::OkStatus();
}

absl::Status Simulation::StartAgent(int h) {
  {
    const auto [begin, end] = Shard(h);
    std::vector<std::string> argv = {
        o_.bin_dir + "/ldpgraph-agent", "--curator", AgentCuratorAddress(h),
        "--ca", work_ + "/tls/ca.pem",
        "--server-name", "localhost", "--credentials",
        absl::StrCat(work_, "/host-", h, ".credentials"), "--dataset",
        dataset_dir_, "--nodes", absl::StrCat(begin, "-", end), "--scaling",
        std::string(FeatureScalingName(config_.scaling)), "--state-dir",
        absl::StrCat(work_, "/agent-", h), "--http", "off", "--name",
        absl::StrCat("host-", h), "--cap-total", absl::StrCat(o_.cap)};
    if (o_.seed) {
      argv.push_back("--seed");
      argv.push_back(absl::StrCat(pipeline::NoiseSeed(*o_.seed, 0)));
    }
    if (o_.churn_on || o_.frontend_kills > 0) {
      argv.insert(argv.end(), {"--batch", absl::StrCat(o_.churn_batch)});
    }
    if (o_.dropout > 0) {
      argv.insert(argv.end(), {"--offline", absl::StrCat(o_.dropout),
                               "--offline-seed", absl::StrCat(DropoutSeed())});
    }
    const std::vector<std::string> attack = AttackArgs();
    argv.insert(argv.end(), attack.begin(), attack.end());
    const std::string log =
        restarts_[h] == 0
            ? absl::StrCat(work_, "/agent-", h, ".log")
            : absl::StrCat(work_, "/agent-", h, ".restart-", restarts_[h], ".log");
    ASSIGN_OR_RETURN(agents_[h], ChildProcess::Start(absl::StrCat("agent host ", h),
                                                     argv, log));
  }
  return absl::OkStatus();
}

absl::StatusOr<ChurnDriver> Simulation::ChurnFor(const std::string& campaign_id,
                                                 bool exchange) {
  ASSIGN_OR_RETURN(std::vector<ChurnKill> plan,
                   PlanChurn(o_.seed.value_or(1), static_cast<int>(churned_.size()),
                             o_.hosts, o_.churn, exchange));
  churned_.push_back({campaign_id, {}, {}, {}});
  const size_t index = churned_.size() - 1;
  ChurnDriver::Hooks hooks;
  hooks.before_kill = [this, index](int) -> absl::Status {
    ChurnedCampaign& cc = churned_[index];
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::GetCampaignRequest get;
    get.set_campaign_id(cc.id);
    v1::Campaign c;
    RETURN_IF_ERROR(FromGrpc(admin_->stub->GetCampaign(&ctx, get, &c),
                             admin_->address));
    cc.acked_before_kill.push_back(c.progress().reported());
    ASSIGN_OR_RETURN(auto stored, Reporters(cc.id));
    cc.stored_before_kill.push_back(std::move(stored));
    return absl::OkStatus();
  };
  hooks.kill = [this, index](int h) {
    const std::string how = agents_[h]->Kill();
    agents_[h].reset();
    progress_.Note(absl::StrFormat("churn: agent host %d %s during %s (%u acknowledged reports)",
                                   h, how, churned_[index].id,
                                   churned_[index].acked_before_kill.back()));
    return absl::OkStatus();
  };
  hooks.restart = [this](int h) {
    ++restarts_[h];
    RETURN_IF_ERROR(StartAgent(h));
    progress_.Note(absl::StrFormat("churn: agent host %d restarted (restart %d)",
                                   h, restarts_[h]));
    return absl::OkStatus();
  };
  return ChurnDriver(std::move(plan), absl::Seconds(o_.churn_down_s),
                     std::move(hooks));
}

absl::Status Simulation::WaitEnrolled() {
  const auto t = std::chrono::steady_clock::now();
  const absl::Time until = absl::Now() + absl::Seconds(o_.timeout_s);
  v1::CuratorStatus s;
  while (true) {
    RETURN_IF_ERROR(Check());
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    // Attached, the curator may not listen yet: wait for the channel (a
    // blocked call drives the reconnection; a failed one would leave it to
    // gRPC's 5 s backup poller).
    if (o_.attach) ctx.set_wait_for_ready(true);
    grpc::Status g = admin_->stub->GetStatus(&ctx, v1::GetStatusRequest(), &s);
    if (o_.attach &&
        (g.error_code() == grpc::StatusCode::UNAVAILABLE ||
         g.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
        absl::Now() < until) {
      // The curator may still be starting (a container, a pod).
      progress_.Update("waiting for the curator", g.error_message());
      absl::SleepFor(absl::Milliseconds(500));
      continue;
    }
    if (!g.ok()) return FromGrpc(g, admin_->address);
    if (o_.attach && s.graph_nodes() != data_.meta.nodes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the curator's graph has ", s.graph_nodes(), " nodes but ",
          o_.dataset_dir, "/meta.json says ", data_.meta.nodes,
          ": give the deployment's dataset"));
    }
    // Attached to a fleet, every shard's holder subscribes after it enrols:
    // wait for them all, or the campaign starts (and the table counts
    // hosts) before the last one is listening.
    const int want_hosts =
        o_.attach ? std::max(1, static_cast<int>(s.fleet_shards())) : o_.hosts;
    std::string fleet;
    if (s.fleet_shards() > 0) {
      fleet = absl::StrCat(", fleet of ", s.fleet_shards(), " shards");
    } else if (s.fleet_gathering() > 0) {
      fleet = absl::StrCat(", ", s.fleet_gathering(), " hosts gathering for shards");
    }
    progress_.Update(
        "enrolling",
        o_.attach ? absl::StrFormat("%u/%u nodes, %u hosts subscribed%s",
                                    s.enrolled_nodes(), s.graph_nodes(),
                                    s.task_streams(), fleet)
                  : absl::StrFormat("%u/%u nodes, %u/%d hosts subscribed",
                                    s.enrolled_nodes(), s.graph_nodes(),
                                    s.task_streams(), o_.hosts));
    const uint32_t want_nodes =
        o_.dropout > 0 ? online_nodes_ : s.graph_nodes();
    if (s.enrolled_nodes() >= want_nodes &&
        static_cast<int>(s.task_streams()) >= want_hosts) {
      hosts_ = o_.attach ? static_cast<int>(s.task_streams()) : o_.hosts;
      break;
    }
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(absl::StrCat(
          "only ", s.enrolled_nodes(), " of ", s.graph_nodes(),
          " nodes enrolled within --timeout"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  progress_.Done("enrolled", absl::StrFormat("%u nodes on %d agent hosts",
                                             s.enrolled_nodes(), hosts_));
  Record("start and enrol", std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - t).count());
  return absl::OkStatus();
}

absl::StatusOr<v1::Campaign> Simulation::Collect(
    v1::CreateCampaignRequest req, const std::string& what) {
  const auto t = std::chrono::steady_clock::now();
  req.set_quorum(o_.quorum);
  if (o_.deadline_s > 0) {
    req.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now()) +
                             static_cast<int64_t>(o_.deadline_s * 1000));
  }
  v1::Campaign c;
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    RETURN_IF_ERROR(FromGrpc(admin_->stub->CreateCampaign(&ctx, req, &c),
                             admin_->address));
  }
  const absl::Time opened = absl::Now();
  const absl::Time until = opened + absl::Seconds(o_.timeout_s);
  const std::string stage = absl::StrCat("collecting ", what, " (", c.id(), ")");
  std::optional<ChurnDriver> churn;
  if (o_.churn_on) {
    ASSIGN_OR_RETURN(churn, ChurnFor(c.id(), req.spec().kind() ==
                                         v1::MECHANISM_KIND_EDGE_SUBSTITUTION));
  }
  while (true) {
    RETURN_IF_ERROR(Check());
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::GetCampaignRequest get;
    get.set_campaign_id(c.id());
    RETURN_IF_ERROR(FromGrpc(admin_->stub->GetCampaign(&ctx, get, &c),
                             admin_->address));
    const auto& p = c.progress();
    const uint32_t answered = p.reported() + p.refused();
    if (answered >= online_nodes_ && !all_online_seconds_.contains(c.id())) {
      all_online_seconds_[c.id()] = absl::ToDoubleSeconds(absl::Now() - opened);
    }
    progress_.Update(stage, absl::StrFormat(
                                "%u/%u reports, %u refusals, %u rejected",
                                p.reported(), p.targeted(), p.refused(), p.rejected()));
    if (answered >= p.targeted() || c.state() == v1::CAMPAIGN_STATE_CLOSED) break;
    if (churn) {
      RETURN_IF_ERROR(churn->Poll(answered, p.targeted(), absl::Now() - opened));
    }
    if (o_.frontend_kills > 0 && what == "features") {
      RETURN_IF_ERROR(KillFrontends(c, absl::Now() - opened));
    }
    if (absl::Now() > until) {
      return absl::DeadlineExceededError(absl::StrCat(
          c.id(), ": ", answered, " of ", p.targeted(),
          " nodes answered within --timeout"));
    }
    // A kill due soon is looked for often: a small campaign is over in a
    // few tens of milliseconds.
    const bool kill_due =
        o_.frontend_kills > 0 && what == "features" &&
        frontend_kills_.size() < static_cast<size_t>(o_.frontend_kills);
    absl::SleepFor(
        absl::Milliseconds((churn && churn->pending()) || kill_due ? 2 : 50));
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  if (churn) {  // hosts still down come back before the next campaign
    RETURN_IF_ERROR(churn->Finish());
    churned_.back().kills = churn->kills();
  }
  progress_.Done(stage, absl::StrFormat("%u reports, %u refusals, %u rejected in %.2f s",
                                        c.progress().reported(), c.progress().refused(),
                                        c.progress().rejected(), secs));
  if (c.progress().rejected() > 0) {
    progress_.Note(absl::StrCat(
        "warning: the curator rejected ", c.progress().rejected(), " reports of ",
        c.id(), "; see ",
        o_.attach ? "the agent hosts' logs" : absl::StrCat(work_, "/agent-*.log")));
  }
  Record(absl::StrCat("collect ", what), secs);
  return c;
}

absl::Status Simulation::Stage(
    const std::string& what,
    const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  RETURN_IF_ERROR(Check());
  progress_.Update(what, "on the curator");
  const auto t = std::chrono::steady_clock::now();
  grpc::ClientContext ctx;
  admin_->Prepare(&ctx);
  grpc::Status g;
  {
    Interrupts::Guard guard([&ctx] { ctx.TryCancel(); });
    g = call(&ctx);
  }
  RETURN_IF_ERROR(Check());
  RETURN_IF_ERROR(FromGrpc(g, admin_->address));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  progress_.Done(what, absl::StrFormat("%.2f s", secs));
  Record(what, secs);
  return absl::OkStatus();
}

void Simulation::RemoveWorkFiles() {
  if (!owns_work_files_) return;
  std::error_code ec;
  if (made_work_) {
    fs::remove_all(work_, ec);
    return;
  }
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(work_, ec), end; !ec && it != end;
       it.increment(ec)) {
    entries.push_back(it->path());
  }
  for (const fs::path& p : entries) fs::remove_all(p, ec);
}

void Simulation::StopAll() {
  // Agents first, all at once, so that none reconnects to a curator on its
  // way down; then the admin channel (an open one holds the curator's
  // graceful shutdown until its grace period ends); then the curator.
  for (auto& a : agents_) {
    if (a) a->Terminate();
  }
  for (auto& a : agents_) {
    if (a) a->Stop(absl::Seconds(5));
  }
  proxies_.clear();
  admin_.reset();
  for (auto& f : frontends_) {
    if (f) f->Terminate();
  }
  for (auto& f : frontends_) {
    if (f) f->Stop(absl::Seconds(10));
  }
  if (curator_) curator_->Stop(absl::Seconds(10));
  observer_.reset();
  if (postgres_) {
    if (absl::Status s = postgres_->Stop(); !s.ok()) {
      err_ << "ldpctl simulate: stopping PostgreSQL: " << s.message() << "\n";
    }
    postgres_.reset();
  }
}

absl::Status Simulation::Run() {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(Prepare());
  RETURN_IF_ERROR(StartCurator());
  if (!o_.attach) RETURN_IF_ERROR(StartNetwork());
  if (!o_.attach) RETURN_IF_ERROR(StartAgents());
  RETURN_IF_ERROR(WaitEnrolled());

  ASSIGN_OR_RETURN(const Campaigns campaigns, CollectAll());
  v1::StageResult estimate, evaluate;
  RETURN_IF_ERROR(Train(campaigns, &estimate, &evaluate));
  ASSIGN_OR_RETURN(const json j, Results(campaigns, estimate, evaluate, t0));
  Report(j);
  if (o_.keep_running) return ServeUntilInterrupted();
  return absl::OkStatus();
}

absl::StatusOr<Simulation::Campaigns> Simulation::CollectAll() {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  v1::CreateCampaignRequest features;
  features.set_name(absl::StrCat("simulate: features, ", config_.mechanism));
  features.set_attribute(v1::ATTRIBUTE_FEATURES);
  ASSIGN_OR_RETURN(v1::MechanismKind kind, ParseMechanismKind(config_.mechanism));
  features.mutable_spec()->set_kind(kind);
  features.mutable_spec()->set_epsilon(config_.epsilon);
  features.mutable_spec()->set_dimension(static_cast<uint32_t>(data_.meta.features));
  if (config_.sampled) {
    features.mutable_spec()->set_sampled(static_cast<uint32_t>(*config_.sampled));
  }
  features.mutable_spec()->set_range_low(range_.first);
  features.mutable_spec()->set_range_high(range_.second);
  features.mutable_nodes()->set_all(true);
  std::vector<v1::Campaign> campaigns;
  // The graph first, when the agents hold it: randomized response, or
  // neighbour substitution over the features campaign's question (each
  // node answers both with one report).
  std::optional<v1::Campaign> graph_campaign;
  if (o_.edges != "none") {
    v1::CreateCampaignRequest edges;
    edges.set_attribute(v1::ATTRIBUTE_EDGES);
    v1::MechanismSpec* spec = edges.mutable_spec();
    spec->set_epsilon(o_.edge_epsilon);
    spec->set_dimension(n);
    if (o_.edges == "rr") {
      edges.set_name("simulate: edges, edge-rr");
      spec->set_kind(v1::MECHANISM_KIND_EDGE_RR);
    } else if (o_.edges == "blink") {
      edges.set_name("simulate: edges, edge-blink");
      spec->set_kind(v1::MECHANISM_KIND_EDGE_BLINK);
      spec->mutable_blink()->set_degree_share(o_.blink_delta);
    } else {
      edges.set_name(absl::StrCat("simulate: edges, edge-substitution ",
                                  o_.edges == "ns1" ? "approach 1"
                                                    : "approach 2"));
      spec->set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
      v1::SubstitutionSpec* sub = spec->mutable_substitution();
      *sub = edges::DefaultSubstitutionSpec();
      sub->set_approach(o_.edges == "ns1" ? 1 : 2);
      sub->set_round_timeout_ms(o_.round_timeout_ms);
      // Dummies in the middle of the public range, spread over it.
      sub->set_dummy_mean((range_.first + range_.second) / 2);
      sub->set_dummy_std((range_.second - range_.first) / 2);
      *sub->mutable_features() = features.spec();
    }
    edges.mutable_nodes()->set_all(true);
    ASSIGN_OR_RETURN(graph_campaign, Collect(edges, "edges"));
    campaigns.push_back(*graph_campaign);
  }
  ASSIGN_OR_RETURN(v1::Campaign fc, Collect(features, "features"));
  campaigns.push_back(fc);
  std::string label_campaign;
  if (config_.label_epsilon) {
    v1::CreateCampaignRequest labels;
    labels.set_name("simulate: labels, label-rr");
    labels.set_attribute(v1::ATTRIBUTE_LABEL);
    labels.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
    labels.mutable_spec()->set_epsilon(*config_.label_epsilon);
    labels.mutable_spec()->set_dimension(static_cast<uint32_t>(data_.meta.classes));
    labels.mutable_nodes()->set_all(true);
    ASSIGN_OR_RETURN(v1::Campaign lc, Collect(labels, "labels"));
    label_campaign = lc.id();
    campaigns.push_back(lc);
  }
  return Campaigns{std::move(campaigns), std::move(fc), std::move(graph_campaign),
                   std::move(label_campaign)};
}

absl::Status Simulation::Train(const Campaigns& c, v1::StageResult* estimate,
                               v1::StageResult* evaluate) {
  RETURN_IF_ERROR(Stage("estimate", [&](grpc::ClientContext* ctx) {
                    v1::EstimateRequest req;
                    req.set_campaign_id(c.features.id());
                    SetDefence(o_, &req);
                    return admin_->stub->Estimate(ctx, req, estimate);
                  }));
  return Stage("evaluate", [&](grpc::ClientContext* ctx) {
    v1::EvaluateRequest req;
    req.set_input(estimate->id());
    req.set_pipeline_task(o_.task);
    req.set_pipeline_method(o_.method);
    req.set_label_campaign_id(c.label_campaign);
    if (c.graph) req.set_graph_campaign_id(c.graph->id());
    if (o_.edges == "blink") {
      req.set_blink_variant(
          std::string(edges::kBlinkVariantNames.Name(o_.blink_variant)));
    }
    req.set_seed(o_.seed.value_or(1));
    SetDefence(o_, &req);
    return admin_->stub->Evaluate(ctx, req, evaluate);
  });
}

absl::StatusOr<v1::GetBudgetsResponse> Simulation::Budgets() {
  v1::GetBudgetsResponse budgets;
  grpc::ClientContext ctx;
  admin_->Prepare(&ctx);
  RETURN_IF_ERROR(FromGrpc(
      admin_->stub->GetBudgets(&ctx, v1::GetBudgetsRequest(), &budgets),
      admin_->address));
  return budgets;
}

absl::StatusOr<json> Simulation::Spending(v1::CuratorStatus* status) {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  // What the ledger and the curator's counters say.
  ASSIGN_OR_RETURN(const v1::GetBudgetsResponse budgets, Budgets());
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    RETURN_IF_ERROR(FromGrpc(
        admin_->stub->GetStatus(&ctx, v1::GetStatusRequest(), status),
        admin_->address));
  }
  double lo = 0, hi = 0, sum = 0;
  for (int i = 0; i < budgets.budgets_size(); ++i) {
    const double s = budgets.budgets(i).total_spent();
    lo = i == 0 ? s : std::min(lo, s);
    hi = std::max(hi, s);
    sum += s;
  }
  // Nodes the ledger does not list spent nothing.
  if (static_cast<uint32_t>(budgets.budgets_size()) < n) lo = 0;
  return json{{"min", lo}, {"mean", n ? sum / n : 0.0}, {"max", hi}};
}

absl::StatusOr<json> Simulation::ChurnFigures(const Campaigns& c) {
  // Every campaign's final reporters, from the curator's store.
  std::vector<CampaignAnswers> answers;
  std::map<std::string, std::vector<uint32_t>> final_of;
  for (const v1::Campaign& campaign : c.all) {
    ASSIGN_OR_RETURN(auto reporters, Reporters(campaign.id()));
    if (reporters.size() != campaign.progress().reported()) {
      return absl::InternalError(absl::StrCat(
          campaign.id(), ": the curator counts ", campaign.progress().reported(),
          " reports but its store holds ", reporters.size()));
    }
    final_of[campaign.id()] = reporters;
    answers.push_back({campaign.attribute(), campaign.spec(), std::move(reporters)});
  }
  ASSIGN_OR_RETURN(json spending, SpendingChecks(answers));
  uint64_t checked = 0, lost = 0;
  int kills = 0, restarts = 0;
  json campaigns = json::array();
  for (const ChurnedCampaign& cc : churned_) {
    const std::vector<uint32_t>& final_set = final_of[cc.id];
    json jk = json::array();
    for (size_t i = 0; i < cc.kills.size(); ++i) {
      const ChurnKill& k = cc.kills[i];
      if (!k.killed) continue;
      const uint64_t missing = MissingFrom(cc.stored_before_kill[i], final_set);
      checked += cc.stored_before_kill[i].size();
      lost += missing;
      ++kills;
      restarts += k.restarted;
      jk.push_back({{"host", k.host},
                    {"after_seconds", k.killed_after_s},
                    {"answered_at_kill", k.answered_at_kill},
                    {"acknowledged_before_kill", cc.acked_before_kill[i]},
                    {"stored_before_kill", cc.stored_before_kill[i].size()},
                    {"lost", missing},
                    {"down_seconds", k.down_s}});
    }
    double secs = 0;
    for (const v1::Campaign& campaign : c.all) {
      if (campaign.id() != cc.id) continue;
      const std::string attr = campaign.attribute() == v1::ATTRIBUTE_LABEL   ? "labels"
                               : campaign.attribute() == v1::ATTRIBUTE_EDGES ? "edges"
                                                                             : "features";
      for (const auto& [stage, v] : stage_seconds_) {
        if (stage == "collect " + attr) secs = v;
      }
    }
    campaigns.push_back({{"id", cc.id}, {"seconds", secs}, {"kills", jk}});
  }
  json figures{
      {"fraction", o_.churn},
      {"down_seconds", o_.churn_down_s},
      {"batch", o_.churn_batch},
      {"kills", kills},
      {"restarts", restarts},
      {"campaigns", campaigns},
      {"acknowledged_reports_checked", checked},
      {"acknowledged_reports_lost", lost},
      {"lost_definition",
       "nodes the curator's store held for the campaign just before a kill "
       "(a superset of those acknowledged) missing from its final reporters"},
  };
  figures.update(spending);
  return figures;
}

absl::StatusOr<json> Simulation::SpendingChecks(
    const std::vector<CampaignAnswers>& answers) {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  // The ledger charges what the curator received: the questions of the
  // campaigns a node reported to. A host charges what it answered, which
  // can include an answer the curator never received (drawn and memoized,
  // then the campaign closed at its deadline before the host, restarted,
  // sent it): the questions of the campaigns that asked the node (every
  // node: simulate's campaigns target all).
  ASSIGN_OR_RETURN(const std::vector<double> expected, ExpectedSpending(answers, n));
  std::vector<uint32_t> all(n);
  for (uint32_t v = 0; v < n; ++v) all[v] = v;
  std::vector<CampaignAnswers> asked = answers;
  for (CampaignAnswers& a : asked) a.reporters = all;
  ASSIGN_OR_RETURN(const std::vector<double> asked_of, ExpectedSpending(asked, n));
  // The ledger's spend per node.
  ASSIGN_OR_RETURN(const v1::GetBudgetsResponse budgets, Budgets());
  std::vector<double> ledger(n, 0.0);
  for (const v1::NodeBudget& b : budgets.budgets()) {
    if (b.node_id() < n) ledger[b.node_id()] = b.total_spent();
  }
  // The hosts' own memos (committed before a report leaves the host).
  std::vector<double> memo(n, 0.0);
  uint64_t memo_rows = 0;
  for (int h = 0; h < o_.hosts; ++h) {
    RETURN_IF_ERROR(AddMemoSpending(absl::StrCat(work_, "/agent-", h), n, &memo,
                                    &memo_rows));
  }
  return json{
      {"curator_extra_epsilon_max", MaxExtraEpsilon(ledger, expected)},
      {"agent_extra_epsilon_max", MaxExtraEpsilon(memo, asked_of)},
      {"agent_memo_rows", memo_rows},
      {"extra_definition",
       "max over nodes of the epsilon spent beyond the sum over the distinct "
       "questions asked of it: by the curator's ledger, of the campaigns the "
       "node reported to; by the hosts' memo rows, of the campaigns that "
       "asked it"},
      {"charged_not_received_epsilon_max", MaxExtraEpsilon(memo, ledger)},
      {"charged_not_received_definition",
       "max over nodes of the epsilon its host charged (memo rows) for "
       "answers the curator never received: drawn and kept, not revealed "
       "(a later identical question gets them again at no cost)"}};
}

uint64_t Simulation::MissingFrom(const std::vector<uint32_t>& stored,
                                 const std::vector<uint32_t>& final_set) {
  uint64_t missing = 0;
  for (uint32_t v : stored) {
    missing += !std::binary_search(final_set.begin(), final_set.end(), v);
  }
  return missing;
}

std::vector<std::string> Simulation::AttackArgs() const {
  if (!o_.malicious || *o_.malicious == 0) return {};
  std::vector<std::string> args = {
      "--malicious",      absl::StrCat(*o_.malicious),
      "--malicious-seed", absl::StrCat(DropoutSeed()),
      "--attack",         std::string(poisoning::kAttackNames.Name(o_.attack_kind)),
      "--attack-class",   absl::StrCat(o_.attack_class),
      "--attack-dims",    absl::StrCat(o_.attack_dims)};
  if (o_.attack_kind == poisoning::AttackKind::kAdaptive) {
    // The screen's public level, as ldpgraph eval's adaptive attacker
    // assumes it (PipelineConfig::screen_alpha, its default without the
    // screen). %.17g: the agents must parse the very same double.
    args.insert(args.end(), {"--attack-alpha",
                             absl::StrFormat("%.17g", o_.screen_alpha)});
  }
  if (o_.attack_kind == poisoning::AttackKind::kFakeEdges) {
    args.insert(args.end(), {"--attack-edges", absl::StrCat(o_.attack_edges)});
  }
  return args;
}

void Simulation::AddTargetRate(const json& details, json* run) const {
  if (!o_.malicious || !details.contains("confusion")) return;
  (*run)["confusion"] = details["confusion"];
  auto rate = pipeline::TargetRate(
      details["confusion"].get<std::vector<std::vector<uint32_t>>>(),
      o_.attack_class);
  if (rate.ok()) (*run)["target_rate"] = *rate;
}

absl::StatusOr<json> Simulation::Results(
    const Campaigns& c, const v1::StageResult& estimate,
    const v1::StageResult& evaluate,
    std::chrono::steady_clock::time_point t0) {
  v1::CuratorStatus status;
  ASSIGN_OR_RETURN(const json spent, Spending(&status));
  if (o_.churn_on) {
    ASSIGN_OR_RETURN(churn_figures_, ChurnFigures(c));
  }
  if (o_.frontend_kills > 0) {
    ASSIGN_OR_RETURN(frontend_figures_, FrontendFigures(c));
  }
  const uint64_t eval_seed = o_.seed.value_or(1);
  json details = json::parse(evaluate.details_json(), nullptr, false);
  if (details.is_discarded()) details = json::object();
  const bool node = o_.task == v1::PIPELINE_TASK_NODE;
  json run = {{"run", 0},
              {"metric", evaluate.metric()},
              {"epochs", details.value("epochs", 0)},
              {"best_epoch", details.value("best_epoch", 0)},
              {"validation", details.value("validation", 0.0)},
              {"seconds_per_epoch", details.value("seconds_per_epoch", 0.0)},
              {"propagate_seconds", details.value("propagate_seconds", 0.0)},
              {"train_seconds", details.value("train_seconds", 0.0)}};
  if (node) {
    run["micro_f1"] = details.value("micro_f1", 0.0);
    run["macro_f1"] = details.value("macro_f1", 0.0);
  }
  if (details.contains("label_agreement")) {
    run["label_agreement"] = details["label_agreement"];
    run["label_agreement_raw"] = details.value("label_agreement_raw", 0.0);
  }
  // PrivGE's node task: the propagations tried and the one kept.
  if (details.contains("tuning")) run["tuning"] = details["tuning"];
  AddTargetRate(details, &run);
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  json j;
  j["task"] = pipeline::TaskName(o_.task);
  j["metric"] = node ? "accuracy" : "roc_auc";
  j["mean"] = evaluate.metric();
  j["std"] = 0.0;
  j["runs"] = 1;
  j["values"] = json::array({evaluate.metric()});
  j["seconds"] = total;
  j["dataset"] = data_.meta.name;
  j["seed"] = eval_seed;
  j["parameters"] = pipeline::ConfigToJson(config_);
  j["noise_source"] = o_.seed ? "seeded-not-private" : "secure";
  j["per_run"] = json::array({run});
  j["deployment"] =
      Deployment(c, details, status, spent, estimate, evaluate, total);
  return j;
}

json Simulation::Deployment(const Campaigns& c, const json& details,
                            const v1::CuratorStatus& status,
                            const json& spent,
                            const v1::StageResult& estimate,
                            const v1::StageResult& evaluate,
                            double total) const {
  const uint32_t n = static_cast<uint32_t>(data_.meta.nodes);
  const std::vector<v1::Campaign>& campaigns = c.all;
  const std::optional<v1::Campaign>& graph_campaign = c.graph;
  uint64_t reports = 0, refusals = 0, rejected = 0;
  json jc = json::array();
  for (const v1::Campaign& c : campaigns) {
    reports += c.progress().reported();
    refusals += c.progress().refused();
    rejected += c.progress().rejected();
    jc.push_back({{"id", c.id()},
                  {"attribute", c.attribute() == v1::ATTRIBUTE_LABEL   ? "label"
                                : c.attribute() == v1::ATTRIBUTE_EDGES ? "edges"
                                                                       : "features"},
                  {"epsilon", c.spec().epsilon()},
                  {"targeted", c.progress().targeted()},
                  {"reported", c.progress().reported()},
                  {"refused", c.progress().refused()},
                  {"close_reason", c.close_reason()},
                  {"rejected", c.progress().rejected()}});
    if (auto it = all_online_seconds_.find(c.id()); it != all_online_seconds_.end()) {
      jc.back()["all_online_answered_seconds"] = it->second;
    }
  }
  json d;
  // Which graph the pipeline ran on (the evaluate stage's record of it).
  json graph = {{"source", o_.edges == "none" ? "curator" : o_.edges}};
  if (graph_campaign) {
    graph["campaign"] = graph_campaign->id();
    graph["mechanism"] = details.value("graph_mechanism", "");
    graph["epsilon"] = o_.edge_epsilon;
    if (o_.edges == "blink") {
      // The estimate's own figures, from the evaluate stage's details.
      graph["delta"] = o_.blink_delta;
      graph["variant"] = details.value("graph_variant", "");
      for (const char* k :
           {"reports", "nonreporters", "prior_iterations", "prior_converged",
            "max_degree_residual", "reported_pairs", "target_edges",
            "expected_edges", "clipped_low", "clipped_high"}) {
        const std::string key = absl::StrCat("graph_", k);
        if (details.contains(key)) graph[k] = details[key];
      }
    } else {
      graph["rule"] = details.value("graph_rule", "");
    }
  }
  graph["edges"] = details.value("graph_edges", uint64_t{0});
  d["graph"] = graph;
  d["hosts"] = hosts_;
  d["nodes"] = n;
  d["edges"] = data_.meta.edges;
  d["tls"] = !status.insecure();
  d["campaigns"] = jc;
  d["scenario"] = {{"dropout", o_.dropout},
                   {"offline_nodes", n - online_nodes_},
                   {"quorum", o_.quorum},
                   {"campaign_deadline_seconds", o_.deadline_s}};
  if (!o_.attach) d["scenario"]["network"] = NetworkJson();
  if (!churn_figures_.is_null()) d["scenario"]["churn"] = churn_figures_;
  if (!frontend_figures_.is_null()) {
    d["scenario"]["frontend_kills"] = frontend_figures_;
  }
  d["store"] = {{"kind", o_.store}, {"frontends", o_.frontends}};
  // The attacker's nodes, drawn once for the poisoning and defence figures.
  const std::vector<uint32_t> malicious =
      o_.malicious ? MaliciousNodes() : std::vector<uint32_t>();
  if (o_.malicious) {
    d["scenario"]["malicious"] = {
        {"fraction", *o_.malicious},
        {"nodes", malicious.size()},
        {"attack", std::string(poisoning::kAttackNames.Name(o_.attack_kind))},
        {"attack_class", o_.attack_class},
        {"attack_dims", o_.attack_dims}};
    if (o_.attack_kind == poisoning::AttackKind::kFakeEdges) {
      d["scenario"]["malicious"]["attack_edges"] = o_.attack_edges;
    }
  }
  if (o_.defences.any()) {
    d["scenario"]["defence"] = DefenceJson(o_, estimate, evaluate, malicious);
  }
  d["reports"] = reports;
  d["refusals"] = refusals;
  d["rejected"] = rejected;
  // An operator's status adds up its frontends' (a restarted one counts
  // since its restart).
  const uint64_t report_bytes = status.report_bytes_received();
  d["report_bytes"] = report_bytes;
  d["report_bytes_per_report"] = reports ? double(report_bytes) / reports : 0.0;
  d["epsilon_spent_per_node"] = spent;
  if (!o_.attach) {  // ldpctl run cannot see another machine's processes
    uint64_t agents_max = 0, agents_total = 0;
    for (const auto& a : agents_) {
      if (!a) continue;
      agents_max = std::max(agents_max, a->PeakRssBytes());
      agents_total += a->PeakRssBytes();
    }
    constexpr double kMiB = 1 << 20;
    uint64_t curator = curator_->PeakRssBytes();
    uint64_t frontends = 0;
    for (const auto& f : frontends_) {
      if (f) frontends += f->PeakRssBytes();
    }
    curator += frontends;
    const uint64_t self = SelfPeakRssBytes();
    // Each process's own peak, summed: an upper bound on what the
    // deployment held at any one moment (the peaks need not coincide).
    d["peak_rss_mib"] = {{"curator", curator / kMiB},
                         {"frontends", frontends / kMiB},
                         {"agent_host_max", agents_max / kMiB},
                         {"agent_hosts_total", agents_total / kMiB},
                         {"ldpctl", self / kMiB},
                         {"all_processes", (curator + agents_total + self) / kMiB}};
  }
  json stages = json::object();
  for (const auto& [k, v] : stage_seconds_) stages[k] = v;
  d["stage_seconds"] = stages;
  // Where the evaluate stage's time went: the curator's propagation and
  // training, and the rest (reading the estimate, splits, conversions,
  // recording the result, the call itself).
  {
    const double prop = details.value("propagate_seconds", 0.0);
    const double train = details.value("train_seconds", 0.0);
    double whole = 0;
    for (const auto& [k, v] : stage_seconds_) {
      if (k == "evaluate") whole = v;
    }
    d["evaluate_seconds"] = {{"propagate", prop},
                             {"train", train},
                             {"rest", std::max(0.0, whole - prop - train)}};
  }
  d["total_seconds"] = total;
  d["results"] = {{"estimate", estimate.id()}, {"evaluate", evaluate.id()}};
  if (!o_.attach && (o_.keep || o_.keep_running || !created_work_)) {
    d["work_dir"] = work_;
  }
  if (o_.attach) d["curator"] = admin_->address;
  return d;
}

void Simulation::ScenarioRows(const json& d, const TableRow& row) const {
  const json& sc = d["scenario"];
  if (sc["dropout"].get<double>() > 0 || o_.quorum < 1 || o_.deadline_s > 0) {
    std::string closing = absl::StrCat("quorum ", o_.quorum);
    if (o_.deadline_s > 0) {
      absl::StrAppend(&closing, ", deadline ", o_.deadline_s, " s");
    }
    row("scenario",
        absl::StrFormat("dropout %g (%u nodes offline); campaigns close at %s",
                        sc["dropout"].get<double>(),
                        sc["offline_nodes"].get<uint32_t>(), closing));
    for (const json& c : d["campaigns"]) {
      row(absl::StrCat("  ", c["attribute"].get<std::string>(), " ",
                       c["id"].get<std::string>()),
          absl::StrCat(
              absl::StrFormat("%u of %u answered, closed on %s",
                              c["reported"].get<uint32_t>() +
                                  c["refused"].get<uint32_t>(),
                              c["targeted"].get<uint32_t>(),
                              c["close_reason"].get<std::string>()),
              c.contains("all_online_answered_seconds")
                  ? absl::StrFormat(
                        "; every online node in %.2f s",
                        c["all_online_answered_seconds"].get<double>())
                  : ""));
    }
  }
  if (sc.contains("network") && sc["network"]["enabled"].get<bool>()) {
    row("network", NetworkText(sc["network"]));
  }
  if (sc.contains("frontend_kills")) {
    const json& fk = sc["frontend_kills"];
    row("frontend kills",
        absl::StrFormat("%d of %d frontends' SIGKILLs; %u acknowledged "
                        "reports lost (of %u checked); extra epsilon %g "
                        "(ledger), %g (agents' memos)",
                        fk["kills"].get<int>(), o_.frontends,
                        fk["acknowledged_reports_lost"].get<uint64_t>(),
                        fk["acknowledged_reports_checked"].get<uint64_t>(),
                        fk["curator_extra_epsilon_max"].get<double>(),
                        fk["agent_extra_epsilon_max"].get<double>()));
  }
  if (sc.contains("churn")) {
    const json& ch = sc["churn"];
    row("churn",
        absl::StrFormat("%g of the hosts: %d kills, %d restarts; %u "
                        "acknowledged reports lost (of %u checked); extra "
                        "epsilon %g (ledger), %g (agents' memos)",
                        ch["fraction"].get<double>(), ch["kills"].get<int>(),
                        ch["restarts"].get<int>(),
                        ch["acknowledged_reports_lost"].get<uint64_t>(),
                        ch["acknowledged_reports_checked"].get<uint64_t>(),
                        ch["curator_extra_epsilon_max"].get<double>(),
                        ch["agent_extra_epsilon_max"].get<double>()));
    if (const double unsent = ch["charged_not_received_epsilon_max"].get<double>();
        unsent > 0) {
      row("", absl::StrFormat("a host charged up to %g epsilon for answers the "
                              "curator never received (closed first)",
                              unsent));
    }
    for (const json& c : ch["campaigns"]) {
      row(absl::StrCat("  ", c["id"].get<std::string>()),
          absl::StrFormat("%u kills, complete in %.2f s",
                          c["kills"].size(), c["seconds"].get<double>()));
    }
  }
  if (sc.contains("malicious")) {
    const json& m = sc["malicious"];
    row("poisoning",
        absl::StrFormat("malicious %g (%u nodes, simulated), %s attack on "
                        "class %d, %d target dimensions",
                        m["fraction"].get<double>(), m["nodes"].get<uint32_t>(),
                        m.value("attack", "maximal-gain"),
                        m["attack_class"].get<int>(), m["attack_dims"].get<int>()));
  }
  if (sc.contains("defence")) row("defence", DefenceRow(sc["defence"]));
}

void Simulation::Report(const json& j) {
  if (o_.json) {
    out_ << j.dump(2) << "\n" << std::flush;
    return;
  }
  const json& d = j["deployment"];
  const bool lpgnn = o_.method == v1::PIPELINE_METHOD_LPGNN;
  std::string pipeline_text =
      absl::StrCat(lpgnn ? "LPGNN" : "PrivGE", ", ",
                   o_.task == v1::PIPELINE_TASK_NODE ? "node classification"
                                                     : "link prediction",
                   ", ", config_.mechanism, " epsilon_x ",
                   absl::StrFormat("%g", config_.epsilon));
  if (config_.label_epsilon) {
    absl::StrAppend(&pipeline_text, ", label RR epsilon_y ",
                    absl::StrFormat("%g", *config_.label_epsilon));
  }
  const TableRow row = [&](const std::string& k, const std::string& v) {
    out_ << absl::StrFormat("  %-26s %s\n", k, v);
  };
  out_ << (o_.attach ? "\n== ldpctl run: results ==\n"
                      : "\n== ldpctl simulate: results ==\n");
  row("dataset", absl::StrCat(j["dataset"].get<std::string>(), " (",
                              d["nodes"].get<uint32_t>(), " nodes, ",
                              d["edges"].get<size_t>(), " edges)"));
  row("deployment",
      o_.attach ? absl::StrCat("curator ", d["curator"].get<std::string>(), " + ",
                               hosts_, " agent hosts, gRPC over ",
                               d["tls"].get<bool>() ? "TLS" : "PLAINTEXT")
                : o_.store == "postgres"
                      ? absl::StrCat(o_.frontends > 0
                                         ? absl::StrCat("operator + ", o_.frontends,
                                                        " frontends")
                                         : std::string("1 curator"),
                                     " on PostgreSQL + ", o_.hosts,
                                     " agent hosts, gRPC over TLS on 127.0.0.1")
                      : absl::StrCat("1 curator + ", o_.hosts,
                                     " agent hosts, gRPC over TLS on 127.0.0.1"));
  row("pipeline", pipeline_text);
  if (const json& r = j["per_run"][0]; r.contains("tuning") &&
                                       r["tuning"].contains("candidates")) {
    // PrivGE's node task: which propagation the validation nodes chose.
    std::string tried;
    for (const json& c : r["tuning"]["candidates"]) {
      absl::StrAppend(&tried, tried.empty() ? "" : ", ",
                      c["propagation"].get<std::string>(), " ",
                      absl::StrFormat("%.3f", c["validation"].get<double>()));
    }
    row("propagation",
        absl::StrCat(r["tuning"]["propagation"].get<std::string>(),
                     " (kept by validation accuracy: ", tried, ")"));
  }
  {
    const json& g = d["graph"];
    if (g["source"] == "curator") {
      row("graph", absl::StrFormat("the curator's (true edges, %u)",
                                   g["edges"].get<uint64_t>()));
    } else if (g["source"] == "blink") {
      row("graph",
          absl::StrFormat(
              "assembled from %s: Blink, epsilon %g (delta %g), %s over %u "
              "reporters, %u non-reporters isolated (%u edges)",
              g["campaign"].get<std::string>(), g["epsilon"].get<double>(),
              g["delta"].get<double>(), g["variant"].get<std::string>(),
              g.value("reports", uint64_t{0}),
              g.value("nonreporters", uint64_t{0}),
              g["edges"].get<uint64_t>()));
    } else {
      row("graph",
          absl::StrFormat(
              "assembled from %s: %s, epsilon_e %g, %s (%u edges)",
              g["campaign"].get<std::string>(),
              g["source"] == "rr" ? "edge randomized response"
                                  : absl::StrCat("neighbour substitution, approach ",
                                                 g["source"] == "ns1" ? "1" : "2"),
              g["epsilon"].get<double>(), g["rule"].get<std::string>(),
              g["edges"].get<uint64_t>()));
    }
  }
  row("noise", o_.seed ? absl::StrCat("seeded (", *o_.seed,
                                      "): reproducible, NOT private")
                       : "secure (OpenSSL)");
  ScenarioRows(d, row);
  out_ << "\n";
  row(j["metric"].get<std::string>() + " (test)",
      absl::StrFormat("%.4f", j["mean"].get<double>()));
  if (j["per_run"][0].contains("target_rate")) {
    row(absl::StrCat("target rate (class ", o_.attack_class, ")"),
        absl::StrFormat("%.4f", j["per_run"][0]["target_rate"].get<double>()));
  }
  const json& e = d["epsilon_spent_per_node"];
  row("epsilon spent per node",
      absl::StrFormat("mean %g (min %g, max %g)", e["mean"].get<double>(),
                      e["min"].get<double>(), e["max"].get<double>()));
  row("reports", absl::StrFormat("%u (%u refused, %u rejected)",
                                 d["reports"].get<uint64_t>(),
                                 d["refusals"].get<uint64_t>(),
                                 d["rejected"].get<uint64_t>()));
  row("bytes on the wire", absl::StrFormat(
                               "%.1f KiB of reports (%.1f B per report)",
                               d["report_bytes"].get<uint64_t>() / 1024.0,
                               d["report_bytes_per_report"].get<double>()));
  if (d.contains("peak_rss_mib")) {
    const json& mem = d["peak_rss_mib"];
    row("peak memory", absl::StrFormat(
                           "%.0f MiB in all: curator %.0f MiB%s, agent hosts "
                           "%.0f MiB (largest %.0f), ldpctl %.0f MiB",
                           mem["all_processes"].get<double>(),
                           mem["curator"].get<double>(),
                           o_.frontends > 0
                               ? absl::StrFormat(" (frontends %.0f)",
                                                 mem["frontends"].get<double>())
                               : std::string(),
                           mem["agent_hosts_total"].get<double>(),
                           mem["agent_host_max"].get<double>(),
                           mem["ldpctl"].get<double>()));
  }
  out_ << "\n  " << absl::StrFormat("%-26s %9s\n", "stage", "seconds");
  for (const auto& [k, v] : stage_seconds_) {
    out_ << absl::StrFormat("  %-26s %9.2f\n", k, v);
  }
  const json& r = j["per_run"][0];
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which propagate",
                          r["propagate_seconds"].get<double>());
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which train",
                          r["train_seconds"].get<double>());
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which the rest",
                          d["evaluate_seconds"]["rest"].get<double>());
  out_ << absl::StrFormat("  %-26s %9.2f\n", "total", d["total_seconds"].get<double>());
  out_ << std::flush;
}

absl::Status Simulation::StartNetwork() {
  if (!o_.network()) return absl::OkStatus();
  // Network simulation, not privacy noise: seeded even without --seed.
  const uint64_t seed = SeedMix(o_.seed.value_or(1) ^ 0x6e6574776f726b21ULL);
  for (int h = 0; h < o_.hosts; ++h) {
    net::FaultProxy::Options p;
    p.upstream = absl::StrCat("127.0.0.1:", port_);
    p.latency = absl::Microseconds(std::llround(o_.latency_ms * 1000));
    p.jitter = absl::Microseconds(std::llround(o_.jitter_ms * 1000));
    p.loss = o_.loss;
    p.seed = SeedFinalise(seed + static_cast<uint64_t>(h));
    auto proxy = net::FaultProxy::Create(std::move(p));
    if (!proxy.ok()) {
      return absl::Status(proxy.status().code(),
                          absl::StrCat("the network proxy of agent host ", h,
                                       ": ", proxy.status().message()));
    }
    proxies_.push_back(std::move(*proxy));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> Simulation::Reporters(
    const std::string& id) {
  if (observer_ == nullptr) return StoredReporters(work_ + "/curator", id);
  int64_t n = 0;
  if (id.size() < 2 || id[0] != 'c' || !absl::SimpleAtoi(id.substr(1), &n)) {
    return absl::InvalidArgumentError(absl::StrCat("not a campaign id: ", id));
  }
  std::vector<uint32_t> nodes;
  RETURN_IF_ERROR(observer_->ForEachAnswer(n, [&](const store::AnswerRow& a) {
    if (!a.refusal) nodes.push_back(a.node);
    return true;
  }));
  return nodes;  // ascending (ForEachAnswer orders by node)
}

absl::Status Simulation::KillFrontends(const v1::Campaign& c,
                                       absl::Duration since_open) {
  const int k = static_cast<int>(frontend_kills_.size());
  if (k >= o_.frontend_kills) return absl::OkStatus();
  uint32_t answered = c.progress().reported() + c.progress().refused();
  if (observer_ != nullptr) {
    // The store's count now: the operator's lags by its sync interval, in
    // which a small campaign can finish.
    int64_t id = 0;
    absl::SimpleAtoi(absl::string_view(c.id()).substr(1), &id);
    uint32_t stored = 0;
    RETURN_IF_ERROR(observer_->ForEachAnswerKey(
        [&](int64_t campaign, uint32_t, bool) { stored += campaign == id; }));
    answered = std::max(answered, stored);
  }
  // Kill k is due when the answers pass (k + 1) / (K + 1) of the targets.
  if (static_cast<uint64_t>(answered) * (o_.frontend_kills + 1) <
      static_cast<uint64_t>(c.progress().targeted()) * (k + 1)) {
    return absl::OkStatus();
  }
  killed_campaign_ = c.id();
  FrontendKill kill;
  kill.frontend = k % o_.frontends;
  kill.after_seconds = absl::ToDoubleSeconds(since_open);
  kill.answered_at_kill = answered;
  kill.acked_before_kill = c.progress().reported();
  ASSIGN_OR_RETURN(kill.stored_before_kill, Reporters(c.id()));
  const int i = kill.frontend;
  const std::string how = frontends_[i]->Kill();
  frontends_[i].reset();
  progress_.Note(absl::StrFormat(
      "frontend kill %d: frontend %d %s during %s (%u reports stored)", k + 1,
      i, how, c.id(), kill.stored_before_kill.size()));
  const absl::Time t = absl::Now();
  ++frontend_restarts_[i];
  RETURN_IF_ERROR(StartFrontend(i, frontend_ports_[i]));
  kill.restart_seconds = absl::ToDoubleSeconds(absl::Now() - t);
  frontend_kills_.push_back(std::move(kill));
  return absl::OkStatus();
}

absl::StatusOr<json> Simulation::FrontendFigures(const Campaigns& c) {
  std::vector<CampaignAnswers> answers;
  std::vector<uint32_t> final_set;
  for (const v1::Campaign& campaign : c.all) {
    ASSIGN_OR_RETURN(auto reporters, Reporters(campaign.id()));
    if (campaign.id() == killed_campaign_) final_set = reporters;
    answers.push_back({campaign.attribute(), campaign.spec(), std::move(reporters)});
  }
  ASSIGN_OR_RETURN(json spending, SpendingChecks(answers));
  uint64_t checked = 0, lost = 0;
  json kills = json::array();
  for (const FrontendKill& k : frontend_kills_) {
    const uint64_t missing = MissingFrom(k.stored_before_kill, final_set);
    checked += k.stored_before_kill.size();
    lost += missing;
    kills.push_back({{"frontend", k.frontend},
                     {"after_seconds", k.after_seconds},
                     {"answered_at_kill", k.answered_at_kill},
                     {"acknowledged_before_kill", k.acked_before_kill},
                     {"stored_before_kill", k.stored_before_kill.size()},
                     {"lost", missing},
                     {"restart_seconds", k.restart_seconds}});
  }
  json figures{
      {"frontends", o_.frontends},
      {"campaign", killed_campaign_},
      {"kills", static_cast<int>(frontend_kills_.size())},
      {"each", kills},
      {"acknowledged_reports_checked", checked},
      {"acknowledged_reports_lost", lost},
      {"lost_definition",
       "nodes the store held for the campaign just before a kill (a superset "
       "of those acknowledged) missing from its final reporters"}};
  figures.update(spending);
  return figures;
}

std::string Simulation::AgentCuratorAddress(int h) const {
  if (!frontend_ports_.empty()) {
    // Every frontend, starting at a different one per host: each host keeps
    // to the first live one of its list.
    std::vector<std::string> list;
    const int n = static_cast<int>(frontend_ports_.size());
    for (int k = 0; k < n; ++k) {
      list.push_back(absl::StrCat("127.0.0.1:", frontend_ports_[(h + k) % n]));
    }
    return absl::StrJoin(list, ",");
  }
  return absl::StrCat("127.0.0.1:", proxies_.empty() ? port_
                                                      : proxies_[h]->port());
}

json Simulation::NetworkJson() const {
  uint64_t connections = 0, chunks = 0, losses = 0, to_curator = 0,
           to_agents = 0;
  absl::Duration max_delay;
  double cpu = 0;
  for (const auto& p : proxies_) {
    const net::FaultProxy::Stats s = p->stats();
    connections += s.connections;
    chunks += s.chunks;
    losses += s.injected_losses;
    to_curator += s.bytes_to_upstream;
    to_agents += s.bytes_to_client;
    max_delay = std::max(max_delay, s.max_delay);
    cpu += s.cpu_seconds;
  }
  return {{"enabled", o_.network()},
          {"latency_ms", o_.latency_ms},
          {"jitter_ms", o_.jitter_ms},
          {"loss", o_.loss},
          {"rto_ms", absl::ToDoubleMilliseconds(net::FaultProxy::RetransmissionTimeout(
                         absl::Milliseconds(o_.latency_ms),
                         absl::Milliseconds(o_.jitter_ms)))},
          {"proxies", proxies_.size()},
          {"connections", connections},
          {"chunks", chunks},
          {"injected_losses", losses},
          {"bytes_to_curator", to_curator},
          {"bytes_to_agents", to_agents},
          {"max_delay_ms", absl::ToDoubleMilliseconds(max_delay)},
          {"proxy_cpu_seconds", cpu}};
}

std::string Simulation::NetworkText(const json& n) const {
  return absl::StrFormat(
      "latency %g ms +- %g ms each way, loss %g per chunk through %u proxies: "
      "%u of %u chunks stalled one RTO (%g ms), longest hold %.0f ms",
      n["latency_ms"].get<double>(), n["jitter_ms"].get<double>(),
      n["loss"].get<double>(), n["proxies"].get<uint32_t>(),
      n["injected_losses"].get<uint64_t>(), n["chunks"].get<uint64_t>(),
      n["rto_ms"].get<double>(), n["max_delay_ms"].get<double>());
}

absl::Status Simulation::ServeUntilInterrupted() {
  progress_.Note(absl::StrCat(
      "\nThe deployment keeps running. In another shell:\n  ldpctl --config ",
      work_, "/ldpctl.conf status\nCtrl-C stops it."));
  while (true) {
    absl::Status s = Check();
    if (absl::IsCancelled(s)) return absl::OkStatus();  // asked to stop
    RETURN_IF_ERROR(s);
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace

// The defence flags' help, shared with ldpgraph eval.
constexpr char kDefenceSection[] =
    "\nDefence (default: off; ldpctl simulate and ldpctl run):\n";
std::string SimulateHelp() {
  return absl::StrCat(kHelp, poisoning::kAttackHelp, kAttackAlphaHelp,
                      kDefenceSection, pipeline::kDefenceHelp, kHelpTail);
}
std::string RunHelp() {
  return absl::StrCat(kRunHelp, kDefenceSection, pipeline::kDefenceHelp);
}

int RunAttached(const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err) {
  auto options = ParseOptions(args, "", /*attach=*/true);
  if (!options.ok()) {
    err << "ldpctl run: " << options.status().message()
        << "\nRun ldpctl run --help for its flags.\n";
    return kExitUsage;
  }
  Interrupts::Install();
  Simulation run(*options, out, err);
  absl::Status s = run.Run();
  if (!s.ok()) {
    err << "\nldpctl run: " << absl::StatusCodeToString(s.code()) << ": "
        << s.message() << "\n";
  }
  return ExitCodeOf(s);
}

int RunSimulate(const std::vector<std::string>& args, const std::string& self_path,
                std::ostream& out, std::ostream& err) {
  auto options = ParseOptions(args, self_path, /*attach=*/false);
  if (!options.ok()) {
    err << "ldpctl simulate: " << options.status().message()
        << "\nRun ldpctl simulate --help for its flags.\n";
    return kExitUsage;
  }
  Interrupts::Install();
  if (options->seed) err << kSeededWarning << "\n";
  absl::Status s;
  std::string work;
  bool created = false, keep = options->keep || options->keep_running;
  {
    Simulation sim(*options, out, err);
    s = sim.Run();
    work = sim.work_dir();
    created = sim.created_work_dir();
    if (!s.ok()) {
      err << "\nldpctl simulate: " << absl::StatusCodeToString(s.code()) << ": "
          << s.message() << "\n"
          << sim.failure_logs();
    }
    sim.StopAll();  // agents first, then the curator
    // A run that failed before any process started has no log to read:
    // what it wrote (a dataset, certificates, secrets) goes, with the
    // folder if it made it, and the message does not send the user there.
    if (!s.ok() && !keep && !sim.started_processes()) {
      sim.RemoveWorkFiles();
      work.clear();
      created = false;
    }
  }
  // A folder ldpctl made is removed unless kept; one the user named
  // (--work-dir) is theirs and stays. A failure keeps the logs and says
  // where they are.
  if (!s.ok() && !absl::IsCancelled(s) && !work.empty()) {
    err << "ldpctl simulate: logs, stores and certificates are in " << work
        << "\n";
    keep = true;
  }
  if (created && !keep) {
    std::error_code ec;
    fs::remove_all(work, ec);
  } else if (created && s.ok()) {
    err << "ldpctl simulate: work folder kept: " << work << "\n";
  }
  return ExitCodeOf(s);
}

}  // namespace ldpgraph::ldpctl

// `ldpctl simulate` and `ldpctl run` (simulate.h): their help texts and
// entry points, which parse the flags (simulate_options.cc), run a
// Simulation (internal/simulation.h) and map the outcome to an exit code,
// cleaning up the work folder as the help describes.
#include "server/ldpctl/simulate.h"

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/attacks/poisoning.h"
#include "common/random/random.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/simulate_options.h"
#include "server/ldpctl/internal/simulation.h"
#include "server/ldpctl/process.h"
#include "server/pipeline/config.h"

namespace ldpgraph::ldpctl {
namespace {

namespace fs = std::filesystem;

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
  --method M          privge (HDS, PPR, MLP; default), lpgnn (Multi-bit,
                      KProp, GraphSAGE, LPGNN's published label denoising)
                      or upgnet (Multi-bit, NFR, HOA, GraphSAGE)
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
  --edge              the agents reach the curator (its frontends with
                      --frontends) through HAProxy, which terminates their
                      TLS and spreads their calls over the frontends on a
                      few HTTP/2 connections, keeping each host on one
                      (apt-get install haproxy). Not with --latency
  --database-restarts K  with --store postgres: SIGKILL the PostgreSQL
                      server (every process of it) K times during the
                      features campaign, each restarted at once. Every
                      curator process rides it out: reported under
                      scenario.database_restarts as --frontend-kills's
                      figures, with the seconds until reports flow again
  --operator-kills K  with --frontends: start a standby operator beside the
                      active one and SIGKILL the active one K times during
                      the features campaign; the standby takes over, ldpctl
                      follows it (its connection lists both), and the killed
                      one restarts as the next standby. Reported under
                      scenario.operator_kills: the seconds until the standby
                      serves, reports lost, extra epsilon
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
                      Seeded, equal to `ldpgraph eval` with the same flags,
                      --edges rr or blink and fake-edges (which needs them
                      and crafts them) included
  --attack-class C    the class the attacker wants predicted (default 0)
  --attack-dims R     its target feature dimensions (default 10)
  --attack-edges V    --attack fake-edges: the victims each malicious node
                      claims an edge to (default 50)
)";
// The baselines' flag, after the Defence section.
constexpr char kBaselinesHelp[] = R"(
Baselines (node task; ldpctl simulate and ldpctl run):
  --baselines LIST    what the evaluate stage also scores beside the result,
                      from what the curator holds anyway (comma separated, or
                      none): graph-labels (default up to 100,000 nodes:
                      label propagation from the training labels, no
                      features; well under a second on the quick start's
                      graph) and feature-free (random
                      features in place of the reports, the same model,
                      labels and split: one more training, so asked for)
                      and no-graph (the same reports over a graph of no
                      edge: what the graph adds; beside --edges, whether
                      the private graph adds at all: one more training).
                      The table adds a row per baseline saying what the
                      reports added over it; the JSON a "baselines" object
                      as ldpgraph eval --baselines lays it out
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
  ldpctl simulate --store postgres --frontends 3 --database-restarts 3 --operator-kills 3
  ldpctl simulate --method lpgnn --epsilon 3 --label-epsilon 3 --malicious 0.1 --defence screen
  ldpctl simulate --method lpgnn --mechanism multibit --epsilon 2 --edges ns1 --edge-epsilon 1
)";

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

}  // namespace

// The defence flags' help, shared with ldpgraph eval.
constexpr char kDefenceSection[] =
    "\nDefence (default: off; ldpctl simulate and ldpctl run):\n";
std::string SimulateHelp() {
  return absl::StrCat(kHelp, poisoning::kAttackHelp, kAttackAlphaHelp,
                      kDefenceSection, pipeline::kDefenceHelp, kBaselinesHelp,
                      kHelpTail);
}
std::string RunHelp() {
  return absl::StrCat(kRunHelp, kDefenceSection, pipeline::kDefenceHelp,
                      kBaselinesHelp);
}

int RunAttached(const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err) {
  auto options = internal::ParseOptions(args, "", /*attach=*/true);
  if (!options.ok()) {
    err << "ldpctl run: " << options.status().message()
        << "\nRun ldpctl run --help for its flags.\n";
    return kExitUsage;
  }
  Interrupts::Install();
  internal::Simulation run(*options, out, err);
  absl::Status s = run.Run();
  if (!s.ok()) {
    err << "\nldpctl run: " << absl::StatusCodeToString(s.code()) << ": "
        << s.message() << "\n";
  }
  return ExitCodeOf(s);
}

int RunSimulate(const std::vector<std::string>& args, const std::string& self_path,
                std::ostream& out, std::ostream& err) {
  auto options = internal::ParseOptions(args, self_path, /*attach=*/false);
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
    internal::Simulation sim(*options, out, err);
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

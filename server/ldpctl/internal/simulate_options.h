// The flags of `ldpctl simulate` and `ldpctl run` (server/ldpctl/simulate.h)
// as one Options value, parsed and validated before anything is written or
// started, and the pipeline configuration they select. Internal to ldpctl:
// simulate.cc parses, the Simulation (internal/simulation.h) runs on the
// result; simulate_options.cc implements both functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/attacks/edge_poisoning.h"
#include "common/attacks/poisoning.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "server/ldpctl/connection.h"
#include "server/pipeline/config.h"

namespace ldpgraph::ldpctl::internal {

// Everything a run was asked for, each field at its flag's default unless
// given. A plain value: ParseOptions fills and validates it, nothing else
// writes it.
inline constexpr uint64_t kDefaultBaselinesMaxNodes = 100'000;

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
  // of frontends during the features campaign; SIGKILLs of the database
  // (each restarted at once) and of the active operator (a standby takes
  // over; the killed one comes back as the next standby).
  std::string store = "sqlite";
  int frontends = 0;
  int frontend_kills = 0;
  int database_restarts = 0;
  int operator_kills = 0;
  // --edge: the agents reach the curator through HAProxy, which terminates
  // their TLS (common/net/edge_config.h).
  bool edge = false;
  // Any fault of the server side during the features campaign.
  bool server_faults() const {
    return frontend_kills > 0 || database_restarts > 0 || operator_kills > 0;
  }
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
  // --baselines: what the evaluate stage also scores beside the result
  // (server/pipeline/baselines.h), node task: graph-labels by default (label
  // propagation: well under a second on the quick start's graph);
  // feature-free trains the model once more and is asked for.
  // Without the flag the default applies to graphs of at most
  // kDefaultBaselinesMaxNodes nodes: past them label propagation's 400
  // passes over the graph add to a large run's evaluate stage.
  std::vector<pipeline::Baseline> baselines = {
      pipeline::Baseline::kGraphLabels};
  bool baselines_given = false;
  std::string bin_dir;
  std::string work_dir;
  bool keep = false;
  bool keep_running = false;
  bool json = false;
};

// args: the flags after "simulate" (attach false) or "run" (attach true,
// which takes the connection flags and requires --dataset, and takes none
// of the flags that start or disturb processes). self_path: ldpctl's
// executable, whose folder is the default --bin-dir. Every flag is checked
// here, before a run writes or starts anything: INVALID_ARGUMENT naming the
// flag for an unknown flag, a value that does not parse or is out of range,
// or flags that do not combine; for run, ResolveConnection's errors
// (connection.h) too.
absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args,
                                     const std::string& self_path, bool attach);

// The library's configuration of the run the deployment performs: what
// `ldpgraph eval` would use with the same flags.
// INVALID_ARGUMENT when pipeline::ValidateConfig rejects the combination.
absl::StatusOr<pipeline::PipelineConfig> ConfigOf(const Options& o);

}  // namespace ldpgraph::ldpctl::internal

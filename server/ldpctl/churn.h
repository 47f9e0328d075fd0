// Churn: agent hosts killed (SIGKILL) and restarted on a schedule while a
// campaign runs, and the figures that say whether anything was lost or
// spent twice. Shared by `ldpctl simulate --churn` and the fleet load tool
// (tests/bench/fleet_load.cc --real-agents --churn); each supervises its
// own processes and gives ChurnDriver the two hooks that kill and restart
// one of them.
//
// The schedule is a simulation's design, public and reproducible: it is
// drawn from a seed (PublicRandom), never from the privacy noise.
//
// Seeded runs: an agent given --seed draws each node's answers in turn from
// its streams (NodeNoiseSeed; the edge answers from their own,
// client/agent.h NodeEdgeRandomSource). Each memo row stores how far the
// answer's stream had gone (MemoRow::draws, client/agent_state.h), and a restarted
// host advances each node's stream to it, so a node that answers after a
// restart draws exactly what it would have drawn without one: a seeded run
// with churn equals the run without it, and `ldpgraph eval`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ldpgraph/v1/agent.pb.h"
#include "ldpgraph/v1/mechanism.pb.h"
#include "server/store/store.h"

namespace ldpgraph::ldpctl {

// One planned kill of one host in one campaign.
struct ChurnKill {
  int host = 0;
  // Due once the campaign's answered count (reports and refusals) reaches
  // at_fraction of its targeted nodes; for an exchange (neighbour
  // substitution, whose reports all come at its end) at_time after the
  // campaign opened instead.
  bool by_time = false;
  double at_fraction = 0;
  absl::Duration at_time;
  // What happened (filled by ChurnDriver).
  bool killed = false;
  bool restarted = false;
  uint32_t answered_at_kill = 0;  // the progress the kill saw
  double killed_after_s = 0;      // seconds after the campaign opened
  double down_s = 0;              // seconds from kill to restart
  absl::Time killed_at;
};

// ceil(fraction x hosts) distinct hosts (fraction in [0, 1]) for the
// campaign-th campaign of a run (0, 1, ...), each with its point: a
// fraction drawn in [0.1, 0.6], or for an exchange a delay drawn in
// [0.05, 0.5] s. The same (seed, campaign, hosts, fraction) always gives
// the same plan. INVALID_ARGUMENT for a fraction outside [0, 1] or hosts < 1.
absl::StatusOr<std::vector<ChurnKill>> PlanChurn(uint64_t seed, int campaign,
                                                 int hosts, double fraction,
                                                 bool exchange);

// Carries out one campaign's plan. Not thread-safe: one supervisor thread
// polls it.
class ChurnDriver {
 public:
  struct Hooks {
    // Called just before host h is killed (to read what the curator has
    // acknowledged so far); an error stops the run. May be empty.
    std::function<absl::Status(int host)> before_kill;
    // Kills host h with SIGKILL and reaps it.
    std::function<absl::Status(int host)> kill;
    // Starts host h again with the same arguments and state.
    std::function<absl::Status(int host)> restart;
  };
  // down: how long a killed host stays down, >= 0.
  ChurnDriver(std::vector<ChurnKill> plan, absl::Duration down, Hooks hooks);

  // One look at the campaign: kills every host whose point has come (and
  // that is not down already), restarts every host whose down time has
  // passed. answered and targeted: the campaign's progress; since_open:
  // the time since it opened. The first hook error is returned.
  absl::Status Poll(uint32_t answered, uint32_t targeted,
                    absl::Duration since_open);
  // The campaign is over: waits out the down time of every host still down
  // and restarts it. Kills not yet due are dropped (never carried out).
  absl::Status Finish();
  // Whether host h is down (killed, not restarted yet).
  bool down(int host) const;
  // Whether a kill is still due (a supervisor polls faster meanwhile).
  bool pending() const;
  const std::vector<ChurnKill>& kills() const { return plan_; }

 private:
  std::vector<ChurnKill> plan_;
  absl::Duration down_;
  Hooks hooks_;
  absl::Time opened_;
};

// The nodes with a stored report (not a refusal) for campaign `campaign_id`
// ("c1", ...) in `store`, read through its interface (ForEachAnswer): what
// the curator has made durable, which is a superset of what it has
// acknowledged (it acknowledges a report after its commit). Ascending.
// INVALID_ARGUMENT for a malformed id; the store's errors (DATA_LOSS for a
// damaged log).
absl::StatusOr<std::vector<uint32_t>> StoredReporters(
    store::CuratorStore& store, absl::string_view campaign_id);
// The same from the SQLite store of a curator's data directory, opened
// read-only beside the running curator (store.h Options::read_only).
absl::StatusOr<std::vector<uint32_t>> StoredReporters(
    const std::string& curator_data_dir, absl::string_view campaign_id);

// Per node (indexed by node id, `nodes` entries), the sum of the epsilons
// of the memo rows of an agent host's state <state_dir>/agent.db, read
// through client/agent_state.h opened read-only, added into *spent; *rows
// counts the rows read. INVALID_ARGUMENT for a row whose node is >= nodes;
// the state's errors otherwise (NOT_FOUND for a host with no state).
absl::Status AddMemoSpending(const std::string& state_dir, uint32_t nodes,
                             std::vector<double>* spent, uint64_t* rows);

// What a campaign asked and who answered it.
struct CampaignAnswers {
  v1::Attribute attribute = v1::ATTRIBUTE_UNSPECIFIED;
  v1::MechanismSpec spec;
  // The nodes whose answers count: the campaign's reporters (what the
  // curator's ledger charges), or every node it asked (what their hosts
  // may charge).
  std::vector<uint32_t> reporters;
};
// Per node (`nodes` entries), the epsilon the campaigns asked of it: the sum
// over the distinct questions (wire::CampaignQuestions: neighbour
// substitution asks the features question too, which a features campaign
// of the same spec then shares) of the campaigns listing it.
// INVALID_ARGUMENT for a reporter >= nodes.
absl::StatusOr<std::vector<double>> ExpectedSpending(
    const std::vector<CampaignAnswers>& campaigns, uint32_t nodes);

// The largest spent[v] - expected[v] over nodes (0 when none spent more,
// differences within 1e-9 of 0 count as 0): the epsilon spent beyond what
// the campaigns asked. Sizes must match (else the shorter is used).
double MaxExtraEpsilon(const std::vector<double>& spent,
                       const std::vector<double>& expected);

}  // namespace ldpgraph::ldpctl

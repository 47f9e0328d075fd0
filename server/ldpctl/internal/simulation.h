// The machinery behind `ldpctl simulate` and `ldpctl run`
// (server/ldpctl/simulate.h): the Simulation, which prepares and starts a
// deployment (or attaches to one), drives its campaigns and stages, and
// reports what it measured; and the progress lines it writes on stderr.
// Internal to ldpctl: only simulate.cc constructs a Simulation.
//
// The Simulation's definitions are split by responsibility:
//   simulate_run.cc        the run's outline, the work folder, the dataset
//                          and secrets, starting and stopping the curator,
//                          PostgreSQL, frontends and agent hosts
//   simulate_campaigns.cc  enrolment, the campaigns, the curator's stages
//   simulate_scenarios.cc  the network proxies, --churn, --frontend-kills,
//                          the attacker's flags and the spending checks
//   simulate_failover.cc   --database-restarts and --operator-kills
//   simulate_report.cc     the results JSON, the ledger's figures
//   simulate_table.cc      the table printed without --format json
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/attacks/poisoning.h"
#include "common/dataset/dataset.h"
#include "common/net/fault_proxy.h"
#include "common/random/seed_mix.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/churn.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/simulate_options.h"
#include "server/ldpctl/memory_sampler.h"
#include "server/ldpctl/process.h"
#include "server/pipeline/config.h"
#include "server/store/local_postgres.h"
#include "server/store/store.h"

namespace ldpgraph::ldpctl::internal {

using json = nlohmann::json;

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

// The running deployment and everything the run measured. One thread
// drives it (Run); it owns every child process it starts, and stops them
// when destroyed (StopAll).
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
  // Prepare's steps: the work folder (--work-dir, or a new one under
  // $TMPDIR), made private; the dataset (generated, or --dataset, prepared
  // in a copy when it lacks a feature schema or device index) into data_
  // and dataset_dir_; the TLS material, admin token, node key and each
  // host's credentials under work_.
  absl::Status MakeWorkFolder();
  absl::Status ReadOrGenerateData();
  absl::Status WriteSecrets();
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
  // Collect's steps. OpenCampaign: creates the campaign *req asks for, with
  // the run's quorum and deadline set in *req.
  absl::StatusOr<v1::Campaign> OpenCampaign(v1::CreateCampaignRequest* req);
  // Polls *c (opened at `opened`) until every targeted node answered or it
  // closed, driving churn (if not null) and, for the features campaign,
  // --frontend-kills and the server faults; DEADLINE_EXCEEDED after until.
  absl::Status AwaitCampaign(const std::string& what, const std::string& stage,
                             absl::Time opened, absl::Time until,
                             ChurnDriver* churn, v1::Campaign* c);
  // *c as the curator has it now: true; false when the curator was away
  // (UNAVAILABLE or CANCELLED before until), after waiting a little and,
  // once away for 2 s since *unavailable_since, connecting anew.
  absl::StatusOr<bool> RefreshCampaign(
      const std::string& stage, absl::Time until,
      std::optional<absl::Time>* unavailable_since, v1::Campaign* c);
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
  // ScenarioRows' parts: dropout and closing, with a row per campaign;
  // --frontend-kills, --database-restarts and --operator-kills (from the
  // scenario sc); --churn (from sc's churn ch).
  void ClosingRows(const json& d, const TableRow& row) const;
  void FaultRows(const json& sc, const TableRow& row) const;
  static void ChurnRows(const json& ch, const TableRow& row);
  void SetupRows(const json& j, const TableRow& row) const;
  static void GraphRow(const json& g, const TableRow& row);
  void ResultRows(const json& j, const TableRow& row) const;
  void StageTable(const json& j);
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
  // The ledger: every node's total spending, by node (admin GetBudgets,
  // every page; 0 for a node the ledger does not list).
  absl::StatusOr<std::vector<double>> LedgerSpent();
  // r with the id lists the curator cut in its details made whole again
  // (admin ListResultIds), as `ldpgraph eval` prints them.
  absl::StatusOr<v1::StageResult> WithWholeIdLists(
      const v1::StageResult& r) const;
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
  // Results' parts. The scenarios' figures (churn_figures_,
  // frontend_figures_, database_figures_, operator_figures_) for those
  // that ran; per_run[0], from the evaluate stage and its details; the
  // parameters (the pipeline's, and the edges campaign's under "edges").
  absl::Status GatherScenarioFigures(const Campaigns& c);
  json RunJson(const v1::StageResult& evaluate, const json& details) const;
  json ParametersJson() const;
  // Deployment's parts: deployment.campaigns, adding each campaign's
  // reports, refusals and rejections to *totals; .graph; .scenario;
  // .peak_rss_mib (not attached); .evaluate_seconds.
  struct CampaignTotals {
    uint64_t reports = 0;
    uint64_t refusals = 0;
    uint64_t rejected = 0;
  };
  json CampaignsJson(const std::vector<v1::Campaign>& campaigns,
                     CampaignTotals* totals) const;
  json GraphJson(const std::optional<v1::Campaign>& graph_campaign,
                 const json& details) const;
  json ScenarioJson(const v1::StageResult& estimate,
                    const v1::StageResult& evaluate) const;
  json PeakRssJson() const;
  json EvaluateSecondsJson(const json& details) const;

  Options o_;
  std::ostream& out_;
  std::ostream& err_;
  Progress progress_;
  // The memory of this process and every process it started, sampled
  // together from the start (peak_rss_mib.together in the report).
  MemorySampler memory_;
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
  // What admin_ was made from: Connect again when the curator stays away
  // (a list's names are resolved once per channel, and a restarted
  // operator's container may come back at another address).
  ConnectionSettings admin_settings_;
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
  // --operator-kills: the standby operator (null without the flag), each
  // slot's fixed port (the active one is curator_, in slot active_slot_),
  // and each kill. --database-restarts: each restart. What the store held
  // before each, and how long until the deployment served again.
  std::unique_ptr<ChildProcess> standby_;
  int operator_ports_[2] = {0, 0};
  int operator_starts_[2] = {0, 0};
  int active_slot_ = 0;
  struct ServerFault {
    double after_seconds = 0;
    uint32_t answered_at_fault = 0;
    std::vector<uint32_t> stored_before;
    // --operator-kills: kill -> the standby's ready file; kill -> the first
    // answer through ldpctl's connection. --database-restarts: the seconds
    // the database was down (kill to accepting again), and from its return
    // until the operator counts more answers than at the kill (null when
    // the campaign ended first).
    double takeover_seconds = 0;
    double serving_seconds = 0;
    double down_seconds = 0;
    std::optional<double> flowing_seconds;
  };
  std::vector<ServerFault> operator_kills_, database_restarts_;
  std::string fault_campaign_;  // the features campaign, for the figures
  json operator_figures_, database_figures_;  // null without the flags
  // Starts the operator of `slot` on its port (its log operator-SLOT.log,
  // .restart-K.log after a kill); it serves at once or waits as a standby.
  absl::Status StartOperator(int slot, std::unique_ptr<ChildProcess>* into);
  std::vector<std::string> OperatorArgs(int slot, const std::string& ready) const;
  std::string OperatorReady(int slot) const;
  // --database-restarts, --operator-kills: the faults due at `c`'s
  // progress (each kind spread over the campaign, apart from the others).
  absl::Status ServerFaults(const v1::Campaign& c, absl::Duration since_open);
  // A fault's record as it begins: when, and what the store held.
  absl::StatusOr<ServerFault> FaultAt(const v1::Campaign& c,
                                      absl::Duration since_open);
  absl::Status RestartDatabase(const v1::Campaign& c, absl::Duration since_open);
  absl::Status KillOperator(const v1::Campaign& c, absl::Duration since_open);
  // The answers the store holds for campaign `id` now (0 on an error).
  uint32_t StoredCount(const std::string& id);
  // scenario.operator_kills / scenario.database_restarts.
  absl::StatusOr<json> FaultFigures(const Campaigns& c,
                                    const std::vector<ServerFault>& faults,
                                    bool operator_kills);
  // --edge: HAProxy in front of the frontends (or the one curator), its
  // port, and its start.
  std::unique_ptr<ChildProcess> edge_;
  int edge_port_ = 0;
  absl::Status StartEdge();
  // The curator processes' arguments for the store (--store ... or none).
  std::vector<std::string> StoreArgs() const;
  absl::Status StartPostgres();
  // Starts frontend i (on `port`, 0: any) and waits until it serves.
  absl::Status StartFrontend(int i, int port);
  // Waits for a curator process's ready file; its gRPC port.
  absl::StatusOr<int> WaitReady(ChildProcess* p, const std::string& ready,
                                const std::string& what);
  // Every campaign's final reporters (for the spending checks) into
  // *answers, and campaign_id's into *final_set.
  absl::Status FinalAnswers(const Campaigns& c, const std::string& campaign_id,
                            std::vector<CampaignAnswers>* answers,
                            std::vector<uint32_t>* final_set);
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

}  // namespace ldpgraph::ldpctl::internal

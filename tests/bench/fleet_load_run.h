// fleet_load's run: the curator, the fleet (simulated hosts or real agent
// processes), enrolment, the campaign and the measurements, reported as a
// table and one JSON object. Benchmark code (tests/bench/fleet_load.cc):
// driving in fleet_load_run.cc, reporting in fleet_load_report.cc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/net/fault_proxy.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/churn.h"
#include "server/store/local_postgres.h"
#include "tests/bench/fleet_load_admin.h"
#include "tests/bench/fleet_load_options.h"
#include "tests/bench/fleet_load_workers.h"
#include "tests/bench/load_util.h"

namespace ldpgraph::bench::fleet {

class Run {
 public:
  explicit Run(Options o) : o_(std::move(o)), progress_(MonoSeconds()) {}
  ~Run() { Cleanup(); }
  int Main();

 private:
  bool real() const { return o_.real_agents > 0; }
  int hosts() const { return real() ? o_.real_agents : o_.hosts; }
  uint32_t nodes() const { return static_cast<uint32_t>(int64_t{hosts()} * o_.nodes_per_host); }
  bool Prepare();
  bool StartCurator();
  bool StartAgents();
  // --latency/--jitter/--loss: the proxy the fleet reaches the curator
  // through (agent_target_; target_ without them), and --dropout's offline
  // nodes (offline_) and hosts with a node online.
  bool StartScenario();
  int OnlineHosts() const;
  std::vector<std::string> AgentScenarioArgs() const;
  // With a deadline, waits until the campaign closed; false on a failure.
  bool WaitClosed();
  json ScenarioJson() const;
  std::string ScenarioText() const;
  // Agent process a, its log agent-a<log_suffix>.log.
  pid_t StartAgent(int a, const std::string& log_suffix);
  // --churn: the campaign's kill plan, and one look at it per poll.
  void StartChurn();
  void PollChurn(uint64_t answered, uint64_t targeted, double since_open);
  std::optional<ldpgraph::ldpctl::ChurnDriver> churn_;
  // Every host enrolled and subscribed (or failed, or the timeout).
  void WaitEnrolled();
  // Creates the campaign (CampaignRequest) and waits until every online
  // node answered, something failed, or --timeout.
  void RunCampaign();
  v1::CreateCampaignRequest CampaignRequest() const;
  // One look at the campaign (and the fleet, the churn) at t0 + some
  // seconds; true when the wait is over: answered, failed or timed out.
  bool PollCampaign(double t0, double until, int64_t* stalled_polls);
  // Every online node answered (expected of them): the times, the latest
  // ack, and with a deadline the wait for the campaign to close.
  void CampaignAnswered(const v1::CampaignProgress& p, uint64_t expected, double t0,
                        const std::string& line);
  // An admin call of the enrolment or campaign loop failed: counted, and
  // its message kept among the first three.
  void AdminFailed(const char* call, const grpc::Status& g);
  // The figures of the run, gathered once for the JSON and the table.
  struct Figures;
  Figures Gather() const;
  json FiguresJson(const Figures& f, int exit_code) const;
  // FiguresJson's "error_counts".
  json ErrorCountsJson(const Figures& f) const;
  // FiguresJson's figures of the processes: "curator", "frontends",
  // "store", "edge", "workers_cpu_seconds", "agents".
  void AddProcessesJson(const Figures& f, json* j) const;
  std::string Table(const Figures& f, bool show_dir) const;
  // The table's rows of the run (hosts, enrolment, campaign, scenario,
  // errors) and of the processes (CPU, memory, threads, GetStatus).
  void TableRunRows(const Figures& f, std::ostream& t) const;
  void TableProcessRows(const Figures& f, std::ostream& t) const;
  // Prints the table (stderr) and the JSON object (stdout).
  void Finish(int exit_code);
  void Fail(const std::string& message) {
    failures_.push_back(message);
    std::cerr << "fleet_load: " << message << "\n";
  }
  // Errors so far: everything counted, plus processes that died.
  int64_t Errors() const;
  std::optional<std::string> SomethingDied();
  void Cleanup();

  Options o_;
  Progress progress_;
  std::string dir_;
  bool made_dir_ = false;
  bool success_ = false;  // the work folder is removed only then
  std::string node_key_;  // raw
  std::string admin_hex_;
  std::string dataset_;
  pid_t curator_ = -1;
  int port_ = 0;
  std::string target_;
  std::string agent_target_;  // the proxy's address, or target_
  std::unique_ptr<ldpgraph::net::FaultProxy> proxy_;
  // --edge: HAProxy's pid, and its figures with the fleet connected.
  pid_t edge_ = -1;
  ProcStats edge_at_done_;
  bool StartEdge();
  // --frontends: the store they share, their pids and addresses, and their
  // figures with the fleet connected.
  std::unique_ptr<ldpgraph::store::LocalPostgres> postgres_;
  std::vector<pid_t> frontends_;
  std::vector<std::string> frontend_targets_;
  std::vector<ProcStats> frontends_at_done_;
  bool StartPostgres();
  bool StartFrontends();
  // The curator's flags shared by the operator and the frontends.
  std::vector<std::string> CuratorCommonArgs() const;
  // Waits for a curator's ready file; its port, or 0 after Fail.
  int WaitReady(pid_t pid, const std::string& ready, const std::string& log,
                const std::string& what);
  uint32_t offline_ = 0;  // --dropout: nodes that never come online
  std::vector<pid_t> agents_;
  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<StatusProbe> probe_;
  std::vector<std::string> failures_;
  int64_t agent_errors_ = 0;  // real agents that exited
  int64_t admin_errors_ = 0;  // admin calls of the campaign loop that failed
  std::vector<std::string> admin_messages_;

  // Measurements.
  ProcStats at_ready_, at_go_, at_campaign_, at_campaign_end_, at_done_;
  double enrol_seconds_ = -1;
  double campaign_seconds_ = -1;  // until every node answered
  double campaign_waited_ = -1;   // until it answered or the wait ended
  double last_ack_seconds_ = -1;
  bool complete_ = false;
  bool aborted_ = false;
  uint32_t subscribed_ = 0, enrolled_nodes_ = 0;
  v1::Campaign campaign_;
  std::vector<ProcStats> agent_stats_;
  double fleet_cpu_ = 0;  // the worker processes' CPU seconds
};

}  // namespace ldpgraph::bench::fleet

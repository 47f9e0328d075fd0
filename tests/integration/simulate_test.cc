// End to end: the real ldpctl, ldpgraph-curator, ldpgraph-agent and
// ldpgraph binaries.
//  - `ldpctl simulate --seed S` prints exactly the metric of `ldpgraph eval
//    --seed S --runs 1` (PrivGE node and link, LPGNN with label RR, cora).
//  - No process outlives simulate: on success, on Ctrl-C (mid-run and with
//    --keep-running), and when one of its children dies.
//  - The admin commands against the running simulated deployment: config
//    file and environment, both formats, export with node ids, and the
//    documented exit codes.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/linalg/npy.h"
#include "common/random/seed_mix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr absl::Duration kLong = absl::Seconds(300);

// Pids of the processes whose command line mentions `needle` (the work
// folder every child of a simulation is given).
std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    auto cmd = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    if (!cmd.ok()) continue;
    // Zombies have an empty cmdline; they are not running.
    if (absl::StrContains(*cmd, needle)) out.push_back(pid);
  }
  closedir(proc);
  return out;
}

class SimulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = LDPGRAPH_BINARY_DIR;
    scratch_ = NewTempDir("simulate");
  }
  void TearDown() override { RemoveTempDir(scratch_); }

  CommandResult Run(std::vector<std::string> argv) {
    auto r = RunCommand(argv, scratch_, kLong);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }
  CommandResult Ldpctl(std::vector<std::string> args) {
    args.insert(args.begin(), bin_ + "/ldpctl");
    return Run(args);
  }
  // ldpctl simulate ... --format json; its JSON (discarded on failure).
  json Simulate(std::vector<std::string> args) {
    args.insert(args.begin(), "simulate");
    args.push_back("--format");
    args.push_back("json");
    CommandResult r = Ldpctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }
  json Eval(const std::string& dataset, std::vector<std::string> args) {
    std::vector<std::string> argv = {bin_ + "/ldpgraph", "eval", "--dataset",
                                     dataset, "--runs", "1", "--format", "json"};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = Run(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }
  std::string Generated(int nodes) {
    const std::string dir = absl::StrCat(scratch_, "/gen", nodes);
    if (!std::filesystem::exists(dir)) {
      CommandResult r = Run({bin_ + "/ldpgraph", "generate", "--nodes",
                             absl::StrCat(nodes), "--out", dir});
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    return dir;
  }

  std::string bin_, scratch_;
};

TEST_F(SimulateTest, EqualsTheLibraryWithTheSameSeeds) {
  const std::string data = Generated(900);
  struct Case {
    std::vector<std::string> flags;
    int campaigns;
    double epsilon;
  };
  const std::vector<Case> cases = {
      {{"--seed", "11"}, 1, 1.0},
      {{"--seed", "12", "--method", "lpgnn", "--epsilon", "2",
        "--label-epsilon", "1"}, 2, 3.0},
      {{"--seed", "13", "--task", "link", "--epsilon", "2"}, 1, 2.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrJoin(c.flags, " "));
    const std::string work = absl::StrCat(scratch_, "/work-", c.flags[1]);
    std::vector<std::string> sim = {"--dataset", data, "--hosts", "3",
                                    "--work-dir", work};
    sim.insert(sim.end(), c.flags.begin(), c.flags.end());
    json s = Simulate(sim);
    json e = Eval(data, c.flags);
    ASSERT_TRUE(s.is_object() && e.is_object());
    // The same metric, exactly: the agents drew the library's noise.
    EXPECT_EQ(s["mean"].get<double>(), e["mean"].get<double>());
    EXPECT_EQ(s["task"], e["task"]);
    EXPECT_EQ(s["noise_source"], "seeded-not-private");
    EXPECT_EQ(s["parameters"], e["parameters"]);
    // PrivGE's node task: the same propagations tried, the same one kept.
    EXPECT_EQ(s["per_run"][0].value("tuning", json()),
              e["per_run"][0].value("tuning", json()));
    EXPECT_EQ(s["per_run"][0].contains("tuning"), c.flags.size() == 2);
    // The node task's default baseline: label propagation from the labels
    // the curator trains on, beside the result.
    if (s["task"] == "node") {
      ASSERT_TRUE(s.contains("baselines")) << s.dump();
      const json& lp = s["baselines"]["graph_labels"];
      EXPECT_EQ(lp["label"], "graph and labels alone");
      EXPECT_DOUBLE_EQ(lp["difference"]["mean"].get<double>(),
                       s["mean"].get<double>() - lp["mean"].get<double>());
      if (c.flags.size() == 2) {
        // Clean labels: the library's baseline on the same split, exactly.
        std::vector<std::string> flags = c.flags;
        flags.push_back("--baselines");
        json eb = Eval(data, flags);
        ASSERT_TRUE(eb.is_object());
        EXPECT_EQ(lp["mean"].get<double>(),
                  eb["baselines"]["graph_labels"]["values"][0].get<double>());
      }
    } else {
      EXPECT_FALSE(s.contains("baselines"));
    }
    const json& d = s["deployment"];
    EXPECT_EQ(d["hosts"], 3);
    EXPECT_EQ(d["reports"].get<int>(), 900 * c.campaigns);
    EXPECT_EQ(d["refusals"], 0);
    EXPECT_EQ(d["rejected"], 0);
    EXPECT_GT(d["report_bytes"].get<double>(), 900.0 * c.campaigns);
    EXPECT_DOUBLE_EQ(d["epsilon_spent_per_node"]["min"].get<double>(), c.epsilon);
    EXPECT_DOUBLE_EQ(d["epsilon_spent_per_node"]["max"].get<double>(), c.epsilon);
    EXPECT_TRUE(d["stage_seconds"].contains("evaluate"));
    // Every process's peak memory, and their sum.
    const json& mem = d["peak_rss_mib"];
    EXPECT_GT(mem["ldpctl"].get<double>(), 0);
    EXPECT_GT(mem["curator"].get<double>(), 0);
    EXPECT_NEAR(mem["all_processes"].get<double>(),
                mem["curator"].get<double>() +
                    mem["agent_hosts_total"].get<double>() +
                    mem["ldpctl"].get<double>(),
                1e-6);
    // The evaluate stage, split into propagation, training and the rest.
    EXPECT_GE(d["evaluate_seconds"]["rest"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(d["evaluate_seconds"]["train"].get<double>(),
                     s["per_run"][0]["train_seconds"].get<double>());
    // The run left nothing behind but its (named) work folder.
    EXPECT_THAT(ProcessesMentioning(work), ::testing::IsEmpty());
    EXPECT_TRUE(std::filesystem::exists(work + "/curator.log"));
  }
}

// --defence screen: the curator's estimate stage screens the agents'
// reports exactly as ldpgraph eval screens the simulated ones (the same
// flagged nodes, the same metric); the table's JSON carries the figures
// under deployment.scenario.defence. With a high alpha this seed's honest
// reports have over-reported dimensions (2, with about 50 nodes flagged),
// so the flagged lists compared are not empty.
TEST_F(SimulateTest, DefenceScreenEqualsTheLibrary) {
  const std::string data = Generated(900);
  const std::vector<std::string> flags = {
      "--seed", "18", "--method", "lpgnn", "--epsilon", "2",
      "--label-epsilon", "1", "--defence", "screen", "--screen-alpha", "0.9"};
  std::vector<std::string> sim = {"--dataset", data, "--hosts", "2"};
  sim.insert(sim.end(), flags.begin(), flags.end());
  json s = Simulate(sim);
  json e = Eval(data, flags);
  ASSERT_TRUE(s.is_object() && e.is_object());
  EXPECT_EQ(s["mean"].get<double>(), e["mean"].get<double>());
  EXPECT_EQ(s["parameters"], e["parameters"]);
  const json& d = s["deployment"]["scenario"]["defence"];
  const json& screen = e["per_run"][0]["screen"];
  EXPECT_EQ(d["kind"], "screen");
  EXPECT_EQ(d["alpha"], 0.9);
  EXPECT_EQ(d["screen"], "applied");
  EXPECT_EQ(d["flagged"], screen["flagged"]);
  EXPECT_EQ(d["overreported_dims"], screen["overreported_dims"]);
  EXPECT_GT(d["flagged_nodes"].get<int>(), 0);
}

// The curator without the graph (--private-edges): the edges campaign runs
// first, then features; the pipeline runs over the assembled graph, and the
// table says so. Neighbour substitution shares the features campaign's
// question, so each node spends eps_x + eps_e; randomized response and
// Blink (eps_e its total, bits and degree) ask nothing more of the features.
TEST_F(SimulateTest, PrivateEdgesFromTheAgents) {
  const std::string data = Generated(300);
  struct Case {
    std::vector<std::string> flags;
    std::string mechanism;
    double epsilon;
  };
  const std::vector<Case> cases = {
      {{"--edges", "ns1"}, "edge-substitution", 3.0},
      {{"--edges", "ns2", "--edge-epsilon", "0.5"}, "edge-substitution", 2.5},
      {{"--edges", "rr", "--edge-epsilon", "4"}, "edge-rr", 6.0},
      {{"--edges", "blink", "--edge-epsilon", "4"}, "edge-blink", 6.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrJoin(c.flags, " "));
    const std::string work = absl::StrCat(scratch_, "/work-", c.flags[1]);
    std::vector<std::string> sim = {"--dataset", data, "--hosts", "2",
                                    "--method", "lpgnn", "--mechanism",
                                    "multibit", "--epsilon", "2",
                                    "--work-dir", work};
    sim.insert(sim.end(), c.flags.begin(), c.flags.end());
    json s = Simulate(sim);
    ASSERT_TRUE(s.is_object());
    const json& d = s["deployment"];
    EXPECT_EQ(d["graph"]["source"], c.flags[1]);
    EXPECT_EQ(d["graph"]["campaign"], "c1");
    EXPECT_EQ(d["graph"]["mechanism"], c.mechanism);
    EXPECT_GT(d["graph"]["edges"].get<int>(), 0);
    if (c.mechanism == "edge-blink") {
      // Every node reported: the estimate is over all 300.
      EXPECT_EQ(d["graph"]["variant"], "hard");
      EXPECT_EQ(d["graph"]["delta"], 0.1);
      EXPECT_EQ(d["graph"]["reports"], 300);
      EXPECT_EQ(d["graph"]["nonreporters"], 0);
      EXPECT_EQ(d["graph"]["target_edges"], 0);  // hard: no K
    }
    ASSERT_EQ(d["campaigns"].size(), 2u);
    EXPECT_EQ(d["campaigns"][0]["attribute"], "edges");
    EXPECT_EQ(d["campaigns"][1]["attribute"], "features");
    EXPECT_EQ(d["reports"].get<int>(), 600);
    EXPECT_EQ(d["refusals"], 0);
    EXPECT_EQ(d["rejected"], 0);
    EXPECT_DOUBLE_EQ(d["epsilon_spent_per_node"]["min"].get<double>(), c.epsilon);
    EXPECT_DOUBLE_EQ(d["epsilon_spent_per_node"]["max"].get<double>(), c.epsilon);
    EXPECT_GT(s["mean"].get<double>(), 0.0);
    EXPECT_THAT(ProcessesMentioning(work), ::testing::IsEmpty());
    // The curator started without the graph's edges.
    EXPECT_THAT(ReadFile(work + "/curator.log").value_or(""),
                HasSubstr("edges private"));
  }
  // The table names the graph.
  CommandResult r = Ldpctl({"simulate", "--dataset", data, "--hosts", "2",
                            "--edges", "ns1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("assembled from c1: neighbour substitution, "
                               "approach 1"));
  // Flags that need --edges.
  r = Ldpctl({"simulate", "--edge-epsilon", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--edge-epsilon applies to"));
  r = Ldpctl({"simulate", "--edges", "maybe"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--edges must be none, rr, blink, ns1 or ns2"));
  // Blink's flags need --edges blink, and a delta in (0, 1).
  r = Ldpctl({"simulate", "--edges", "rr", "--blink-variant", "hybrid"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--blink-variant applies to --edges blink"));
  r = Ldpctl({"simulate", "--blink-delta", "0.2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--blink-delta applies to --edges blink"));
  r = Ldpctl({"simulate", "--edges", "blink", "--blink-delta", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("delta (the degree's share of epsilon)"));
  r = Ldpctl({"simulate", "--edges", "blink", "--blink-variant", "soft"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--blink-variant must be one of hard, topk, hybrid"));
  // The table names Blink's graph.
  r = Ldpctl({"simulate", "--dataset", data, "--hosts", "2", "--method",
              "lpgnn", "--edges", "blink", "--edge-epsilon", "2",
              "--blink-delta", "0.2", "--blink-variant", "hybrid"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("assembled from c1: Blink, epsilon 2 (delta "
                               "0.2), hybrid over 300 reporters, 0 "
                               "non-reporters isolated"));
}

// The graph from the agents equals `ldpgraph eval --edges` by seed: a
// seeded agent draws its edge answers from the edge streams eval draws
// from (common/random/random.h EdgeStreamSeed), and its features from where they
// were without an edges campaign; the curator's evaluate stage applies
// --defence edge-consistency to the campaign's reports as eval applies it
// to the simulated ones (the same nodes isolated, the same graph, the same
// metric), here against the fake-edges attacker. Without the defence the
// attacker's nodes stay in the graph: the check could fail.
TEST_F(SimulateTest, EdgeConsistencyInTheDeploymentEqualsTheLibrary) {
  const std::string data = Generated(600);
  for (const char* mechanism : {"rr", "blink"}) {
    SCOPED_TRACE(mechanism);
    const std::vector<std::string> base = {
        "--method", "lpgnn", "--mechanism", "multibit", "--epsilon", "2",
        "--edges", mechanism, "--edge-epsilon", "6", "--malicious", "0.05",
        "--attack", "fake-edges", "--seed", "2"};
    for (bool defended : {false, true}) {
      SCOPED_TRACE(defended ? "defended" : "undefended");
      std::vector<std::string> flags = base;
      if (defended) flags.insert(flags.end(), {"--defence", "edge-consistency"});
      std::vector<std::string> sim = {"--dataset", data, "--hosts", "2"};
      sim.insert(sim.end(), flags.begin(), flags.end());
      json s = Simulate(sim);
      json e = Eval(data, flags);
      ASSERT_TRUE(s.is_object() && e.is_object());
      EXPECT_EQ(s["mean"].get<double>(), e["mean"].get<double>());
      EXPECT_EQ(s["parameters"], e["parameters"]);
      const json& ee = e["per_run"][0]["edges"];
      EXPECT_EQ(s["deployment"]["graph"]["edges"], ee["edges"]);
      EXPECT_EQ(s["deployment"]["rejected"], 0);
      const json& sc = s["deployment"]["scenario"];
      if (!defended) {
        EXPECT_FALSE(sc.contains("defence"));
        EXPECT_GT(ee["malicious_edges"].get<int>(), 0);
        continue;
      }
      ASSERT_TRUE(sc.contains("defence")) << sc.dump();
      const json& d = sc["defence"]["edge_consistency"];
      EXPECT_EQ(d["flagged"], ee["screen"]["flagged"]);
      EXPECT_EQ(d["malicious_flagged"], ee["malicious_flagged"]);
      // At eps_e 6 the screen catches most of the attacker's 50 claimed
      // victims per node (edge_screen.h): the deployment's figures say so.
      EXPECT_GE(d["malicious_flagged"].get<int>(),
                d["malicious"].get<int>() / 2);
    }
  }
  // The table says what the screen did; the flag needs rr or blink.
  CommandResult r = Ldpctl({"simulate", "--dataset", data, "--hosts", "2",
                            "--edges", "rr", "--edge-epsilon", "6",
                            "--defence", "edge-consistency"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("edge consistency (alpha 0.001): "));
  r = Ldpctl({"simulate", "--edges", "ns1", "--defence", "edge-consistency"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--defence edge-consistency screens edge "
                               "reports: it needs --edges rr or blink"));
}

TEST_F(SimulateTest, EqualsTheLibraryOnCora) {
  const std::string cora = CoraDir();
  ASSERT_FALSE(cora.empty());
  json s = Simulate({"--dataset", cora, "--hosts", "4", "--seed", "5"});
  json e = Eval(cora, {"--seed", "5"});
  ASSERT_TRUE(s.is_object() && e.is_object());
  EXPECT_EQ(s["mean"].get<double>(), e["mean"].get<double>());
  EXPECT_EQ(s["deployment"]["reports"], 2708);
}

TEST_F(SimulateTest, SecureNoiseByDefaultAndTheTemporaryFolderIsRemoved) {
  const std::string tmp = NewTempDir("tmpdir");
  CommandResult r = Run({"/usr/bin/env", "TMPDIR=" + tmp, bin_ + "/ldpctl",
                         "simulate", "--nodes", "400", "--hosts", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("accuracy (test)"));
  EXPECT_THAT(r.out, HasSubstr("secure (OpenSSL)"));
  EXPECT_THAT(r.out, HasSubstr("bytes on the wire"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("NOT differentially private")));
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "work folder left in " << tmp;
  EXPECT_THAT(ProcessesMentioning(tmp), ::testing::IsEmpty());
  RemoveTempDir(tmp);
}

// Starts `ldpctl simulate ... --keep-running --work-dir W` and waits until
// the deployment is up and the table printed.
struct Running {
  ChildProcess ldpctl;
  std::string work, log;
};

TEST_F(SimulateTest, AdminCommandsAgainstTheRunningDeploymentThenCtrlC) {
  Running run;
  run.work = scratch_ + "/running";
  run.log = scratch_ + "/running.log";
  ASSERT_TRUE(run.ldpctl
                  .Start({bin_ + "/ldpctl", "simulate", "--nodes", "600",
                          "--hosts", "2", "--keep-running", "--work-dir",
                          run.work},
                         run.log)
                  .ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        return absl::StrContains(ReadFile(run.log).value_or(""),
                                 "deployment keeps running") ||
               !run.ldpctl.running();
      },
      absl::Seconds(120)))
      << run.ldpctl.LogTail();
  ASSERT_FALSE(run.ldpctl.Exited()) << run.ldpctl.LogTail();
  const std::string conf = run.work + "/ldpctl.conf";

  // status, as JSON, with the config file.
  CommandResult r = Ldpctl({"status", "--config", conf, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json status = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(status.is_discarded()) << r.out;
  EXPECT_EQ(status["graph_nodes"], 600);
  EXPECT_EQ(status["enrolled_nodes"], 600);
  EXPECT_EQ(status["task_streams"], 2);
  EXPECT_EQ(status["stored_reports"], "600");  // uint64 prints as a string
  EXPECT_EQ(status["closed_campaigns"], 1);
  EXPECT_EQ(status["insecure"], false);

  // The same through the environment, as a table.
  r = Run({"/usr/bin/env", "LDPCTL_CONFIG=" + conf, bin_ + "/ldpctl", "status"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("600 of 600"));
  EXPECT_THAT(r.out, HasSubstr("(TLS)"));

  r = Ldpctl({"campaign", "list", "--config", conf});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("c1"));
  EXPECT_THAT(r.out, HasSubstr("closed"));
  // Connection flags before the command, as the overview's example has it.
  r = Ldpctl({"--config", conf, "campaign", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("c1"));
  r = Ldpctl({"--config", conf});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("no command"));

  r = Ldpctl({"budget", "show", "--config", conf, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json budget = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(budget.is_discarded()) << r.out;
  EXPECT_EQ(budget["summary"]["nodes"], 600);
  EXPECT_EQ(budget["summary"]["caps_known"], 600);
  EXPECT_DOUBLE_EQ(budget["summary"]["spent_mean"].get<double>(), 1.0);
  r = Ldpctl({"budget", "show", "--config", conf, "--nodes", "0-5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 3 + 2 + 5) << r.out;

  // A second pipeline run over the same reports: post-processing, no spend.
  r = Ldpctl({"pipeline", "run", "c1", "--config", conf, "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json results = json::parse(r.out, nullptr, false);
  ASSERT_EQ(results["results"].size(), 2u) << r.out;
  const std::string estimate = results["results"][0]["id"];
  EXPECT_GT(results["results"][1]["metric"].get<double>(), 0.0);

  r = Ldpctl({"export", estimate, "--config", conf, "--out",
              scratch_ + "/x.npy"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto x = ReadNpy(scratch_ + "/x.npy");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->rows, 600u);
  EXPECT_TRUE(std::filesystem::exists(scratch_ + "/x.ids.npy"));

  r = Ldpctl({"audit", "--config", conf, "--format", "json", "--limit", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["entries"].size(), 3u);

  r = Ldpctl({"budget", "show", "--config", conf});
  EXPECT_THAT(r.out, HasSubstr("min 1, mean 1, max 1")) << "no spend by pipeline run";

  // The documented exit codes.
  EXPECT_EQ(Ldpctl({"campaign", "show", "c99", "--config", conf}).exit_code, 5);
  EXPECT_EQ(Ldpctl({"campaign", "show", "c1", "--config", conf, "--colour"}).exit_code, 2);
  EXPECT_EQ(Ldpctl({"status", "--config", conf, "--format", "yaml"}).exit_code, 2);
  const std::string wrong = scratch_ + "/wrong.token";
  ASSERT_EQ(Run({"/bin/sh", "-c",
                 "echo 00112233445566778899aabbccddeeff > " + wrong}).exit_code, 0);
  r = Ldpctl({"status", "--config", conf, "--admin-token", wrong});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("UNAUTHENTICATED"));
  // The agents' caps (8) make a campaign at epsilon 100 unaffordable.
  r = Ldpctl({"campaign", "create", "--config", conf, "--mechanism", "hds",
              "--epsilon", "100", "--dimension", "64"});
  EXPECT_EQ(r.exit_code, 6) << r.err;
  r = Ldpctl({"status", "--config", conf, "--curator", "127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("is it running"));

  // Ctrl-C: the deployment stops, ldpctl exits 0 (it was asked to), and no
  // process of it is left.
  auto status_code = run.ldpctl.Signal(SIGINT, absl::Seconds(30));
  ASSERT_TRUE(status_code.ok()) << status_code.status();
  EXPECT_TRUE(WIFEXITED(*status_code) && WEXITSTATUS(*status_code) == 0)
      << run.ldpctl.LogTail();
  EXPECT_THAT(ProcessesMentioning(run.work), ::testing::IsEmpty());
}

TEST_F(SimulateTest, CtrlCMidRunStopsEverythingAndExits130) {
  ChildProcess ldpctl;
  const std::string work = scratch_ + "/interrupted";
  const std::string log = scratch_ + "/interrupted.log";
  // Large enough that training is still running when the signal lands.
  ASSERT_TRUE(ldpctl
                  .Start({bin_ + "/ldpctl", "simulate", "--nodes", "30000",
                          "--hosts", "2", "--work-dir", work},
                         log)
                  .ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        const std::string l = ReadFile(log).value_or("");
        return absl::StrContains(l, "evaluate: on the curator") ||
               !ldpctl.running();
      },
      absl::Seconds(180)));
  ASSERT_FALSE(ProcessesMentioning(work).empty()) << ldpctl.LogTail();
  auto status = ldpctl.Signal(SIGINT, absl::Seconds(30));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status)) << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 130) << ldpctl.LogTail();
  EXPECT_THAT(ReadFile(log).value_or(""), HasSubstr("interrupted"));
  EXPECT_THAT(ProcessesMentioning(work), ::testing::IsEmpty());
}

TEST_F(SimulateTest, AChildThatDiesFailsTheRunAndTakesNothingWithIt) {
  ChildProcess ldpctl;
  const std::string work = scratch_ + "/dies";
  const std::string log = scratch_ + "/dies.log";
  ASSERT_TRUE(ldpctl
                  .Start({bin_ + "/ldpctl", "simulate", "--nodes", "400",
                          "--hosts", "3", "--keep-running", "--work-dir", work},
                         log)
                  .ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        return absl::StrContains(ReadFile(log).value_or(""), "keeps running") ||
               !ldpctl.running();
      },
      absl::Seconds(120)));
  pid_t agent = -1;
  for (pid_t p : ProcessesMentioning(work)) {
    auto cmd = ReadFile(absl::StrCat("/proc/", p, "/cmdline"));
    if (cmd.ok() && absl::StrContains(*cmd, "host-1.credentials")) agent = p;
  }
  ASSERT_GT(agent, 0) << "agent host 1 not found";
  ASSERT_EQ(kill(agent, SIGKILL), 0);
  auto status = ldpctl.Wait(absl::Seconds(30));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(WEXITSTATUS(*status), 1) << ldpctl.LogTail();
  const std::string out = ReadFile(log).value_or("");
  EXPECT_THAT(out, HasSubstr("agent host 1 killed by signal 9"));
  EXPECT_THAT(out, HasSubstr("agent-1.log"));
  EXPECT_THAT(ProcessesMentioning(work), ::testing::IsEmpty());
}

// Dropout: the nodes drawn offline never enrol nor answer, the campaigns
// close at their deadline with every online node's report, the offline
// nodes spend nothing, and the pipeline learns from who answered.
// Simulated poisoning: a fifth of the nodes malicious (their agents send
// crafted features and labels, valid: nothing is rejected, every node
// spends its budget); the deployment reports the attack and a target rate
// above the same seeded run's without attack, and equals `ldpgraph eval`
// with the same flags (every host derives the attacker's target dimensions
// from the same pooled records).
TEST_F(SimulateTest, PoisoningRaisesTheTargetRateAndEqualsTheLibrary) {
  const std::string data = Generated(600);
  const std::vector<std::string> flags = {"--method", "lpgnn", "--epsilon", "3",
                                          "--label-epsilon", "3", "--seed", "3"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--dataset", data, "--hosts", "2"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  json clean = Simulate(with({"--malicious", "0"}));
  json attacked = Simulate(with({"--malicious", "0.2"}));
  ASSERT_FALSE(clean.is_discarded() || attacked.is_discarded());
  uint32_t malicious = 0;
  for (uint32_t v = 0; v < 600; ++v) malicious += SimulatedMalicious(3, v, 0.2);
  const json& m = attacked["deployment"]["scenario"]["malicious"];
  EXPECT_EQ(m["nodes"].get<uint32_t>(), malicious);
  EXPECT_EQ(m["fraction"].get<double>(), 0.2);
  EXPECT_EQ(m["attack_class"], 0);
  EXPECT_EQ(m["attack_dims"], 10);
  EXPECT_EQ(clean["deployment"]["scenario"]["malicious"]["nodes"], 0);
  EXPECT_EQ(attacked["deployment"]["rejected"], 0);
  EXPECT_DOUBLE_EQ(
      attacked["deployment"]["epsilon_spent_per_node"]["min"].get<double>(), 6.0);
  const double rate = attacked["per_run"][0]["target_rate"].get<double>();
  const double base = clean["per_run"][0]["target_rate"].get<double>();
  EXPECT_GT(rate, base + 0.1) << rate << " vs " << base;
  std::vector<std::string> eval = flags;
  eval.insert(eval.end(), {"--malicious", "0.2"});
  json e = Eval(data, eval);
  EXPECT_EQ(attacked["mean"].get<double>(), e["mean"].get<double>());
  EXPECT_EQ(rate, e["per_run"][0]["target_rate"].get<double>());
  EXPECT_EQ(attacked["parameters"], e["parameters"]);
  // The table says so.
  std::vector<std::string> table = {"simulate"};
  for (const std::string& a : with({"--malicious", "0.2"})) table.push_back(a);
  CommandResult r = Ldpctl(table);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("maximal-gain attack on class 0"));
  EXPECT_THAT(r.out, HasSubstr("target rate (class 0)"));
}

// --attack and the robust defence through the deployment: the agent hosts
// build the attacker of the kind asked (the adaptive one assuming the
// run's --screen-alpha), the estimate stage screens, the evaluate stage
// retrains without the labels its first model contradicts; the metric, the
// target rate and the nodes dropped equal `ldpgraph eval` with the same
// flags (the malicious counts ldpctl adds are the library's), and the JSON
// and the table name the attack and what the defences did.
TEST_F(SimulateTest, AttackKindsAndTheRobustDefenceEqualTheLibrary) {
  const std::string data = Generated(600);
  const std::vector<std::vector<std::string>> cases = {
      {"--method", "lpgnn", "--epsilon", "3", "--label-epsilon", "3",
       "--malicious", "0.1", "--attack", "labels-only", "--defence", "robust",
       "--seed", "5"},
      {"--method", "lpgnn", "--epsilon", "3", "--label-epsilon", "3",
       "--malicious", "0.1", "--attack", "adaptive", "--defence",
       "screen,robust", "--screen-alpha", "0.01", "--seed", "6"},
  };
  for (const std::vector<std::string>& flags : cases) {
    SCOPED_TRACE(absl::StrJoin(flags, " "));
    std::vector<std::string> sim = {"--dataset", data, "--hosts", "2"};
    sim.insert(sim.end(), flags.begin(), flags.end());
    json s = Simulate(sim);
    json e = Eval(data, flags);
    ASSERT_TRUE(s.is_object() && e.is_object());
    EXPECT_EQ(s["mean"].get<double>(), e["mean"].get<double>());
    EXPECT_EQ(s["per_run"][0]["target_rate"].get<double>(),
              e["per_run"][0]["target_rate"].get<double>());
    EXPECT_EQ(s["parameters"], e["parameters"]);
    const json& sc = s["deployment"]["scenario"];
    EXPECT_EQ(sc["malicious"]["attack"], flags[9]);
    EXPECT_EQ(s["deployment"]["rejected"], 0);
    const json& d = sc["defence"];
    EXPECT_EQ(d["kind"], flags[11]);
    ASSERT_TRUE(d.contains("robust")) << d.dump();
    EXPECT_EQ(d["robust"], e["per_run"][0]["robust"]);
    EXPECT_GT(d["robust"]["dropped"].get<int>(), 0);
    EXPECT_GT(d["robust"]["malicious_dropped"].get<int>(), 0);
    if (flags[11] == "screen,robust") {
      EXPECT_EQ(d["alpha"], 0.01);
      EXPECT_EQ(d["screen"], "applied");
      EXPECT_EQ(d["flagged"], e["per_run"][0]["screen"]["flagged"]);
    } else {
      EXPECT_FALSE(d.contains("alpha"));
    }
  }
  // The table says so.
  std::vector<std::string> table = {"simulate", "--dataset", data, "--hosts",
                                    "2"};
  table.insert(table.end(), cases[0].begin(), cases[0].end());
  CommandResult r = Ldpctl(table);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("labels-only attack on class 0"));
  EXPECT_THAT(r.out, HasSubstr("robust: "));
  EXPECT_THAT(r.out, HasSubstr("malicious nodes among them, retrained"));
}

TEST_F(SimulateTest, DropoutClosesAtTheDeadlineAndLearnsFromWhoAnswered) {
  constexpr int kNodes = 600;
  constexpr double kDropout = 0.3;
  constexpr double kDeadline = 3;
  uint32_t offline = 0;
  for (uint32_t v = 0; v < kNodes; ++v) {
    offline += SimulatedOffline(/*seed=*/3, v, kDropout);
  }
  ASSERT_GT(offline, 120u);  // about 180 of 600
  ASSERT_LT(offline, 240u);
  json j = Simulate({"--nodes", absl::StrCat(kNodes), "--hosts", "2", "--method",
                     "lpgnn", "--epsilon", "3", "--label-epsilon", "3", "--dropout",
                     absl::StrCat(kDropout), "--campaign-deadline",
                     absl::StrCat(kDeadline),
                     "--seed", "3"});
  ASSERT_FALSE(j.is_discarded());
  const json& d = j["deployment"];
  EXPECT_EQ(d["scenario"]["offline_nodes"].get<uint32_t>(), offline);
  EXPECT_EQ(d["scenario"]["dropout"].get<double>(), kDropout);
  ASSERT_EQ(d["campaigns"].size(), 2u);
  for (const json& c : d["campaigns"]) {
    SCOPED_TRACE(c.dump());
    EXPECT_EQ(c["targeted"].get<uint32_t>(), kNodes);
    EXPECT_EQ(c["reported"].get<uint32_t>(), kNodes - offline);
    EXPECT_EQ(c["rejected"].get<uint32_t>(), 0u);
    EXPECT_EQ(c["close_reason"].get<std::string>(), "deadline");
    // Every online node had answered before the deadline closed it.
    ASSERT_TRUE(c.contains("all_online_answered_seconds"));
    EXPECT_LT(c["all_online_answered_seconds"].get<double>(), kDeadline);
  }
  // Offline nodes spent nothing; online ones their two budgets (3 + 3).
  EXPECT_EQ(d["epsilon_spent_per_node"]["min"].get<double>(), 0.0);
  EXPECT_EQ(d["epsilon_spent_per_node"]["max"].get<double>(), 6.0);
  EXPECT_NEAR(d["epsilon_spent_per_node"]["mean"].get<double>(),
              6.0 * (kNodes - offline) / kNodes, 1e-9);
  // Six classes (a guess: 1/6): learnt from the nodes that answered (0.81
  // measured with these seeds).
  EXPECT_GT(j["mean"].get<double>(), 0.5);

  CommandResult r = Ldpctl({"simulate", "--dropout", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--dropout must be in [0, 1), got 1"));
  r = Ldpctl({"simulate", "--campaign-deadline", "20", "--timeout", "10"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("must be below --timeout"));
  r = Ldpctl({"simulate", "--quorum", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--quorum must be in (0, 1]"));
}

// The network: each agent host through its own fault-injecting proxy, with
// latency, jitter and loss. Answers arrive later, never differently: the
// seeded metric is exactly that of the direct run, and TLS still verifies
// the curator through the proxy.
TEST_F(SimulateTest, TheNetworkDelaysAnswersButDoesNotChangeThem) {
  const std::string data = Generated(300);
  const std::vector<std::string> base = {"--dataset", data, "--hosts", "2",
                                         "--seed", "3"};
  json direct = Simulate(base);
  std::vector<std::string> args = base;
  // A run is a few dozen chunks each way: loss 0.2 stalls some for sure
  // (none in 40 chunks: 0.8^40, about 1e-4).
  args.insert(args.end(), {"--latency", "50", "--jitter", "20", "--loss", "0.2"});
  json slow = Simulate(args);
  ASSERT_TRUE(direct.is_object() && slow.is_object());
  EXPECT_EQ(slow["mean"].get<double>(), direct["mean"].get<double>());
  EXPECT_EQ(slow["deployment"]["reports"], direct["deployment"]["reports"]);
  EXPECT_EQ(slow["deployment"]["rejected"], 0);
  EXPECT_TRUE(slow["deployment"]["tls"].get<bool>());

  const json& off = direct["deployment"]["scenario"]["network"];
  EXPECT_FALSE(off["enabled"].get<bool>());
  EXPECT_EQ(off["proxies"], 0);
  const json& n = slow["deployment"]["scenario"]["network"];
  SCOPED_TRACE(n.dump());
  EXPECT_TRUE(n["enabled"].get<bool>());
  EXPECT_EQ(n["latency_ms"].get<double>(), 50);
  EXPECT_EQ(n["jitter_ms"].get<double>(), 20);
  EXPECT_EQ(n["loss"].get<double>(), 0.2);
  EXPECT_EQ(n["rto_ms"].get<double>(), 200);  // max(200, 2 x 50 + 4 x 20)
  EXPECT_EQ(n["proxies"], 2);
  EXPECT_GE(n["connections"].get<int>(), 2);  // one per agent host at least
  // Every report crossed a proxy: more bytes than the curator counted in
  // report payloads alone.
  EXPECT_GT(n["bytes_to_curator"].get<uint64_t>(),
            slow["deployment"]["report_bytes"].get<uint64_t>());
  EXPECT_GT(n["bytes_to_agents"].get<uint64_t>(), 0u);
  const uint64_t chunks = n["chunks"].get<uint64_t>();
  const uint64_t losses = n["injected_losses"].get<uint64_t>();
  EXPECT_GT(chunks, 20u);
  EXPECT_GT(losses, 0u);
  EXPECT_LT(losses, chunks / 2);  // about 20 %
  // A lost chunk waits its delay plus one RTO.
  EXPECT_GE(n["max_delay_ms"].get<double>(), 200 + 30 - 1);

  CommandResult r = Ldpctl({"simulate", "--loss", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--loss must be in [0, 1), got 1"));
  r = Ldpctl({"simulate", "--latency", "-5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--latency must be in [0, 600000] milliseconds, got -5"));
  // ldpctl run attaches to a deployment whose network is its own.
  r = Ldpctl({"run", "--dataset", data, "--latency", "5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("latency"));
}

// Churn: the figures of scenario.churn that must hold after every kill.
void ExpectNothingLostNorSpentTwice(const json& j, size_t campaigns) {
  const json& d = j["deployment"];
  const json& ch = d["scenario"]["churn"];
  SCOPED_TRACE(ch.dump());
  ASSERT_EQ(ch["campaigns"].size(), campaigns);
  for (const json& c : ch["campaigns"]) EXPECT_GE(c["kills"].size(), 1u);
  EXPECT_EQ(ch["restarts"].get<int>(), ch["kills"].get<int>());
  EXPECT_GT(ch["acknowledged_reports_checked"].get<uint64_t>(), 0u);
  EXPECT_EQ(ch["acknowledged_reports_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(ch["curator_extra_epsilon_max"].get<double>(), 0.0);
  EXPECT_EQ(ch["agent_extra_epsilon_max"].get<double>(), 0.0);
  for (const json& c : d["campaigns"]) {
    EXPECT_EQ(c["reported"].get<uint32_t>(), c["targeted"].get<uint32_t>());
    EXPECT_EQ(c["rejected"].get<uint32_t>(), 0u);
  }
}

// Churn: two of three hosts killed (SIGKILL) mid-campaign in every campaign
// and restarted on their state: every campaign completes, no acknowledged
// report is lost, no node spends beyond what was asked (ledger and memos),
// and the seeded metric is the run's without churn: the restarted hosts
// re-send their memoized answers, and a node answering after a restart
// continues its noise stream where its memo says it stopped (a label after
// its features draws what it would have drawn without the restart).
TEST_F(SimulateTest, ChurnLosesNothingAndSpendsNothingTwice) {
  const std::vector<std::string> base = {"--nodes", "600", "--hosts", "3",
                                         "--seed", "5", "--churn-down", "0.5"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  json quiet = Simulate(with({"--churn", "0"}));
  json churned = Simulate(with({"--churn", "0.34"}));
  ASSERT_FALSE(quiet.is_discarded() || churned.is_discarded());
  EXPECT_EQ(quiet["deployment"]["scenario"]["churn"]["kills"].get<int>(), 0);
  ExpectNothingLostNorSpentTwice(churned, 1);
  EXPECT_EQ(churned["deployment"]["scenario"]["churn"]["kills"].get<int>(), 2);
  EXPECT_EQ(churned["mean"].get<double>(), quiet["mean"].get<double>());
  const std::vector<std::string> lpgnn = {"--method", "lpgnn", "--label-epsilon", "1"};
  json labels_quiet = Simulate(with({"--churn", "0", lpgnn[0], lpgnn[1], lpgnn[2], lpgnn[3]}));
  json labels = Simulate(with({"--churn", "1", lpgnn[0], lpgnn[1], lpgnn[2], lpgnn[3]}));
  ASSERT_FALSE(labels.is_discarded() || labels_quiet.is_discarded());
  ExpectNothingLostNorSpentTwice(labels, 2);
  EXPECT_EQ(labels["mean"].get<double>(), labels_quiet["mean"].get<double>());

  CommandResult r = Ldpctl({"simulate", "--churn", "1.5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--churn must be in [0, 1], got 1.5"));
  r = Ldpctl({"simulate", "--churn-down", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--churn-down applies to --churn"));
}

// The server side on PostgreSQL: an operator and three frontends, two of
// them killed (SIGKILL) and restarted during the features campaign. The
// agents move to a live frontend and resend; nothing acknowledged is lost,
// nothing is charged twice (ledger and memos), and the seeded metric is the
// SQLite run's.
TEST_F(SimulateTest, FrontendsOnPostgresEqualSqliteAndLoseNothing) {
  const std::vector<std::string> base = {"--nodes", "1500", "--hosts", "3",
                                         "--seed", "5"};
  json sqlite = Simulate(base);
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--store", "postgres", "--frontends", "3",
                           "--frontend-kills", "2", "--churn-batch", "2"});
  json pg = Simulate(args);
  ASSERT_FALSE(sqlite.is_discarded() || pg.is_discarded());
  EXPECT_EQ(pg["mean"].get<double>(), sqlite["mean"].get<double>());
  const json& d = pg["deployment"];
  EXPECT_EQ(d["store"]["kind"], "postgres");
  EXPECT_EQ(d["store"]["frontends"], 3);
  const json& fk = d["scenario"]["frontend_kills"];
  SCOPED_TRACE(fk.dump());
  EXPECT_GE(fk["kills"].get<int>(), 1);
  EXPECT_GT(fk["acknowledged_reports_checked"].get<uint64_t>(), 0u);
  EXPECT_EQ(fk["acknowledged_reports_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(fk["curator_extra_epsilon_max"].get<double>(), 0.0);
  EXPECT_EQ(fk["agent_extra_epsilon_max"].get<double>(), 0.0);
  for (const json& c : d["campaigns"]) {
    EXPECT_EQ(c["reported"].get<uint32_t>(), c["targeted"].get<uint32_t>());
    EXPECT_EQ(c["rejected"].get<uint32_t>(), 0u);
  }

  CommandResult r = Ldpctl({"simulate", "--frontends", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--frontends needs --store postgres"));
  r = Ldpctl({"simulate", "--store", "postgres", "--frontends", "1",
              "--frontend-kills", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--frontends 2 or more"));
  r = Ldpctl({"simulate", "--store", "mysql"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--store must be sqlite or postgres"));
}

// The database and the operator fail too: PostgreSQL killed (every process
// of it) and restarted, the active operator killed with a standby beside
// it, each during the features campaign. Every curator process rides it
// out; nothing acknowledged is lost, nothing is charged twice, the standby
// serves within seconds, and the seeded metric is the SQLite run's.
TEST_F(SimulateTest, DatabaseRestartsAndOperatorKillsLoseNothing) {
  const std::vector<std::string> base = {"--nodes", "1500", "--hosts", "3",
                                         "--seed", "5"};
  json sqlite = Simulate(base);
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--store", "postgres", "--frontends", "2",
                           "--database-restarts", "1", "--operator-kills", "1",
                           "--churn-batch", "1"});
  json pg = Simulate(args);
  ASSERT_FALSE(sqlite.is_discarded() || pg.is_discarded());
  EXPECT_EQ(pg["mean"].get<double>(), sqlite["mean"].get<double>());
  const json& sc = pg["deployment"]["scenario"];
  for (const char* kind : {"database_restarts", "operator_kills"}) {
    const json& f = sc[kind];
    SCOPED_TRACE(f.dump());
    EXPECT_EQ(f["each"].size(), 1u) << kind;
    EXPECT_GT(f["acknowledged_reports_checked"].get<uint64_t>(), 0u);
    EXPECT_EQ(f["acknowledged_reports_lost"].get<uint64_t>(), 0u);
    EXPECT_EQ(f["curator_extra_epsilon_max"].get<double>(), 0.0);
    EXPECT_EQ(f["agent_extra_epsilon_max"].get<double>(), 0.0);
    EXPECT_EQ(f["charged_not_received_epsilon_max"].get<double>(), 0.0);
  }
  // Generous bounds for a loaded machine; docs/operators.md has the figures.
  EXPECT_LT(sc["operator_kills"]["serving_seconds_max"].get<double>(), 15);
  for (const json& c : pg["deployment"]["campaigns"]) {
    EXPECT_EQ(c["reported"].get<uint32_t>(), c["targeted"].get<uint32_t>());
    EXPECT_EQ(c["rejected"].get<uint32_t>(), 0u);
    EXPECT_EQ(c["id"], "c1");  // the only campaign, whatever the crash did
  }

  CommandResult r = Ldpctl({"simulate", "--database-restarts", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--database-restarts must be in [0, 100], "
                               "with --store postgres"));
  r = Ldpctl({"simulate", "--store", "postgres", "--operator-kills", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--frontends 1 or more"));
}

// The agents' TLS ends at an HAProxy edge in front of two frontends, one of
// them killed mid-campaign: the edge moves its hosts to the live one (their
// route header keeps each host on one frontend otherwise), nothing is lost
// or charged twice, and the seeded metric is the direct run's.
TEST_F(SimulateTest, AnEdgeInFrontOfTheFrontendsChangesNothingButTheRoute) {
  const std::vector<std::string> base = {"--nodes", "1500", "--hosts", "3",
                                         "--seed", "5"};
  json direct = Simulate(base);
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--store", "postgres", "--frontends", "2",
                           "--frontend-kills", "1", "--churn-batch", "2",
                           "--edge"});
  json edge = Simulate(args);
  ASSERT_FALSE(direct.is_discarded() || edge.is_discarded());
  EXPECT_EQ(edge["mean"].get<double>(), direct["mean"].get<double>());
  const json& d = edge["deployment"];
  EXPECT_EQ(d["edge"]["kind"], "haproxy");
  const json& fk = d["scenario"]["frontend_kills"];
  SCOPED_TRACE(fk.dump());
  EXPECT_EQ(fk["kills"].get<int>(), 1);
  EXPECT_EQ(fk["acknowledged_reports_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(fk["curator_extra_epsilon_max"].get<double>(), 0.0);
  EXPECT_EQ(fk["agent_extra_epsilon_max"].get<double>(), 0.0);
  for (const json& c : d["campaigns"]) {
    EXPECT_EQ(c["reported"].get<uint32_t>(), c["targeted"].get<uint32_t>());
  }
  CommandResult r = Ldpctl({"simulate", "--edge", "--latency", "50"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--edge with --latency"));
}

// Neighbour substitution over three frontends, one of them killed: every
// frontend serves every node's sealing key, wherever it enrolled (the store
// holds them), so the exchange finds as many neighbours as on one curator.
// Before the keys were shared, a node enrolled at another frontend had no
// key and its neighbours left it out: 21% fewer edges (3,255 against
// 4,115-4,204 on SQLite). The exchange's timing varies from run to run
// (within 2% here), so the bound is 5%.
TEST_F(SimulateTest, SubstitutionOverThreeFrontendsFindsEveryKey) {
  const std::vector<std::string> base = {
      "--nodes", "600", "--hosts", "3", "--seed", "5", "--method", "lpgnn",
      "--mechanism", "multibit", "--epsilon", "2", "--edges", "ns1"};
  json one = Simulate(base);
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--store", "postgres", "--frontends", "3",
                           "--frontend-kills", "1", "--churn-batch", "2"});
  json three = Simulate(args);
  ASSERT_FALSE(one.is_discarded() || three.is_discarded());
  const double e1 = one["deployment"]["graph"]["edges"].get<double>();
  const double e3 = three["deployment"]["graph"]["edges"].get<double>();
  EXPECT_NEAR(e3 / e1, 1.0, 0.05) << e3 << " edges over three frontends, " << e1
                                  << " on one curator";
  const json& fk = three["deployment"]["scenario"]["frontend_kills"];
  EXPECT_EQ(fk["acknowledged_reports_lost"].get<uint64_t>(), 0u) << fk.dump();
  EXPECT_EQ(fk["curator_extra_epsilon_max"].get<double>(), 0.0) << fk.dump();
}

// Churn during a neighbour-substitution exchange: every host killed while
// the sealed messages flow and restarted; the exchange replays its part
// (its randomness comes from the node keys kept in agent.db), completes,
// and nothing is lost or spent twice.
TEST_F(SimulateTest, ChurnDuringASubstitutionExchange) {
  json j = Simulate({"--nodes", "600", "--hosts", "3", "--seed", "5", "--method",
                     "lpgnn", "--mechanism", "multibit", "--epsilon", "2",
                     "--edges", "ns1", "--churn", "1", "--churn-down", "0.5"});
  ASSERT_FALSE(j.is_discarded());
  ExpectNothingLostNorSpentTwice(j, 2);
  // The kills of the exchange came before any report: mid-exchange.
  for (const json& k : j["deployment"]["scenario"]["churn"]["campaigns"][0]["kills"]) {
    EXPECT_EQ(k["answered_at_kill"].get<uint32_t>(), 0u);
  }
}

TEST_F(SimulateTest, BadInputIsAClearErrorBeforeAnyProcessStarts) {
  CommandResult r = Ldpctl({"simulate", "--dataset", scratch_ + "/missing"});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_THAT(r.err, HasSubstr(scratch_ + "/missing"));
  r = Ldpctl({"simulate", "--hosts", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--hosts"));
  r = Ldpctl({"simulate", "--mechanism", "none"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("raw features"));
  r = Ldpctl({"simulate", "--cap", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--cap must be > 0, got 0"));
  const std::string work = scratch_ + "/nobin";
  r = Ldpctl({"simulate", "--nodes", "200", "--bin-dir", scratch_ + "/nobin-dir",
              "--work-dir", work});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_THAT(r.err, HasSubstr("nobin-dir/ldpgraph-curator"));
  EXPECT_THAT(ProcessesMentioning(work), ::testing::IsEmpty());
}

TEST_F(SimulateTest, EveryCommandHasHelpWithExamples) {
  for (const char* c : {"simulate", "status", "campaign", "budget", "pipeline",
                        "results", "export", "audit", "credentials"}) {
    CommandResult r = Ldpctl({c, "--help"});
    EXPECT_EQ(r.exit_code, 0) << c;
    EXPECT_THAT(r.out, HasSubstr("Example")) << c;
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("ldpctl ", c))) << c;
  }
  CommandResult r = Ldpctl({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("Exit codes"));
  EXPECT_EQ(Ldpctl({"frobnicate"}).exit_code, 2);
}

}  // namespace
}  // namespace ldpgraph::integration

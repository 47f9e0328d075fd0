// ldpgraph-agent: an agent host. Runs one logical agent per node of its
// shard (own credential, budget, memo and randomness), connects out to the
// curator, answers its tasks, and keeps spent budgets and memos under
// --state-dir. Exposes /metrics, /healthz and /readyz over HTTP. With
// --nodes from-curator its shard comes from the curator (client/shard_loop.h).
#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/agent_host.h"
#include "client/agent_host_flags.h"
#include "client/agent_host_metrics.h"
#include "client/check_in.h"
#include "client/shard_loop.h"
#include "common/cli_args.h"
#include "common/observability/http_endpoint.h"
#include "common/observability/metrics.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"

namespace {

using ldpgraph::agent::AgentHost;
using ldpgraph::agent::AgentHostOptions;
using Config = ldpgraph::agent::AgentHostConfig;

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

// An exclusive lock on DIR/host.lock (created with DIR), held while the
// object lives, so that two agent hosts never share a state directory: each
// would answer from its own memo and the nodes' budgets would split.
class StateDirLock {
 public:
  // INTERNAL if DIR or the lock file cannot be made; FAILED_PRECONDITION if
  // another host holds the lock.
  static absl::StatusOr<StateDirLock> Acquire(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat(
          "cannot create the agent state directory ", dir, ": ", ec.message()));
    }
    const std::string path = dir + "/host.lock";
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::InternalError(
          absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      close(fd);
      if (err == EWOULDBLOCK) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the agent state directory ", dir,
            " is in use by another agent host (", path, " is locked)"));
      }
      return absl::InternalError(
          absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
    }
    return StateDirLock(fd);
  }
  StateDirLock(StateDirLock&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)) {}
  StateDirLock& operator=(StateDirLock&&) = delete;
  ~StateDirLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// What /readyz reports before the host runs: claiming a shard, loading it.
class Phase {
 public:
  void Set(std::string text) {
    absl::MutexLock lock(&mu_);
    text_ = std::move(text);
  }
  std::string Get() const {
    absl::MutexLock lock(&mu_);
    return text_;
  }

 private:
  mutable absl::Mutex mu_;
  std::string text_ = "starting";
};

int Fail(const absl::Status& s) {
  std::cerr << "ldpgraph-agent: " << s.message() << "\n";
  return 1;
}

// Waits, looking every 100 ms, until SIGINT or SIGTERM (true) or done()
// (false).
bool WaitForSignalOr(const std::function<bool()>& done) {
  while (g_signal == 0 && !done()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return g_signal != 0;
}

// Runs run() on a thread of its own until it returns, or until SIGINT or
// SIGTERM, which call stop() (which must make run return); its result.
absl::Status RunUntilSignal(const std::function<absl::Status()>& run,
                            const std::function<void()>& stop) {
  absl::Status result;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    result = run();
    done.store(true);
  });
  if (WaitForSignalOr([&] { return done.load(); })) stop();
  worker.join();
  return result;
}

// An AgentHost serving one shard on a thread of its own, published in
// `running` (metrics, /readyz) while it runs.
class HostRun : public ldpgraph::agent::RunningShard {
 public:
  HostRun(StateDirLock lock, std::unique_ptr<AgentHost> host,
          std::atomic<AgentHost*>& running, std::atomic<uint64_t>& acked)
      : lock_(std::move(lock)),
        host_(std::move(host)),
        running_(running),
        acked_(acked) {
    running_.store(host_.get());
    worker_ = std::thread([this] {
      result_ = host_->Run();
      done_.store(true);
    });
  }
  // Stops the host if Stop was not called (its result then goes unread).
  ~HostRun() override { Stop().IgnoreError(); }

  bool Done() override { return done_.load(); }
  absl::Status Stop() override {
    if (worker_.joinable()) {
      host_->Stop();
      worker_.join();
      running_.store(nullptr);
      acked_.fetch_add(host_->counters().reports_acked.load());
    }
    return result_;
  }

 private:
  StateDirLock lock_;  // released after the host
  std::unique_ptr<AgentHost> host_;
  std::atomic<AgentHost*>& running_;
  std::atomic<uint64_t>& acked_;
  std::thread worker_;
  std::atomic<bool> done_{false};
  absl::Status result_;
};

// Starts the agents of a shard: the records of its nodes, its state
// directory (locked), an AgentHost with the shard's credentials.
class ShardHost : public ldpgraph::agent::ShardRunner {
 public:
  // per_shard_dirs (--nodes from-curator): the shard's state lives under
  // --state-dir/shard-I-of-K and only its nodes' credentials are used.
  // config: its credentials go to the host a Start makes (a copy of the
  // claim's with per_shard_dirs; all of them, moved, otherwise: a fixed
  // shard starts once).
  ShardHost(Config& config, bool per_shard_dirs,
            std::atomic<AgentHost*>& running, Phase& phase,
            const ldpgraph::observability::HttpEndpoint* http)
      : config_(config),
        per_shard_dirs_(per_shard_dirs),
        running_(running),
        phase_(phase),
        http_(http) {}

  absl::StatusOr<std::unique_ptr<ldpgraph::agent::RunningShard>> Start(
      const ldpgraph::agent::ShardClaim& claim) override {
    // The options with the shard's credentials only, never every node's
    // twice (a host holds one per node).
    std::vector<ldpgraph::agent::NodeSecret> all =
        std::move(config_.host.credentials);
    AgentHostOptions options = config_.host;
    std::string state_dir = config_.state_dir;
    if (per_shard_dirs_) {
      std::copy_if(all.begin(), all.end(), std::back_inserter(options.credentials),
                   [&](const auto& c) {
                     return c.node() >= claim.begin && c.node() < claim.end;
                   });
      config_.host.credentials = std::move(all);  // for the next claim
      state_dir = absl::StrCat(config_.state_dir, "/shard-", claim.shard,
                               "-of-", claim.shards);
    } else {
      options.credentials = std::move(all);
    }
    ASSIGN_OR_RETURN(StateDirLock lock, StateDirLock::Acquire(state_dir));
    size_t offline = 0;
    ASSIGN_OR_RETURN(auto records, LoadRecords(claim, options, &offline));
    std::optional<ldpgraph::agent::SimulatedAttack> attack;
    size_t malicious = 0;
    if (config_.attack.settings.fraction > 0) {
      phase_.Set("simulating the attacker");
      ASSIGN_OR_RETURN(attack, ldpgraph::agent::LoadSimulatedAttack(
                                   config_.dataset, config_.scaling,
                                   config_.attack.settings, config_.attack.seed,
                                   [&](uint32_t v) { return IsOffline(v); },
                                   config_.attack.screen_alpha,
                                   config_.attack.attack_edges));
      for (const auto& r : records) malicious += attack->nodes.contains(r.node);
    }
    ASSIGN_OR_RETURN(auto shard, ldpgraph::agent::AgentShard::Create(
                                     std::move(records), config_.policy,
                                     config_.seed, state_dir, {},
                                     attack ? &*attack : nullptr,
                                     config_.sealing_keys));
    // Hand the loading's scratch heap back, so that a host idles at what
    // its shard needs.
    ::malloc_trim(0);
    const uint64_t restored = shard->counters().restored;
    ASSIGN_OR_RETURN(std::unique_ptr<AgentHost> host,
                     AgentHost::Create(std::move(options), std::move(shard)));
    std::cerr << "ldpgraph-agent: " << config_.host.host_name << ": nodes "
              << claim.begin << ".." << claim.end - 1 << ", " << restored
              << " memo entries restored";
    if (config_.offline > 0) {
      std::cerr << ", " << offline << " nodes offline (simulated dropout)";
    }
    if (attack) {
      std::cerr << ", " << malicious << " nodes MALICIOUS (simulated "
                << ldpgraph::poisoning::kAttackNames.Name(
                       config_.attack.settings.kind)
                << " poisoning, attack class "
                << config_.attack.settings.target_class << ")";
    }
    if (http_ != nullptr) std::cerr << ", HTTP on port " << http_->port();
    std::cerr << std::endl;
    return std::make_unique<HostRun>(std::move(lock), std::move(host),
                                     running_, acked_);
  }

  // The records of the claim's nodes, less those drawn offline (whose
  // credentials leave `options` too; *offline counts them).
  absl::StatusOr<std::vector<ldpgraph::agent::NodeRecord>> LoadRecords(
      const ldpgraph::agent::ShardClaim& claim, AgentHostOptions& options,
      size_t* offline) {
    phase_.Set("loading the shard's records");
    ASSIGN_OR_RETURN(auto records, ldpgraph::agent::LoadShard(
                                       config_.dataset, config_.scaling,
                                       claim.begin, claim.end));
    *offline = LeaveOutOffline(records, options.credentials);
    return records;
  }

  // Simulated dropout: removes the records and credentials of the nodes
  // drawn offline; returns how many.
  size_t LeaveOutOffline(std::vector<ldpgraph::agent::NodeRecord>& records,
                         std::vector<ldpgraph::agent::NodeSecret>& creds) {
    auto offline = [&](uint32_t v) { return IsOffline(v); };
    const size_t before = records.size();
    std::erase_if(records, [&](const auto& r) { return offline(r.node); });
    std::erase_if(creds, [&](const auto& e) { return offline(e.node()); });
    return before - records.size();
  }

  // Whether --offline leaves node v out.
  bool IsOffline(uint32_t v) const {
    return ldpgraph::SimulatedOffline(config_.offline_seed, v, config_.offline);
  }

  // Reports acknowledged by the curator, over every shard run so far.
  uint64_t reports_acked() const { return acked_.load(); }

 private:
  Config& config_;
  const bool per_shard_dirs_;
  std::atomic<AgentHost*>& running_;
  Phase& phase_;
  const ldpgraph::observability::HttpEndpoint* const http_;
  std::atomic<uint64_t> acked_{0};
};

// --nodes A-B: serves the fixed shard until a signal or a permanent error.
absl::Status RunFixedShard(const Config& config, ShardHost& runner) {
  ldpgraph::agent::ShardClaim claim;
  claim.begin = config.begin;
  claim.end = config.end;
  ASSIGN_OR_RETURN(auto running, runner.Start(claim));
  WaitForSignalOr([&] { return running->Done(); });
  return running->Stop();
}

// --check-in: the device's visits (client/check_in.h) until a signal, its
// visit count, an idle check-in (--exit-when-idle) or a permanent error.
absl::Status RunCheckIns(const Config& config, ShardHost& runner,
                         std::atomic<const ldpgraph::agent::CheckInLoop*>& live) {
  ldpgraph::agent::ShardClaim claim;
  claim.begin = config.begin;
  claim.end = config.end;
  ldpgraph::agent::CheckInOptions options = config.visits;
  options.host = config.host;
  ASSIGN_OR_RETURN(StateDirLock lock, StateDirLock::Acquire(config.state_dir));
  size_t offline = 0;
  ASSIGN_OR_RETURN(auto records, runner.LoadRecords(claim, options.host, &offline));
  if (records.empty()) {
    std::cerr << "ldpgraph-agent: every node is offline (simulated dropout)\n";
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto shard, ldpgraph::agent::AgentShard::Create(
                                   std::move(records), config.policy,
                                   config.seed, config.state_dir, {},
                                   nullptr, config.sealing_keys));
  const std::string name = config.host.host_name;
  options.log = [name](const std::string& line) {
    std::cerr << "ldpgraph-agent: " << name << ": " << line << std::endl;
  };
  ASSIGN_OR_RETURN(auto loop, ldpgraph::agent::CheckInLoop::Create(
                                  std::move(options), std::move(shard)));
  live.store(loop.get());
  const absl::Status result =
      RunUntilSignal([&] { return loop->Run(); }, [&] { loop->Stop(); });
  live.store(nullptr);
  const auto& c = loop->counters();
  std::cerr << "ldpgraph-agent: " << name << ": " << c.check_ins.load()
            << " check-ins (" << c.served.load() << " served, " << c.idle.load()
            << " idle, " << c.paced.load() << " paced, " << c.failed.load()
            << " failed), " << c.reports_acked.load() << " reports acknowledged ("
            << c.duplicates.load() << " duplicates)" << std::endl;
  return result;
}

// --nodes from-curator: the shard loop (client/shard_loop.h) over the
// curator's ClaimShard until a signal or a permanent error.
absl::Status RunFromCurator(const Config& config, ShardHost& runner,
                            Phase& phase) {
  phase.Set("asking the curator for a shard");
  std::cerr << "ldpgraph-agent: " << config.host.host_name
            << ": asking the curator at " << config.host.curator
            << " for a shard" << std::endl;
  ldpgraph::agent::GrpcShardLeases leases(config.host,
                                          config.host.credentials.front());
  ldpgraph::agent::ShardLoopOptions options;
  options.note = [&phase](const std::string& note) {
    phase.Set(note);
    std::cerr << "ldpgraph-agent: " << note << std::endl;
  };
  ldpgraph::agent::ShardLoop loop(leases, runner,
                                  ldpgraph::agent::RealLoopClock(), options);
  return RunUntilSignal([&] { return loop.Run(); },
                        [&] {
                          loop.Stop();
                          // A claim waiting for a curator that is gone.
                          leases.Cancel();
                        });
}

// The HTTP endpoint of --http (nullptr when off): /metrics, and /readyz
// saying what the host waits for until it serves.
absl::StatusOr<std::unique_ptr<ldpgraph::observability::HttpEndpoint>>
StartHttp(const std::pair<std::string, int>& address,
          ldpgraph::observability::MetricsRegistry& metrics,
          std::atomic<AgentHost*>& running,
          std::atomic<const ldpgraph::agent::CheckInLoop*>& checking_in,
          Phase& phase) {
  return ldpgraph::observability::HttpEndpoint::Start(
      address.first, address.second, &metrics,
      [&running, &checking_in, &phase]() -> absl::Status {
        if (const auto* loop = checking_in.load()) {
          if (loop->ready()) return absl::OkStatus();
          return absl::UnavailableError("no check-in has succeeded yet");
        }
        AgentHost* h = running.load();
        if (h == nullptr) return absl::UnavailableError(phase.Get());
        if (h->ready()) return absl::OkStatus();
        const std::string e = h->last_error();
        return absl::UnavailableError(
            e.empty() ? "not connected to the curator yet" : e);
      });
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  const std::string usage = ldpgraph::agent::AgentHostUsage();
  auto config = ldpgraph::StartBinary("ldpgraph-agent", usage, argc, argv,
                                      ldpgraph::agent::ParseAgentHostFlags,
                                      &exit_code);
  if (!config) return exit_code;
  if (config->seed) std::cerr << ldpgraph::kSeededWarning << "\n";
  if (const auto& s = config->attack.settings; s.fraction > 0) {
    std::cerr << "ldpgraph-agent: WARNING: --malicious " << s.fraction
              << ": this host SIMULATES MALICIOUS AGENTS: its nodes drawn "
                 "malicious send poisoning reports, not their own perturbed "
                 "data (attack "
              << ldpgraph::poisoning::kAttackNames.Name(s.kind) << ", class "
              << s.target_class << ", " << s.target_dims
              << " target dimensions)\n";
  }
  if (config->host.insecure) {
    std::cerr << "ldpgraph-agent: WARNING: --insecure: plaintext gRPC, for "
                 "development only\n";
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  // A shard's host runs once the shard is known and loaded; until then the
  // metrics read zeros and /readyz says what the host waits for.
  std::atomic<AgentHost*> running{nullptr};
  std::atomic<const ldpgraph::agent::CheckInLoop*> checking_in{nullptr};
  Phase phase;
  ldpgraph::observability::MetricsRegistry metrics;
  if (absl::Status s = ldpgraph::agent::RegisterAgentHostMetrics(
          metrics, [&running] { return running.load(); });
      !s.ok()) {
    return Fail(s);
  }
  std::unique_ptr<ldpgraph::observability::HttpEndpoint> http;
  if (!config->http.empty()) {
    auto hp = ldpgraph::SplitHostPort(config->http);
    if (!hp.ok()) {
      std::cerr << "ldpgraph-agent: --http: " << hp.status().message() << "\n";
      return 2;
    }
    auto endpoint = StartHttp(*hp, metrics, running, checking_in, phase);
    if (!endpoint.ok()) return Fail(endpoint.status());
    http = std::move(*endpoint);
  }

  ShardHost runner(*config, config->from_curator, running, phase, http.get());
  const absl::Status result =
      config->check_in       ? RunCheckIns(*config, runner, checking_in)
      : config->from_curator ? RunFromCurator(*config, runner, phase)
                             : RunFixedShard(*config, runner);
  if (http) http->Stop();
  if (!result.ok()) return Fail(result);
  if (!config->check_in) {  // check-in mode printed its own totals
    std::cerr << "ldpgraph-agent: stopped (" << runner.reports_acked()
              << " reports acknowledged)" << std::endl;
  }
  return 0;
}

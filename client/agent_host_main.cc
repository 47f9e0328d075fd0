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
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "client/agent_host.h"
#include "client/agent_host_metrics.h"
#include "client/check_in.h"
#include "client/shard_loop.h"
#include "common/cli_args.h"
#include "common/hex.h"
#include "common/observability/http_endpoint.h"
#include "common/observability/metrics.h"
#include "common/seed_mix.h"
#include "common/status_macros.h"

namespace {

using ldpgraph::agent::AgentHost;
using ldpgraph::agent::AgentHostOptions;

constexpr char kUsage[] = R"(ldpgraph-agent: an agent host of an ldpgraph deployment.

Usage: ldpgraph-agent --curator HOST:PORT (--ca FILE | --insecure)
                      --credentials FILE --dataset DIR
                      --nodes (A-B | from-curator) --state-dir DIR [flags]
       ldpgraph-agent --check-in [check-in flags] (same flags, --nodes A-B)

Each node of the shard is one logical agent: it holds its private record,
perturbs locally, and is the authority on its own budget. It refuses a task
that would exceed its caps, and answers a repeated identical question from
its memo (no fresh randomness, no extra epsilon). Raw data never leaves it.

Flags:
  --curator ADDR       the curator's gRPC address, or its frontends' as a
                       list HOST:PORT,HOST:PORT,... (a host moves to the
                       next live one when the one it uses goes; a
                       Kubernetes Service name is one address)
  --ca FILE            CA certificate (PEM) that signed the curator's
  --server-name NAME   name to check the curator's certificate against
                       (default: the host part of --curator)
  --insecure           plaintext gRPC: development only
  --credentials FILE   lines "node<TAB>hex secret" (ldpctl credentials)
  --dataset DIR        dataset folder holding the shard's private records
                       (a simulation's stand-in for each node's own data);
                       the host reads only its nodes' lines, through the
                       folder's device index, and scales with its public
                       feature schema (ldpgraph prepare writes both)
  --nodes A-B          the shard: nodes A..B-1
  --nodes from-curator for hosts that are interchangeable replicas (docker
                       compose --scale, a Kubernetes StatefulSet): the host
                       asks the curator for its shard (the curator waits
                       until no new host has asked for its --fleet-settle
                       time, then gives one contiguous shard to each),
                       renews its lease, and keeps the shard's state under
                       --state-dir/shard-I-of-K. --credentials must cover
                       every node it may be given. --name is its identity:
                       the same name gets the same shard after a restart.
  --scaling S          public feature scaling: symmetric (default, [-1, 1]),
                       unit ([0, 1]) or none
  --state-dir DIR      durable memo and spent budgets (agent.db); one host
                       at a time (host.lock)
  --cap-total EPS      each node's total budget cap (default 8)
  --cap LIST           per-attribute caps, e.g. features=4,label=2
  --attributes LIST    attributes the nodes answer about
                       (default features,label,edges)
  --seed S             seeded noise: reproducible, NOT private (tests and
                       simulations only)
  --batch N            reports per batch (default 512)
  --max-rate R         at most R reports per second (default: no limit)
  --offline F          simulation of dropout: each node of the shard is
                       offline with probability F in [0, 1), drawn from
                       --offline-seed (default 1) and its id: it never
                       enrols nor answers (ldpctl simulate --dropout)
  --offline-seed S     the seed of --offline's draw
  --no-sealing-keys    make and load no X25519 sealing keys: the nodes
                       enrol without one and cannot take part in neighbour
                       substitution (--edges ns1/ns2). A key costs about
                       22 us to make, a host's largest cost at start;
                       ldpctl simulate sets it when no run of its uses them
  --malicious F        SIMULATION of data poisoning: each node of the
                       dataset is the attacker's with probability F in
                       [0, 1), drawn from --malicious-seed and its id (a
                       node also drawn offline is offline). This host's
                       malicious nodes answer feature and label questions
                       as --attack says (Cao, Jia and Gong, USENIX Security
                       2021) in place of their perturbed record, through
                       the same budget and memo; edge answers stay honest
                       but under fake-edges (randomized response and Blink
                       crafted). Default 0: no attack
  --malicious-seed S   the seed of --malicious's draw (default 1)
  --attack-class C     the class the attacker wants predicted (default 0)
  --attack-dims R      its target dimensions: the R most indicative of C in
                       the records of all its nodes (default 10)
)";
// After the shared --attack text (kUsage, kAttackHelp, kUsageTail).
constexpr char kUsageTail[] =
    R"(  --attack-alpha A     --attack adaptive: the report screen's level alpha
                       in (0, 1) the attacker assumes the curator uses
                       (default 1e-3; ldpctl simulate passes its
                       --screen-alpha)
  --attack-edges V     --attack fake-edges: the victims each malicious node
                       claims an edge to (default 50)
Check-in mode (a device of a cross-device fleet, not a host holding a
stream open): each visit connects, checks in with the nodes' credentials,
answers the tasks it is given (same budget, memo and exactly-once), submits,
and leaves; it comes back when the curator's reply says (its interval with
jitter, or, when it paces, its slot). Neighbour substitution is not
answered in this mode.
  --check-in           check-in mode
  --check-in-interval S  until the curator says otherwise, and as the most
                       a failed visit backs off to (default 60)
  --check-in-jitter F  F in [0, 1): each wait drawn from x [1 - F, 1 + F]
                       (default 0.2)
  --check-ins N        stop after N check-ins (default: until a signal)
  --exit-when-idle     stop after the first check-in that finds nothing to
                       answer
  --http ADDR          /metrics, /healthz, /readyz (default 0.0.0.0:9091;
                       "off" disables)
  --name NAME          host name for the curator's audit log (default:
                       agent-host-A-B, or with from-curator the machine's
                       hostname, which is the pod or container name)
  -h, --help           this text

Stops gracefully on SIGINT or SIGTERM.
)";

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

// "node<TAB>hex" lines; '#' comments and blank lines ignored.
absl::StatusOr<std::vector<ldpgraph::agent::NodeSecret>> ReadCredentials(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ldpgraph::ReadFileToString(path));
  std::vector<ldpgraph::agent::NodeSecret> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint32_t node = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &node) ||
        parts[1].size() != 64) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_no, ": expected \"node<TAB>64 hex digits\""));
    }
    auto secret = ldpgraph::FromHex(parts[1]);
    if (!secret.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_no, ": ", secret.status().message()));
    }
    out.emplace_back(node, *secret);
  }
  out.shrink_to_fit();
  return out;
}

// Keeps only the credentials of nodes [begin, end): a file may hold a whole
// deployment's.
void KeepShardCredentials(std::vector<ldpgraph::agent::NodeSecret>& creds,
                          uint32_t begin, uint32_t end) {
  std::erase_if(creds, [&](const auto& e) {
    return e.node() < begin || e.node() >= end;
  });
  creds.shrink_to_fit();
}

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

struct Config {
  AgentHostOptions host;
  std::string dataset, state_dir, http = "0.0.0.0:9091";
  uint32_t begin = 0, end = 0;
  bool from_curator = false;
  bool sealing_keys = true;  // --no-sealing-keys
  ldpgraph::FeatureScaling scaling = ldpgraph::FeatureScaling::kSymmetric;
  ldpgraph::agent::AgentPolicy policy;
  std::optional<uint64_t> seed;
  // Simulated dropout: nodes drawn offline are left out of the shard.
  double offline = 0;
  uint64_t offline_seed = 1;
  // Simulated poisoning (--malicious and the attack flags): off while
  // attack.settings.fraction is 0.
  ldpgraph::agent::SimulatedAttackFlags attack;
  // --check-in: a device that visits instead of a host with a stream.
  bool check_in = false;
  ldpgraph::agent::CheckInOptions visits;
};

// --check-in and its flags.
absl::Status ParseCheckInFlags(const ldpgraph::CliArgs& a, Config* config) {
  Config& c = *config;
  c.check_in = a.Flag("check-in");
  const bool any = a.Has("check-in-interval") || a.Has("check-in-jitter") ||
                   a.Has("check-ins") || a.Flag("exit-when-idle");
  if (!c.check_in) {
    if (any) {
      return absl::InvalidArgumentError(
          "--check-in-interval, --check-in-jitter, --check-ins and "
          "--exit-when-idle apply to --check-in");
    }
    return absl::OkStatus();
  }
  if (c.from_curator) {
    return absl::InvalidArgumentError(
        "--check-in needs a fixed --nodes A-B: a device knows its own nodes");
  }
  ASSIGN_OR_RETURN(auto interval, a.GetDouble("check-in-interval"));
  if (interval) {
    if (!(*interval > 0 && *interval <= 86400)) {
      return absl::InvalidArgumentError(
          "--check-in-interval must be in (0, 86400] seconds");
    }
    c.visits.interval = absl::Seconds(*interval);
    c.visits.backoff = std::min(c.visits.backoff, c.visits.interval);
  }
  ASSIGN_OR_RETURN(auto jitter, a.GetDouble("check-in-jitter"));
  if (jitter) c.visits.jitter = *jitter;
  ASSIGN_OR_RETURN(auto count, a.GetInt("check-ins"));
  if (count) {
    if (*count < 1 || *count > 1 << 30) {
      return absl::InvalidArgumentError("--check-ins must be >= 1");
    }
    c.visits.max_check_ins = static_cast<int>(*count);
  }
  c.visits.exit_when_idle = a.Flag("exit-when-idle");
  if (c.attack.settings.fraction > 0) {
    return absl::InvalidArgumentError(
        "--malicious is simulated for streaming hosts only, not --check-in");
  }
  return absl::OkStatus();
}

// --cap-total, --cap and --attributes, validated.
absl::StatusOr<ldpgraph::agent::AgentPolicy> ParsePolicy(
    const ldpgraph::CliArgs& a) {
  ldpgraph::agent::AgentPolicy policy;
  ASSIGN_OR_RETURN(auto total, a.GetDouble("cap-total"));
  policy.caps.total = total.value_or(8.0);
  if (a.Has("cap")) {
    for (absl::string_view item : absl::StrSplit(*a.Get("cap"), ',')) {
      std::vector<absl::string_view> kv = absl::StrSplit(item, '=');
      double v = 0;
      if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--cap must be attribute=epsilon[,...], got '", item, "'"));
      }
      policy.caps.per_attribute[std::string(kv[0])] = v;
    }
  }
  if (a.Has("attributes")) {
    policy.attributes.clear();
    for (absl::string_view item : absl::StrSplit(*a.Get("attributes"), ',')) {
      policy.attributes.insert(std::string(item));
    }
  }
  RETURN_IF_ERROR(policy.Validate());
  return policy;
}

absl::StatusOr<Config> ParseFlags(const std::vector<std::string>& args) {
  using ldpgraph::CliArgs;
  std::set<std::string> values = {
      "curator", "ca", "server-name", "credentials", "dataset", "nodes",
      "scaling", "state-dir", "cap-total", "cap", "attributes", "seed",
      "batch", "http", "name", "max-rate", "offline", "offline-seed",
      "check-in-interval", "check-in-jitter", "check-ins"};
  for (const std::string& f : ldpgraph::agent::SimulatedAttackFlagNames()) {
    values.insert(f);
  }
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(args, values, {"insecure", "check-in", "exit-when-idle",
                                    "no-sealing-keys"}));
  Config c;
  for (const char* flag :
       {"curator", "credentials", "dataset", "nodes", "state-dir"}) {
    if (!a.Has(flag)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
    }
  }
  c.host.curator = *a.Get("curator");
  c.host.insecure = a.Flag("insecure");
  c.sealing_keys = !a.Flag("no-sealing-keys");
  if (c.host.insecure == a.Has("ca")) {
    return absl::InvalidArgumentError(
        "give --ca (TLS) or --insecure (development only), not both");
  }
  if (a.Has("ca")) {
    ASSIGN_OR_RETURN(c.host.ca_pem, ldpgraph::ReadFileToString(*a.Get("ca")));
  }
  c.host.server_name = a.Get("server-name").value_or("");
  ASSIGN_OR_RETURN(c.host.credentials, ReadCredentials(*a.Get("credentials")));
  c.dataset = *a.Get("dataset");
  if (*a.Get("nodes") == "from-curator") {
    c.from_curator = true;
    if (c.host.credentials.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--credentials ", *a.Get("credentials"), " lists no node"));
    }
  } else {
    ASSIGN_OR_RETURN(auto range,
                     ldpgraph::ParseNodeRange(*a.Get("nodes"), "nodes"));
    c.begin = range.first;
    c.end = range.second;
    KeepShardCredentials(c.host.credentials, c.begin, c.end);
  }
  if (a.Has("scaling")) {
    ASSIGN_OR_RETURN(c.scaling,
                     ldpgraph::ParseFeatureScaling(*a.Get("scaling")));
  }
  c.state_dir = *a.Get("state-dir");
  ASSIGN_OR_RETURN(c.policy, ParsePolicy(a));
  c.host.caps = c.policy.caps;
  ASSIGN_OR_RETURN(c.seed, a.GetUint("seed"));
  ASSIGN_OR_RETURN(auto offline, a.GetDouble("offline"));
  if (offline) {
    if (!(*offline >= 0 && *offline < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--offline must be in [0, 1), got ", *offline));
    }
    c.offline = *offline;
  }
  ASSIGN_OR_RETURN(auto offline_seed, a.GetUint("offline-seed"));
  if (offline_seed) c.offline_seed = *offline_seed;
  ASSIGN_OR_RETURN(c.attack, ldpgraph::agent::ParseSimulatedAttackFlags(a));
  ASSIGN_OR_RETURN(auto batch, a.GetInt("batch"));
  if (batch) {
    if (*batch < 1 || *batch > 65536) {
      return absl::InvalidArgumentError("--batch must be in [1, 65536]");
    }
    c.host.batch_size = static_cast<int>(*batch);
  }
  ASSIGN_OR_RETURN(auto rate, a.GetDouble("max-rate"));
  if (rate) {
    if (*rate <= 0) return absl::InvalidArgumentError("--max-rate must be > 0");
    c.host.max_reports_per_second = *rate;
  }
  RETURN_IF_ERROR(ParseCheckInFlags(a, &c));
  c.http = a.Get("http").value_or(c.http);
  if (c.http == "off") c.http.clear();
  if (a.Has("name")) {
    c.host.host_name = *a.Get("name");
  } else if (c.from_curator) {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
      return absl::InvalidArgumentError(
          "--nodes from-curator needs --name: the hostname is unknown");
    }
    c.host.host_name = name;
  } else {
    c.host.host_name = absl::StrCat("agent-host-", c.begin, "-", c.end);
  }
  return c;
}

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
  absl::Status result;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    result = loop->Run();
    done.store(true);
  });
  if (WaitForSignalOr([&] { return done.load(); })) loop->Stop();
  worker.join();
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
  absl::Status result;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    result = loop.Run();
    done.store(true);
  });
  if (WaitForSignalOr([&] { return done.load(); })) {
    loop.Stop();
    leases.Cancel();  // a claim waiting for a curator that is gone
  }
  worker.join();
  return result;
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
  const std::string usage =
      absl::StrCat(kUsage, ldpgraph::poisoning::kAttackHelp, kUsageTail);
  auto config = ldpgraph::StartBinary("ldpgraph-agent", usage, argc, argv,
                                      ParseFlags, &exit_code);
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

// ldpgraph-agent's flags (client/agent_host_flags.h): the usage text, the
// credentials file, and each group of flags read and checked in turn.
#include "client/agent_host_flags.h"

#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/attacks/attack_settings.h"
#include "common/cli_args.h"
#include "common/hex.h"
#include "common/status_macros.h"

namespace ldpgraph::agent {
namespace {

using Config = AgentHostConfig;

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

// --curator, --insecure or --ca, and --server-name.
absl::Status ParseCuratorFlags(const ldpgraph::CliArgs& a, Config* config) {
  Config& c = *config;
  c.host.curator = *a.Get("curator");
  c.host.insecure = a.Flag("insecure");
  if (c.host.insecure == a.Has("ca")) {
    return absl::InvalidArgumentError(
        "give --ca (TLS) or --insecure (development only), not both");
  }
  if (a.Has("ca")) {
    ASSIGN_OR_RETURN(c.host.ca_pem, ldpgraph::ReadFileToString(*a.Get("ca")));
  }
  c.host.server_name = a.Get("server-name").value_or("");
  return absl::OkStatus();
}

// The shard: --credentials (only the shard's kept for --nodes A-B),
// --dataset, --nodes and --scaling.
absl::Status ParseShardFlags(const ldpgraph::CliArgs& a, Config* config) {
  Config& c = *config;
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
  return absl::OkStatus();
}

// The simulations: --seed, --offline and --offline-seed (dropout), and the
// attack's flags (ParseSimulatedAttackFlags).
absl::Status ParseSimulationFlags(const ldpgraph::CliArgs& a, Config* config) {
  Config& c = *config;
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
  return absl::OkStatus();
}

// The sending: --batch and --max-rate.
absl::Status ParseSendingFlags(const ldpgraph::CliArgs& a, Config* config) {
  Config& c = *config;
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
  return absl::OkStatus();
}

// The host's name: --name, else with --nodes from-curator the machine's
// hostname, else agent-host-A-B.
absl::StatusOr<std::string> HostName(const ldpgraph::CliArgs& a,
                                     const Config& c) {
  if (a.Has("name")) return *a.Get("name");
  if (c.from_curator) {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
      return absl::InvalidArgumentError(
          "--nodes from-curator needs --name: the hostname is unknown");
    }
    return std::string(name);
  }
  return absl::StrCat("agent-host-", c.begin, "-", c.end);
}

}  // namespace

std::string AgentHostUsage() {
  return absl::StrCat(kUsage, ldpgraph::poisoning::kAttackHelp, kUsageTail);
}

absl::StatusOr<AgentHostConfig> ParseAgentHostFlags(
    const std::vector<std::string>& args) {
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
  c.sealing_keys = !a.Flag("no-sealing-keys");
  RETURN_IF_ERROR(ParseCuratorFlags(a, &c));
  RETURN_IF_ERROR(ParseShardFlags(a, &c));
  c.state_dir = *a.Get("state-dir");
  ASSIGN_OR_RETURN(c.policy, ParsePolicy(a));
  c.host.caps = c.policy.caps;
  RETURN_IF_ERROR(ParseSimulationFlags(a, &c));
  RETURN_IF_ERROR(ParseSendingFlags(a, &c));
  RETURN_IF_ERROR(ParseCheckInFlags(a, &c));
  c.http = a.Get("http").value_or(c.http);
  if (c.http == "off") c.http.clear();
  ASSIGN_OR_RETURN(c.host.host_name, HostName(a, c));
  return c;
}

}  // namespace ldpgraph::agent

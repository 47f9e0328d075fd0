// fleet_load's options: the usage text and the flags' parsing
// (tests/bench/fleet_load_options.h).
#include "tests/bench/fleet_load_options.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"
#include "common/wire/names.h"
#include "tests/bench/load_util.h"

namespace ldpgraph::bench::fleet {

const char kUsage[] = R"(fleet_load: the curator under a fleet of agent hosts

Usage: fleet_load [--hosts H] [--nodes-per-host N] [--processes P] [flags]
       fleet_load --real-agents K [--nodes-per-host N] [flags]
       fleet_load --check-in [--devices N] [--window S] [flags]
                  (devices that check in and leave: fleet_load --check-in --help)

Starts ldpgraph-curator (127.0.0.1, plaintext or --tls, state in a temporary
folder),
enrols a fleet, subscribes it, runs one campaign over every node and
measures. Simulated hosts (default) each have their own gRPC channel and TCP
connection and answer like ldpgraph-agent; --real-agents starts real
ldpgraph-agent processes instead. A table goes to stderr, one JSON object to
stdout. Exit status 0 only if the campaign completed with no error.

Fleet:
  --hosts H               simulated agent hosts (default 1000)
  --nodes-per-host N      nodes each host (or real agent) speaks for
                          (default 1; 100 with --real-agents)
  --processes P           worker processes the simulated hosts are spread
                          over (default: the number of CPUs, at most 8)
  --fleet-nice N          niceness of the worker processes and real agents
                          (default 10, 0 to 19): a real fleet runs on other
                          machines, so here it yields the CPU to the curator
  --enrol-concurrency C   at most C Enrol calls in flight per worker process
                          (default 0: every host at once, like a fleet
                          reconnecting after a curator restart)
  --batch B               reports per ReportBatch (default 512)
  --real-agents K         K real ldpgraph-agent processes instead of
                          simulated hosts, on a generated dataset of
                          K * nodes-per-host nodes
  --churn F               with --real-agents: ceil(F x K) of the agent
                          processes (drawn from seed 1) are killed with
                          SIGKILL once mid-campaign, when its answers pass a
                          fraction drawn in [0.1, 0.6], and restarted on the
                          same state after 1 s (log agent-A.restart-1.log);
                          JSON "churn": kills, restarts (default 0: off)
Campaign:
  --attribute A           label (k-ary randomized response, default) or
                          features (HDS, sampled dimensions: the default)
  --epsilon E             the campaign's epsilon (default 1)
  --classes C             label classes of the simulated hosts (default 6;
                          real agents: the generated dataset's, 6)
  --features D            feature dimension (default 64, the generator's)
Measurement:
  --status-interval-ms T  pause between admin GetStatus calls (default 50)
  --enrol-timeout S       longest wait for enrolment and subscription
                          (default 120)
  --timeout S             longest wait for the campaign (default 300)
  --hold S                after the campaign, keep the fleet connected and
                          GetStatus sampling for S more seconds (default 0)
Scenarios (default: off):
  --latency MS            every host's connection goes through one
                          fault-injecting TCP proxy in this process (user
                          space: no root, no netem) that delays each chunk
                          of bytes MS milliseconds each way (default 0: no
                          proxy). Admin and GetStatus calls stay direct
  --jitter MS             plus a uniform draw in [-MS, +MS] per chunk,
                          clipped at zero; bytes never reorder (default 0)
  --loss P                per-chunk probability P in [0, 1) of a lost
                          segment: the chunk and what follows it stall one
                          RTO, max(200 ms, 2 x latency + 4 x jitter)
                          (default 0)
  --dropout F             each node is offline with probability F in [0, 1)
                          (drawn from seed 1 and its id, as ldpctl simulate
                          does): it never enrols nor answers (default 0)
  --campaign-deadline S   the campaign closes S seconds after it opened
                          (default: none; 30 with --dropout); it counts as
                          complete when every online node reported
Programs and files:
  --curator PATH          ldpgraph-curator (default: found beside fleet_load,
                          or one or two folders up)
  --agent PATH            ldpgraph-agent (same search)
  --curator-args "ARGS"   extra curator flags, split at spaces, e.g.
                          "--sync normal --max-threads 2000"
  --dir DIR               work folder, empty or new (default: a new one under
                          $TMPDIR or /tmp, removed at the end unless --keep
                          or a failure)
  --tls                   real TLS: the curator serves a certificate of a
                          development CA made for the run, and every
                          simulated host's channel (its own connection) and
                          every real agent does its own TLS handshake, with
                          its node credentials as without TLS
  --edge                  with --tls: the hosts connect to HAProxy (apt-get
                          install haproxy), which terminates their TLS and
                          carries their calls to the curator on a few
                          HTTP/2 connections (TLS too); the edge's CPU and
                          memory are reported beside the curator's
  --frontends N           with --edge: a throwaway PostgreSQL server
                          (initdb and postgres from Debian's postgresql
                          package), an operator and N frontend curators on
                          it; the edge spreads the hosts over the frontends
                          (by their route header) and each frontend's CPU
                          and memory are reported
  --keep                  keep the work folder (logs, stores)
  -h, --help              this text

Examples:
  fleet_load --hosts 200
  fleet_load --hosts 5000 --processes 4 --enrol-concurrency 200
  fleet_load --real-agents 20 --nodes-per-host 100 --attribute features
  fleet_load --hosts 500 --latency 200 --jitter 20 --loss 0.05
  fleet_load --hosts 500 --dropout 0.2 --campaign-deadline 10
)";

std::string g_tls_ca_pem;  // NOLINT: one per process, set once

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           grpc::ChannelArguments args) {
  return ldpgraph::bench::MakeChannel(target, g_tls_ca_pem, kTlsName, std::move(args));
}

bool NodeOffline(const Options& o, uint32_t v) {
  return ldpgraph::SimulatedOffline(kScenarioSeed, v, o.dropout);
}

namespace {

// --latency, --jitter, --loss, --dropout and --campaign-deadline.
absl::Status ParseScenario(const ldpgraph::CliArgs& a, Options* o) {
  struct Range {
    const char* flag;
    double* out;
    double lo, hi;
    bool hi_open;
  };
  for (const Range& r : {Range{"latency", &o->latency_ms, 0, 600000, false},
                         Range{"jitter", &o->jitter_ms, 0, 600000, false},
                         Range{"loss", &o->loss, 0, 1, true},
                         Range{"dropout", &o->dropout, 0, 1, true}}) {
    auto v = a.GetDouble(r.flag);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    if (!(**v >= r.lo && (r.hi_open ? **v < r.hi : **v <= r.hi))) {
      return absl::InvalidArgumentError(absl::StrCat("--", r.flag, " must be in [", r.lo, ", ",
                                                     r.hi, r.hi_open ? ")" : "]", ", got ", **v));
    }
    *r.out = **v;
  }
  auto deadline = a.GetDouble("campaign-deadline");
  if (!deadline.ok()) return deadline.status();
  if (*deadline) {
    if (!(**deadline > 0)) {
      return absl::InvalidArgumentError("--campaign-deadline must be > 0 seconds");
    }
    o->campaign_deadline = **deadline;
  } else if (o->dropout > 0) {
    o->campaign_deadline = 30;  // offline nodes would hold it open
  }
  if (o->campaign_deadline >= o->timeout) {
    return absl::InvalidArgumentError("--campaign-deadline must be below --timeout");
  }
  return absl::OkStatus();
}

// Flag `flag`, when given, into *out; INVALID_ARGUMENT unless it is > 0.
absl::Status GetPositive(const ldpgraph::CliArgs& a, const char* flag, double* out) {
  auto v = a.GetDouble(flag);
  if (!v.ok()) return v.status();
  if (!*v) return absl::OkStatus();
  if (!(**v > 0)) return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be > 0"));
  *out = **v;
  return absl::OkStatus();
}

// The fleet's, the campaign's and the measurement's numbers, and --churn.
absl::Status ParseNumbers(const ldpgraph::CliArgs& a, Options* o) {
  for (absl::Status s :
       {GetIntFlag(a, "hosts", &o->hosts, 1, 1000000),
        GetIntFlag(a, "processes", &o->processes, 1, 256),
        GetIntFlag(a, "enrol-concurrency", &o->enrol_concurrency, 0, 1000000),
        GetIntFlag(a, "batch", &o->batch, 1, 65536),
        GetIntFlag(a, "real-agents", &o->real_agents, 1, 10000),
        GetIntFlag(a, "classes", &o->classes, 2, 1000000),
        GetIntFlag(a, "features", &o->features, 1, 1000000),
        GetIntFlag(a, "status-interval-ms", &o->status_interval_ms, 0, 60000),
        GetIntFlag(a, "fleet-nice", &o->fleet_nice, 0, 19),
        GetPositive(a, "epsilon", &o->epsilon), GetPositive(a, "enrol-timeout", &o->enrol_timeout),
        GetPositive(a, "timeout", &o->timeout), GetPositive(a, "hold", &o->hold)}) {
    if (!s.ok()) return s;
  }
  if (auto churn = a.GetDouble("churn"); !churn.ok()) {
    return churn.status();
  } else if (*churn) {
    if (!(**churn >= 0 && **churn <= 1) || o->real_agents == 0) {
      return absl::InvalidArgumentError("--churn F needs F in [0, 1] and --real-agents");
    }
    o->churn = **churn;
  }
  return absl::OkStatus();
}

// --real-agents' flags apart, --nodes-per-host, and the fleet's size.
absl::Status ParseFleetSize(const ldpgraph::CliArgs& a, Options* o) {
  if (o->real_agents > 0) {
    o->nodes_per_host = 100;
    if (a.Has("hosts") || a.Has("processes") || a.Has("enrol-concurrency") || a.Has("batch") ||
        a.Has("classes")) {
      return absl::InvalidArgumentError(
          "--hosts, --processes, --enrol-concurrency, --batch and --classes "
          "are for simulated hosts; --real-agents K starts K ldpgraph-agent "
          "processes");
    }
  }
  if (absl::Status s = GetIntFlag(a, "nodes-per-host", &o->nodes_per_host, 1, 100000);
      !s.ok()) {
    return s;
  }
  const int64_t hosts = o->real_agents > 0 ? o->real_agents : o->hosts;
  if (hosts * o->nodes_per_host > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError("hosts * nodes-per-host is too large");
  }
  if (o->real_agents > 0 && hosts * o->nodes_per_host < 12) {
    return absl::InvalidArgumentError(
        "--real-agents needs at least 12 nodes in all (the generated "
        "dataset's 6 classes, twice)");
  }
  o->processes = std::min(o->processes, o->hosts);
  return absl::OkStatus();
}

// --curator and --agent (found beside fleet_load unless given): the ones
// the run needs must be executable.
absl::Status FindPrograms(const ldpgraph::CliArgs& a, Options* o) {
  o->curator_bin = a.Get("curator").value_or(FindProgram("ldpgraph-curator"));
  o->agent_bin = a.Get("agent").value_or(FindProgram("ldpgraph-agent"));
  for (const auto& bin : o->real_agents > 0
                             ? std::vector<std::string>{o->curator_bin, o->agent_bin}
                             : std::vector<std::string>{o->curator_bin}) {
    if (access(bin.c_str(), X_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(bin,
                       " is not an executable: build it (ninja ldpgraph-curator "
                       "ldpgraph-agent) or give --curator / --agent"));
    }
  }
  return absl::OkStatus();
}

// --edge's conditions, and --frontends.
absl::Status ParseEdge(const ldpgraph::CliArgs& a, Options* o) {
  if (o->edge && (!o->tls || o->network())) {
    return absl::InvalidArgumentError(
        "--edge terminates the hosts' TLS: it needs --tls, and not --latency, "
        "--jitter or --loss (the proxy would sit where the edge is)");
  }
  if (absl::Status s = GetIntFlag(a, "frontends", &o->frontends, 1, 64); !s.ok()) {
    return s;
  }
  if (o->frontends > 0 && !o->edge) {
    return absl::InvalidArgumentError(
        "--frontends spreads the hosts through the edge: it needs --edge");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  auto parsed = ldpgraph::CliArgs::Parse(
      args,
      {"hosts", "nodes-per-host", "processes", "enrol-concurrency", "batch", "real-agents",
       "attribute", "epsilon", "classes", "features", "status-interval-ms", "enrol-timeout",
       "fleet-nice",
       "timeout", "hold", "churn", "curator", "agent", "curator-args", "dir", "latency",
       "jitter", "loss", "dropout", "campaign-deadline", "frontends"},
      {"keep", "tls", "edge"});
  if (!parsed.ok()) return parsed.status();
  const ldpgraph::CliArgs& a = *parsed;
  Options o;
  o.processes = static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
  RETURN_IF_ERROR(ParseNumbers(a, &o));
  RETURN_IF_ERROR(ParseFleetSize(a, &o));
  o.attribute = a.Get("attribute").value_or("label");
  RETURN_IF_ERROR(ldpgraph::wire::kAttributeNames
                      .Parse(o.attribute, "--attribute",
                             {ldpgraph::v1::ATTRIBUTE_LABEL,
                              ldpgraph::v1::ATTRIBUTE_FEATURES})
                      .status());
  RETURN_IF_ERROR(FindPrograms(a, &o));
  if (auto extra = a.Get("curator-args")) {
    o.curator_args = absl::StrSplit(*extra, ' ', absl::SkipEmpty());
  }
  o.dir = a.Get("dir").value_or("");
  o.keep = a.Flag("keep");
  o.tls = a.Flag("tls");
  o.edge = a.Flag("edge");
  RETURN_IF_ERROR(ParseEdge(a, &o));
  if (absl::Status s = ParseScenario(a, &o); !s.ok()) return s;
  return o;
}

}  // namespace ldpgraph::bench::fleet

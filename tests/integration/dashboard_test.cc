// The Grafana dashboard (deploy/grafana/ldpgraph.json) and the Prometheus
// scrape configuration (deploy/prometheus/prometheus.yml) against what
// ldpgraph really exports and how docker-compose.yml names its services.
// The exported metrics are read from the real registration code: /metrics
// of an in-process CuratorServer, and a registry filled by
// RegisterAgentHostMetrics, by their `# TYPE` lines; renaming a metric
// without the dashboard fails here.
//
//   CheckerFlagsWhatIsWrong     the PromQL checker itself, on expressions
//       that must fail (unknown metric, rate() of a gauge,
//       histogram_quantile() of a counter) and that must pass.
//   DashboardIsWellFormed       valid JSON, uid, schemaVersion, the
//       datasource variable, unique panel ids, a query per panel.
//   EveryQueryUsesExportedMetricsRightly  every metric named in every
//       query and variable is exported, rate() sees only counters and
//       histogram series, histogram_quantile() only _bucket series.
//   ScrapeTargetsAreTheComposeServices  each job's targets are compose
//       services on the port their --http flag serves, and every service
//       that serves /metrics is scraped.
#include <httplib.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/agent_host_metrics.h"
#include "common/observability/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/curator/server.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(LDPGRAPH_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << "cannot read " << relative;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// --- PromQL -----------------------------------------------------------------

// A metric named in a query, and the functions it sits inside (outermost
// first).
struct MetricUse {
  std::string name;
  std::vector<std::string> inside;
};

// ASCII only (a byte of a UTF-8 sequence is neither).
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsIdentStart(char c) { return IsAlpha(c) || c == '_' || c == ':'; }
bool IsIdent(char c) { return IsIdentStart(c) || IsDigit(c); }

size_t SkipSpaces(const std::string& q, size_t at) {
  while (at < q.size() && IsSpace(q[at])) ++at;
  return at;
}

// The index just past the bracket that closes the one at `at`; strings
// inside are skipped.
size_t SkipBracketed(const std::string& q, size_t at, char open, char close) {
  int depth = 0;
  for (size_t i = at; i < q.size(); ++i) {
    const char c = q[i];
    if (c == '"' || c == '\'' || c == '`') {
      for (++i; i < q.size() && q[i] != c; ++i) {
        if (q[i] == '\\') ++i;
      }
    } else if (c == open) {
      ++depth;
    } else if (c == close && --depth == 0) {
      return i + 1;
    }
  }
  return q.size();
}

// Every metric named in a PromQL expression: identifiers that are not
// functions or aggregations (followed by "("), keywords, label lists of
// by/without/on/ignoring/group_*, label matchers ({...}), ranges ([...]),
// strings, numbers or Grafana variables ($x, ${x}).
std::vector<MetricUse> MetricsOf(const std::string& q) {
  static const std::set<std::string> kKeywords = {
      "by", "without", "on", "ignoring", "group_left", "group_right",
      "bool", "and", "or", "unless", "offset", "inf", "nan"};
  std::vector<MetricUse> out;
  std::vector<std::string> stack;  // "" for a bare parenthesis
  for (size_t i = 0; i < q.size();) {
    const char c = q[i];
    if (c == '{') {
      i = SkipBracketed(q, i, '{', '}');
    } else if (c == '[') {
      i = SkipBracketed(q, i, '[', ']');
    } else if (c == '"' || c == '\'' || c == '`') {
      for (++i; i < q.size() && q[i] != c; ++i) {
        if (q[i] == '\\') ++i;
      }
      ++i;
    } else if (c == '$') {
      ++i;
      if (i < q.size() && q[i] == '{') {
        i = SkipBracketed(q, i, '{', '}');
      } else {
        while (i < q.size() && IsIdent(q[i])) ++i;
      }
    } else if (IsDigit(c) || c == '.') {
      while (i < q.size() && (IsIdent(q[i]) || q[i] == '.')) ++i;
    } else if (c == '(') {
      stack.push_back("");
      ++i;
    } else if (c == ')') {
      if (!stack.empty()) stack.pop_back();
      ++i;
    } else if (IsIdentStart(c)) {
      size_t end = i;
      while (end < q.size() && IsIdent(q[end])) ++end;
      const std::string word = q.substr(i, end - i);
      size_t next = SkipSpaces(q, end);
      // An aggregation with its clause first: sum by (x) (...).
      for (const char* clause : {"by", "without"}) {
        if (q.compare(next, strlen(clause), clause) == 0 &&
            SkipSpaces(q, next + strlen(clause)) < q.size() &&
            q[SkipSpaces(q, next + strlen(clause))] == '(') {
          next = SkipSpaces(
              q, SkipBracketed(q, SkipSpaces(q, next + strlen(clause)), '(', ')'));
        }
      }
      const bool call = next < q.size() && q[next] == '(';
      if (kKeywords.count(word) != 0) {
        // A label list: skipped whole.
        i = call && word != "bool" ? SkipBracketed(q, next, '(', ')') : end;
      } else if (call) {
        stack.push_back(word);
        i = next + 1;
      } else {
        MetricUse use{word, {}};
        for (const std::string& f : stack) {
          if (!f.empty()) use.inside.push_back(f);
        }
        out.push_back(std::move(use));
        i = end;
      }
    } else {
      ++i;
    }
  }
  return out;
}

// Metric family name -> type ("counter", "gauge", "histogram"), from the
// `# TYPE` lines of a Prometheus text exposition.
using MetricTypes = std::map<std::string, std::string>;

void AddTypes(const std::string& exposition, MetricTypes& types) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, "# TYPE ")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() == 2) types[parts[0]] = parts[1];
  }
}

// The kind of series a name selects: the family's type, or
// "histogram_bucket" / "histogram_sum" / "histogram_count" for a
// histogram's series; nullopt for a name nothing exports.
std::optional<std::string> SeriesKind(const MetricTypes& types,
                                      const std::string& name) {
  if (auto it = types.find(name); it != types.end()) return it->second;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    absl::string_view base = name;
    if (!absl::ConsumeSuffix(&base, suffix)) continue;
    auto it = types.find(std::string(base));
    if (it != types.end() && it->second == "histogram") {
      return absl::StrCat("histogram", suffix);
    }
  }
  return std::nullopt;
}

bool Inside(const MetricUse& use, std::initializer_list<const char*> fs) {
  for (const std::string& f : use.inside) {
    for (const char* g : fs) {
      if (f == g) return true;
    }
  }
  return false;
}

// What is wrong with a query, one line per problem; empty if nothing.
// `up` is Prometheus's own series per target, always there.
std::vector<std::string> CheckQuery(const MetricTypes& types,
                                    const std::string& query) {
  std::vector<std::string> problems;
  const std::vector<MetricUse> uses = MetricsOf(query);
  if (uses.empty()) problems.push_back("names no metric");
  for (const MetricUse& use : uses) {
    if (use.name == "up") continue;
    const std::optional<std::string> kind = SeriesKind(types, use.name);
    if (!kind) {
      problems.push_back(absl::StrCat(use.name, ": not exported"));
      continue;
    }
    const bool cumulative =
        *kind == "counter" || absl::StartsWith(*kind, "histogram_");
    if (Inside(use, {"rate", "irate", "increase"}) && !cumulative) {
      problems.push_back(absl::StrCat(use.name, ": rate() of a ", *kind));
    }
    if (Inside(use, {"histogram_quantile"}) && *kind != "histogram_bucket") {
      problems.push_back(
          absl::StrCat(use.name, ": histogram_quantile() of a ", *kind));
    }
    if (*kind == "histogram") {
      problems.push_back(absl::StrCat(
          use.name, ": a histogram has only _bucket, _sum and _count series"));
    }
  }
  return problems;
}

// --- the exported metrics ---------------------------------------------------

// The `# TYPE`s of a running curator's /metrics and of an agent host's
// registry, both registered by the code the binaries run.
MetricTypes ExportedTypes() {
  MetricTypes types;
  const std::string dir = NewTempDir("dashboard");
  curator::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.data_dir = dir + "/curator";
  o.nodes = 4;
  o.node_key = std::string(32, 'n');
  o.admin_token = "0123456789abcdef0123456789abcdef";
  o.insecure = true;
  o.http_listen = "127.0.0.1:0";
  auto server = curator::CuratorServer::Start(o);
  EXPECT_TRUE(server.ok()) << server.status();
  if (server.ok()) {
    httplib::Client client("127.0.0.1", (*server)->http_port());
    client.set_read_timeout(30);
    auto response = client.Get("/metrics");
    EXPECT_TRUE(response && response->status == 200);
    if (response) AddTypes(response->body, types);
    (*server)->Shutdown(absl::Seconds(2));
  }
  RemoveTempDir(dir);

  observability::MetricsRegistry agent;
  EXPECT_TRUE(
      agent::RegisterAgentHostMetrics(agent, [] { return nullptr; }).ok());
  AddTypes(agent.Render(), types);
  return types;
}

// --- the dashboard ----------------------------------------------------------

nlohmann::json Dashboard() {
  return nlohmann::json::parse(ReadSource("deploy/grafana/ldpgraph.json"),
                               nullptr, /*allow_exceptions=*/false);
}

// Every panel, rows' nested panels included.
void Panels(const nlohmann::json& list, std::vector<nlohmann::json>& out) {
  for (const nlohmann::json& p : list) {
    out.push_back(p);
    if (p.contains("panels")) Panels(p["panels"], out);
  }
}

// (where, PromQL) of every panel target and query variable.
std::vector<std::pair<std::string, std::string>> Queries(
    const nlohmann::json& dashboard) {
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<nlohmann::json> panels;
  Panels(dashboard.value("panels", nlohmann::json::array()), panels);
  for (const nlohmann::json& p : panels) {
    for (const nlohmann::json& t : p.value("targets", nlohmann::json::array())) {
      out.emplace_back(absl::StrCat("panel '", p.value("title", ""), "'"),
                       t.value("expr", ""));
    }
  }
  for (const nlohmann::json& v : dashboard["templating"].value(
           "list", nlohmann::json::array())) {
    if (v.value("type", "") != "query") continue;
    const nlohmann::json& q = v["query"];
    std::string query =
        q.is_string() ? q.get<std::string>() : q.value("query", "");
    // Grafana's label_values(<series selector>, <label>): the selector is
    // PromQL, the label is not.
    absl::string_view inner = query;
    if (absl::ConsumePrefix(&inner, "label_values(") &&
        absl::ConsumeSuffix(&inner, ")")) {
      const size_t comma = inner.rfind(',');
      query = std::string(inner.substr(0, comma == absl::string_view::npos
                                              ? 0
                                              : comma));
    }
    out.emplace_back(absl::StrCat("variable ", v.value("name", "")), query);
  }
  return out;
}

TEST(DashboardTest, CheckerFlagsWhatIsWrong) {
  const MetricTypes types = {{"a_total", "counter"},
                             {"g", "gauge"},
                             {"h_seconds", "histogram"}};
  std::vector<MetricUse> uses = MetricsOf(
      "histogram_quantile(0.99, sum by (method, le) "
      "(rate(h_seconds_bucket{job=~\"x|y\"}[$__rate_interval]))) "
      "/ on (instance) group_left (z) g offset 5m + bool 2 * sum(a_total)");
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].name, "h_seconds_bucket");
  EXPECT_THAT(uses[0].inside, ElementsAre("histogram_quantile", "sum", "rate"));
  EXPECT_EQ(uses[1].name, "g");
  EXPECT_THAT(uses[1].inside, IsEmpty());
  EXPECT_EQ(uses[2].name, "a_total");

  EXPECT_THAT(CheckQuery(types, "sum(rate(a_total[5m])) / sum(g)"), IsEmpty());
  EXPECT_THAT(CheckQuery(types, "h_seconds_sum / h_seconds_count"), IsEmpty());
  EXPECT_THAT(CheckQuery(types, "up{job=\"x\"}"), IsEmpty());
  EXPECT_THAT(CheckQuery(types, "rate(b_total[5m])"),
              ElementsAre("b_total: not exported"));
  EXPECT_THAT(CheckQuery(types, "sum(rate(g[5m]))"),
              ElementsAre("g: rate() of a gauge"));
  EXPECT_THAT(
      CheckQuery(types, "histogram_quantile(0.5, rate(a_total[5m]))"),
      ElementsAre("a_total: histogram_quantile() of a counter"));
  EXPECT_THAT(CheckQuery(types, "h_seconds"),
              ElementsAre("h_seconds: a histogram has only _bucket, _sum and "
                          "_count series"));
  EXPECT_THAT(CheckQuery(types, "sum(g_bucket)"),
              ElementsAre("g_bucket: not exported"));
  EXPECT_THAT(CheckQuery(types, "vector(1)"), ElementsAre("names no metric"));
}

TEST(DashboardTest, DashboardIsWellFormed) {
  const nlohmann::json d = Dashboard();
  ASSERT_FALSE(d.is_discarded()) << "deploy/grafana/ldpgraph.json: not JSON";
  EXPECT_FALSE(d.value("uid", "").empty());
  EXPECT_FALSE(d.value("title", "").empty());
  ASSERT_TRUE(d.contains("schemaVersion") && d["schemaVersion"].is_number_integer());
  // The datasource: a variable every query names.
  bool datasource_variable = false;
  for (const nlohmann::json& v : d["templating"]["list"]) {
    datasource_variable |= v.value("name", "") == "DS_PROMETHEUS" &&
                           v.value("type", "") == "datasource" &&
                           v.value("query", "") == "prometheus";
  }
  EXPECT_TRUE(datasource_variable);
  std::vector<nlohmann::json> panels;
  Panels(d["panels"], panels);
  ASSERT_FALSE(panels.empty());
  std::set<int> ids;
  for (const nlohmann::json& p : panels) {
    const std::string title = p.value("title", "");
    ASSERT_TRUE(p.contains("id") && p["id"].is_number_integer()) << title;
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second)
        << "panel id " << p["id"] << " twice (" << title << ")";
    EXPECT_TRUE(p.contains("gridPos")) << title;
    if (p.value("type", "") == "row") continue;
    EXPECT_EQ(p["datasource"].value("uid", ""), "${DS_PROMETHEUS}") << title;
    ASSERT_TRUE(p.contains("targets") && !p["targets"].empty()) << title;
    std::set<std::string> refs;
    for (const nlohmann::json& t : p["targets"]) {
      EXPECT_FALSE(t.value("expr", "").empty()) << title;
      EXPECT_TRUE(refs.insert(t.value("refId", "")).second) << title;
    }
  }
}

TEST(DashboardTest, EveryQueryUsesExportedMetricsRightly) {
  const MetricTypes types = ExportedTypes();
  // Both processes answered: a few families each, typed.
  ASSERT_EQ(types.count("ldpgraph_curator_rpc_seconds"), 1u);
  ASSERT_EQ(types.count("ldpgraph_agent_reports_sent_total"), 1u);
  const nlohmann::json d = Dashboard();
  ASSERT_FALSE(d.is_discarded());
  const auto queries = Queries(d);
  ASSERT_GT(queries.size(), 10u);
  std::set<std::string> used;
  for (const auto& [where, query] : queries) {
    for (const std::string& problem : CheckQuery(types, query)) {
      ADD_FAILURE() << where << ": " << problem << "\n  in " << query;
    }
    for (const MetricUse& use : MetricsOf(query)) used.insert(use.name);
  }
  // The panels are there: reports in, refusals, the ledger, nodes
  // at a cap, campaign progress, RPC latency, the agent hosts.
  for (const char* name :
       {"ldpgraph_curator_reports_accepted_total",
        "ldpgraph_curator_reports_duplicate_total",
        "ldpgraph_curator_reports_rejected_total",
        "ldpgraph_curator_refusals_total",
        "ldpgraph_curator_epsilon_spent_bucket",
        "ldpgraph_curator_nodes_at_cap",
        "ldpgraph_curator_open_campaign_targets",
        "ldpgraph_curator_rpc_seconds_bucket",
        "ldpgraph_agent_reports_sent_total",
        "ldpgraph_agent_reconnects_total",
        "ldpgraph_agent_refusals_total",
        "ldpgraph_agent_exchange_messages_sent_total"}) {
    EXPECT_EQ(used.count(name), 1u) << "no panel shows " << name;
  }
}

// --- the scrape configuration -----------------------------------------------

// Compose service name -> the port its --http flag serves /metrics on, for
// every service of docker-compose.yml whose command has one. The file's
// layout: services as two-space-indented keys under `services:`.
std::map<std::string, int> ComposeMetricsPorts(const std::string& yml) {
  std::map<std::string, int> ports;
  bool in_services = false;
  std::string service;
  for (absl::string_view line : absl::StrSplit(yml, '\n')) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      in_services = line == "services:";
      continue;
    }
    if (!in_services) continue;
    if (absl::StartsWith(line, "  ") && line.size() > 2 && IsIdentStart(line[2]) &&
        absl::EndsWith(line, ":")) {
      service = std::string(absl::StripSuffix(line.substr(2), ":"));
      continue;
    }
    const size_t at = line.find("--http 0.0.0.0:");
    int port = 0;
    if (at != absl::string_view::npos &&
        absl::SimpleAtoi(line.substr(at + 15, line.find_first_not_of(
                                                  "0123456789", at + 15) -
                                                  at - 15),
                         &port)) {
      ports[service] = port;
    }
  }
  return ports;
}

// job name -> its targets as "host:port", from prometheus.yml's
// static_configs (targets: ["h:p", ...]) and dns_sd_configs (names:
// ["h"] with port: p). The file's layout: one list per line.
std::map<std::string, std::set<std::string>> ScrapeTargets(
    const std::string& yml) {
  std::map<std::string, std::set<std::string>> jobs;
  std::string job;
  std::vector<std::string> names;  // of the dns_sd_config being read
  auto list = [](absl::string_view v) {
    v = absl::StripSuffix(absl::StripPrefix(absl::StripAsciiWhitespace(v), "["), "]");
    std::vector<std::string> out;
    for (absl::string_view item : absl::StrSplit(v, ',', absl::SkipEmpty())) {
      out.emplace_back(absl::StripSuffix(
          absl::StripPrefix(absl::StripAsciiWhitespace(item), "\""), "\""));
    }
    return out;
  };
  for (absl::string_view line : absl::StrSplit(yml, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumePrefix(&line, "- ");
    if (absl::ConsumePrefix(&line, "job_name:")) {
      job = std::string(absl::StripAsciiWhitespace(line));
    } else if (absl::ConsumePrefix(&line, "targets:")) {
      for (const std::string& t : list(line)) jobs[job].insert(t);
    } else if (absl::ConsumePrefix(&line, "names:")) {
      names = list(line);
    } else if (absl::ConsumePrefix(&line, "port:")) {
      for (const std::string& n : names) {
        jobs[job].insert(absl::StrCat(n, ":", absl::StripAsciiWhitespace(line)));
      }
      names.clear();
    }
  }
  return jobs;
}

TEST(DashboardTest, ScrapeTargetsAreTheComposeServices) {
  const std::map<std::string, int> ports =
      ComposeMetricsPorts(ReadSource("docker-compose.yml"));
  // The two services that serve /metrics, as the compose file runs them.
  ASSERT_EQ(ports.count("curator"), 1u);
  ASSERT_EQ(ports.count("agent"), 1u);
  const auto jobs = ScrapeTargets(ReadSource("deploy/prometheus/prometheus.yml"));
  ASSERT_FALSE(jobs.empty());
  std::set<std::string> scraped;
  for (const auto& [job, targets] : jobs) {
    EXPECT_FALSE(targets.empty()) << "job " << job << " has no target";
    for (const std::string& target : targets) {
      std::pair<std::string, std::string> hp = absl::StrSplit(target, ':');
      auto it = ports.find(hp.first);
      if (it == ports.end()) {
        ADD_FAILURE() << "job " << job << ": " << target
                      << " is no compose service serving /metrics";
        continue;
      }
      EXPECT_EQ(hp.second, absl::StrCat(it->second))
          << "job " << job << ": " << hp.first << " serves /metrics on "
          << it->second;
      scraped.insert(hp.first);
    }
  }
  for (const auto& [service, port] : ports) {
    EXPECT_EQ(scraped.count(service), 1u) << service << " is not scraped";
  }
  // The jobs the dashboard's `up` panel selects.
  EXPECT_EQ(jobs.count("ldpgraph-curator"), 1u);
  EXPECT_EQ(jobs.count("ldpgraph-agent"), 1u);
}

}  // namespace
}  // namespace ldpgraph::integration

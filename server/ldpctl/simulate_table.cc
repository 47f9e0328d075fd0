// The Simulation's table (internal/simulation.h): what `ldpctl simulate`
// and `ldpctl run` print without --format json, from the results JSON
// (simulate_report.cc): the setup, the scenarios' rows, the results beside
// their baselines and what the deployment cost, and the seconds of each
// stage.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/internal/simulation.h"

namespace ldpgraph::ldpctl::internal {
namespace {

// ", N of the M malicious nodes <what>": the attacker's nodes among a
// defence's node list, from its figures' count_key and "malicious"
// (CountMalicious, simulate_report.cc).
std::string MaliciousText(const json& figures, const char* count_key,
                          const char* what) {
  return absl::StrFormat(", %u of the %u malicious nodes %s",
                         figures[count_key].get<uint32_t>(),
                         figures["malicious"].get<uint32_t>(), what);
}

// What a fault scenario's spending checks found (scenario.churn,
// .frontend_kills, .database_restarts, .operator_kills): the acknowledged
// reports lost and the extra epsilon, by the ledger and by the agents.
std::string LostReportsText(const json& f) {
  return absl::StrFormat(
      "%u acknowledged reports lost (of %u checked); extra epsilon %g "
      "(ledger), %g (agents' memos)",
      f["acknowledged_reports_lost"].get<uint64_t>(),
      f["acknowledged_reports_checked"].get<uint64_t>(),
      f["curator_extra_epsilon_max"].get<double>(),
      f["agent_extra_epsilon_max"].get<double>());
}

// The table's defence line.
std::string DefenceRow(const json& d) {
  std::vector<std::string> parts;
  if (d.contains("alpha")) {  // the screen
    if (d.value("screen", "") != "applied") {
      parts.push_back(
          "report screen: not applicable (the mechanism samples no "
          "dimensions)");
    } else {
      std::string row = absl::StrFormat(
          "report screen (alpha %g): %u nodes flagged, %u dimensions "
          "over-reported",
          d["alpha"].get<double>(), d["flagged_nodes"].get<uint32_t>(),
          d["overreported_dims"].get<uint32_t>());
      if (d.contains("malicious_flagged")) {
        absl::StrAppend(&row, MaliciousText(d, "malicious_flagged", "caught"));
      }
      parts.push_back(row);
    }
  }
  if (d.contains("edge_consistency")) {
    const json& e = d["edge_consistency"];
    std::string row = absl::StrFormat(
        "edge consistency (alpha %g): %u nodes isolated",
        e.value("alpha", 0.0), e.value("flagged_nodes", 0u));
    if (e.contains("malicious_flagged")) {
      absl::StrAppend(&row, MaliciousText(e, "malicious_flagged", "caught"));
    }
    parts.push_back(row);
  }
  if (d.contains("robust")) {
    const json& r = d["robust"];
    std::string row = absl::StrFormat(
        "robust: %u nodes dropped (%u training, %u validation)",
        r.value("dropped", 0u), r.value("dropped_train", 0u),
        r.value("dropped_validation", 0u));
    if (r.contains("malicious_dropped")) {
      absl::StrAppend(&row,
                      MaliciousText(r, "malicious_dropped", "among them"));
    }
    absl::StrAppend(&row, r.value("retrained", true) ? ", retrained"
                                                     : ", not retrained");
    parts.push_back(row);
  }
  if (parts.empty()) return d["kind"].get<std::string>();
  return absl::StrJoin(parts, "; ");
}

}  // namespace

// Report's table, in parts: the setup (what ran), the scenario's rows,
// the results beside their baselines, and the seconds of each stage.
void Simulation::Report(const json& j) {
  if (o_.json) {
    out_ << j.dump(2) << "\n" << std::flush;
    return;
  }
  const TableRow row = [&](const std::string& k, const std::string& v) {
    out_ << absl::StrFormat("  %-26s %s\n", k, v);
  };
  out_ << (o_.attach ? "\n== ldpctl run: results ==\n"
                      : "\n== ldpctl simulate: results ==\n");
  SetupRows(j, row);
  ScenarioRows(j["deployment"], row);
  out_ << "\n";
  ResultRows(j, row);
  StageTable(j);
  out_ << std::flush;
}

void Simulation::ClosingRows(const json& d, const TableRow& row) const {
  const json& sc = d["scenario"];
  if (!(sc["dropout"].get<double>() > 0 || o_.quorum < 1 || o_.deadline_s > 0)) {
    return;
  }
  std::string closing = absl::StrCat("quorum ", o_.quorum);
  if (o_.deadline_s > 0) {
    absl::StrAppend(&closing, ", deadline ", o_.deadline_s, " s");
  }
  row("scenario",
      absl::StrFormat("dropout %g (%u nodes offline); campaigns close at %s",
                      sc["dropout"].get<double>(),
                      sc["offline_nodes"].get<uint32_t>(), closing));
  for (const json& c : d["campaigns"]) {
    row(absl::StrCat("  ", c["attribute"].get<std::string>(), " ",
                     c["id"].get<std::string>()),
        absl::StrCat(
            absl::StrFormat("%u of %u answered, closed on %s",
                            c["reported"].get<uint32_t>() +
                                c["refused"].get<uint32_t>(),
                            c["targeted"].get<uint32_t>(),
                            c["close_reason"].get<std::string>()),
            c.contains("all_online_answered_seconds")
                ? absl::StrFormat(
                      "; every online node in %.2f s",
                      c["all_online_answered_seconds"].get<double>())
                : ""));
  }
}

void Simulation::FaultRows(const json& sc, const TableRow& row) const {
  if (sc.contains("frontend_kills")) {
    const json& fk = sc["frontend_kills"];
    row("frontend kills",
        absl::StrFormat("%d of %d frontends' SIGKILLs; %s",
                        fk["kills"].get<int>(), o_.frontends,
                        LostReportsText(fk)));
  }
  if (sc.contains("database_restarts")) {
    const json& dr = sc["database_restarts"];
    row("database restarts",
        absl::StrFormat("%d SIGKILLs of PostgreSQL; reports flowed again "
                        "within %.2f s of its return; %s",
                        dr["restarts"].get<int>(),
                        dr["flowing_seconds_max"].get<double>(),
                        LostReportsText(dr)));
  }
  if (sc.contains("operator_kills")) {
    const json& ok = sc["operator_kills"];
    row("operator kills",
        absl::StrFormat("%d SIGKILLs of the active operator; the standby "
                        "served within %.2f s; %s",
                        ok["kills"].get<int>(),
                        ok["serving_seconds_max"].get<double>(),
                        LostReportsText(ok)));
  }
}

void Simulation::ChurnRows(const json& ch, const TableRow& row) {
  row("churn",
      absl::StrFormat("%g of the hosts: %d kills, %d restarts; %s",
                      ch["fraction"].get<double>(), ch["kills"].get<int>(),
                      ch["restarts"].get<int>(), LostReportsText(ch)));
  if (const double unsent = ch["charged_not_received_epsilon_max"].get<double>();
      unsent > 0) {
    row("", absl::StrFormat("a host charged up to %g epsilon for answers the "
                            "curator never received (closed first)",
                            unsent));
  }
  for (const json& c : ch["campaigns"]) {
    row(absl::StrCat("  ", c["id"].get<std::string>()),
        absl::StrFormat("%u kills, complete in %.2f s",
                        c["kills"].size(), c["seconds"].get<double>()));
  }
}

void Simulation::ScenarioRows(const json& d, const TableRow& row) const {
  const json& sc = d["scenario"];
  ClosingRows(d, row);
  if (sc.contains("network") && sc["network"]["enabled"].get<bool>()) {
    row("network", NetworkText(sc["network"]));
  }
  FaultRows(sc, row);
  if (sc.contains("churn")) ChurnRows(sc["churn"], row);
  if (sc.contains("malicious")) {
    const json& m = sc["malicious"];
    row("poisoning",
        absl::StrFormat("malicious %g (%u nodes, simulated), %s attack on "
                        "class %d, %d target dimensions",
                        m["fraction"].get<double>(), m["nodes"].get<uint32_t>(),
                        m.value("attack", "maximal-gain"),
                        m["attack_class"].get<int>(), m["attack_dims"].get<int>()));
  }
  if (sc.contains("defence")) row("defence", DefenceRow(sc["defence"]));
}

// The dataset, the deployment, the pipeline, the propagation chosen, the
// graph and the noise.
void Simulation::SetupRows(const json& j, const TableRow& row) const {
  const json& d = j["deployment"];
  row("dataset", absl::StrCat(j["dataset"].get<std::string>(), " (",
                              d["nodes"].get<uint32_t>(), " nodes, ",
                              d["edges"].get<size_t>(), " edges)"));
  std::string deployment =
      o_.attach ? absl::StrCat("curator ", d["curator"].get<std::string>(), " + ",
                               hosts_, " agent hosts, gRPC over ",
                               d["tls"].get<bool>() ? "TLS" : "PLAINTEXT")
                : o_.store == "postgres"
                      ? absl::StrCat(o_.frontends > 0
                                         ? absl::StrCat("operator + ", o_.frontends,
                                                        " frontends")
                                         : std::string("1 curator"),
                                     " on PostgreSQL + ", o_.hosts,
                                     " agent hosts, gRPC over TLS on 127.0.0.1")
                      : absl::StrCat("1 curator + ", o_.hosts,
                                     " agent hosts, gRPC over TLS on 127.0.0.1");
  if (!o_.attach && o_.edge) {
    deployment += "; the agents' TLS ends at an HAProxy edge";
  }
  row("deployment", deployment);
  std::string pipeline_text =
      absl::StrCat(o_.method == v1::PIPELINE_METHOD_LPGNN    ? "LPGNN"
                   : o_.method == v1::PIPELINE_METHOD_UPGNET ? "UPGNET"
                                                             : "PrivGE",
                   ", ",
                   o_.task == v1::PIPELINE_TASK_NODE ? "node classification"
                                                     : "link prediction",
                   ", ", config_.mechanism, " epsilon_x ",
                   absl::StrFormat("%g", config_.epsilon));
  if (config_.label_epsilon) {
    absl::StrAppend(&pipeline_text, ", label RR epsilon_y ",
                    absl::StrFormat("%g", *config_.label_epsilon));
  }
  row("pipeline", pipeline_text);
  if (const json& r = j["per_run"][0]; r.contains("tuning") &&
                                       r["tuning"].contains("candidates")) {
    // PrivGE's node task: which propagation the validation nodes chose.
    std::string tried;
    for (const json& c : r["tuning"]["candidates"]) {
      absl::StrAppend(&tried, tried.empty() ? "" : ", ",
                      c["propagation"].get<std::string>(), " ",
                      absl::StrFormat("%.3f", c["validation"].get<double>()));
    }
    row("propagation",
        absl::StrCat(r["tuning"]["propagation"].get<std::string>(),
                     " (kept by validation accuracy: ", tried, ")"));
  }
  GraphRow(d["graph"], row);
  row("noise", o_.seed ? absl::StrCat("seeded (", *o_.seed,
                                      "): reproducible, NOT private")
                       : "secure (OpenSSL)");
}

// Where the graph came from: the curator's, or assembled from an edge
// campaign.
void Simulation::GraphRow(const json& g, const TableRow& row) {
  if (g["source"] == "curator") {
    row("graph", absl::StrFormat("the curator's (true edges, %u)",
                                 g["edges"].get<uint64_t>()));
  } else if (g["source"] == "blink") {
    row("graph",
        absl::StrFormat(
            "assembled from %s: Blink, epsilon %g (delta %g), %s over %u "
            "reporters, %u non-reporters isolated (%u edges)",
            g["campaign"].get<std::string>(), g["epsilon"].get<double>(),
            g["delta"].get<double>(), g["variant"].get<std::string>(),
            g.value("reports", uint64_t{0}),
            g.value("nonreporters", uint64_t{0}),
            g["edges"].get<uint64_t>()));
  } else {
    row("graph",
        absl::StrFormat(
            "assembled from %s: %s, epsilon_e %g, %s (%u edges)",
            g["campaign"].get<std::string>(),
            g["source"] == "rr" ? "edge randomized response"
                                : absl::StrCat("neighbour substitution, approach ",
                                               g["source"] == "ns1" ? "1" : "2"),
            g["epsilon"].get<double>(), g["rule"].get<std::string>(),
            g["edges"].get<uint64_t>()));
  }
}

// The metric, beside its baselines, and what the deployment cost.
void Simulation::ResultRows(const json& j, const TableRow& row) const {
  const json& d = j["deployment"];
  row(j["metric"].get<std::string>() + " (test)",
      absl::StrFormat("%.4f", j["mean"].get<double>()));
  if (j.contains("baselines")) {
    // What the campaign's reports bought over what the curator holds anyway.
    for (const auto& [key, b] : j["baselines"].items()) {
      const double diff = 100 * b["difference"]["mean"].get<double>();
      // no_graph holds the reports without the graph: the difference is
      // the graph's.
      const bool graph = key == "no_graph";
      const char* gain = graph ? "the graph adds" : "the reports add";
      const char* ahead = graph ? "the result with the graph" : "the reports";
      row(b["label"].get<std::string>(),
          absl::StrFormat(
              "%.4f (%s)", b["mean"].get<double>(),
              diff >= 0
                  ? absl::StrFormat("%s %.1f points", gain, diff)
                  : absl::StrFormat("ahead of %s by %.1f points", ahead,
                                    -diff)));
    }
  }
  if (j["per_run"][0].contains("target_rate")) {
    row(absl::StrCat("target rate (class ", o_.attack_class, ")"),
        absl::StrFormat("%.4f", j["per_run"][0]["target_rate"].get<double>()));
  }
  const json& e = d["epsilon_spent_per_node"];
  row("epsilon spent per node",
      absl::StrFormat("mean %g (min %g, max %g)", e["mean"].get<double>(),
                      e["min"].get<double>(), e["max"].get<double>()));
  row("reports", absl::StrFormat("%u (%u refused, %u rejected)",
                                 d["reports"].get<uint64_t>(),
                                 d["refusals"].get<uint64_t>(),
                                 d["rejected"].get<uint64_t>()));
  row("bytes on the wire", absl::StrFormat(
                               "%.1f KiB of reports (%.1f B per report)",
                               d["report_bytes"].get<uint64_t>() / 1024.0,
                               d["report_bytes_per_report"].get<double>()));
  if (d.contains("peak_rss_mib")) {
    const json& mem = d["peak_rss_mib"];
    row("peak memory", absl::StrFormat(
                           "%.0f MiB at once (each process's own peak: "
                           "%.0f MiB in all, curator %.0f MiB%s, agent hosts "
                           "%.0f MiB (largest %.0f), ldpctl %.0f MiB)",
                           mem["together"].get<double>(),
                           mem["all_processes"].get<double>(),
                           mem["curator"].get<double>(),
                           o_.frontends > 0
                               ? absl::StrFormat(" (frontends %.0f)",
                                                 mem["frontends"].get<double>())
                               : std::string(),
                           mem["agent_hosts_total"].get<double>(),
                           mem["agent_host_max"].get<double>(),
                           mem["ldpctl"].get<double>()));
  }
}

// The seconds of each stage, and of the evaluation's parts.
void Simulation::StageTable(const json& j) {
  const json& d = j["deployment"];
  out_ << "\n  " << absl::StrFormat("%-26s %9s\n", "stage", "seconds");
  for (const auto& [k, v] : stage_seconds_) {
    out_ << absl::StrFormat("  %-26s %9.2f\n", k, v);
  }
  const json& r = j["per_run"][0];
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which propagate",
                          r["propagate_seconds"].get<double>());
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which train",
                          r["train_seconds"].get<double>());
  if (d["evaluate_seconds"]["baselines"].get<double>() > 0) {
    out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which baselines",
                            d["evaluate_seconds"]["baselines"].get<double>());
  }
  out_ << absl::StrFormat("  %-26s %9.2f\n", "  of which the rest",
                          d["evaluate_seconds"]["rest"].get<double>());
  out_ << absl::StrFormat("  %-26s %9.2f\n", "total", d["total_seconds"].get<double>());
}

}  // namespace ldpgraph::ldpctl::internal

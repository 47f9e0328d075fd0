// The commands that read the curator's state (internal/commands.h):
// status (its counters at a glance), budget show (the privacy ledger) and
// audit (the audit log).
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/commands.h"

namespace ldpgraph::ldpctl::internal {

absl::Status Status(const Connection& c, const Output& o) {
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::CuratorStatus s;
  RETURN_IF_ERROR(
      FromGrpc(c.stub->GetStatus(&ctx, v1::GetStatusRequest(), &s), c.address));
  if (o.json) {
    o.Json(s);
    return absl::OkStatus();
  }
  const double up =
      absl::ToDoubleSeconds(absl::Now() - absl::FromUnixMillis(s.started_unix_ms()));
  auto row = [&](const std::string& k, const std::string& v) {
    o.out << absl::StrFormat("%-22s %s\n", k, v);
  };
  row("curator", absl::StrCat(c.address, s.insecure() ? " (PLAINTEXT)" : " (TLS)",
                              ", up ", absl::StrFormat("%.0f", up), " s"));
  row("graph", absl::StrCat(s.graph_nodes(), " nodes, ", s.graph_edges(),
                            " edges, ", s.classes(), " classes"));
  row("agent hosts", absl::StrCat(s.sessions(), " sessions, ", s.task_streams(),
                                  " task streams open"));
  if (s.fleet_shards() > 0) {
    row("fleet", absl::StrCat("plan of ", s.fleet_shards(),
                              " shards (hosts started with --nodes from-curator)"));
  } else if (s.fleet_gathering() > 0) {
    row("fleet", absl::StrCat(s.fleet_gathering(),
                              " hosts asked for shards; the plan is not fixed yet"));
  }
  row("nodes enrolled", absl::StrFormat("%u of %u (%.1f%%)", s.enrolled_nodes(),
                                        s.graph_nodes(),
                                        s.graph_nodes() ? 100.0 * s.enrolled_nodes() / s.graph_nodes() : 0.0));
  if (s.check_ins() > 0) {
    row("devices (check-in)",
        absl::StrCat(s.devices_seen(), " seen; ", s.check_ins(),
                     " check-ins: ", s.check_ins_served(), " served, ",
                     s.check_ins_idle(), " idle, ", s.check_ins_paced(),
                     " paced; ", s.check_in_sessions(), " sessions live"));
  }
  row("campaigns", absl::StrCat(s.open_campaigns(), " open, ",
                                s.closed_campaigns(), " closed"));
  row("answers stored", absl::StrCat(s.stored_reports(), " reports, ",
                                     s.stored_refusals(), " refusals"));
  row("since start", absl::StrCat(s.reports_accepted(), " accepted, ",
                                  s.reports_duplicate(), " duplicates, ",
                                  s.reports_rejected(), " rejected"));
  row("report bytes", absl::StrCat(s.report_bytes_received(), " received"));
  row("results", absl::StrCat(s.results()));
  return absl::OkStatus();
}

absl::Status BudgetShow(const CliArgs& a, const Connection& c, const Output& o) {
  v1::GetBudgetsRequest req;
  if (a.Has("nodes")) {
    ASSIGN_OR_RETURN(auto r, ParseNodeRange(*a.Get("nodes"), "nodes"));
    req.set_range_begin(r.first);
    req.set_range_end(r.second);
  }
  const bool per_node = a.Flag("per-node") || a.Has("nodes");
  // The summary, page by page; the rows only when they are shown.
  size_t n = 0, caps_known = 0;
  double lo = 0, hi = 0, sum = 0;
  std::map<std::string, std::pair<double, double>> per_attr;  // max, sum
  v1::GetBudgetsResponse resp;
  req.set_page_size(100000);
  RETURN_IF_ERROR(c.ForEachPage(
      &v1::AdminService::Stub::GetBudgets, req,
      [&](const v1::GetBudgetsResponse& page) {
        for (const auto& b : page.budgets()) {
          caps_known += b.caps_known() ? 1 : 0;
          lo = n == 0 ? b.total_spent() : std::min(lo, b.total_spent());
          hi = std::max(hi, b.total_spent());
          sum += b.total_spent();
          for (const auto& [attr, eps] : b.spent()) {
            auto& s = per_attr[attr];
            s.first = std::max(s.first, eps);
            s.second += eps;
          }
          ++n;
          if (per_node) *resp.add_budgets() = b;
        }
        return absl::OkStatus();
      }));
  if (o.json) {
    // {"summary": {...}, "budgets": [...]} (budgets with --per-node/--nodes,
    // in protobuf's JSON mapping, as every other command prints them).
    nlohmann::json j;
    j["summary"] = {{"nodes", n},
                    {"caps_known", caps_known},
                    {"spent_min", lo},
                    {"spent_mean", n ? sum / n : 0.0},
                    {"spent_max", hi},
                    {"per_attribute", nlohmann::json::object()}};
    for (const auto& [attr, s] : per_attr) {
      j["summary"]["per_attribute"][attr] = {{"max", s.first},
                                             {"mean", n ? s.second / n : 0.0}};
    }
    j["budgets"] = nlohmann::json::array();
    if (per_node) {
      google::protobuf::util::JsonPrintOptions po;
      po.preserve_proto_field_names = true;
      po.always_print_primitive_fields = true;
      std::string all;
      (void)google::protobuf::util::MessageToJsonString(resp, &all, po);
      nlohmann::json parsed = nlohmann::json::parse(all);
      if (parsed.contains("budgets")) j["budgets"] = std::move(parsed["budgets"]);
    }
    o.out << j.dump() << "\n";
    return absl::OkStatus();
  }
  o.out << absl::StrFormat("%-22s %u (caps known for %u)\n", "nodes in ledger", n,
                           caps_known);
  o.out << absl::StrFormat("%-22s min %g, mean %g, max %g\n",
                           "epsilon spent", lo, n ? sum / n : 0.0, hi);
  for (const auto& [attr, s] : per_attr) {
    o.out << absl::StrFormat("%-22s mean %g, max %g\n", "  " + attr,
                             n ? s.second / n : 0.0, s.first);
  }
  if (!per_node) return absl::OkStatus();
  o.out << "\n"
        << absl::StrFormat("%-8s %10s %10s  %s\n", "node", "cap", "spent",
                           "per attribute");
  for (const auto& b : resp.budgets()) {
    std::string per;
    for (const auto& [attr, eps] : b.spent()) {
      absl::StrAppend(&per, attr, "=", eps, " ");
    }
    o.out << absl::StrFormat(
        "%-8u %10s %10g  %s\n", b.node_id(),
        b.caps_known() ? absl::StrCat(b.caps().total()) : "unknown",
        b.total_spent(), per);
  }
  return absl::OkStatus();
}

absl::Status Audit(const CliArgs& a, const Connection& c, const Output& o) {
  v1::ListAuditRequest req;
  ASSIGN_OR_RETURN(auto after, a.GetUint("after"));
  req.set_after_sequence(after.value_or(0));
  ASSIGN_OR_RETURN(auto limit_flag, a.GetUint("limit"));
  // At most --limit entries in all, over as many pages as that takes.
  const uint64_t limit = limit_flag.value_or(0) > 0 ? *limit_flag : 1000;
  req.set_limit(static_cast<uint32_t>(std::min<uint64_t>(limit, 10000)));
  v1::ListAuditResponse all;
  uint64_t shown = 0;
  // Stops the listing once --limit entries are in (not an error).
  const absl::Status enough = absl::CancelledError("enough entries");
  absl::Status s = c.ForEachPage(
      &v1::AdminService::Stub::ListAudit, req,
      [&](const v1::ListAuditResponse& page) {
        for (const auto& e : page.entries()) {
          if (shown == limit) return enough;
          ++shown;
          if (o.json) {
            *all.add_entries() = e;
            continue;
          }
          o.out << absl::StrFormat(
              "%6u %s %-16s %-16s %s\n", e.sequence(),
              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                               absl::FromUnixMillis(e.unix_ms()),
                               absl::UTCTimeZone()),
              e.actor(), e.action(), e.details_json());
        }
        return shown == limit ? enough : absl::OkStatus();
      });
  if (s != enough) RETURN_IF_ERROR(s);
  if (o.json) o.Json(all);
  return absl::OkStatus();
}

}  // namespace ldpgraph::ldpctl::internal

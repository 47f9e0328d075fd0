// fleet_load's run, reported (tests/bench/fleet_load_run.h): the figures
// gathered once, as the JSON object on stdout and the table on stderr.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/bench/fleet_load_run.h"

namespace ldpgraph::bench::fleet {
namespace {

// One row of the table: the key in a column of 30.
void Row(std::ostream& t, const std::string& k, const std::string& v) {
  t << absl::StrFormat("  %-30s %s\n", k, v);
}
// Seconds ("-" when not measured, < 0).
std::string Secs(double s) { return s < 0 ? std::string("-") : absl::StrFormat("%.2f s", s); }
// CPU seconds, unit-less ("-" when not measured).
std::string Cpu(double s) { return s < 0 ? std::string("-") : absl::StrFormat("%.2f", s); }
// GetStatus latency percentiles ("-" without a call).
std::string Latency(const Percentiles& q) {
  return q.samples == 0 ? std::string("-")
                        : absl::StrFormat("p50 %.2f  p90 %.2f  p99 %.2f  max %.2f ms (%u calls)",
                                          q.p50, q.p90, q.p99, q.max, q.samples);
}

}  // namespace

struct Run::Figures {
  // Curator CPU seconds in total and per phase (-1: not measured).
  double cpu_total = -1, cpu_enrol = -1, cpu_campaign = -1, cpu_hold = -1;
  Percentiles all, enrol, camp, hold;  // GetStatus latency per phase
  WorkerCounters w;
  std::vector<std::string> messages;  // the first errors of each kind
  int64_t errors = 0;
  // The real agents' memory (KiB) and CPU, summed, and each one's RSS.
  long agents_rss = 0, agents_hwm = 0, agent_max_rss = 0;
  long agents_pss = 0, agents_private = 0;
  double agents_cpu = 0;
  json per_agent = json::array();
};

Run::Figures Run::Gather() const {
  Figures f;
  f.cpu_total = at_done_.ok ? at_done_.cpu_seconds : -1;
  f.cpu_enrol =
      at_campaign_.ok && at_go_.ok ? at_campaign_.cpu_seconds - at_go_.cpu_seconds : -1;
  f.cpu_campaign = at_campaign_end_.ok && at_campaign_.ok
                       ? at_campaign_end_.cpu_seconds - at_campaign_.cpu_seconds
                       : -1;
  f.cpu_hold =
      at_done_.ok && at_campaign_end_.ok ? at_done_.cpu_seconds - at_campaign_end_.cpu_seconds : -1;
  f.all = Summarise(probe_->Latencies(-1));
  f.enrol = Summarise(probe_->Latencies(kEnrolPhase));
  f.camp = Summarise(probe_->Latencies(kCampaignPhase));
  f.hold = Summarise(probe_->Latencies(kHoldPhase));
  if (fleet_) f.w = fleet_->Totals();
  if (fleet_) f.messages = fleet_->Messages();
  for (const auto& m : admin_messages_) f.messages.push_back(m);
  for (const auto& m : probe_->Messages()) f.messages.push_back(m);
  f.errors = Errors();
  for (const auto& a : agent_stats_) {
    f.agents_rss += a.rss_kib;
    f.agents_pss += a.pss_kib;
    f.agents_private += a.private_kib;
    f.agents_cpu += a.cpu_seconds;
    f.agents_hwm += a.hwm_kib;
    f.agent_max_rss = std::max(f.agent_max_rss, a.rss_kib);
    f.per_agent.push_back(std::round(Mib(a.rss_kib) * 10) / 10);
  }
  return f;
}

json Run::FiguresJson(const Figures& f, int exit_code) const {
  const auto& p = campaign_.progress();
  json j;
  j["mode"] = real() ? "real-agents" : "simulated";
  j["tls"] = o_.tls;
  if (churn_) {
    int kills = 0, restarts = 0;
    for (const ldpgraph::ldpctl::ChurnKill& k : churn_->kills()) {
      kills += k.killed;
      restarts += k.restarted;
    }
    j["churn"] = {{"fraction", o_.churn}, {"kills", kills}, {"restarts", restarts}};
  }
  j["hosts"] = hosts();
  j["nodes_per_host"] = o_.nodes_per_host;
  j["nodes"] = nodes();
  if (!real()) j["processes"] = o_.processes;
  j["attribute"] = o_.attribute;
  j["subscribed"] = subscribed_;
  j["enrolled_nodes"] = enrolled_nodes_;
  j["enrol_seconds"] = enrol_seconds_;
  j["campaign_id"] = campaign_.id();
  j["campaign_complete"] = complete_;
  j["campaign_seconds"] = campaign_seconds_;  // -1: incomplete
  j["campaign_waited_seconds"] = campaign_waited_;
  if (!real()) j["last_ack_seconds"] = last_ack_seconds_;
  j["reported"] = p.reported();
  j["targeted"] = p.targeted();
  j["refused"] = p.refused();
  j["rejected_by_curator"] = p.rejected();
  j["errors"] = f.errors;
  j["error_counts"] = ErrorCountsJson(f);
  j["first_errors"] = f.messages;  // at most three of each kind
  for (const auto& fail : failures_) j["failures"].push_back(fail);
  AddProcessesJson(f, &j);
  j["getstatus_ms"] = ToJson(f.all);
  j["getstatus_ms_enrolment"] = ToJson(f.enrol);
  j["getstatus_ms_campaign"] = ToJson(f.camp);
  j["getstatus_ms_hold"] = ToJson(f.hold);
  j["hold_seconds"] = o_.hold;
  j["getstatus_failed"] = probe_->failures();
  j["scenario"] = ScenarioJson();
  j["work_dir"] = (o_.keep || exit_code != 0 || !made_dir_) ? dir_ : "";
  return j;
}

json Run::ErrorCountsJson(const Figures& f) const {
  const auto& p = campaign_.progress();
  const WorkerCounters& w = f.w;
  json e;
  if (fleet_) {
    e["enrol_failed"] = w.enrol_failed;
    e["task_streams_failed"] = w.subscribe_failed;
    e["report_streams_failed"] = w.report_failed;
    e["reports_rejected"] = w.rejected;
    e["other"] = w.errors - w.enrol_failed - w.subscribe_failed - w.report_failed - w.rejected;
  } else {
    e["agents_died"] = agent_errors_;
    e["reports_rejected"] = p.rejected();
  }
  e["nodes_refused"] = p.refused();
  e["admin_calls_failed"] = admin_errors_ + probe_->failures();
  return e;
}

void Run::AddProcessesJson(const Figures& f, json* out) const {
  json& j = *out;
  j["curator"] = {{"cpu_seconds_total", f.cpu_total},
                  {"cpu_seconds_startup", at_ready_.ok ? at_ready_.cpu_seconds : -1},
                  {"cpu_seconds_enrolment", f.cpu_enrol},
                  {"cpu_seconds_campaign", f.cpu_campaign},
                  {"cpu_seconds_hold", f.cpu_hold},
                  {"rss_mib", Mib(at_done_.rss_kib)},
                  {"peak_rss_mib", Mib(at_done_.hwm_kib)},
                  {"rss_mib_at_start", Mib(at_ready_.rss_kib)},
                  {"threads", at_done_.threads},
                  {"threads_max_sampled", probe_->max_threads()},
                  {"threads_at_start", at_ready_.threads}};
  if (!frontends_at_done_.empty()) {
    // The frontends hold the hosts' sessions and task streams; "curator"
    // above is then the operator.
    json fr = json::array();
    for (const ProcStats& f : frontends_at_done_) {
      fr.push_back({{"cpu_seconds_total", f.cpu_seconds},
                    {"rss_mib", Mib(f.rss_kib)},
                    {"peak_rss_mib", Mib(f.hwm_kib)},
                    {"threads", f.threads}});
    }
    j["frontends"] = std::move(fr);
    j["store"] = "postgres";
  }
  if (o_.edge) {
    j["edge"] = {{"kind", "haproxy"},
                 {"cpu_seconds_total", edge_at_done_.cpu_seconds},
                 {"rss_mib", Mib(edge_at_done_.rss_kib)},
                 {"peak_rss_mib", Mib(edge_at_done_.hwm_kib)}};
  }
  if (fleet_) j["workers_cpu_seconds"] = fleet_cpu_;
  if (real()) {
    j["agents"] = {{"cpu_seconds_total", f.agents_cpu},
                   {"rss_mib_total", Mib(f.agents_rss)},
                   {"peak_rss_mib_total", Mib(f.agents_hwm)},
                   {"rss_mib_max", Mib(f.agent_max_rss)},
                   {"pss_mib_total", Mib(f.agents_pss)},
                   {"private_mib_total", Mib(f.agents_private)},
                   {"rss_mib_each", f.per_agent}};
  }
}

std::string Run::Table(const Figures& f, bool show_dir) const {
  std::ostringstream t;
  t << "\n== fleet_load: " << (real() ? "real agents" : "simulated hosts")
    << (o_.tls ? ", TLS" : ", plaintext") << " ==\n";
  TableRunRows(f, t);
  TableProcessRows(f, t);
  if (!failures_.empty()) {
    t << "  failures:\n";
    for (const auto& fail : failures_) t << "    " << OneLine(fail, 2000) << "\n";
  }
  if (!f.messages.empty()) {
    t << "  first errors:\n";
    for (const auto& m : f.messages) t << "    " << m << "\n";
  }
  if (show_dir) Row(t, "work folder", dir_);
  return t.str();
}

void Run::TableRunRows(const Figures& f, std::ostream& t) const {
  const auto& p = campaign_.progress();
  const WorkerCounters& w = f.w;
  Row(t, "hosts",
      absl::StrCat(hosts(), " x ", o_.nodes_per_host, " nodes = ", nodes(), " nodes",
                   real() ? "" : absl::StrCat(" (", o_.processes, " worker processes)")));
  Row(t, "subscribed (curator)",
      absl::StrCat(subscribed_, " task streams, ", enrolled_nodes_, " nodes enrolled"));
  Row(t, "enrolment", enrol_seconds_ < 0 ? "did not finish"
                      : fleet_ ? absl::StrCat(Secs(enrol_seconds_), " (", w.enrolled, "/", o_.hosts,
                                              " hosts enrolled, ", w.enrol_failed, " failed)")
                               : Secs(enrol_seconds_));
  Row(t, "campaign",
      absl::StrCat(campaign_.id().empty() ? "-" : campaign_.id(), " ", o_.attribute, ": ",
                   p.reported(), "/", p.targeted(), " reported, ",
                   complete_ ? absl::StrCat("complete in ", Secs(campaign_seconds_))
                   : campaign_.id().empty()
                       ? std::string("not created")
                       : absl::StrCat("INCOMPLETE (gave up after ", Secs(campaign_waited_), ")")));
  if (!real()) Row(t, "  last ack at", Secs(last_ack_seconds_));
  if (o_.network() || o_.dropout > 0 || o_.campaign_deadline > 0) {
    Row(t, "scenario", ScenarioText());
  }
  if (fleet_) {
    Row(t, "errors",
        absl::StrCat(f.errors, " (enrol ", w.enrol_failed, ", task streams ", w.subscribe_failed,
                     ", report streams ", w.report_failed, ", rejected ", w.rejected, ", admin ",
                     admin_errors_ + probe_->failures(), ")"));
  } else {
    Row(t, "errors", absl::StrCat(f.errors, " (agents died ", agent_errors_, ", rejected ",
                                  p.rejected(), ", refused ", p.refused(), ", admin ",
                                  admin_errors_ + probe_->failures(), ")"));
  }
}

void Run::TableProcessRows(const Figures& f, std::ostream& t) const {
  Row(t, frontends_at_done_.empty() ? "curator CPU" : "operator CPU",
      absl::StrCat(Cpu(f.cpu_total), " s total (startup ", Cpu(at_ready_.cpu_seconds),
                   ", enrolment ", Cpu(f.cpu_enrol), ", campaign ", Cpu(f.cpu_campaign),
                   o_.hold > 0 ? absl::StrCat(", hold ", Cpu(f.cpu_hold)) : "", ")"));
  Row(t, frontends_at_done_.empty() ? "curator RSS" : "operator RSS",
      absl::StrFormat("%.1f MiB now, %.1f MiB peak (%.1f at start)", Mib(at_done_.rss_kib),
                      Mib(at_done_.hwm_kib), Mib(at_ready_.rss_kib)));
  for (size_t i = 0; i < frontends_at_done_.size(); ++i) {
    const ProcStats& f = frontends_at_done_[i];
    Row(t, absl::StrCat("frontend ", i),
        absl::StrFormat("CPU %.2f s; RSS %.1f MiB now, %.1f MiB peak", f.cpu_seconds,
                        Mib(f.rss_kib), Mib(f.hwm_kib)));
  }
  if (o_.edge) {
    Row(t, "edge (HAProxy)",
        absl::StrFormat("CPU %.2f s; RSS %.1f MiB now, %.1f MiB peak", edge_at_done_.cpu_seconds,
                        Mib(edge_at_done_.rss_kib), Mib(edge_at_done_.hwm_kib)));
  }
  Row(t, "curator threads", absl::StrFormat("%d now, %d most seen (%d at start)", at_done_.threads,
                                            probe_->max_threads(), at_ready_.threads));
  Row(t, "GetStatus, all", Latency(f.all));
  Row(t, "GetStatus, enrolment", Latency(f.enrol));
  Row(t, "GetStatus, campaign", Latency(f.camp));
  if (o_.hold > 0) Row(t, "GetStatus, hold", Latency(f.hold));
  if (fleet_) Row(t, "worker processes CPU", absl::StrFormat("%.2f s", fleet_cpu_));
  if (real()) {
    Row(t, "agents CPU", absl::StrFormat("%.2f s", f.agents_cpu));
    Row(t, "agents RSS",
        absl::StrFormat("%.1f MiB total, %.1f MiB largest, %.1f MiB peak total",
                        Mib(f.agents_rss), Mib(f.agent_max_rss), Mib(f.agents_hwm)));
    const double n = std::max<size_t>(1, agent_stats_.size());
    Row(t, "agents PSS", absl::StrFormat(
                             "%.1f MiB total, %.1f MiB each (shared library "
                             "pages split among the agents)",
                             Mib(f.agents_pss), Mib(f.agents_pss) / n));
    Row(t, "agents private", absl::StrFormat("%.1f MiB total, %.1f MiB each",
                                             Mib(f.agents_private),
                                             Mib(f.agents_private) / n));
  }
}

json Run::ScenarioJson() const {
  json j = {{"latency_ms", o_.latency_ms},
            {"jitter_ms", o_.jitter_ms},
            {"loss", o_.loss},
            {"dropout", o_.dropout},
            {"offline_nodes", offline_},
            {"online_hosts", OnlineHosts()},
            {"campaign_deadline_seconds", o_.campaign_deadline},
            {"close_reason", campaign_.close_reason()}};
  if (proxy_) {
    const ldpgraph::net::FaultProxy::Stats s = proxy_->stats();
    j["proxy"] = {{"connections", s.connections},
                  {"connect_failures", s.connect_failures},
                  {"chunks", s.chunks},
                  {"injected_losses", s.injected_losses},
                  {"bytes_to_curator", s.bytes_to_upstream},
                  {"bytes_to_hosts", s.bytes_to_client},
                  {"max_delay_ms", absl::ToDoubleMilliseconds(s.max_delay)},
                  {"cpu_seconds", s.cpu_seconds}};
  }
  return j;
}

std::string Run::ScenarioText() const {
  std::string t;
  if (proxy_) {
    const ldpgraph::net::FaultProxy::Stats s = proxy_->stats();
    t = absl::StrFormat(
        "network %g ms +- %g ms, loss %g: %u connections, %u of %u chunks stalled, "
        "longest hold %.0f ms, proxy CPU %.2f s",
        o_.latency_ms, o_.jitter_ms, o_.loss, s.connections, s.injected_losses, s.chunks,
        absl::ToDoubleMilliseconds(s.max_delay), s.cpu_seconds);
  }
  if (o_.dropout > 0 || o_.campaign_deadline > 0) {
    absl::StrAppend(&t, t.empty() ? "" : "; ",
                    absl::StrFormat("dropout %g (%u nodes offline, %d hosts online), deadline "
                                    "%g s, closed on %s",
                                    o_.dropout, offline_, OnlineHosts(), o_.campaign_deadline,
                                    campaign_.close_reason().empty() ? "-"
                                                                     : campaign_.close_reason()));
  }
  return t;
}

void Run::Finish(int exit_code) {
  const Figures f = Gather();
  const json j = FiguresJson(f, exit_code);
  std::cerr << Table(f, !j["work_dir"].get<std::string>().empty()) << std::flush;
  std::cout << j.dump() << std::endl;
}

}  // namespace ldpgraph::bench::fleet

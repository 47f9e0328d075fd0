#include "server/curator/operator_side.h"

#include <algorithm>

#include "common/status_macros.h"

namespace ldpgraph::curator {

OperatorSide::OperatorSide(Parts parts, Options options)
    : parts_(parts), options_(options) {}

absl::Status OperatorSide::LoadCaps(store::CuratorStore& store,
                                    Ledger& ledger, uint32_t num_nodes) {
  return store.ForEachCaps([&](uint32_t node, const std::string& bytes) {
    v1::BudgetCaps caps;
    if (node >= num_nodes || !caps.ParseFromString(bytes)) return;
    ledger.SetCaps(node, caps);
  });
}

absl::StatusOr<v1::Campaign> OperatorSide::CreateCampaign(
    const v1::CreateCampaignRequest& request) {
  if (options_.shared_store) {
    // Caps nodes declared to the frontends, and their spending, for the
    // ledger's check.
    RETURN_IF_ERROR(
        LoadCaps(*parts_.store, *parts_.ledger, options_.num_nodes));
    RETURN_IF_ERROR(parts_.campaigns->Sync().status());
  }
  return parts_.campaigns->Create(request);
}

v1::CuratorStatus OperatorSide::Status() const {
  v1::CuratorStatus s;
  s.set_graph_nodes(options_.num_nodes);
  s.set_fleet_shards(parts_.fleet->shards());
  s.set_fleet_gathering(parts_.fleet->gathering());
  s.set_sessions(parts_.sessions->sessions());
  s.set_enrolled_nodes(parts_.sessions->enrolled_nodes());
  s.set_task_streams(
      static_cast<uint32_t>(std::max(0, parts_.task_streams->load())));
  const CampaignBook::Tally tally = parts_.campaigns->Count();
  s.set_open_campaigns(tally.open);
  s.set_closed_campaigns(tally.closed);
  s.set_stored_reports(tally.reports);
  s.set_stored_refusals(tally.refusals);
  const IngestCounters& counters = parts_.campaigns->counters();
  const auto relaxed = std::memory_order_relaxed;
  s.set_reports_accepted(counters.reports_accepted.load(relaxed));
  s.set_reports_duplicate(counters.reports_duplicate.load(relaxed));
  uint64_t rejected = 0;
  for (const auto& r : counters.rejected) rejected += r.load(relaxed);
  s.set_reports_rejected(rejected);
  s.set_report_bytes_received(counters.report_bytes.load(relaxed));
  const CheckInDesk::Counters desk = parts_.desk->counters();
  s.set_check_ins(desk.check_ins);
  s.set_devices_seen(desk.devices_seen);
  s.set_check_ins_served(desk.served);
  s.set_check_ins_idle(desk.idle);
  s.set_check_ins_paced(desk.paced);
  s.set_check_in_sessions(parts_.sessions->lapsing());
  if (options_.add_frontend_status) {
    auto published = parts_.store->FreshFrontendStatus(absl::Seconds(2));
    if (published.ok()) {
      for (const std::string& bytes : *published) {
        v1::CuratorStatus f;
        if (!f.ParseFromString(bytes)) continue;
        s.set_frontends(s.frontends() + 1);
        s.set_sessions(s.sessions() + f.sessions());
        s.set_enrolled_nodes(s.enrolled_nodes() + f.enrolled_nodes());
        s.set_task_streams(s.task_streams() + f.task_streams());
        s.set_reports_accepted(s.reports_accepted() + f.reports_accepted());
        s.set_reports_duplicate(s.reports_duplicate() + f.reports_duplicate());
        s.set_reports_rejected(s.reports_rejected() + f.reports_rejected());
        s.set_report_bytes_received(s.report_bytes_received() +
                                    f.report_bytes_received());
        s.set_check_ins(s.check_ins() + f.check_ins());
        s.set_devices_seen(s.devices_seen() + f.devices_seen());
        s.set_check_ins_served(s.check_ins_served() + f.check_ins_served());
        s.set_check_ins_idle(s.check_ins_idle() + f.check_ins_idle());
        s.set_check_ins_paced(s.check_ins_paced() + f.check_ins_paced());
        s.set_check_in_sessions(s.check_in_sessions() + f.check_in_sessions());
      }
    }
  }
  return s;
}

absl::Status OperatorSide::PublishStatus(const std::string& name) {
  return parts_.store->PutFrontendStatus(name, Status().SerializeAsString());
}

}  // namespace ldpgraph::curator

#include "server/curator/curator.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::curator {

Curator::Curator(std::unique_ptr<store::CuratorStore> store, Options options)
    : options_(std::move(options)),
      store_(std::move(store)),
      sessions_(options_.num_nodes),
      ledger_(options_.num_nodes) {}

Curator::~Curator() = default;

absl::StatusOr<std::unique_ptr<Curator>> Curator::Open(
    std::unique_ptr<store::CuratorStore> store, Options options) {
  if (options.num_nodes == 0) {
    return absl::InvalidArgumentError("the curator needs a graph of >= 1 node");
  }
  if (options.node_key.size() < 16) {
    return absl::InvalidArgumentError(
        "the node key must hold at least 16 bytes");
  }
  if (options.max_enrol < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_enrol must be >= 1, got ", options.max_enrol));
  }
  std::unique_ptr<Curator> c(new Curator(std::move(store), std::move(options)));
  const Options& o = c->options_;
  store::CuratorStore* const s = c->store_.get();
  const uint32_t num_nodes = o.num_nodes;
  c->relay_ = std::make_unique<RelayMailbox>(s, num_nodes);
  FleetPlanner::Options fleet;
  fleet.num_nodes = num_nodes;
  fleet.settle = o.fleet_settle;
  fleet.lease = o.fleet_lease;
  fleet.min_hosts = o.fleet_min_hosts;
  fleet.shared = o.shared_store;
  ASSIGN_OR_RETURN(c->fleet_, FleetPlanner::Create(fleet, s));
  CampaignBook::Options book;
  book.num_nodes = num_nodes;
  book.max_batch = o.max_batch;
  book.close_on_quorum = o.close_on_quorum;
  ASSIGN_OR_RETURN(c->campaigns_, CampaignBook::Open(s, &c->ledger_, book));
  RETURN_IF_ERROR(OperatorSide::LoadCaps(*s, c->ledger_, num_nodes));
  ASSIGN_OR_RETURN(c->keys_, KeyDirectory::Open(s, num_nodes, o.shared_store));
  CheckInDesk::Options desk = o.check_in;
  desk.num_nodes = num_nodes;
  RETURN_IF_ERROR(desk.Validate());
  c->desk_ = std::make_unique<CheckInDesk>(desk);

  c->agents_ = std::make_unique<AgentSide>(
      AgentSide::Parts{.store = s,
                       .sessions = &c->sessions_,
                       .ledger = &c->ledger_,
                       .campaigns = c->campaigns_.get(),
                       .keys = c->keys_.get(),
                       .relay = c->relay_.get(),
                       .fleet = c->fleet_.get(),
                       .desk = c->desk_.get(),
                       .task_streams = &c->task_streams_},
      AgentSide::Options{.num_nodes = num_nodes,
                         .node_key = o.node_key,
                         .max_enrol = o.max_enrol});
  c->operators_ = std::make_unique<OperatorSide>(
      OperatorSide::Parts{.store = s,
                          .ledger = &c->ledger_,
                          .campaigns = c->campaigns_.get(),
                          .sessions = &c->sessions_,
                          .fleet = c->fleet_.get(),
                          .desk = c->desk_.get(),
                          .task_streams = &c->task_streams_},
      OperatorSide::Options{.num_nodes = num_nodes,
                            .shared_store = o.shared_store,
                            .add_frontend_status = o.add_frontend_status});
  RETURN_IF_ERROR(c->campaigns_->CloseExpired(absl::Now()).status());
  return c;
}

}  // namespace ldpgraph::curator

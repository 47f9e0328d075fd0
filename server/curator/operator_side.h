// The curator as the operator sees it: the admin service (services.h,
// AdminServiceImpl), the pipeline stages (stages.h) and the server's
// periodic work (server.cc). The other of the two narrow interfaces over
// the curator's parts (curator.h).
//
// It composes what takes several parts, in one place:
//   CreateCampaign  on a store shared with other curator processes, the
//                   caps nodes declared to any of them and the answers they
//                   stored brought in first, so that the ledger's check sees
//                   them; then the campaign book creates it;
//   Status          what every part counts (sessions, task streams, fleet,
//                   campaigns, ingest, check-ins), with the frontends';
//   PublishStatus   a frontend's Status, into the store for the operator.
// Everything else is asked of a part directly, through the accessors:
//   campaigns()  a CampaignDesk (side_views.h): list, get, close,
//                refusals, stored reports, a campaign's compiled spec;
//                sync and closing by deadline or quorum; the tally and
//                counters. Not Create (CreateCampaign above) nor ingest;
//   ledger()     budgets (Ledger::Budgets) and the metrics' summary;
//   check_ins()  the check-in desk's counters, for the metrics;
//   store()      a ResultStore (side_views.h): the pipeline's results and
//                the audit log (AddResult, ListResults, ListResultsBefore,
//                GetResult, Audit, ListAudit), the operator lease
//                (TryOperatorLease) and Describe. Campaigns, answers, caps,
//                keys and sealed messages are written by their parts only,
//                never through this.
//
// Thread-safe. It holds no lock of its own, and never holds a part's lock
// while it calls another part (curator.h states the order of the parts'
// own locks). The parts are not owned; the Curator that built this owns
// them and outlives it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ldpgraph/v1/admin.pb.h"
#include "server/curator/campaigns.h"
#include "server/curator/check_ins.h"
#include "server/curator/fleet.h"
#include "server/curator/ledger.h"
#include "server/curator/sessions.h"
#include "server/curator/side_views.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class OperatorSide {
 public:
  // What the operator side reaches: the parts, none owned (Curator::Open).
  // It changes the store, the ledger (caps) and the book; the others it
  // only reads for Status.
  struct Parts {
    store::CuratorStore* store = nullptr;
    Ledger* ledger = nullptr;
    CampaignBook* campaigns = nullptr;
    const SessionTable* sessions = nullptr;
    const FleetPlanner* fleet = nullptr;
    const CheckInDesk* desk = nullptr;
    const std::atomic<int>* task_streams = nullptr;
  };
  struct Options {
    // Node ids are [0, num_nodes).
    uint32_t num_nodes = 0;
    // The store is shared with other curator processes (roles.h):
    // CreateCampaign reads the caps nodes declared to any of them, and what
    // they stored, before its ledger check.
    bool shared_store = false;
    // Status adds up the frontends' published status (PublishStatus),
    // those of the last 2 s.
    bool add_frontend_status = false;
  };
  OperatorSide(Parts parts, Options options);
  OperatorSide(const OperatorSide&) = delete;
  OperatorSide& operator=(const OperatorSide&) = delete;

  // --- compositions ----------------------------------------------------------
  // Validates the request (INVALID_ARGUMENT naming what is wrong), refuses
  // a campaign that a targeted node with known caps could not afford
  // (FAILED_PRECONDITION, campaigns.h), and stores it open. On a shared
  // store, first the caps and answers the other processes stored (store
  // errors).
  absl::StatusOr<v1::Campaign> CreateCampaign(
      const v1::CreateCampaignRequest& request);

  // What the core knows for GetStatus: the graph's nodes, sessions,
  // enrolled nodes, task streams, fleet shards, campaigns by state, stored
  // answers, the ingest and check-in counters; with add_frontend_status,
  // plus the frontends' (admin.proto, CuratorStatus.frontends; a store
  // error leaves them out). The caller fills the rest (start time, graph,
  // results, insecure).
  v1::CuratorStatus Status() const;
  // A frontend's Status, stored under `name` for the operator's
  // (store.h, PutFrontendStatus).
  absl::Status PublishStatus(const std::string& name);

  // --- the parts the operator calls directly --------------------------------
  CampaignDesk campaigns() { return CampaignDesk(*parts_.campaigns); }
  const Ledger& ledger() const { return *parts_.ledger; }
  const CheckInDesk& check_ins() const { return *parts_.desk; }
  ResultStore store() { return ResultStore(*parts_.store); }
  uint32_t num_nodes() const { return options_.num_nodes; }

 private:
  friend class Curator;  // Open loads the caps too
  // The caps nodes [0, num_nodes) declared (to any process on the store),
  // from the store into the ledger; store errors.
  static absl::Status LoadCaps(store::CuratorStore& store, Ledger& ledger,
                               uint32_t num_nodes);

  const Parts parts_;
  const Options options_;
};

}  // namespace ldpgraph::curator

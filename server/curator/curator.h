// The curator's core, as a plain library: parts with one job each, and two
// narrow interfaces over them, one per gRPC service (services.h), which only
// adapt requests to their calls; tests and benchmarks call them directly.
//
// The parts:
//   SessionTable  (sessions.h)       which agent host proved which nodes,
//                                    by bearer token; not persisted.
//   CampaignBook  (campaigns.h)      campaigns and their persisted state
//                                    machine (OPEN -> CLOSED by operator,
//                                    quorum or deadline), each with its spec
//                                    compiled once, the tasks they set, and
//                                    report ingestion and validation.
//   Ledger        (ledger.h)         each node's caps and privacy spend per
//                                    attribute, a question charged once;
//                                    rebuilt from the stored answers at
//                                    start-up; refuses a campaign a node
//                                    with known caps could not afford.
//   KeyDirectory  (key_directory.h)  the sealing public keys nodes sent at
//                                    enrolment; a replacement is audited.
//   RelayMailbox  (relay_mailbox.h)  sealed messages between nodes.
//   FleetPlanner  (fleet.h)          shard plans for interchangeable hosts.
//   CheckInDesk   (check_ins.h)      pacing of devices in check-in mode.
//   the store     (store.h)          what persists: the parts that persist
//                                    write through it.
//
// The interfaces:
//   AgentSide     (agent_side.h)     the agent service's: enrolment and
//                                    check-ins (credentials, caps, keys,
//                                    session, audit: composed there, and
//                                    only there), shard claims; the
//                                    sessions, the book's tasks and ingest,
//                                    the relay and the key directory, asked
//                                    directly.
//   OperatorSide  (operator_side.h)  the admin service's and the stages':
//                                    campaign creation (after a shared
//                                    store's caps), status; the book, the
//                                    ledger, results and the audit log,
//                                    asked directly.
// Neither forwards calls to a part: a service calls a part through the
// side that exposes it, and a side implements only what takes several
// parts.
//
// Curator owns the store, the parts and both sides, and builds them in
// Open. The parts that persist keep a pointer to the store, the book one to
// the ledger, and the sides pointers to the parts; members are declared so
// that each is destroyed before what it points into. Nothing outlives the
// Curator.
//
// Thread-safe. Each part has its own lock (none for the relay, which has no
// state of its own besides the store); the sides have none. Where locks
// nest, the order is: the campaign book's, the key directory's or the fleet
// planner's, then the store's, then the ledger's. The session table's and
// the check-in desk's are leaves. No side holds a part's lock while it
// calls another part. Ingest checks batches of several sessions at once
// (campaigns.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/curator/agent_side.h"
#include "server/curator/campaigns.h"
#include "server/curator/check_ins.h"
#include "server/curator/fleet.h"
#include "server/curator/key_directory.h"
#include "server/curator/ledger.h"
#include "server/curator/operator_side.h"
#include "server/curator/relay_mailbox.h"
#include "server/curator/sessions.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class Curator {
 public:
  struct Options {
    // Number of nodes of the curator's graph: node ids are [0, num_nodes).
    uint32_t num_nodes = 0;
    // The operator's node key (raw bytes); credentials are derived from it.
    std::string node_key;
    // Largest batch accepted (reports); larger batches fail whole.
    int max_batch = 65536;
    // Largest nodes per Enrol call (a host with more enrols in parts).
    int max_enrol = 100000;
    // Fleet shard plans (fleet.h): quiet time before a plan is fixed, and
    // how long a holder's lease lasts without a renewal.
    absl::Duration fleet_settle = absl::Seconds(5);
    absl::Duration fleet_lease = absl::Seconds(30);
    size_t fleet_min_hosts = 1;
    // Devices in check-in mode: pacing, intervals, session TTL
    // (check_ins.h); num_nodes is taken from above.
    CheckInDesk::Options check_in;
    // The store is shared with other curator processes (roles.h): the
    // server brings in what they stored (CampaignBook::Sync), and
    // CreateCampaign reads the caps nodes declared to any of them before
    // its ledger check (OperatorSide).
    bool shared_store = false;
    // Whether ingest closes a campaign at its quorum (a frontend does not:
    // the operator closes, after a Sync).
    bool close_on_quorum = true;
    // An operator's Status adds up the frontends' published status
    // (OperatorSide::PublishStatus), those of the last 2 s.
    bool add_frontend_status = false;
  };

  // Opens the curator over an opened store: loads campaigns (compiling
  // their specs), rebuilds the progress of every campaign and the ledger
  // from the stored answers, loads the caps and keys, and closes campaigns
  // whose deadline passed while it was down. INVALID_ARGUMENT for bad
  // options; the parts' errors (campaigns.h, key_directory.h, fleet.h,
  // check_ins.h) and store errors otherwise.
  static absl::StatusOr<std::unique_ptr<Curator>> Open(
      std::unique_ptr<store::CuratorStore> store, Options options);
  ~Curator();
  Curator(const Curator&) = delete;
  Curator& operator=(const Curator&) = delete;

  // The two interfaces; valid as long as the Curator.
  AgentSide& agents() { return *agents_; }
  OperatorSide& operators() { return *operators_; }

  uint32_t num_nodes() const { return options_.num_nodes; }

 private:
  Curator(std::unique_ptr<store::CuratorStore> store, Options options);

  const Options options_;
  // Declared before the parts, so destroyed after them: they point into it
  // (and the book into the ledger).
  std::unique_ptr<store::CuratorStore> store_;
  std::atomic<int> task_streams_{0};
  SessionTable sessions_;
  Ledger ledger_;
  std::unique_ptr<CampaignBook> campaigns_;
  std::unique_ptr<KeyDirectory> keys_;
  std::unique_ptr<RelayMailbox> relay_;
  std::unique_ptr<FleetPlanner> fleet_;
  std::unique_ptr<CheckInDesk> desk_;
  // Declared last, so destroyed first: they point into all of the above.
  std::unique_ptr<AgentSide> agents_;
  std::unique_ptr<OperatorSide> operators_;
};

}  // namespace ldpgraph::curator

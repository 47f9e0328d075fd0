// The curator as the agent service sees it (services.h, AgentServiceImpl):
// one of the two narrow interfaces over the curator's parts (curator.h).
//
// It composes what takes several parts, in one place:
//   Enrol       credentials checked, caps recorded (store and ledger),
//               sealing keys put in the key directory, the enrolment
//               audited, a session opened (or held, for a part);
//   CheckIn     the same checks and records for a device, the check-in
//               desk's pacing, its tasks, a lapsing session;
//   ClaimShard  the proof credential checked, then the fleet planner.
// Everything else the service asks a part directly, through the accessors:
//   sessions()   a session by its token (SessionTable::Find);
//   campaigns()  a CampaignIntake (side_views.h): the tasks of a session,
//                the generation to wait on, and ingest; nothing else of
//                the campaign book;
//   relay()      sealed messages (RelayMailbox::Relay, Fetch);
//   keys()       nodes' sealing public keys (KeyDirectory::Get): any
//                session may ask, the keys are public.
//
// Thread-safe. It holds no lock of its own, and never holds a part's lock
// while it calls another part: Enrol and CheckIn call the parts one after
// another (curator.h states the order of the parts' own locks). The parts
// are not owned; the Curator that built this owns them and outlives it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "ldpgraph/v1/agent.pb.h"
#include "server/curator/campaigns.h"
#include "server/curator/check_ins.h"
#include "server/curator/fleet.h"
#include "server/curator/key_directory.h"
#include "server/curator/ledger.h"
#include "server/curator/side_views.h"
#include "server/curator/relay_mailbox.h"
#include "server/curator/sessions.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class AgentSide {
 public:
  // What the agent side reaches: the parts, none owned (Curator::Open).
  struct Parts {
    store::CuratorStore* store = nullptr;
    SessionTable* sessions = nullptr;
    Ledger* ledger = nullptr;
    CampaignBook* campaigns = nullptr;
    KeyDirectory* keys = nullptr;
    RelayMailbox* relay = nullptr;
    FleetPlanner* fleet = nullptr;
    CheckInDesk* desk = nullptr;
    // Task streams open now: the service counts them, the operator side
    // reports them.
    std::atomic<int>* task_streams = nullptr;
  };
  struct Options {
    // Node ids are [0, num_nodes).
    uint32_t num_nodes = 0;
    // The operator's node key (raw bytes); credentials are derived from it.
    std::string node_key;
    // Largest nodes per Enrol call (a host with more enrols in parts).
    int max_enrol = 100000;
  };
  AgentSide(Parts parts, Options options);
  AgentSide(const AgentSide&) = delete;
  AgentSide& operator=(const AgentSide&) = delete;

  // --- compositions ----------------------------------------------------------
  // Verifies every credential (UNAUTHENTICATED naming the first bad node,
  // nothing opened), records the declared caps, opens a session. A session
  // of exactly the same nodes opened earlier is replaced (sessions.h).
  // INVALID_ARGUMENT for no nodes, more than max_enrol, or a node twice.
  // Enrolment in parts (agent.proto EnrolRequest.more, continues): each
  // part is checked and recorded as above; a part with `more` returns the
  // session built so far, held aside (not found by sessions().Find), and
  // the last part opens it. FAILED_PRECONDITION for a `continues` token
  // with no enrolment under way; a failed part ends its enrolment.
  absl::StatusOr<std::shared_ptr<const Session>> Enrol(
      const v1::EnrolRequest& request);

  // A device's check-in (agent.proto CheckIn) at `now`: verifies every
  // credential as Enrol does (nothing recorded on a failure;
  // INVALID_ARGUMENT for no nodes, more than kMaxCheckInNodes or a node
  // twice), records caps and keys that changed (audited as "check-in"; an
  // unchanged device writes nothing), then asks the desk: PACED (nothing
  // opened), IDLE (no task waits for the nodes), or SERVED with the tasks
  // and a session that lapses after session_ttl (the desk's).
  static constexpr int kMaxCheckInNodes = 1000;
  struct CheckInResult {
    CheckInDesk::Outcome outcome = CheckInDesk::Outcome::kIdle;
    std::shared_ptr<const Session> session;  // kServed only
    std::vector<v1::Task> tasks;             // kServed only
    absl::Duration session_ttl;              // kServed only
    absl::Duration retry_after;
  };
  absl::StatusOr<CheckInResult> CheckIn(const v1::CheckInRequest& request,
                                        absl::Time now);

  // A shard for an interchangeable agent host (fleet.h): verifies the
  // proof credential (UNAUTHENTICATED if it does not verify, INVALID_ARGUMENT
  // for a node out of range; both prefixed "shard claim: "), then claims.
  absl::StatusOr<FleetPlanner::Grant> ClaimShard(
      const v1::ClaimShardRequest& request, absl::Time now);

  // --- the parts the service calls directly ---------------------------------
  const SessionTable& sessions() const { return *parts_.sessions; }
  CampaignIntake campaigns() { return CampaignIntake(*parts_.campaigns); }
  RelayMailbox& relay() { return *parts_.relay; }
  const KeyDirectory& keys() const { return *parts_.keys; }
  // Task streams open now; the Subscribe service counts them.
  std::atomic<int>& task_streams() { return *parts_.task_streams; }

 private:
  // A node credential: INVALID_ARGUMENT for a node outside the graph,
  // UNAUTHENTICATED if the secret is not the node's.
  absl::Status CheckCredential(const v1::NodeCredential& credential) const;
  // What Enrol and CheckIn check of each node: its credential, then its
  // caps and sealing key when given.
  absl::Status CheckNode(const v1::NodeCredential& node) const;
  // Records the caps and keys of `nodes` that changed, with one audit
  // entry "check-in" when anything did.
  absl::Status RecordCapsAndKeys(
      const google::protobuf::RepeatedPtrField<v1::NodeCredential>& nodes,
      const std::string& actor);

  const Parts parts_;
  const Options options_;
};

}  // namespace ldpgraph::curator

// Internal to the campaign book (campaigns.cc, campaigns_ingest.cc): the
// state the book keeps of each campaign, and each targeted node's answer
// status in it. Not for use outside server/curator/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/admin.pb.h"
#include "server/curator/campaigns.h"
#include "server/curator/ledger.h"

namespace ldpgraph::curator {
namespace campaigns_internal {

// A targeted node's answer to a campaign (CampaignState::status).
enum NodeStatus : uint8_t {
  kNotTargeted = 0,
  kPending = 1,
  kReported = 2,
  kRefused = 3,
};

// The time now, as the campaigns' records hold it.
inline int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

}  // namespace campaigns_internal

// One campaign as the book keeps it, under CampaignBook::mu_.
struct CampaignBook::CampaignState {
  int64_t id = 0;
  v1::Campaign record;  // as persisted; progress filled on the way out
  // record.spec(), compiled once (at Create, or when loaded); the rest of
  // the campaign's question derives from it.
  std::shared_ptr<const wire::CompiledSpec> spec;
  std::string attribute;
  QueryKey key;
  // What a report to this campaign charges: its own question, and for
  // neighbour substitution the features question of its feature spec first
  // (CompiledSpec::Questions).
  std::vector<Ledger::Question> charges;
  std::vector<uint8_t> status;  // NodeStatus per node
  uint32_t targeted = 0, reported = 0, refused = 0;
  uint64_t rejected = 0;
  bool open() const { return record.state() == v1::CAMPAIGN_STATE_OPEN; }
  bool expired(int64_t now_ms) const {
    return record.deadline_unix_ms() > 0 && now_ms >= record.deadline_unix_ms();
  }
};

}  // namespace ldpgraph::curator

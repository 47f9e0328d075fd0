// The curator's relay of sealed messages: agents exchange messages sealed
// to each other's public keys (key_directory.h) through the curator, which
// stores them and lets each recipient's session fetch them; it cannot read
// them, but it sees who sends to whom (common/edges/README.md). One job:
// accept, store and deliver sealed messages.
//
// The sender of a message must be one of the sending session's nodes and
// the recipient a node of the graph; a message is delivered to any session
// holding its recipient, in the order stored. Messages are never deleted:
// a session fetches those after the last sequence it saw.
//
// Thread-safe: no state of its own besides the store, which serialises
// its calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ldpgraph/v1/agent.pb.h"
#include "server/curator/sessions.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class RelayMailbox {
 public:
  // Limits of one Relay call and one Fetch.
  static constexpr int kMaxMessages = 4096;
  static constexpr size_t kMaxCiphertext = 65536;
  static constexpr int kMaxFetch = 1024;

  // Node ids are [0, num_nodes). `store` must outlive the mailbox.
  RelayMailbox(store::CuratorStore* store, uint32_t num_nodes)
      : store_(store), num_nodes_(num_nodes) {}

  // Stores the request's messages, in order, and returns how many. All or
  // nothing: INVALID_ARGUMENT for more than kMaxMessages messages, a
  // recipient outside the graph or a ciphertext over kMaxCiphertext bytes,
  // PERMISSION_DENIED for a sender that is not one of the session's nodes
  // (each naming the message's index); a store error otherwise.
  absl::StatusOr<int> Relay(const Session& session,
                            const v1::RelayRequest& request);

  // Messages to the session's nodes with sequence > after, ascending, at
  // most limit (0, negative or beyond kMaxFetch: kMaxFetch); only
  // `campaign`'s when it is not empty.
  absl::StatusOr<std::vector<v1::SealedMessage>> Fetch(
      const Session& session, uint64_t after, int limit,
      const std::string& campaign = "") const;

 private:
  store::CuratorStore* const store_;
  const uint32_t num_nodes_;
};

}  // namespace ldpgraph::curator

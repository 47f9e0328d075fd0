// The curator's key directory: the sealing public key (X25519, 32 bytes)
// each node sent at enrolment (NodeCredential.sealing_key), kept in the
// store and served to authenticated sessions (AgentSide::keys), so
// agents can seal messages to their neighbours through the relay
// (relay_mailbox.h). One job: store, replace and serve keys.
//
// A node that enrols with another key replaces its old one, and the
// replacement is audited; enrolling without a key, or with the same key,
// changes nothing. Keys survive restarts: Open reads them back. On a store
// shared by several frontends (roles.h), a node may enrol at any of them:
// Get then reads the asked nodes' keys from the store, so every frontend
// serves every key, the newest.
//
// Thread-safe: one internal lock, held across the store write of Put so
// that two enrolments of one node cannot both count a key as new.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ldpgraph/v1/agent.pb.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class KeyDirectory {
 public:
  // Size of a sealing public key.
  static constexpr size_t kKeySize = 32;
  // Most nodes one Get may ask for.
  static constexpr size_t kMaxGet = 100000;

  // Reads the stored keys of nodes [0, num_nodes) (others, and keys of
  // another size, are ignored). `store` must outlive the directory. Store
  // errors are returned.
  static absl::StatusOr<std::unique_ptr<KeyDirectory>> Open(
      store::CuratorStore* store, uint32_t num_nodes, bool shared = false);

  // OK for a key of kKeySize bytes; INVALID_ARGUMENT naming the node and
  // the size otherwise.
  static absl::Status ValidateKey(uint32_t node, absl::string_view key);

  // What Put changed.
  struct Change {
    size_t added = 0;                // nodes that had no key
    std::vector<uint32_t> replaced;  // nodes whose key changed, ascending
  };
  // Stores the keys of (node, key) pairs: a node without a key gets it, a
  // node with another key has it replaced, a node with the same key is
  // left alone. Replacements are audited under `actor` (action
  // "node.key.replace": how many, and the first 100 nodes). INVALID_ARGUMENT
  // for a node outside the graph or a key of the wrong size, nothing
  // stored; a store error otherwise (the keys were not stored if the write
  // failed, and were if only the audit did).
  absl::StatusOr<Change> Put(
      absl::Span<const std::pair<uint32_t, std::string>> keys,
      const std::string& actor);

  // The keys of `nodes`, in request order, leaving out nodes without one.
  // INVALID_ARGUMENT for more than kMaxGet ids or an id outside the graph;
  // on a shared store, the store's error.
  absl::StatusOr<std::vector<v1::NodeKey>> Get(
      const std::vector<uint32_t>& nodes) const;

 private:
  KeyDirectory(store::CuratorStore* store, uint32_t num_nodes, bool shared);
  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);

  store::CuratorStore* const store_;
  const uint32_t num_nodes_;
  const bool shared_;
  mutable absl::Mutex mu_;
  // keys_[v] is v's key iff has_key_[v].
  std::vector<std::array<char, kKeySize>> keys_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> has_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ldpgraph::curator

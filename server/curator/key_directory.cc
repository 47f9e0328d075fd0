#include "server/curator/key_directory.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ldpgraph::curator {

KeyDirectory::KeyDirectory(store::CuratorStore* store, uint32_t num_nodes,
                           bool shared)
    : store_(store), num_nodes_(num_nodes), shared_(shared) {}

absl::StatusOr<std::unique_ptr<KeyDirectory>> KeyDirectory::Open(
    store::CuratorStore* store, uint32_t num_nodes, bool shared) {
  std::unique_ptr<KeyDirectory> d(new KeyDirectory(store, num_nodes, shared));
  RETURN_IF_ERROR(d->Load());
  return d;
}

absl::Status KeyDirectory::Load() {
  absl::MutexLock lock(&mu_);
  keys_.assign(num_nodes_, {});
  has_key_.assign(num_nodes_, false);
  return store_->ForEachNodeKey(
      [&](uint32_t node, const std::string& key)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            if (node >= num_nodes_ || key.size() != kKeySize) return;
            std::copy(key.begin(), key.end(), keys_[node].begin());
            has_key_[node] = true;
          });
}

absl::Status KeyDirectory::ValidateKey(uint32_t node, absl::string_view key) {
  if (key.size() == kKeySize) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("node ", node,
                   ": sealing_key must be 32 bytes (an X25519 "
                   "public key), got ",
                   key.size()));
}

absl::StatusOr<KeyDirectory::Change> KeyDirectory::Put(
    absl::Span<const std::pair<uint32_t, std::string>> keys,
    const std::string& actor) {
  for (const auto& [v, key] : keys) {
    if (v >= num_nodes_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", v, " out of range: the graph has ", num_nodes_, " nodes"));
    }
    RETURN_IF_ERROR(ValidateKey(v, key));
  }
  Change change;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<uint32_t, std::string>> changed;
    for (const auto& [v, key] : keys) {
      if (has_key_[v]) {
        if (std::equal(keys_[v].begin(), keys_[v].end(), key.begin())) {
          continue;
        }
        change.replaced.push_back(v);
      } else {
        ++change.added;
      }
      changed.emplace_back(v, key);
    }
    RETURN_IF_ERROR(store_->PutNodeKeys(changed));
    for (const auto& [v, key] : changed) {
      std::copy(key.begin(), key.end(), keys_[v].begin());
      has_key_[v] = true;
    }
  }
  if (!change.replaced.empty()) {
    std::sort(change.replaced.begin(), change.replaced.end());
    const size_t shown = std::min<size_t>(change.replaced.size(), 100);
    RETURN_IF_ERROR(store_->Audit(
        actor, "node.key.replace",
        absl::StrFormat(R"({"nodes":%d,"first_nodes":[%s]})",
                        change.replaced.size(),
                        absl::StrJoin(change.replaced.begin(),
                                      change.replaced.begin() + shown, ","))));
  }
  return change;
}

absl::StatusOr<std::vector<v1::NodeKey>> KeyDirectory::Get(
    const std::vector<uint32_t>& nodes) const {
  if (nodes.size() > kMaxGet) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PublicKeys asks for ", nodes.size(), " nodes; at most ", kMaxGet));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] >= num_nodes_) {
      return absl::InvalidArgumentError(
          absl::StrCat("node_ids[", i, "] = ", nodes[i],
                       " out of range: the graph has ", num_nodes_, " nodes"));
    }
  }
  std::vector<v1::NodeKey> out;
  if (shared_) {
    // Other frontends enrol nodes too: the store's keys, the newest.
    absl::flat_hash_map<uint32_t, std::string> fresh;
    RETURN_IF_ERROR(store_->GetNodeKeys(
        nodes, [&](uint32_t node, const std::string& key) {
          if (key.size() == kKeySize) fresh[node] = key;
        }));
    for (const uint32_t v : nodes) {
      auto it = fresh.find(v);
      if (it == fresh.end()) continue;
      v1::NodeKey& k = out.emplace_back();
      k.set_node_id(v);
      k.set_public_key(it->second);
    }
    return out;
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const uint32_t v = nodes[i];
    if (!has_key_[v]) continue;
    v1::NodeKey& k = out.emplace_back();
    k.set_node_id(v);
    k.set_public_key(std::string(keys_[v].data(), keys_[v].size()));
  }
  return out;
}

}  // namespace ldpgraph::curator

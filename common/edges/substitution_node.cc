// SubstitutionNode: one node's part in the exchange, round by round
// (receiving, sending each round's body, and the final substitution).
#include "common/edges/substitution.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_format.h"
#include "common/edges/substitution_internal.h"
#include "common/status_macros.h"

namespace ldpgraph::edges {
namespace substitution_internal {

std::vector<const v1::FeatureReport*> VectorsOf(const v1::EdgeExchange& m) {
  std::vector<const v1::FeatureReport*> out;
  auto add = [&](const v1::FeatureList& l) {
    for (const auto& r : l.vectors()) out.push_back(&r);
  };
  if (m.has_feature()) out.push_back(&m.feature());
  if (m.has_relay()) add(m.relay());
  if (m.has_queries()) {
    add(m.queries().first());
    add(m.queries().second());
  }
  if (m.has_answers()) {
    add(m.answers().first());
    add(m.answers().second());
  }
  if (m.has_identity_queries()) add(m.identity_queries());
  return out;
}

}  // namespace substitution_internal

namespace {

uint64_t InboxKey(int round, uint32_t from) {
  return (static_cast<uint64_t>(round) << 32) | from;
}

// What body each round carries, per approach.
enum class Body { kFeature, kRelay, kQueries, kAnswers, kIdentityQueries,
                  kIdentities };

Body BodyOf(Approach a, int round) {
  if (round == 1) return Body::kFeature;
  if (a == Approach::kCandidateRelay) {
    return round == 2   ? Body::kRelay
           : round == 3 ? Body::kIdentityQueries
                        : Body::kIdentities;
  }
  return round == 2   ? Body::kQueries
         : round == 3 ? Body::kAnswers
         : round == 4 ? Body::kIdentityQueries
                      : Body::kIdentities;
}

bool BodyMatches(Body b, const v1::EdgeExchange& m) {
  switch (b) {
    case Body::kFeature: return m.has_feature();
    case Body::kRelay: return m.has_relay();
    case Body::kQueries: return m.has_queries();
    case Body::kAnswers: return m.has_answers();
    case Body::kIdentityQueries: return m.has_identity_queries();
    case Body::kIdentities: return m.has_identities();
  }
  return false;
}

const char* BodyName(Body b) {
  switch (b) {
    case Body::kFeature: return "feature";
    case Body::kRelay: return "relay";
    case Body::kQueries: return "queries";
    case Body::kAnswers: return "answers";
    case Body::kIdentityQueries: return "identity_queries";
    case Body::kIdentities: return "identities";
  }
  return "?";
}

// Appends a message of `round` to `to` and returns it to be filled.
v1::EdgeExchange& AddMessage(std::vector<Outgoing>* out, uint32_t to,
                             int round) {
  Outgoing o;
  o.to = to;
  o.message.set_round(round);
  out->push_back(std::move(o));
  return out->back().message;
}

}  // namespace

SubstitutionNode::SubstitutionNode(const SubstitutionParams& params,
                                   uint32_t node,
                                   std::vector<uint32_t> neighbours)
    : params_(params), node_(node), neighbours_(std::move(neighbours)) {}

absl::StatusOr<std::unique_ptr<SubstitutionNode>> SubstitutionNode::Create(
    const SubstitutionParams& params,
    std::shared_ptr<const ExchangeFeatures> features, uint32_t node,
    std::vector<uint32_t> neighbours, v1::FeatureReport own_feature,
    RandomSource* rng, std::optional<std::vector<uint32_t>> dropped) {
  RETURN_IF_ERROR(params.Validate());
  if (features == nullptr || rng == nullptr) {
    return absl::InvalidArgumentError("features and rng must be set");
  }
  for (size_t i = 0; i < neighbours.size(); ++i) {
    if (neighbours[i] == node || (i > 0 && neighbours[i] <= neighbours[i - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "node %u: neighbour %u at position %d is the node itself or not "
          "strictly ascending",
          node, neighbours[i], i));
    }
  }
  if (dropped.has_value()) {
    std::sort(dropped->begin(), dropped->end());
    dropped->erase(std::unique(dropped->begin(), dropped->end()),
                   dropped->end());
    for (uint32_t u : *dropped) {
      if (!std::binary_search(neighbours.begin(), neighbours.end(), u)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "node %u: preset dropped node %u is not a neighbour", node, u));
      }
    }
  }
  auto n = std::unique_ptr<SubstitutionNode>(
      new SubstitutionNode(params, node, std::move(neighbours)));
  ASSIGN_OR_RETURN(CompactVector own_vec, features->Decode(own_feature));
  n->features_ = std::move(features);
  n->rng_ = rng;
  n->own_key_ = CanonicalKey(own_feature);
  n->vectors_.emplace(n->own_key_, std::move(own_vec));
  n->reports_.emplace(n->own_key_, own_feature);
  n->own_ = std::move(own_feature);
  n->preset_dropped_ = std::move(dropped);
  n->result_.stats.degree = static_cast<uint32_t>(n->neighbours_.size());
  return n;
}

std::unique_ptr<SubstitutionNode> SubstitutionNode::Abstaining(
    const SubstitutionParams& params, uint32_t node,
    std::vector<uint32_t> neighbours) {
  auto n = std::unique_ptr<SubstitutionNode>(
      new SubstitutionNode(params, node, std::move(neighbours)));
  n->abstaining_ = true;
  n->result_.stats.degree = static_cast<uint32_t>(n->neighbours_.size());
  return n;
}

absl::Status SubstitutionNode::Deliver(uint32_t from,
                                       const v1::EdgeExchange& message) {
  if (abstaining_) return absl::OkStatus();
  if (!std::binary_search(neighbours_.begin(), neighbours_.end(), from)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node %u: message from %u, which is not its neighbour", node_, from));
  }
  const int round = static_cast<int>(message.round());
  if (round < 1 || round > params_.rounds()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node %u: message from %u names round %d, want 1..%d", node_, from,
        round, params_.rounds()));
  }
  const Body body = BodyOf(params_.approach, round);
  if (!message.has_abstain() && !BodyMatches(body, message)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "node %u: round %d message from %u must carry %s or abstain", node_,
        round, from, BodyName(body)));
  }
  const uint64_t key = InboxKey(round, from);
  const std::string wire = message.SerializeAsString();
  const size_t digest = absl::HashOf(wire);
  if (auto it = digests_.find(key); it != digests_.end()) {
    if (it->second == digest) return absl::OkStatus();  // an exact repeat
    return absl::InvalidArgumentError(absl::StrFormat(
        "node %u: a different round %d message from %u is already held",
        node_, round, from));
  }
  // Decode (and so validate) every vector before keeping anything.
  const std::vector<const v1::FeatureReport*> carried =
      substitution_internal::VectorsOf(message);
  std::vector<std::string> keys;
  keys.reserve(carried.size());
  std::vector<std::pair<size_t, CompactVector>> decoded;
  for (const v1::FeatureReport* r : carried) {
    keys.push_back(CanonicalKey(*r));
    if (vectors_.contains(keys.back())) continue;
    absl::StatusOr<CompactVector> v = features_->Decode(*r);
    if (!v.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "node %u: round %d message from %u carries a bad vector: %s", node_,
          round, from, v.status().message()));
    }
    decoded.emplace_back(keys.size() - 1, *std::move(v));
  }
  for (auto& [i, v] : decoded) vectors_.emplace(keys[i], std::move(v));
  for (size_t i = 0; i < carried.size(); ++i) {
    if (!reports_.contains(keys[i])) reports_.emplace(keys[i], *carried[i]);
  }
  if (message.has_feature()) neighbour_key_[from] = keys[0];
  if (message.has_abstain()) absent_.insert(from);
  digests_.emplace(key, digest);
  inbox_.emplace(key, message);
  return absl::OkStatus();
}

void SubstitutionNode::MarkAbsent(uint32_t u) {
  if (std::binary_search(neighbours_.begin(), neighbours_.end(), u)) {
    absent_.insert(u);
  }
}

std::vector<uint32_t> SubstitutionNode::Waiting() const {
  std::vector<uint32_t> out;
  if (done_ || round_ == 0) return out;
  for (uint32_t u : neighbours_) {
    if (!absent_.contains(u) && !digests_.contains(InboxKey(round_, u))) {
      out.push_back(u);
    }
  }
  return out;
}

absl::StatusOr<std::vector<Outgoing>> SubstitutionNode::Advance() {
  std::vector<Outgoing> out;
  if (done_) return out;
  if (abstaining_) {
    for (uint32_t u : neighbours_) {
      Outgoing o;
      o.to = u;
      o.message.set_round(1);
      o.message.set_abstain(true);
      out.push_back(std::move(o));
    }
    round_ = 1;
    done_ = true;
    return out;
  }
  while (!done_ && (round_ == 0 || Waiting().empty())) {
    if (round_ == params_.rounds()) {
      RETURN_IF_ERROR(Finish());
      done_ = true;
      break;
    }
    ASSIGN_OR_RETURN(std::vector<Outgoing> next, Send(round_ + 1));
    // The previous round's messages are spent: keep only their digests.
    for (uint32_t u : neighbours_) inbox_.erase(InboxKey(round_, u));
    ++round_;
    for (Outgoing& o : next) out.push_back(std::move(o));
  }
  return out;
}

void SubstitutionNode::DrawDropped() {
  dropped_.clear();
  if (preset_dropped_.has_value()) {
    dropped_ = *preset_dropped_;
    return;
  }
  const double q = params_.drop_probability();
  for (uint32_t u : neighbours_) {
    if (rng_->Bernoulli(q)) dropped_.push_back(u);
  }
}

std::vector<std::string> SubstitutionNode::Rank(
    const CompactVector& target, const std::vector<std::string>& pool,
    size_t k) const {
  std::vector<std::pair<double, const std::string*>> scored;
  scored.reserve(pool.size());
  for (const std::string& key : pool) {
    scored.emplace_back(
        SimilarityScore(params_.similarity, target, vectors_.at(key)), &key);
  }
  k = std::min(k, scored.size());
  auto better = [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return *a.second < *b.second;  // deterministic ties
  };
  std::partial_sort(scored.begin(), scored.begin() + k, scored.end(), better);
  std::vector<std::string> out;
  for (size_t i = 0; i < k; ++i) out.push_back(*scored[i].second);
  return out;
}

std::vector<uint32_t> SubstitutionNode::Present() const {
  std::vector<uint32_t> present;
  for (uint32_t u : neighbours_) {
    if (!absent_.contains(u)) present.push_back(u);
  }
  return present;
}

absl::StatusOr<std::vector<Outgoing>> SubstitutionNode::Send(int round) {
  const std::vector<uint32_t> present = Present();
  std::vector<Outgoing> out;
  switch (BodyOf(params_.approach, round)) {
    case Body::kFeature:
      for (uint32_t u : present) {
        *AddMessage(&out, u, round).mutable_feature() = own_;
      }
      break;
    case Body::kRelay:
      RETURN_IF_ERROR(SendRelay(present, round, &out));
      break;
    case Body::kQueries:
      SendQueries(present, round, &out);
      break;
    case Body::kAnswers:
      SendAnswers(present, round, &out);
      break;
    case Body::kIdentityQueries:
      SendIdentityQueries(present, round, &out);
      break;
    case Body::kIdentities:
      SendIdentities(present, round, &out);
      break;
  }
  return out;
}

absl::Status SubstitutionNode::SendRelay(const std::vector<uint32_t>& present,
                                         int round,
                                         std::vector<Outgoing>* out) {
  std::vector<const v1::FeatureReport*> heard;
  for (uint32_t u : neighbours_) {
    auto it = inbox_.find(InboxKey(1, u));
    if (it != inbox_.end() && it->second.has_feature()) {
      heard.push_back(&it->second.feature());
    }
  }
  const size_t base = neighbours_.size() / 2;
  for (uint32_t u : present) {
    const size_t f = std::min<size_t>(base + rng_->UniformInt(2),
                                      params_.max_dummies);
    std::vector<v1::FeatureReport> list;
    for (const v1::FeatureReport* r : heard) list.push_back(*r);
    for (size_t i = 0; i < f; ++i) {
      ASSIGN_OR_RETURN(v1::FeatureReport d,
                       features_->Dummy(params_.dummy_mean, params_.dummy_std,
                                        *rng_));
      list.push_back(std::move(d));
    }
    Shuffle(list, *rng_);
    v1::FeatureList* l = AddMessage(out, u, round).mutable_relay();
    for (auto& r : list) *l->add_vectors() = std::move(r);
  }
  return absl::OkStatus();
}

void SubstitutionNode::SendQueries(const std::vector<uint32_t>& present,
                                   int round, std::vector<Outgoing>* out) {
  DrawDropped();
  removed_first_ = rng_->Bernoulli(0.5);
  v1::FeatureList removed, retained;
  for (uint32_t u : neighbours_) {
    auto it = neighbour_key_.find(u);
    if (it == neighbour_key_.end()) continue;
    const bool is_dropped =
        std::binary_search(dropped_.begin(), dropped_.end(), u);
    *(is_dropped ? removed : retained).add_vectors() = reports_.at(it->second);
  }
  for (uint32_t u : present) {
    v1::QuerySets* q = AddMessage(out, u, round).mutable_queries();
    *q->mutable_first() = removed_first_ ? removed : retained;
    *q->mutable_second() = removed_first_ ? retained : removed;
  }
}

void SubstitutionNode::SendAnswers(const std::vector<uint32_t>& present,
                                   int round,
                                   std::vector<Outgoing>* out) const {
  for (uint32_t u : present) {
    const v1::EdgeExchange& in = inbox_.at(InboxKey(round - 1, u));
    v1::QueryAnswers* a = AddMessage(out, u, round).mutable_answers();
    if (!in.has_queries()) continue;  // u abstained at this round
    // The other neighbours' vectors, in ascending neighbour order.
    std::vector<std::string> others;
    for (uint32_t w : neighbours_) {
      if (w == u) continue;
      auto it = neighbour_key_.find(w);
      if (it != neighbour_key_.end()) others.push_back(it->second);
    }
    auto answer = [&](const v1::FeatureList& set, bool* answered,
                      v1::FeatureList* reply) {
      *answered = others.size() >= static_cast<size_t>(set.vectors_size());
      if (!*answered) return;
      for (const v1::FeatureReport& r : set.vectors()) {
        std::vector<std::string> best =
            Rank(vectors_.at(CanonicalKey(r)), others, 1);
        if (!best.empty()) *reply->add_vectors() = reports_.at(best[0]);
      }
    };
    bool answered = false;
    answer(in.queries().first(), &answered, a->mutable_first());
    a->set_first_answered(answered);
    answer(in.queries().second(), &answered, a->mutable_second());
    a->set_second_answered(answered);
  }
}

void SubstitutionNode::SendIdentityQueries(const std::vector<uint32_t>& present,
                                           int round,
                                           std::vector<Outgoing>* out) {
  std::vector<std::string> pool;
  if (params_.approach == Approach::kCandidateRelay) {
    DrawDropped();
    for (uint32_t u : neighbours_) {
      auto it = inbox_.find(InboxKey(2, u));
      if (it == inbox_.end() || !it->second.has_relay()) continue;
      for (const auto& r : it->second.relay().vectors()) {
        pool.push_back(CanonicalKey(r));
      }
    }
  } else {
    for (uint32_t u : neighbours_) {
      auto it = inbox_.find(InboxKey(3, u));
      if (it == inbox_.end() || !it->second.has_answers()) continue;
      const v1::QueryAnswers& a = it->second.answers();
      const bool ok = removed_first_ ? a.first_answered() : a.second_answered();
      if (!ok) continue;
      for (const auto& r :
           (removed_first_ ? a.first() : a.second()).vectors()) {
        pool.push_back(CanonicalKey(r));
      }
    }
  }
  BuildQueries(pool);
  v1::FeatureList list;
  for (const std::string& k : queries_) *list.add_vectors() = reports_.at(k);
  for (uint32_t u : present) {
    *AddMessage(out, u, round).mutable_identity_queries() = list;
  }
}

void SubstitutionNode::BuildQueries(const std::vector<std::string>& pool_in) {
  absl::flat_hash_set<std::string> excluded_keys = {own_key_};
  for (const auto& [u, k] : neighbour_key_) excluded_keys.insert(k);
  std::vector<std::string> pool;
  for (const std::string& k : pool_in) {
    if (!excluded_keys.contains(k)) pool.push_back(k);
  }
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  result_.stats.candidates = static_cast<uint32_t>(pool.size());
  std::vector<uint32_t> order = dropped_;
  Shuffle(order, *rng_);
  absl::flat_hash_set<std::string> asked;
  ranked_.clear();
  queries_.clear();
  for (uint32_t u : order) {
    auto it = neighbour_key_.find(u);
    if (it == neighbour_key_.end()) {
      ranked_.emplace_back(u, std::vector<std::string>{});
      continue;
    }
    std::vector<std::string> top =
        Rank(vectors_.at(it->second), pool, params_.top_k);
    for (const std::string& k : top) {
      if (asked.insert(k).second) queries_.push_back(k);
    }
    ranked_.emplace_back(u, std::move(top));
  }
  Shuffle(queries_, *rng_);
}

void SubstitutionNode::SendIdentities(const std::vector<uint32_t>& present,
                                      int round,
                                      std::vector<Outgoing>* out) const {
  // Exact-match map of round-1 features: key -> smallest neighbour id.
  absl::flat_hash_map<std::string, uint32_t> owner;
  for (uint32_t w : neighbours_) {  // ascending: the first id wins
    auto it = neighbour_key_.find(w);
    if (it != neighbour_key_.end()) owner.try_emplace(it->second, w);
  }
  for (uint32_t u : present) {
    const v1::EdgeExchange& in = inbox_.at(InboxKey(round - 1, u));
    v1::IdentityAnswers* a = AddMessage(out, u, round).mutable_identities();
    if (!in.has_identity_queries()) continue;
    for (const auto& r : in.identity_queries().vectors()) {
      v1::IdentityAnswer* ans = a->add_answers();
      auto it = owner.find(CanonicalKey(r));
      if (it != owner.end()) {
        ans->set_found(true);
        ans->set_node(it->second);
      }
    }
  }
}

absl::Status SubstitutionNode::Finish() {
  const int last = params_.rounds();
  // key -> identity, asking neighbours in ascending order.
  absl::flat_hash_map<std::string, uint32_t> resolved;
  for (uint32_t w : neighbours_) {
    auto it = inbox_.find(InboxKey(last, w));
    if (it == inbox_.end() || !it->second.has_identities()) continue;
    const auto& answers = it->second.identities().answers();
    if (static_cast<size_t>(answers.size()) != queries_.size()) continue;
    for (size_t i = 0; i < queries_.size(); ++i) {
      if (answers[i].found()) resolved.try_emplace(queries_[i], answers[i].node());
    }
  }
  std::vector<uint32_t> out;
  for (uint32_t u : neighbours_) {
    if (!std::binary_search(dropped_.begin(), dropped_.end(), u)) {
      out.push_back(u);
    }
  }
  absl::flat_hash_set<uint32_t> chosen;
  SubstitutionStats& st = result_.stats;
  st.dropped = static_cast<uint32_t>(dropped_.size());
  for (const auto& [u, ranked] : ranked_) {
    bool done = false;
    for (const std::string& k : ranked) {
      auto it = resolved.find(k);
      if (it == resolved.end()) continue;
      const uint32_t id = it->second;
      if (id == node_ ||
          std::binary_search(neighbours_.begin(), neighbours_.end(), id) ||
          chosen.contains(id)) {
        continue;
      }
      chosen.insert(id);
      out.push_back(id);
      done = true;
      break;
    }
    if (done) ++st.substituted;
  }
  st.unresolved = st.dropped - st.substituted;
  st.absent = static_cast<uint32_t>(absent_.size());
  std::sort(out.begin(), out.end());
  result_.neighbours = std::move(out);
  return absl::OkStatus();
}

absl::StatusOr<SubstitutionResult> SubstitutionNode::result() const {
  if (!done_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "node %u: the exchange is at round %d of %d", node_, round_,
        params_.rounds()));
  }
  return result_;
}

}  // namespace ldpgraph::edges

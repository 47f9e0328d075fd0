#include "common/edges/substitution.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"

namespace ldpgraph::edges {
namespace {

uint64_t InboxKey(int round, uint32_t from) {
  return (static_cast<uint64_t>(round) << 32) | from;
}

// Standard normal by Box-Muller.
double Gaussian(RandomSource& rng) {
  double u1 = rng.UniformDouble();
  while (u1 <= 0) u1 = rng.UniformDouble();
  const double u2 = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
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

// Every feature vector a message carries.
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

}  // namespace

absl::StatusOr<Similarity> ParseSimilarity(absl::string_view name) {
  if (name == "cosine") return Similarity::kCosine;
  if (name == "l2") return Similarity::kL2;
  return absl::InvalidArgumentError(
      absl::StrCat("similarity must be cosine or l2, got '", name, "'"));
}

absl::string_view SimilarityName(Similarity s) {
  return s == Similarity::kCosine ? "cosine" : "l2";
}

absl::Status SubstitutionParams::Validate() const {
  if (approach != Approach::kCandidateRelay &&
      approach != Approach::kSimilarityQuery) {
    return absl::InvalidArgumentError("approach must be 1 or 2");
  }
  if (!std::isfinite(epsilon) || epsilon <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge epsilon must be finite and > 0, got ", epsilon));
  }
  if (top_k < 1 || top_k > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k must be in [1, 1000], got ", top_k));
  }
  if (max_dummies < 0 || max_dummies > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_dummies must be in [0, 1000], got ", max_dummies));
  }
  if (!std::isfinite(dummy_mean)) {
    return absl::InvalidArgumentError("dummy_mean must be finite");
  }
  if (!std::isfinite(dummy_std) || dummy_std < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dummy_std must be finite and >= 0, got ", dummy_std));
  }
  return absl::OkStatus();
}

int SubstitutionParams::rounds() const {
  return approach == Approach::kCandidateRelay ? 4 : 5;
}

double SubstitutionParams::drop_probability() const {
  return 1.0 / (1.0 + std::exp(epsilon));
}

absl::StatusOr<SubstitutionParams> FromWire(const v1::MechanismSpec& spec) {
  if (spec.kind() != v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    return absl::InvalidArgumentError(
        "spec.kind must be MECHANISM_KIND_EDGE_SUBSTITUTION");
  }
  const v1::SubstitutionSpec& w = spec.substitution();
  SubstitutionParams p;
  if (w.approach() != 1 && w.approach() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "substitution.approach must be 1 or 2, got ", w.approach()));
  }
  p.approach = static_cast<Approach>(w.approach());
  ASSIGN_OR_RETURN(p.similarity, ParseSimilarity(w.similarity()));
  p.epsilon = spec.epsilon();
  p.top_k = static_cast<int>(std::min<uint32_t>(w.top_k(), 1u << 30));
  p.max_dummies = static_cast<int>(std::min<uint32_t>(w.max_dummies(), 1u << 30));
  p.dummy_mean = w.dummy_mean();
  p.dummy_std = w.dummy_std();
  if (absl::Status s = p.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("substitution spec: ", s.message()));
  }
  return p;
}

void ToWire(const SubstitutionParams& p, v1::MechanismSpec* spec) {
  spec->set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
  spec->set_epsilon(p.epsilon);
  v1::SubstitutionSpec* w = spec->mutable_substitution();
  w->set_approach(static_cast<uint32_t>(p.approach));
  w->set_similarity(std::string(SimilarityName(p.similarity)));
  w->set_top_k(static_cast<uint32_t>(p.top_k));
  w->set_max_dummies(static_cast<uint32_t>(p.max_dummies));
  w->set_dummy_mean(p.dummy_mean);
  w->set_dummy_std(p.dummy_std);
}

v1::SubstitutionSpec DefaultSubstitutionSpec() {
  v1::MechanismSpec spec;
  ToWire(SubstitutionParams(), &spec);
  v1::SubstitutionSpec s = spec.substitution();
  s.set_round_timeout_ms(kDefaultRoundTimeoutMs);
  return s;
}

// ---- CompactVector ----

double CompactVector::Dot(const CompactVector& o) const {
  // dense_a . dense_b with a = oa + sa, b = ob + sb (sa, sb sparse):
  // d oa ob + oa sum(sb) + ob sum(sa) + sa . sb.
  double sa = 0, sb = 0, cross = 0;
  for (float v : values) sa += v;
  for (float v : o.values) sb += v;
  size_t i = 0, j = 0;
  while (i < indices.size() && j < o.indices.size()) {
    if (indices[i] < o.indices[j]) {
      ++i;
    } else if (indices[i] > o.indices[j]) {
      ++j;
    } else {
      cross += static_cast<double>(values[i]) * o.values[j];
      ++i;
      ++j;
    }
  }
  return static_cast<double>(dimension) * offset * o.offset + offset * sb +
         o.offset * sa + cross;
}

CompactVector CompactVector::FromDense(const std::vector<double>& dense) {
  CompactVector c;
  c.dimension = static_cast<uint32_t>(dense.size());
  if (dense.empty()) return c;
  std::vector<double> sorted = dense;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2,
                   sorted.end());
  c.offset = static_cast<float>(sorted[sorted.size() / 2]);
  for (size_t i = 0; i < dense.size(); ++i) {
    const float v = static_cast<float>(dense[i]);
    if (v != c.offset) {
      c.indices.push_back(static_cast<uint32_t>(i));
      c.values.push_back(v - c.offset);
    }
  }
  c.sum = 0;
  c.norm2 = 0;
  for (size_t i = 0; i < dense.size(); ++i) {
    const double v = static_cast<float>(dense[i]);
    c.sum += v;
    c.norm2 += v * v;
  }
  return c;
}

double SimilarityScore(Similarity s, const CompactVector& a,
                       const CompactVector& b) {
  const double dot = a.Dot(b);
  if (s == Similarity::kCosine) {
    const double den = std::sqrt(a.norm2) * std::sqrt(b.norm2);
    return den > 0 ? dot / den : 0.0;
  }
  return -(a.norm2 + b.norm2 - 2 * dot);
}

// ---- ExchangeFeatures ----

std::shared_ptr<const ExchangeFeatures> ExchangeFeatures::Private(
    std::shared_ptr<const FeatureMechanism> mechanism) {
  auto f = std::shared_ptr<ExchangeFeatures>(new ExchangeFeatures());
  f->dimension_ = mechanism->dimension();
  f->alpha_ = mechanism->spec().alpha;
  f->beta_ = mechanism->spec().beta;
  f->mechanism_ = std::move(mechanism);
  return f;
}

std::shared_ptr<const ExchangeFeatures> ExchangeFeatures::RawForResearch(
    int dimension, double alpha, double beta) {
  auto f = std::shared_ptr<ExchangeFeatures>(new ExchangeFeatures());
  f->dimension_ = dimension;
  f->alpha_ = alpha;
  f->beta_ = beta;
  return f;
}

absl::StatusOr<CompactVector> ExchangeFeatures::Decode(
    const v1::FeatureReport& r) const {
  std::vector<double> dense(dimension_, 0.0);
  if (mechanism_ != nullptr) {
    ASSIGN_OR_RETURN(SparseReport report,
                     wire::DecodeFeatureReport(r, *mechanism_));
    RETURN_IF_ERROR(mechanism_->Estimate(report, absl::MakeSpan(dense)));
    return CompactVector::FromDense(dense);
  }
  if (r.dense() || r.has_spec() || r.bit_count() != 0 ||
      r.indices_size() != r.values_size()) {
    return absl::InvalidArgumentError(
        "raw vector: want indices and values of its nonzero entries only");
  }
  for (int i = 0; i < r.indices_size(); ++i) {
    const uint32_t j = r.indices(i);
    if (j >= static_cast<uint32_t>(dimension_) ||
        (i > 0 && j <= r.indices(i - 1))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "raw vector: index %u at position %d not ascending or >= %d", j, i,
          dimension_));
    }
    const double v = r.values(i);
    if (!std::isfinite(v) || v < alpha_ || v > beta_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "raw vector: value %g at index %u outside [%g, %g]", v, j, alpha_,
          beta_));
    }
    dense[j] = v;
  }
  return CompactVector::FromDense(dense);
}

absl::StatusOr<v1::FeatureReport> ExchangeFeatures::Encode(
    absl::Span<const double> x, RandomSource& rng) const {
  if (x.size() != static_cast<size_t>(dimension_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature vector has ", x.size(), " values, want ", dimension_));
  }
  if (mechanism_ != nullptr) {
    ASSIGN_OR_RETURN(SparseReport report, mechanism_->Perturb(x, rng));
    return wire::EncodeFeatureReport(report);
  }
  v1::FeatureReport r;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      return absl::InvalidArgumentError(absl::StrCat("NaN at index ", i));
    }
    const double v = std::clamp(x[i], alpha_, beta_);
    if (v != 0) {
      r.add_indices(static_cast<uint32_t>(i));
      r.add_values(v);
    }
  }
  return r;
}

absl::StatusOr<v1::FeatureReport> ExchangeFeatures::Dummy(
    double mean, double std, RandomSource& rng) const {
  std::vector<double> x(dimension_);
  for (double& v : x) v = std::clamp(mean + std * Gaussian(rng), alpha_, beta_);
  return Encode(x, rng);
}

std::string CanonicalKey(const v1::FeatureReport& r) {
  return r.SerializeAsString();
}

// ---- SubstitutionNode ----

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
  const std::vector<const v1::FeatureReport*> carried = VectorsOf(message);
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

// ---- RunSubstitution ----

absl::StatusOr<RunOutput> RunSubstitution(
    const Graph& g, const SubstitutionParams& params,
    std::shared_ptr<const ExchangeFeatures> features,
    const std::vector<v1::FeatureReport>& own,
    const std::function<RandomSource*(uint32_t)>& rng_of,
    const RunOptions& options) {
  RETURN_IF_ERROR(params.Validate());
  const uint32_t n = static_cast<uint32_t>(g.num_nodes());
  if (own.size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d feature reports for %d nodes", own.size(), n));
  }
  std::vector<std::unique_ptr<SubstitutionNode>> nodes(n);
  for (uint32_t v = 0; v < n; ++v) {
    auto nb = g.neighbors(v);
    std::vector<uint32_t> neighbours(nb.begin(), nb.end());
    if (options.abstaining.contains(v)) {
      nodes[v] = SubstitutionNode::Abstaining(params, v, std::move(neighbours));
      continue;
    }
    RandomSource* rng = rng_of(v);
    ASSIGN_OR_RETURN(nodes[v],
                     SubstitutionNode::Create(params, features, v,
                                              std::move(neighbours), own[v],
                                              rng));
  }
  RunOutput output;
  // Per round: every node advances (in parallel), then every message is
  // serialised, parsed and delivered, grouped by recipient (in parallel).
  std::vector<absl::Status> errors(n);
  std::vector<std::vector<std::pair<uint32_t, std::string>>> inbox(n);
  for (int step = 0; step <= params.rounds() + 1; ++step) {
    std::vector<std::vector<Outgoing>> sent(n);
    ParallelFor(n, n < 64 ? 1 : options.threads, [&](int, size_t v) {
      absl::StatusOr<std::vector<Outgoing>> out = nodes[v]->Advance();
      if (!out.ok()) {
        errors[v] = out.status();
        return;
      }
      sent[v] = *std::move(out);
    });
    for (uint32_t v = 0; v < n; ++v) RETURN_IF_ERROR(errors[v]);
    for (auto& in : inbox) in.clear();
    for (uint32_t v = 0; v < n; ++v) {
      for (Outgoing& o : sent[v]) {
        std::string bytes = o.message.SerializeAsString();
        ++output.stats.messages;
        output.stats.message_bytes += bytes.size();
        output.stats.vectors_sent += VectorsOf(o.message).size();
        inbox[o.to].emplace_back(v, std::move(bytes));
      }
      sent[v].clear();
    }
    ParallelFor(n, n < 64 ? 1 : options.threads, [&](int, size_t v) {
      for (const auto& [from, bytes] : inbox[v]) {
        v1::EdgeExchange m;
        if (!m.ParseFromString(bytes)) {
          errors[v] = absl::InternalError("a message did not parse");
          return;
        }
        absl::Status s = nodes[v]->Deliver(from, m);
        if (!s.ok()) {
          errors[v] = s;
          return;
        }
      }
    });
    for (uint32_t v = 0; v < n; ++v) RETURN_IF_ERROR(errors[v]);
  }
  output.results.resize(n);
  for (uint32_t v = 0; v < n; ++v) {
    ASSIGN_OR_RETURN(output.results[v], nodes[v]->result());
    const SubstitutionStats& s = output.results[v].stats;
    if (!nodes[v]->abstaining()) {
      output.stats.degree += s.degree;
      output.stats.dropped += s.dropped;
      output.stats.substituted += s.substituted;
      output.stats.unresolved += s.unresolved;
    }
    if (nodes[v]->abstaining()) output.results[v].neighbours.clear();
  }
  return output;
}

// ---- AssembleGraph ----

absl::string_view SymmetrisationName(Symmetrisation s) {
  return s == Symmetrisation::kUnion ? "union" : "lower-id";
}

absl::StatusOr<Graph> AssembleGraph(
    uint32_t n, const std::vector<std::vector<uint32_t>>& reports,
    Symmetrisation rule) {
  if (reports.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d reports for %d nodes", reports.size(), n));
  }
  std::vector<Edge> edges;
  for (uint32_t v = 0; v < n; ++v) {
    const auto& r = reports[v];
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i] >= n || r[i] == v || (i > 0 && r[i] <= r[i - 1])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "report of node %u: entry %u at position %d is not a node, is "
            "the node itself or is not strictly ascending",
            v, r[i], i));
      }
      if (rule == Symmetrisation::kLowerId && r[i] < v) continue;
      edges.push_back(Edge{std::min(v, r[i]), std::max(v, r[i])});
    }
  }
  Graph::BuildOptions o;
  o.merge_duplicates = true;
  return Graph::FromEdges(n, edges, o);
}

}  // namespace ldpgraph::edges

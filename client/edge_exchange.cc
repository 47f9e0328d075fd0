#include "client/edge_exchange.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <iostream>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "client/edge_exchange_internal.h"
#include "common/crypto/openssl.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"

namespace ldpgraph::agent {
namespace {

using exchange_internal::BoxReassembly;
using exchange_internal::FragmentHeader;
using exchange_internal::kFragmentHeader;
using exchange_internal::kMaxParts;

// Per node of a PublicKeys request (the curator's bound).
constexpr size_t kMaxKeysPerCall = 100000;
// Individual log lines of one kind per exchange; the rest are counted.
constexpr int kMaxLogLines = 5;

}  // namespace

std::string ExchangeContext(absl::string_view campaign, uint32_t round,
                            uint32_t from, uint32_t to) {
  return absl::StrCat("edge-exchange|", campaign, "|", round, "|", from, "|",
                      to);
}

absl::StatusOr<std::unique_ptr<RandomSource>> ExchangeRandomSource(
    const crypto::KeyPair& key, absl::string_view campaign) {
  static constexpr char kSalt[] = "ldpgraph-exchange-rng-v1";
  uint8_t stream_key[32];
  const absl::Status derived = crypto::HkdfSha256(
      key.private_key(), kSalt, campaign, absl::MakeSpan(stream_key));
  absl::StatusOr<std::unique_ptr<KeyedChaCha20Random>> stream =
      derived.ok() ? KeyedChaCha20Random::Create(stream_key) : derived;
  OPENSSL_cleanse(stream_key, sizeof(stream_key));
  if (!stream.ok()) {
    return absl::InternalError(
        absl::StrCat("exchange randomness: ", stream.status().message()));
  }
  return std::unique_ptr<RandomSource>(*std::move(stream));
}

// --- one exchange -------------------------------------------------------------

class ExchangeRunner::Exchange {
 public:
  Exchange(const v1::Task& task, AgentShard* shard,
           ExchangeTransport* transport, const ExchangeOptions& options,
           ExchangeCounters* counters, const std::atomic<bool>* stopping,
           std::function<void(const std::string&)> log)
      : task_(task),
        campaign_(task.campaign_id()),
        shard_(shard),
        transport_(transport),
        options_(options),
        counters_(counters),
        stopping_(stopping),
        log_(std::move(log)),
        reassembly_(options.max_reassembly_bytes) {}

  void Run();

  std::map<uint32_t, ExchangeNodeOutcome> Outcomes() const {
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  using Role = NodeAgent::SubstitutionStart::Role;
  struct Node {
    uint32_t id = 0;
    Role role = Role::kRefuse;
    std::vector<uint32_t> neighbours;
    std::unique_ptr<RandomSource> rng;
    std::unique_ptr<edges::SubstitutionNode> sub;
    absl::flat_hash_map<uint32_t, crypto::SealingKey> out, in;
    int round = -1;          // sub->round() when the timer started
    absl::Time waiting_since;
    bool done = false;       // the protocol is over for this node
    bool answered = false;   // and its final answer is made (or not needed)
  };

  bool Stopping() const { return stopping_->load(); }
  // Sleeps up to d, waking early on stop.
  void Sleep(absl::Duration d) const {
    const absl::Time until = absl::Now() + d;
    while (!Stopping() && absl::Now() < until) {
      absl::SleepFor(std::min(absl::Milliseconds(20), until - absl::Now()));
    }
  }
  // Calls fn until it succeeds or the runner stops, backing off.
  template <typename F>
  bool Retry(const char* what, F fn) {
    absl::Duration backoff = options_.retry_initial;
    int failures = 0;
    while (!Stopping()) {
      absl::Status s = fn();
      if (s.ok()) return true;
      counters_->transport_errors.fetch_add(1);
      if (failures++ < kMaxLogLines) {
        Log(absl::StrCat(what, " failed (retrying): ", s.ToString()));
      }
      Sleep(backoff);
      backoff = std::min(backoff * 2, options_.retry_max);
    }
    return false;
  }
  void Log(const std::string& line) const {
    log_(absl::StrCat("exchange ", campaign_, ": ", line));
  }
  void Reject(const v1::SealedMessage& m, absl::string_view why) {
    counters_->messages_rejected.fetch_add(1);
    if (rejected_logged_++ < kMaxLogLines) {
      Log(absl::StrCat("refused a message from node ", m.from_node(),
                       " to node ", m.to_node(), " (sequence ", m.sequence(),
                       "): ", why));
    }
    ++rejected_;
  }

  bool Setup();
  bool LoadKeys();
  // Advances one node as far as it goes; true if anything happened.
  bool Drive(Node& node, absl::Time now);
  void Seal(Node& node, const edges::Outgoing& o);
  // Makes the final answers of nodes that are done.
  bool AnswerDone();
  bool FlushOutbox();
  bool FlushReports();
  // Fetches and delivers; false if the transport failed.
  bool FetchAll(bool* progress);
  void Deliver(const v1::SealedMessage& m);
  bool TimeOut(absl::Time now);
  bool Finished() const;
  // Records the outcome of a call to the curator. Silence while the curator
  // is unreachable is not the neighbours': no timeouts then, and every
  // node's timer restarts when it is back.
  void CallOutcome(bool ok) {
    if (ok && !healthy_) {
      const absl::Time now = absl::Now();
      for (Node& node : nodes_) node.waiting_since = now;
    }
    if (!ok) {
      next_transport_ = absl::Now() + backoff_;
      backoff_ = std::min(backoff_ * 2, options_.retry_max);
    } else {
      backoff_ = options_.retry_initial;
    }
    healthy_ = ok;
  }
  void SetOutcome(const Node& node);

  const v1::Task task_;
  const std::string campaign_;
  AgentShard* const shard_;
  ExchangeTransport* const transport_;
  const ExchangeOptions options_;
  ExchangeCounters* const counters_;
  const std::atomic<bool>* const stopping_;
  const std::function<void(const std::string&)> log_;

  edges::SubstitutionParams params_;
  absl::Duration round_timeout_;
  std::shared_ptr<const edges::ExchangeFeatures> features_;
  std::vector<Node> nodes_;
  absl::flat_hash_map<uint32_t, size_t> index_;  // node id -> nodes_
  std::deque<v1::SealedMessage> outbox_;
  std::vector<v1::Report> reports_;
  uint64_t cursor_ = 0;
  // The parts of split boxes received, until each box is whole.
  BoxReassembly reassembly_;
  uint64_t fragment_ids_ = 0;
  absl::Time next_transport_ = absl::InfinitePast();
  absl::Duration backoff_;
  bool healthy_ = true;  // the last call to the curator succeeded
  // Exchange totals for the closing log line.
  uint64_t sent_ = 0, received_ = 0, rejected_ = 0, timed_out_ = 0;
  int rejected_logged_ = 0;

  mutable absl::Mutex mu_;
  std::map<uint32_t, ExchangeNodeOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
};

void ExchangeRunner::Exchange::SetOutcome(const Node& node) {
  ExchangeNodeOutcome o;
  o.role = node.role;
  o.abstained = node.sub != nullptr && node.sub->abstaining();
  o.done = node.done;
  if (node.done && node.sub != nullptr && !node.sub->abstaining()) {
    if (auto r = node.sub->result(); r.ok()) {
      o.stats = r->stats;
      o.result = r->neighbours;
    }
  }
  absl::MutexLock lock(&mu_);
  outcomes_[node.id] = std::move(o);
}

bool ExchangeRunner::Exchange::Setup() {
  // 1. The budget: every fresh answer durable before anything leaves.
  ShardSubstitution begun;
  if (!Retry("answering the features question", [&]() -> absl::Status {
        ASSIGN_OR_RETURN(begun, shard_->BeginSubstitution(task_));
        return absl::OkStatus();
      })) {
    return false;
  }
  for (auto& [id, start] : begun.nodes) {
    if (start.role != Role::kTakePart) reports_.push_back(start.report);
  }
  // 2. The protocol's parameters and the vectors it compares.
  absl::StatusOr<edges::SubstitutionParams> params = edges::FromWire(task_.spec());
  absl::StatusOr<MechanismSpec> fspec =
      wire::FromWireFeatureSpec(task_.spec().substitution().features());
  absl::StatusOr<std::unique_ptr<FeatureMechanism>> mech =
      fspec.ok() ? CreateFeatureMechanism(*fspec)
                 : absl::StatusOr<std::unique_ptr<FeatureMechanism>>(fspec.status());
  if (!params.ok() || !mech.ok()) {
    // Every node refused this task already (its spec does not validate):
    // there is no exchange to take part in, only the refusals to send.
    Log(absl::StrCat("cannot run: ",
                     (!params.ok() ? params.status() : mech.status()).message()));
    return true;
  }
  params_ = *params;
  round_timeout_ =
      absl::Milliseconds(task_.spec().substitution().round_timeout_ms());
  features_ = edges::ExchangeFeatures::Private(
      std::shared_ptr<const FeatureMechanism>(std::move(*mech)));

  nodes_.reserve(begun.nodes.size());
  for (auto& [id, start] : begun.nodes) {
    const NodeAgent* agent = shard_->agent(id);
    const crypto::KeyPair* key = shard_->key_pair(id);
    if (agent == nullptr || key == nullptr) continue;
    Node node;
    node.id = id;
    node.role = start.role;
    node.neighbours = agent->record().neighbours;
    absl::StatusOr<std::unique_ptr<RandomSource>> rng =
        ExchangeRandomSource(*key, campaign_);
    if (!rng.ok()) {
      Log(absl::StrCat("node ", id, ": ", rng.status().message(),
                       "; it abstains"));
    } else {
      node.rng = *std::move(rng);
    }
    const bool takes_part = node.rng != nullptr && start.own_feature &&
                            (start.role == Role::kTakePart ||
                             start.role == Role::kMemo);
    if (takes_part) {
      auto sub = edges::SubstitutionNode::Create(
          params_, features_, id, node.neighbours, *start.own_feature,
          node.rng.get(), start.role == Role::kMemo ? start.dropped
                                                    : std::nullopt);
      if (sub.ok()) {
        node.sub = *std::move(sub);
      } else {
        Log(absl::StrCat("node ", id, ": ", sub.status().message(),
                         "; it abstains"));
      }
    }
    if (node.sub == nullptr) {
      node.sub = edges::SubstitutionNode::Abstaining(params_, id, node.neighbours);
      // A node that meant to report but cannot take part must still answer
      // the campaign: nothing of its edges was used.
      if (start.role == Role::kTakePart) {
        v1::Report refusal;
        refusal.set_campaign_id(campaign_);
        refusal.set_node_id(id);
        refusal.mutable_refusal()->set_reason(v1::REFUSAL_REASON_INVALID_TASK);
        refusal.mutable_refusal()->set_message(
            "the node could not start its part in the exchange");
        reports_.push_back(std::move(refusal));
      }
    }
    node.answered = node.role != Role::kTakePart || node.sub->abstaining();
    index_[id] = nodes_.size();
    nodes_.push_back(std::move(node));
  }
  for (const Node& node : nodes_) SetOutcome(node);
  // 3. The neighbours' keys.
  return LoadKeys();
}

bool ExchangeRunner::Exchange::LoadKeys() {
  absl::flat_hash_set<uint32_t> wanted;
  for (const Node& node : nodes_) {
    wanted.insert(node.neighbours.begin(), node.neighbours.end());
  }
  std::vector<uint32_t> all(wanted.begin(), wanted.end());
  std::sort(all.begin(), all.end());
  absl::flat_hash_map<uint32_t, std::string> keys;
  for (size_t first = 0; first < all.size(); first += kMaxKeysPerCall) {
    std::vector<uint32_t> chunk(
        all.begin() + first,
        all.begin() + std::min(all.size(), first + kMaxKeysPerCall));
    if (!Retry("fetching the neighbours' keys", [&]() -> absl::Status {
          ASSIGN_OR_RETURN(auto got, transport_->PublicKeys(chunk));
          for (auto& [id, key] : got) keys[id] = std::move(key);
          return absl::OkStatus();
        })) {
      return false;
    }
  }
  uint64_t missing = 0;
  for (Node& node : nodes_) {
    const crypto::KeyPair& self = *shard_->key_pair(node.id);
    for (uint32_t u : node.neighbours) {
      auto it = keys.find(u);
      absl::StatusOr<crypto::SealingKey> out =
          it == keys.end() ? absl::NotFoundError("no key")
                           : crypto::SealingKey::Outgoing(self, it->second);
      absl::StatusOr<crypto::SealingKey> in =
          it == keys.end() ? absl::NotFoundError("no key")
                           : crypto::SealingKey::Incoming(self, it->second);
      if (out.ok() && in.ok()) {
        node.out.emplace(u, *out);
        node.in.emplace(u, *in);
        continue;
      }
      // Nothing can be sealed to or opened from u: absent from the start.
      ++missing;
      if (!node.sub->abstaining()) node.sub->MarkAbsent(u);
    }
  }
  if (missing > 0) {
    Log(absl::StrCat(missing, " neighbour links have no valid sealing key "
                              "in the curator's directory; those neighbours "
                              "count as absent"));
  }
  const absl::Time now = absl::Now();
  for (Node& node : nodes_) node.waiting_since = now;
  return true;
}

void ExchangeRunner::Exchange::Seal(Node& node, const edges::Outgoing& o) {
  auto key = node.out.find(o.to);
  if (key == node.out.end()) return;  // no key: the neighbour is absent
  const std::string context =
      ExchangeContext(campaign_, o.message.round(), node.id, o.to);
  absl::StatusOr<std::string> box =
      key->second.Seal(context, o.message.SerializeAsString());
  if (!box.ok()) {
    Log(absl::StrCat("node ", node.id, ": cannot seal a message to ", o.to,
                     ": ", box.status().message()));
    return;
  }
  auto add = [&](std::string ciphertext) {
    v1::SealedMessage m;
    m.set_campaign_id(campaign_);
    m.set_from_node(node.id);
    m.set_to_node(o.to);
    m.set_ciphertext(std::move(ciphertext));
    outbox_.push_back(std::move(m));
  };
  if (box->size() <= options_.max_ciphertext) {
    add(*std::move(box));
    return;
  }
  const size_t room = options_.max_ciphertext - kFragmentHeader;
  const size_t count = (box->size() + room - 1) / room;
  if (count > kMaxParts) {
    Log(absl::StrCat("node ", node.id, ": a message to ", o.to, " of ",
                     box->size(), " bytes exceeds ", kMaxParts,
                     " parts; not sent"));
    return;
  }
  // Ids need only be distinct per sender: the node, an exchange counter.
  const uint64_t id = (uint64_t{node.id} << 32) | (++fragment_ids_ & 0xffffffff);
  for (size_t i = 0; i < count; ++i) {
    add(absl::StrCat(FragmentHeader(id, i, count),
                     absl::string_view(*box).substr(i * room, room)));
  }
}

bool ExchangeRunner::Exchange::Drive(Node& node, absl::Time now) {
  if (node.done) return false;
  bool progress = false;
  while (!node.sub->done()) {
    absl::StatusOr<std::vector<edges::Outgoing>> out = node.sub->Advance();
    if (!out.ok()) {
      Log(absl::StrCat("node ", node.id, ": the protocol failed: ",
                       out.status().message(), "; it stops"));
      node.done = true;
      node.answered = true;
      SetOutcome(node);
      return true;
    }
    if (out->empty()) break;
    for (const edges::Outgoing& o : *out) Seal(node, o);
    progress = true;
  }
  if (node.sub->round() != node.round) {
    node.round = node.sub->round();
    node.waiting_since = now;
  }
  if (node.sub->done()) {
    node.done = true;
    counters_->nodes_done.fetch_add(1);
    SetOutcome(node);
    progress = true;
  }
  return progress;
}

bool ExchangeRunner::Exchange::AnswerDone() {
  bool progress = false;
  for (Node& node : nodes_) {
    if (!node.done || node.answered) continue;
    absl::StatusOr<edges::SubstitutionResult> result = node.sub->result();
    if (!result.ok()) {
      Log(absl::StrCat("node ", node.id, ": ", result.status().message()));
      node.answered = true;
      continue;
    }
    // Durable before it is released; a failure is retried next time.
    absl::StatusOr<v1::Report> report =
        shard_->FinishSubstitution(task_, node.id, result->neighbours);
    if (!report.ok()) {
      Log(absl::StrCat("node ", node.id, ": storing its answer: ",
                       report.status().message(), " (retrying)"));
      continue;
    }
    reports_.push_back(*std::move(report));
    node.answered = true;
    progress = true;
  }
  return progress;
}

bool ExchangeRunner::Exchange::FlushOutbox() {
  bool progress = false;
  while (!outbox_.empty() && !Stopping() && absl::Now() >= next_transport_) {
    std::vector<v1::SealedMessage> batch;
    size_t bytes = 0;
    for (const v1::SealedMessage& m : outbox_) {
      if (static_cast<int>(batch.size()) >= options_.relay_batch ||
          (!batch.empty() && bytes + m.ciphertext().size() > options_.relay_bytes)) {
        break;
      }
      bytes += m.ciphertext().size();
      batch.push_back(m);
    }
    absl::Status s = transport_->Relay(batch);
    if (!s.ok()) {
      counters_->transport_errors.fetch_add(1);
      if (absl::IsInvalidArgument(s) || absl::IsPermissionDenied(s)) {
        // The curator refuses these messages for good: drop them (the
        // recipients time this node out).
        Log(absl::StrCat("the relay refused ", batch.size(),
                         " messages: ", s.message(), "; dropped"));
        outbox_.erase(outbox_.begin(), outbox_.begin() + batch.size());
        continue;
      }
      CallOutcome(false);
      break;
    }
    CallOutcome(true);
    outbox_.erase(outbox_.begin(), outbox_.begin() + batch.size());
    counters_->messages_sent.fetch_add(batch.size());
    sent_ += batch.size();
    progress = true;
  }
  return progress;
}

bool ExchangeRunner::Exchange::FlushReports() {
  if (reports_.empty() || Stopping() || absl::Now() < next_transport_) {
    return false;
  }
  const size_t n = reports_.size();
  absl::Status s = transport_->Report(reports_);
  if (!s.ok()) {
    // Kept: every answer is in the memo, so a resend is identical.
    counters_->transport_errors.fetch_add(1);
    CallOutcome(false);
    return false;
  }
  CallOutcome(true);
  reports_.clear();
  counters_->reports_sent.fetch_add(n);
  return true;
}

void ExchangeRunner::Exchange::Deliver(const v1::SealedMessage& m) {
  auto it = index_.find(m.to_node());
  if (m.campaign_id() != campaign_ || it == index_.end() ||
      nodes_[it->second].done) {
    counters_->messages_ignored.fetch_add(1);
    return;
  }
  Node& node = nodes_[it->second];
  // A split box: hold its parts until all are here.
  std::string joined;
  absl::string_view box = m.ciphertext();
  if (exchange_internal::IsFragment(box)) {
    int evicted = 0;
    const BoxReassembly::Outcome held =
        reassembly_.Add(m.from_node(), box, &joined, &evicted);
    if (held == BoxReassembly::Outcome::kMalformed) {
      return Reject(m, "a malformed part");
    }
    if (held == BoxReassembly::Outcome::kOtherSize) {
      return Reject(m, "a part of another size");
    }
    // Bounded memory: the oldest incomplete boxes were dropped.
    for (int i = 0; i < evicted; ++i) {
      Reject(m, "too many incomplete split messages held; the oldest dropped");
    }
    if (held != BoxReassembly::Outcome::kComplete) return;
    box = joined;
  }
  auto key = node.in.find(m.from_node());
  if (key == node.in.end()) {
    return Reject(m, "the sender is not a neighbour with a sealing key");
  }
  v1::EdgeExchange message;
  bool opened = false;
  // The round is inside the box: try each, the likeliest first (the round
  // the node waits for, then the next; 0 too, in case a message carries no
  // round: the node refuses what does not belong to a round).
  std::vector<int> order = {node.sub->round(), node.sub->round() + 1};
  for (int r = 0; r <= params_.rounds(); ++r) {
    if (r != order[0] && r != order[1]) order.push_back(r);
  }
  for (int r : order) {
    if (opened) break;
    if (r < 0 || r > params_.rounds()) continue;
    absl::StatusOr<std::string> plain = key->second.Open(
        ExchangeContext(campaign_, static_cast<uint32_t>(r), m.from_node(),
                        m.to_node()),
        box);
    if (!plain.ok()) continue;
    opened = true;
    if (!message.ParseFromString(*plain)) {
      return Reject(m, "it does not parse as an EdgeExchange");
    }
    if (message.round() != static_cast<uint32_t>(r)) {
      return Reject(m, absl::StrCat("it says round ", message.round(),
                                    " but was sealed for round ", r));
    }
  }
  if (!opened) {
    return Reject(m, "it does not open (tampered, forged, or sealed for "
                     "another campaign, round or pair of nodes)");
  }
  absl::Status s = node.sub->Deliver(m.from_node(), message);
  if (!s.ok()) return Reject(m, s.message());
  counters_->messages_received.fetch_add(1);
  ++received_;
}

bool ExchangeRunner::Exchange::FetchAll(bool* progress) {
  while (!Stopping()) {
    absl::StatusOr<std::vector<v1::SealedMessage>> got =
        transport_->Fetch(campaign_, cursor_, options_.fetch_batch);
    if (!got.ok()) {
      counters_->transport_errors.fetch_add(1);
      return false;
    }
    for (const v1::SealedMessage& m : *got) {
      cursor_ = std::max<uint64_t>(cursor_, m.sequence());
      Deliver(m);
    }
    if (!got->empty()) *progress = true;
    if (got->size() < options_.fetch_batch) break;
  }
  return true;
}

bool ExchangeRunner::Exchange::TimeOut(absl::Time now) {
  bool progress = false;
  for (Node& node : nodes_) {
    if (node.done || now - node.waiting_since < round_timeout_) continue;
    const std::vector<uint32_t> waiting = node.sub->Waiting();
    for (uint32_t u : waiting) {
      node.sub->MarkAbsent(u);
      counters_->neighbours_timed_out.fetch_add(1);
      ++timed_out_;
    }
    node.waiting_since = now;
    progress = progress || !waiting.empty();
  }
  return progress;
}

bool ExchangeRunner::Exchange::Finished() const {
  if (!outbox_.empty() || !reports_.empty()) return false;
  for (const Node& node : nodes_) {
    if (!node.done || !node.answered) return false;
  }
  return true;
}

void ExchangeRunner::Exchange::Run() {
  backoff_ = options_.retry_initial;
  const absl::Time start = absl::Now();
  if (!Setup()) return;  // stopped
  Log(absl::StrCat(nodes_.size(), " nodes take part (approach ",
                   static_cast<int>(params_.approach), ", ", params_.rounds(),
                   " rounds); features and keys ready after ",
                   absl::FormatDuration(absl::Now() - start)));
  while (!Stopping() && !Finished()) {
    bool progress = false;
    const absl::Time now = absl::Now();
    for (Node& node : nodes_) progress |= Drive(node, now);
    progress |= AnswerDone();
    progress |= FlushOutbox();
    progress |= FlushReports();
    if (!nodes_.empty() && absl::Now() >= next_transport_) {
      CallOutcome(FetchAll(&progress));
    }
    if (healthy_) progress |= TimeOut(absl::Now());
    if (!progress) Sleep(options_.poll_interval);
  }
  uint64_t done = 0;
  for (const Node& node : nodes_) done += node.done ? 1 : 0;
  Log(absl::StrCat(Stopping() ? "stopped" : "finished", " after ",
                   absl::FormatDuration(absl::Now() - start), ": ", done, "/",
                   nodes_.size(), " nodes done, ", sent_, " messages sent, ",
                   received_, " received, ", rejected_, " refused, ",
                   timed_out_, " neighbours timed out"));
}

// --- the runner ---------------------------------------------------------------

ExchangeRunner::ExchangeRunner(AgentShard* shard, ExchangeTransport* transport,
                               ExchangeOptions options)
    : shard_(shard), transport_(transport), options_(std::move(options)) {}

ExchangeRunner::~ExchangeRunner() { Stop(); }

void ExchangeRunner::Log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "ldpgraph-agent: " << line << std::endl;
  }
}

absl::Status ExchangeRunner::Start(const v1::Task& task) {
  if (task.spec().kind() != v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    return absl::InvalidArgumentError(absl::StrCat(
        "campaign ", task.campaign_id(), " is not neighbour substitution"));
  }
  absl::MutexLock lock(&mu_);
  if (stopping_.load()) {
    return absl::FailedPreconditionError("the exchange runner is stopping");
  }
  ReapLocked();
  auto it = exchanges_.find(task.campaign_id());
  if (it != exchanges_.end()) {
    if (!it->second->finished.load()) return absl::OkStatus();  // running
    retired_.push_back(std::move(it->second));
    exchanges_.erase(it);
    ReapLocked();
  }
  auto entry = std::make_unique<Entry>();
  entry->exchange = std::make_shared<Exchange>(
      task, shard_, transport_, options_, &counters_, &stopping_,
      [this](const std::string& line) { Log(line); });
  Entry* e = entry.get();
  counters_.exchanges_started.fetch_add(1);
  e->thread = std::thread([this, e] {
    e->exchange->Run();
    counters_.exchanges_finished.fetch_add(1);
    e->finished.store(true);
  });
  exchanges_.emplace(task.campaign_id(), std::move(entry));
  return absl::OkStatus();
}

void ExchangeRunner::ReapLocked() {
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->finished.load()) {
      if ((*it)->thread.joinable()) (*it)->thread.join();
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
}

void ExchangeRunner::Stop() {
  stopping_.store(true);
  std::vector<std::thread*> threads;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, e] : exchanges_) threads.push_back(&e->thread);
    for (auto& e : retired_) threads.push_back(&e->thread);
  }
  // Entries are never erased once stopping_ is set (Start refuses), so the
  // pointers stay valid.
  for (std::thread* t : threads) {
    if (t->joinable()) t->join();
  }
}

int ExchangeRunner::running() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, e] : exchanges_) n += e->finished.load() ? 0 : 1;
  for (const auto& e : retired_) n += e->finished.load() ? 0 : 1;
  return n;
}

std::map<uint32_t, ExchangeNodeOutcome> ExchangeRunner::Outcomes(
    const std::string& campaign) const {
  absl::MutexLock lock(&mu_);
  auto it = exchanges_.find(campaign);
  if (it == exchanges_.end()) return {};
  return it->second->exchange->Outcomes();
}

bool ExchangeRunner::WaitIdle(absl::Duration timeout) const {
  const absl::Time until = absl::Now() + timeout;
  while (running() > 0) {
    if (absl::Now() >= until) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

}  // namespace ldpgraph::agent

// Tests for the agent host's side of neighbour substitution: several agent
// shards (hosts) run their exchanges through an in-memory fake of the
// curator's relay, key directory and report path. Checked: every node
// reports a valid list whose size is its degree minus its unresolved
// drops; the relay holds no feature report in clear; a repeated question
// spends nothing and repeats its answer; refusing nodes abstain so nobody
// waits; silent neighbours time out; forged, tampered and misaddressed
// messages are refused without breaking the exchange; boxes longer than
// the relay's bound travel split; the exchange randomness is a function of
// the node's key and the campaign.
#include "client/edge_exchange.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/hex.h"
#include "common/testing/temp_folder.h"
#include "common/wire/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::agent {
namespace {

using Role = NodeAgent::SubstitutionStart::Role;

constexpr uint32_t kNodes = 24;
constexpr uint32_t kDim = 8;

// A ring with chords: node v is adjacent to v +- 1, v +- 2 and v + 12, so
// every node has degree 5 and many 2-hop candidates.
std::vector<std::vector<uint32_t>> Adjacency() {
  std::vector<std::set<uint32_t>> adj(kNodes);
  auto link = [&](uint32_t a, uint32_t b) {
    adj[a].insert(b);
    adj[b].insert(a);
  };
  for (uint32_t v = 0; v < kNodes; ++v) {
    link(v, (v + 1) % kNodes);
    link(v, (v + 2) % kNodes);
    if (v < kNodes / 2) link(v, v + kNodes / 2);
  }
  std::vector<std::vector<uint32_t>> out(kNodes);
  for (uint32_t v = 0; v < kNodes; ++v) out[v].assign(adj[v].begin(), adj[v].end());
  return out;
}

NodeRecord Record(uint32_t v, const std::vector<std::vector<uint32_t>>& adj) {
  NodeRecord r;
  r.node = v;
  std::vector<double> row(kDim);
  for (uint32_t j = 0; j < kDim; ++j) row[j] = ((v * 7 + j * 3) % 10) / 10.0;
  r.features = NodeFeatures::FromDense(row);
  r.neighbours = adj[v];
  return r;
}

v1::MechanismSpec FeatureSpec() {
  v1::MechanismSpec f;
  f.set_kind(v1::MECHANISM_KIND_MULTIBIT);
  f.set_epsilon(2.0);
  f.set_dimension(kDim);
  f.set_sampled(4);
  f.set_range_low(0);
  f.set_range_high(1);
  return f;
}

v1::Task Task(const std::string& campaign, uint32_t approach,
              uint32_t timeout_ms = 60000) {
  v1::Task t;
  t.set_campaign_id(campaign);
  t.set_attribute(v1::ATTRIBUTE_EDGES);
  v1::MechanismSpec* w = t.mutable_spec();
  w->set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
  w->set_epsilon(1.0);
  w->set_dimension(kNodes);
  v1::SubstitutionSpec* s = w->mutable_substitution();
  s->set_approach(approach);
  s->set_similarity("cosine");
  s->set_top_k(3);
  s->set_max_dummies(2);
  s->set_dummy_mean(0.5);
  s->set_dummy_std(0.3);
  s->set_round_timeout_ms(timeout_ms);
  *s->mutable_features() = FeatureSpec();
  for (uint32_t v = 0; v < kNodes; ++v) t.add_node_ids(v);
  return t;
}

// The curator's side, in memory: the key directory, the relay (with its
// 65536-byte bound) and the stored reports.
class FakeCurator {
 public:
  void PutKey(uint32_t node, std::string key) {
    absl::MutexLock lock(&mu_);
    keys_[node] = std::move(key);
  }
  std::vector<std::pair<uint32_t, std::string>> Keys(
      const std::vector<uint32_t>& nodes) {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<uint32_t, std::string>> out;
    for (uint32_t v : nodes) {
      if (auto it = keys_.find(v); it != keys_.end()) out.emplace_back(v, it->second);
    }
    return out;
  }
  absl::Status Relay(const std::vector<v1::SealedMessage>& messages) {
    absl::MutexLock lock(&mu_);
    if (messages.size() > 4096) return absl::InvalidArgumentError("batch");
    for (const auto& m : messages) {
      if (m.ciphertext().size() > 65536) {
        return absl::InvalidArgumentError("ciphertext too long");
      }
    }
    for (v1::SealedMessage m : messages) {
      const bool tamper = m.to_node() == tamper_to;
      m.set_sequence(++sequence_);
      sealed_.push_back(m);
      if (tamper) {
        // A copy with one bit flipped, right behind the genuine one.
        std::string c = m.ciphertext();
        c[c.size() / 2] = static_cast<char>(c[c.size() / 2] ^ 0x10);
        m.set_ciphertext(c);
        m.set_sequence(++sequence_);
        sealed_.push_back(std::move(m));
        ++tampered;
      }
    }
    return absl::OkStatus();
  }
  // Messages to this node are followed by a tampered copy.
  std::atomic<int64_t> tamper_to{-1};
  std::atomic<int> tampered{0};
  std::vector<v1::SealedMessage> Fetch(const std::set<uint32_t>& to,
                                       const std::string& campaign,
                                       uint64_t after, uint32_t max) {
    absl::MutexLock lock(&mu_);
    std::vector<v1::SealedMessage> out;
    for (const auto& m : sealed_) {
      if (m.sequence() > after && m.campaign_id() == campaign &&
          to.contains(m.to_node())) {
        out.push_back(m);
        if (out.size() >= max) break;
      }
    }
    return out;
  }
  void Report(const std::vector<v1::Report>& reports) {
    absl::MutexLock lock(&mu_);
    for (const auto& r : reports) {
      auto [it, added] =
          reports_.emplace(std::make_pair(r.campaign_id(), r.node_id()), r);
      if (!added) {
        EXPECT_EQ(it->second.SerializeAsString(), r.SerializeAsString())
            << "node " << r.node_id() << " sent two different answers";
      }
    }
  }
  std::map<uint32_t, v1::Report> Reports(const std::string& campaign) {
    absl::MutexLock lock(&mu_);
    std::map<uint32_t, v1::Report> out;
    for (const auto& [k, r] : reports_) {
      if (k.first == campaign) out[k.second] = r;
    }
    return out;
  }
  std::vector<v1::SealedMessage> Sealed() {
    absl::MutexLock lock(&mu_);
    return sealed_;
  }
  // Fails every call while set (the curator is down).
  std::atomic<bool> down{false};
  // Set: the curator goes down right after the next relay is stored, so an
  // outage lands mid-exchange however fast the exchange runs.
  std::atomic<bool> down_after_relay{false};

 private:
  absl::Mutex mu_;
  std::map<uint32_t, std::string> keys_;
  std::vector<v1::SealedMessage> sealed_;
  uint64_t sequence_ = 0;
  std::map<std::pair<std::string, uint32_t>, v1::Report> reports_;
};

// One host's session with the fake curator.
class FakeTransport : public ExchangeTransport {
 public:
  FakeTransport(FakeCurator* curator, std::set<uint32_t> nodes)
      : curator_(curator), nodes_(std::move(nodes)) {}
  absl::StatusOr<std::vector<std::pair<uint32_t, std::string>>> PublicKeys(
      const std::vector<uint32_t>& nodes) override {
    if (curator_->down || dead) return absl::UnavailableError("down");
    return curator_->Keys(nodes);
  }
  absl::Status Relay(const std::vector<v1::SealedMessage>& messages) override {
    if (curator_->down || dead) return absl::UnavailableError("down");
    if (relay_budget >= 0) {
      relay_budget -= static_cast<int64_t>(messages.size());
      if (relay_budget < 0) {
        dead = true;  // the host "crashes" before this batch is stored
        return absl::UnavailableError("dead");
      }
    }
    for (const auto& m : messages) {
      if (!nodes_.contains(m.from_node())) {
        return absl::PermissionDeniedError("not this session's node");
      }
    }
    absl::Status s = curator_->Relay(messages);
    if (s.ok() && curator_->down_after_relay.exchange(false)) {
      curator_->down = true;
    }
    return s;
  }
  absl::StatusOr<std::vector<v1::SealedMessage>> Fetch(
      const std::string& campaign, uint64_t after, uint32_t max) override {
    if (curator_->down || dead) return absl::UnavailableError("down");
    return curator_->Fetch(nodes_, campaign, after, max);
  }
  absl::Status Report(std::vector<v1::Report> reports) override {
    if (curator_->down || dead) return absl::UnavailableError("down");
    curator_->Report(reports);
    return absl::OkStatus();
  }
  // Messages the host may still relay before it "dies" (-1: no limit).
  std::atomic<int64_t> relay_budget{-1};
  std::atomic<bool> dead{false};

 private:
  FakeCurator* curator_;
  std::set<uint32_t> nodes_;
};

// One agent host: a shard of the nodes, its transport and runner.
struct Host {
  std::unique_ptr<AgentShard> shard;
  std::unique_ptr<FakeTransport> transport;
  std::unique_ptr<ExchangeRunner> runner;
};

class ExchangeTest : public ::testing::Test {
 protected:
  // Hosts over [0, 8), [8, 16), [16, 24), each with `policy`.
  void StartHosts(AgentPolicy policy = {}, ExchangeOptions options = {},
                  int hosts = 3) {
    if (policy.caps.total == 0) policy.caps.total = 10;
    options.poll_interval = absl::Milliseconds(5);
    options.log = [](const std::string&) {};
    const auto adj = Adjacency();
    for (int h = 0; h < hosts; ++h) {
      std::vector<NodeRecord> records;
      std::set<uint32_t> nodes;
      for (uint32_t v = h * 8; v < (h + 1) * 8u; ++v) {
        records.push_back(Record(v, adj));
        nodes.insert(v);
      }
      auto shard = AgentShard::Create(std::move(records), policy, /*seed=*/7,
                                      absl::StrCat(dir_.path(), "/host", h));
      ASSERT_TRUE(shard.ok()) << shard.status();
      Host host;
      host.shard = *std::move(shard);
      for (uint32_t v : nodes) {
        curator_.PutKey(v, std::string(host.shard->key_pair(v)->public_key()));
      }
      host.transport = std::make_unique<FakeTransport>(&curator_, nodes);
      host.runner = std::make_unique<ExchangeRunner>(
          host.shard.get(), host.transport.get(), options);
      hosts_.push_back(std::move(host));
    }
  }
  void RunAll(const v1::Task& task, absl::Duration timeout = absl::Seconds(60)) {
    for (Host& h : hosts_) ASSERT_TRUE(h.runner->Start(task).ok());
    for (Host& h : hosts_) ASSERT_TRUE(h.runner->WaitIdle(timeout));
  }
  void RunAllButWait(const v1::Task& task) {
    for (Host& h : hosts_) ASSERT_TRUE(h.runner->Start(task).ok());
  }
  static bool PollDead(const FakeTransport& t) {
    for (int i = 0; i < 3000 && !t.dead; ++i) absl::SleepFor(absl::Milliseconds(10));
    return t.dead;
  }
  std::map<uint32_t, ExchangeNodeOutcome> Outcomes(const std::string& c) {
    std::map<uint32_t, ExchangeNodeOutcome> all;
    for (Host& h : hosts_) all.merge(h.runner->Outcomes(c));
    return all;
  }
  uint64_t Sum(std::atomic<uint64_t> ExchangeCounters::*field) {
    uint64_t n = 0;
    for (Host& h : hosts_) n += (h.runner->counters().*field).load();
    return n;
  }
  double Spent(uint32_t v, const std::string& attribute) {
    return *hosts_[v / 8].shard->spent(v, attribute);
  }

  TempFolder dir_;
  FakeCurator curator_;
  std::vector<Host> hosts_;
};

TEST(ExchangeContextTest, NamesCampaignRoundAndPair) {
  EXPECT_EQ(ExchangeContext("c3", 2, 10, 7), "edge-exchange|c3|2|10|7");
}

// The stream of a fixed key and campaign, as the exchange draws it: a host
// that restarts mid-exchange must replay the very same draws, so the
// construction (HKDF of the key and campaign, ChaCha20) never changes.
TEST(ExchangeRandomTest, KnownAnswer) {
  auto key = crypto::KeyPair::FromPrivate(*FromHex(
      "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"));
  ASSERT_TRUE(key.ok()) << key.status();
  auto r = ExchangeRandomSource(*key, "campaign-1");
  ASSERT_TRUE(r.ok()) << r.status();
  std::string words;
  for (int i = 0; i < 600; ++i) {
    const uint64_t w = (*r)->Next64();
    // The first words and one from the second 4 KiB block.
    if (i < 3 || i == 599) {
      absl::StrAppend(&words, absl::Hex(w, absl::kZeroPad16), " ");
    }
  }
  EXPECT_EQ(words,
            "d746390432611ec9 590b104efc1bf6a3 f664c7812bb2c375 "
            "8999d13beef77ea4 ");
}

TEST(ExchangeRandomTest, AFunctionOfKeyAndCampaign) {
  auto a = crypto::KeyPair::Generate();
  auto b = crypto::KeyPair::Generate();
  ASSERT_TRUE(a.ok() && b.ok());
  auto draw = [](const crypto::KeyPair& k, const std::string& c) {
    auto r = ExchangeRandomSource(k, c);
    EXPECT_TRUE(r.ok());
    EXPECT_TRUE((*r)->is_secure());
    std::vector<uint64_t> out;
    for (int i = 0; i < 1000; ++i) out.push_back((*r)->Next64());
    return out;
  };
  EXPECT_EQ(draw(*a, "c1"), draw(*a, "c1"));
  EXPECT_NE(draw(*a, "c1"), draw(*a, "c2"));
  EXPECT_NE(draw(*a, "c1"), draw(*b, "c1"));
  // Roughly uniform bits.
  int ones = 0;
  for (uint64_t w : draw(*a, "c9")) ones += __builtin_popcountll(w);
  EXPECT_NEAR(ones / 64000.0, 0.5, 0.01);
}

TEST_F(ExchangeTest, EveryNodeReportsItsSubstitutedList) {
  StartHosts();
  const auto adj = Adjacency();
  for (uint32_t approach : {1u, 2u}) {
    SCOPED_TRACE(absl::StrCat("approach ", approach));
    const std::string c = absl::StrCat("c", approach);
    RunAll(Task(c, approach));
    const auto reports = curator_.Reports(c);
    ASSERT_EQ(reports.size(), kNodes);
    const auto outcomes = Outcomes(c);
    ASSERT_EQ(outcomes.size(), kNodes);
    uint64_t dropped = 0, substituted = 0;
    for (uint32_t v = 0; v < kNodes; ++v) {
      const v1::Report& r = reports.at(v);
      ASSERT_TRUE(r.has_edges()) << r.ShortDebugString();
      EXPECT_TRUE(wire::ValidateEdgeReport(r.edges(), Task(c, approach).spec(), v)
                      .ok());
      const ExchangeNodeOutcome& o = outcomes.at(v);
      EXPECT_EQ(o.role, Role::kTakePart);
      EXPECT_TRUE(o.done);
      EXPECT_FALSE(o.abstained);
      EXPECT_EQ(o.stats.absent, 0u) << "node " << v;
      EXPECT_EQ(o.stats.degree, adj[v].size());
      // The degree is kept but for the drops nothing resolved.
      EXPECT_EQ(static_cast<uint32_t>(r.edges().neighbours_size()),
                o.stats.degree - o.stats.unresolved)
          << "node " << v;
      EXPECT_THAT(std::vector<uint32_t>(r.edges().neighbours().begin(),
                                        r.edges().neighbours().end()),
                  ::testing::ElementsAreArray(o.result));
      dropped += o.stats.dropped;
      substituted += o.stats.substituted;
    }
    // q = 1/(1+e) of 120 neighbour slots: some drops, most substituted.
    EXPECT_GT(dropped, 0u);
    EXPECT_GT(substituted, 0u);
  }
  // Each node spent eps_x once (both campaigns share the feature question)
  // and eps_e per campaign (two questions: approaches 1 and 2).
  for (uint32_t v = 0; v < kNodes; ++v) {
    EXPECT_DOUBLE_EQ(Spent(v, "features"), 2.0);
    EXPECT_DOUBLE_EQ(Spent(v, "edges"), 2.0);
  }
  EXPECT_EQ(Sum(&ExchangeCounters::messages_rejected), 0u);
  EXPECT_EQ(Sum(&ExchangeCounters::neighbours_timed_out), 0u);
  EXPECT_GT(Sum(&ExchangeCounters::messages_received), 0u);
}

// The relay sees ciphertexts only: no node's feature report, as the
// curator would receive it, appears in any.
TEST_F(ExchangeTest, TheRelayHoldsNoFeatureReportInClear) {
  StartHosts();
  RunAll(Task("c1", 1));
  const auto sealed = curator_.Sealed();
  ASSERT_FALSE(sealed.empty());
  const QueryKey features = wire::WireQueryKey(v1::ATTRIBUTE_FEATURES, FeatureSpec());
  for (uint32_t v = 0; v < kNodes; ++v) {
    auto memo = hosts_[v / 8].shard->agent(v)->budget().Lookup(features);
    ASSERT_TRUE(memo.has_value());
    v1::Report body;
    ASSERT_TRUE(body.ParseFromString(memo->answer));
    const std::string clear = body.features().SerializeAsString();
    ASSERT_GE(clear.size(), 4u);
    for (const auto& m : sealed) {
      EXPECT_FALSE(absl::StrContains(m.ciphertext(), clear))
          << "node " << v << "'s report in a relayed message";
    }
  }
}

TEST_F(ExchangeTest, ARepeatedQuestionSpendsNothingAndRepeatsItsAnswer) {
  StartHosts();
  RunAll(Task("c1", 1));
  RunAll(Task("c2", 1));
  const auto first = curator_.Reports("c1");
  const auto second = curator_.Reports("c2");
  ASSERT_EQ(second.size(), kNodes);
  for (uint32_t v = 0; v < kNodes; ++v) {
    EXPECT_EQ(first.at(v).edges().SerializeAsString(),
              second.at(v).edges().SerializeAsString());
    EXPECT_EQ(Outcomes("c2").at(v).role, Role::kMemo);
    EXPECT_DOUBLE_EQ(Spent(v, "edges"), 1.0);
    EXPECT_DOUBLE_EQ(Spent(v, "features"), 2.0);
  }
  // The memo hits still took part: every node finished its exchange.
  for (const auto& [v, o] : Outcomes("c2")) EXPECT_TRUE(o.done) << v;
  uint64_t memo_hits = 0;
  for (Host& h : hosts_) memo_hits += h.shard->counters().memo_hits;
  EXPECT_GE(memo_hits, kNodes);
}

// A task the runner is already running is ignored; a finished one starts
// again, answered from the memo.
TEST_F(ExchangeTest, AResentTaskDoesNotStartASecondExchange) {
  StartHosts();
  const v1::Task task = Task("c1", 1);
  for (Host& h : hosts_) {
    ASSERT_TRUE(h.runner->Start(task).ok());
    ASSERT_TRUE(h.runner->Start(task).ok());
  }
  for (Host& h : hosts_) ASSERT_TRUE(h.runner->WaitIdle(absl::Seconds(60)));
  EXPECT_EQ(Sum(&ExchangeCounters::exchanges_started), 3u);
  EXPECT_EQ(curator_.Reports("c1").size(), kNodes);
  v1::Task other = task;
  other.mutable_spec()->set_kind(v1::MECHANISM_KIND_EDGE_RR);
  EXPECT_EQ(hosts_[0].runner->Start(other).code(),
            absl::StatusCode::kInvalidArgument);
}

// Nodes whose budget refuses send their refusal and abstain: the others
// stop waiting for them at once (the round timeout here is a minute).
TEST_F(ExchangeTest, RefusingNodesAbstainAndNobodyWaits) {
  StartHosts();
  // Host 2's nodes cannot afford the campaign (eps_x 2 + eps_e 1 > 2.5).
  hosts_[2].runner.reset();
  {
    std::vector<NodeRecord> records;
    std::set<uint32_t> nodes;
    const auto adj = Adjacency();
    for (uint32_t v = 16; v < 24; ++v) {
      records.push_back(Record(v, adj));
      nodes.insert(v);
    }
    AgentPolicy poor;
    poor.caps.total = 2.5;
    hosts_[2].shard.reset();
    auto shard = AgentShard::Create(std::move(records), poor, 7,
                                    absl::StrCat(dir_.path(), "/host2"));
    ASSERT_TRUE(shard.ok());
    hosts_[2].shard = *std::move(shard);
    ExchangeOptions o;
    o.poll_interval = absl::Milliseconds(5);
    o.log = [](const std::string&) {};
    hosts_[2].runner = std::make_unique<ExchangeRunner>(
        hosts_[2].shard.get(), hosts_[2].transport.get(), o);
  }
  const absl::Time start = absl::Now();
  RunAll(Task("c1", 1, /*timeout_ms=*/60000));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  const auto reports = curator_.Reports("c1");
  ASSERT_EQ(reports.size(), kNodes);
  const auto outcomes = Outcomes("c1");
  for (uint32_t v = 0; v < kNodes; ++v) {
    if (v >= 16) {
      ASSERT_TRUE(reports.at(v).has_refusal());
      EXPECT_EQ(reports.at(v).refusal().reason(),
                v1::REFUSAL_REASON_BUDGET_EXHAUSTED);
      EXPECT_TRUE(outcomes.at(v).abstained);
      EXPECT_DOUBLE_EQ(Spent(v, "features") + Spent(v, "edges"), 0.0);
    } else {
      EXPECT_TRUE(reports.at(v).has_edges());
      // An abstaining neighbour is absent: kept if not dropped, but never
      // chosen as a substitute (nobody has its features).
      const std::vector<uint32_t> adj = Adjacency()[v];
      for (uint32_t u : reports.at(v).edges().neighbours()) {
        if (u >= 16) {
          EXPECT_TRUE(std::binary_search(adj.begin(), adj.end(), u))
              << "abstaining node " << u << " substituted into node " << v;
        }
      }
    }
  }
  EXPECT_EQ(Sum(&ExchangeCounters::neighbours_timed_out), 0u);
}

// A host that never runs: its nodes' neighbours time them out and finish.
TEST_F(ExchangeTest, SilentNeighboursTimeOut) {
  StartHosts();
  const v1::Task task = Task("c1", 2, /*timeout_ms=*/300);
  for (int h = 0; h < 2; ++h) ASSERT_TRUE(hosts_[h].runner->Start(task).ok());
  for (int h = 0; h < 2; ++h) {
    ASSERT_TRUE(hosts_[h].runner->WaitIdle(absl::Seconds(60)));
  }
  EXPECT_EQ(curator_.Reports("c1").size(), 16u);
  EXPECT_GT(Sum(&ExchangeCounters::neighbours_timed_out), 0u);
  for (const auto& [v, o] : Outcomes("c1")) {
    EXPECT_TRUE(o.done);
    if (v == 0 || v == 15) {
      EXPECT_GT(o.stats.absent, 0u) << v;
    }
  }
}

// Forged and tampered messages are refused by their recipient, counted,
// and the exchange completes.
TEST_F(ExchangeTest, ForgedAndTamperedMessagesAreRefused) {
  StartHosts();
  auto mallory = crypto::KeyPair::Generate();
  ASSERT_TRUE(mallory.ok());
  const auto adj = Adjacency();
  // Node 1 "from" node 0 (a neighbour): garbage, a box under Mallory's key,
  // a box of the right pair but another campaign; and one from node 9, not
  // a neighbour of node 1.
  std::vector<v1::SealedMessage> forged;
  auto add = [&](uint32_t from, uint32_t to, std::string c) {
    v1::SealedMessage m;
    m.set_campaign_id("c1");
    m.set_from_node(from);
    m.set_to_node(to);
    m.set_ciphertext(std::move(c));
    forged.push_back(std::move(m));
  };
  add(0, 1, std::string(200, 'x'));
  v1::EdgeExchange plain;
  plain.set_round(1);
  plain.set_abstain(true);
  auto by_mallory = crypto::Seal(*mallory, hosts_[0].shard->key_pair(1)->public_key(),
                                 ExchangeContext("c1", 1, 0, 1),
                                 plain.SerializeAsString());
  ASSERT_TRUE(by_mallory.ok());
  add(0, 1, *by_mallory);
  auto other_campaign =
      crypto::Seal(*hosts_[0].shard->key_pair(0),
                   hosts_[0].shard->key_pair(1)->public_key(),
                   ExchangeContext("c0", 1, 0, 1), plain.SerializeAsString());
  ASSERT_TRUE(other_campaign.ok());
  add(0, 1, *other_campaign);
  add(9, 1, *other_campaign);
  ASSERT_TRUE(curator_.Relay(forged).ok());
  // Every real message to node 3 is followed by a tampered copy: node 3
  // refuses the copies and keeps the genuine ones.
  curator_.tamper_to = 3;
  RunAll(Task("c1", 1));
  ASSERT_EQ(curator_.Reports("c1").size(), kNodes);
  EXPECT_GT(curator_.tampered.load(), 0);
  EXPECT_GE(Sum(&ExchangeCounters::messages_rejected),
            4u + static_cast<uint64_t>(curator_.tampered.load()));
  EXPECT_EQ(Outcomes("c1").at(3).stats.absent, 0u);
  const auto outcomes = Outcomes("c1");
  EXPECT_EQ(outcomes.at(1).stats.absent, 0u);
  EXPECT_TRUE(curator_.Reports("c1").at(1).has_edges());
  EXPECT_TRUE(curator_.Reports("c1").at(3).has_edges());
}

// Boxes longer than the relay's bound are split and put back together.
TEST_F(ExchangeTest, LongMessagesTravelSplit) {
  ExchangeOptions o;
  o.max_ciphertext = 64;  // every box is longer
  StartHosts({}, o);
  RunAll(Task("c1", 1));
  ASSERT_EQ(curator_.Reports("c1").size(), kNodes);
  for (const auto& m : curator_.Sealed()) EXPECT_LE(m.ciphertext().size(), 64u);
  EXPECT_GT(Sum(&ExchangeCounters::messages_sent),
            Sum(&ExchangeCounters::messages_received));
  EXPECT_EQ(Sum(&ExchangeCounters::messages_rejected), 0u);
  for (const auto& [v, out] : Outcomes("c1")) EXPECT_EQ(out.stats.absent, 0u) << v;
}

// The curator goes away for a while: nothing is lost and nobody is timed
// out for its silence.
TEST_F(ExchangeTest, ACuratorOutageIsWaitedOut) {
  ExchangeOptions o;
  o.retry_initial = absl::Milliseconds(10);
  o.retry_max = absl::Milliseconds(50);
  StartHosts({}, o);
  const v1::Task task = Task("c1", 1, /*timeout_ms=*/400);
  curator_.down_after_relay = true;
  for (Host& h : hosts_) ASSERT_TRUE(h.runner->Start(task).ok());
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (!curator_.down && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(curator_.down) << "no relay reached the curator";
  absl::SleepFor(absl::Milliseconds(1500));
  curator_.down = false;
  for (Host& h : hosts_) ASSERT_TRUE(h.runner->WaitIdle(absl::Seconds(60)));
  EXPECT_EQ(curator_.Reports("c1").size(), kNodes);
  EXPECT_GT(Sum(&ExchangeCounters::transport_errors), 0u);
  EXPECT_EQ(Sum(&ExchangeCounters::neighbours_timed_out), 0u);
}

// A host that dies mid-exchange and restarts (a new shard and runner on the
// same state directory) sends exactly what it sent before, so its
// neighbours see repeats, not conflicts, and every node finishes.
TEST_F(ExchangeTest, ARestartedHostReplaysItsPart) {
  StartHosts();
  const v1::Task task = Task("c1", 1);
  // Host 0 relays its round-1 messages (40) and some of round 2, then dies.
  hosts_[0].transport->relay_budget = 60;
  RunAllButWait(task);
  ASSERT_TRUE(PollDead(*hosts_[0].transport));
  hosts_[0].runner.reset();  // stops its exchange
  hosts_[0].shard.reset();
  {
    const auto adj = Adjacency();
    std::vector<NodeRecord> records;
    for (uint32_t v = 0; v < 8; ++v) records.push_back(Record(v, adj));
    AgentPolicy p;
    p.caps.total = 10;
    auto shard = AgentShard::Create(std::move(records), p, 7,
                                    absl::StrCat(dir_.path(), "/host0"));
    ASSERT_TRUE(shard.ok());
    hosts_[0].shard = *std::move(shard);
    // The same keys after the restart.
    for (uint32_t v = 0; v < 8; ++v) {
      EXPECT_EQ(curator_.Keys({v})[0].second,
                hosts_[0].shard->key_pair(v)->public_key());
    }
    hosts_[0].transport = std::make_unique<FakeTransport>(
        &curator_, std::set<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
    ExchangeOptions o;
    o.poll_interval = absl::Milliseconds(5);
    o.log = [](const std::string&) {};
    hosts_[0].runner = std::make_unique<ExchangeRunner>(
        hosts_[0].shard.get(), hosts_[0].transport.get(), o);
    ASSERT_TRUE(hosts_[0].runner->Start(task).ok());
  }
  for (Host& h : hosts_) ASSERT_TRUE(h.runner->WaitIdle(absl::Seconds(60)));
  ASSERT_EQ(curator_.Reports("c1").size(), kNodes);
  // Its neighbours saw the replayed messages as repeats, not conflicts.
  EXPECT_EQ(Sum(&ExchangeCounters::messages_rejected), 0u);
  EXPECT_EQ(Sum(&ExchangeCounters::neighbours_timed_out), 0u);
  for (uint32_t v = 0; v < 8; ++v) {
    EXPECT_DOUBLE_EQ(Spent(v, "features"), 2.0);
    EXPECT_DOUBLE_EQ(Spent(v, "edges"), 1.0);
  }
}

}  // namespace
}  // namespace ldpgraph::agent

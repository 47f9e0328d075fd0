// Tests for the agent: answering tasks through the budget and its memo,
// refusals, seeded reproducibility, the shard's durable memo across
// restarts and commit failures, and loading a shard from a dataset.
#include "client/agent.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cli_args.h"
#include "common/dataset/device_index.h"
#include "common/dataset/feature_schema.h"
#include "common/dataset/generator.h"
#include "common/dataset/prepare.h"
#include "common/edges/blink.h"
#include "common/files.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"
#include "common/testing/generated_datasets.h"
#include "common/testing/shared_datasets.h"
#include "common/testing/temp_folder.h"
#include "common/wire/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kNodes = 10;  // the graph the records come from

NodeRecord Record(uint32_t node) {
  NodeRecord r;
  r.node = node;
  r.features = NodeFeatures::FromDense({0.1 * (node % 10), 0.5, 0.9, 0.2});
  r.label = static_cast<int>(node % 3);
  for (uint32_t u : {1u, 4u, 8u}) {
    if (u != node) r.neighbours.push_back(u);
  }
  return r;
}

AgentPolicy Policy(double total = 10.0,
                   std::map<std::string, double> per = {}) {
  AgentPolicy p;
  p.caps = BudgetCaps{total, std::move(per)};
  return p;
}

v1::MechanismSpec FeatureSpec(double eps, uint32_t d = 4,
                              v1::MechanismKind kind = v1::MECHANISM_KIND_HDS) {
  v1::MechanismSpec s;
  s.set_kind(kind);
  s.set_epsilon(eps);
  s.set_dimension(d);
  s.set_range_low(0.0);
  s.set_range_high(1.0);
  return s;
}

v1::MechanismSpec LabelSpec(double eps, uint32_t classes = 3) {
  v1::MechanismSpec s;
  s.set_kind(v1::MECHANISM_KIND_LABEL_RR);
  s.set_epsilon(eps);
  s.set_dimension(classes);
  return s;
}

v1::MechanismSpec EdgeSpec(double eps, uint32_t n = kNodes) {
  v1::MechanismSpec s;
  s.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  s.set_epsilon(eps);
  s.set_dimension(n);
  return s;
}

v1::MechanismSpec BlinkSpec(double eps, double delta = 0.1,
                            uint32_t n = kNodes) {
  v1::MechanismSpec s;
  s.set_kind(v1::MECHANISM_KIND_EDGE_BLINK);
  s.set_epsilon(eps);
  s.set_dimension(n);
  s.mutable_blink()->set_degree_share(delta);
  return s;
}

v1::Task MakeTask(const std::string& campaign, v1::Attribute attribute,
                  const v1::MechanismSpec& spec,
                  std::vector<uint32_t> nodes = {}) {
  v1::Task t;
  t.set_campaign_id(campaign);
  t.set_attribute(attribute);
  *t.mutable_spec() = spec;
  t.mutable_node_ids()->Assign(nodes.begin(), nodes.end());
  return t;
}

v1::Task FeatureTask(const std::string& campaign, double eps,
                     std::vector<uint32_t> nodes = {}) {
  return MakeTask(campaign, v1::ATTRIBUTE_FEATURES, FeatureSpec(eps), nodes);
}
v1::Task LabelTask(const std::string& campaign, double eps,
                   std::vector<uint32_t> nodes = {}) {
  return MakeTask(campaign, v1::ATTRIBUTE_LABEL, LabelSpec(eps), nodes);
}
v1::Task EdgeTask(const std::string& campaign, double eps,
                  std::vector<uint32_t> nodes = {}) {
  return MakeTask(campaign, v1::ATTRIBUTE_EDGES, EdgeSpec(eps), nodes);
}

// The report without campaign and node: what the memo stores.
std::string Body(const v1::Report& r) {
  v1::Report copy = r;
  copy.clear_campaign_id();
  copy.clear_node_id();
  return copy.SerializeAsString();
}

std::unique_ptr<NodeAgent> MakeAgent(uint32_t node, const AgentPolicy& policy,
                                     std::optional<uint64_t> seed = 7) {
  auto rng = NodeRandomSource(seed, node);
  EXPECT_TRUE(rng.ok()) << rng.status();
  auto agent = NodeAgent::Create(Record(node), policy, std::move(*rng),
                                 nullptr, nullptr,
                                 NodeEdgeRandomSource(seed, node));
  EXPECT_TRUE(agent.ok()) << agent.status();
  return std::move(*agent);
}

NodeAgent::Response MustRespond(NodeAgent& agent, const v1::Task& task) {
  auto r = agent.Respond(task);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : NodeAgent::Response{};
}

void ExpectRefusal(const NodeAgent::Response& r, v1::RefusalReason reason,
                   const std::string& substring) {
  ASSERT_TRUE(r.report.has_refusal()) << r.report.DebugString();
  EXPECT_EQ(r.report.refusal().reason(), reason)
      << v1::RefusalReason_Name(r.report.refusal().reason());
  EXPECT_THAT(r.report.refusal().message(), HasSubstr(substring));
  EXPECT_FALSE(r.fresh);
  EXPECT_FALSE(r.to_persist.has_value());
}

// --- NodeAgent: memo and composition ------------------------------------------

TEST(NodeAgentTest, RepeatedIdenticalTaskIsAnsweredFromTheMemo) {
  for (const v1::Task& task :
       {FeatureTask("c1", 1.0), LabelTask("c1", 1.0), EdgeTask("c1", 1.0)}) {
    SCOPED_TRACE(v1::Attribute_Name(task.attribute()));
    auto agent = MakeAgent(3, Policy());
    NodeAgent::Response first = MustRespond(*agent, task);
    ASSERT_FALSE(first.report.has_refusal()) << first.report.DebugString();
    EXPECT_TRUE(first.fresh);
    ASSERT_TRUE(first.to_persist.has_value());
    EXPECT_EQ(first.to_persist->node, 3u);
    EXPECT_EQ(first.to_persist->key.Canonical(),
              wire::WireQueryKey(task.attribute(), task.spec()).Canonical());
    EXPECT_EQ(first.to_persist->answer, Body(first.report));
    EXPECT_EQ(first.report.campaign_id(), "c1");
    EXPECT_EQ(first.report.node_id(), 3u);
    EXPECT_DOUBLE_EQ(agent->budget().spent(), 1.0);

    // Same question, same campaign and then another campaign.
    for (const char* campaign : {"c1", "c2"}) {
      v1::Task again = task;
      again.set_campaign_id(campaign);
      NodeAgent::Response r = MustRespond(*agent, again);
      EXPECT_FALSE(r.fresh);
      EXPECT_FALSE(r.to_persist.has_value());
      EXPECT_EQ(r.report.campaign_id(), campaign);
      EXPECT_EQ(r.report.node_id(), 3u);
      EXPECT_EQ(Body(r.report), Body(first.report));
    }
    EXPECT_DOUBLE_EQ(agent->budget().spent(), 1.0);
  }
}

TEST(NodeAgentTest, ADifferentEpsilonIsANewQuestionAndSpendsAgain) {
  auto agent = MakeAgent(3, Policy());
  NodeAgent::Response a = MustRespond(*agent, FeatureTask("c1", 1.0));
  NodeAgent::Response b = MustRespond(*agent, FeatureTask("c2", 0.5));
  EXPECT_TRUE(a.fresh);
  EXPECT_TRUE(b.fresh);
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 1.5);
  EXPECT_DOUBLE_EQ(agent->budget().spent("features"), 1.5);
  // Another mechanism with the same epsilon is new as well.
  v1::Task multibit = MakeTask("c3", v1::ATTRIBUTE_FEATURES,
                               FeatureSpec(1.0, 4, v1::MECHANISM_KIND_MULTIBIT));
  EXPECT_TRUE(MustRespond(*agent, multibit).fresh);
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 2.5);
}

TEST(NodeAgentTest, OverTheTotalCapIsRefusedAndSpendsNothing) {
  auto agent = MakeAgent(3, Policy(1.0));
  ASSERT_TRUE(MustRespond(*agent, FeatureTask("c1", 0.75)).fresh);
  NodeAgent::Response r = MustRespond(*agent, LabelTask("c2", 0.5));
  ExpectRefusal(r, v1::REFUSAL_REASON_BUDGET_EXHAUSTED, "budget exhausted");
  EXPECT_THAT(r.report.refusal().message(), HasSubstr("cap 1"));
  EXPECT_EQ(r.report.campaign_id(), "c2");
  EXPECT_EQ(r.report.node_id(), 3u);
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 0.75);
  EXPECT_DOUBLE_EQ(agent->budget().spent("label"), 0.0);
  // The question answered before is still answered, from the memo.
  NodeAgent::Response memo = MustRespond(*agent, FeatureTask("c3", 0.75));
  EXPECT_FALSE(memo.report.has_refusal());
  EXPECT_FALSE(memo.fresh);
}

TEST(NodeAgentTest, OverAnAttributeCapIsRefusedAndSpendsNothing) {
  auto agent = MakeAgent(3, Policy(10.0, {{"edges", 1.0}}));
  ASSERT_TRUE(MustRespond(*agent, EdgeTask("c1", 0.6)).fresh);
  NodeAgent::Response r = MustRespond(*agent, EdgeTask("c2", 0.5));
  ExpectRefusal(r, v1::REFUSAL_REASON_BUDGET_EXHAUSTED, "'edges'");
  EXPECT_DOUBLE_EQ(agent->budget().spent("edges"), 0.6);
  // Other attributes still have room.
  EXPECT_TRUE(MustRespond(*agent, FeatureTask("c3", 2.0)).fresh);
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 2.6);
}

// --- NodeAgent: refusals --------------------------------------------------------

TEST(NodeAgentTest, AnAttributeOutsideThePolicyIsRefused) {
  AgentPolicy policy = Policy();
  policy.attributes = {"features"};
  auto agent = MakeAgent(3, policy);
  NodeAgent::Response r = MustRespond(*agent, LabelTask("c1", 1.0));
  ExpectRefusal(r, v1::REFUSAL_REASON_POLICY,
                "does not allow questions about 'label'");
  ExpectRefusal(MustRespond(*agent, EdgeTask("c1", 1.0)),
                v1::REFUSAL_REASON_POLICY, "'edges' (allowed: features)");
  EXPECT_EQ(agent->budget().spent(), 0.0);
  EXPECT_TRUE(MustRespond(*agent, FeatureTask("c1", 1.0)).fresh);
  // The allowed ones are listed by name, as the policy's set orders them.
  policy.attributes = {"label", "edges"};
  ExpectRefusal(MustRespond(*MakeAgent(3, policy), FeatureTask("c1", 1.0)),
                v1::REFUSAL_REASON_POLICY,
                "does not allow questions about 'features' (allowed: edges, "
                "label)");
}

TEST(NodeAgentTest, AMissingLabelIsNoData) {
  NodeRecord record = Record(3);
  record.label.reset();
  auto agent = NodeAgent::Create(record, Policy(),
                                 std::make_unique<SeededRandomForTesting>(1));
  ASSERT_TRUE(agent.ok()) << agent.status();
  ExpectRefusal(MustRespond(**agent, LabelTask("c1", 1.0)),
                v1::REFUSAL_REASON_NO_DATA, "node 3 has no label");
  EXPECT_EQ((*agent)->budget().spent(), 0.0);
}

TEST(NodeAgentTest, MissingFeaturesAreNoData) {
  NodeRecord record = Record(3);
  record.features = NodeFeatures();
  auto agent = NodeAgent::Create(record, Policy(),
                                 std::make_unique<SeededRandomForTesting>(1));
  ASSERT_TRUE(agent.ok()) << agent.status();
  ExpectRefusal(MustRespond(**agent, FeatureTask("c1", 1.0)),
                v1::REFUSAL_REASON_NO_DATA, "holds no features");
}

TEST(NodeAgentTest, AFeatureDimensionMismatchIsAnInvalidTask) {
  auto agent = MakeAgent(3, Policy());
  v1::Task task = MakeTask("c1", v1::ATTRIBUTE_FEATURES, FeatureSpec(1.0, 5));
  ExpectRefusal(MustRespond(*agent, task), v1::REFUSAL_REASON_INVALID_TASK,
                "spec.dimension is 5 but node 3 holds 4 features");
  EXPECT_EQ(agent->budget().spent(), 0.0);
}

TEST(NodeAgentTest, AnUnknownMechanismKindIsAnInvalidTask) {
  auto agent = MakeAgent(3, Policy());
  v1::MechanismSpec spec = FeatureSpec(1.0);
  spec.set_kind(v1::MECHANISM_KIND_UNSPECIFIED);
  ExpectRefusal(
      MustRespond(*agent, MakeTask("c1", v1::ATTRIBUTE_FEATURES, spec)),
      v1::REFUSAL_REASON_INVALID_TASK, "spec.kind must name a mechanism");
  spec.set_kind(static_cast<v1::MechanismKind>(42));
  ExpectRefusal(
      MustRespond(*agent, MakeTask("c1", v1::ATTRIBUTE_FEATURES, spec)),
      v1::REFUSAL_REASON_INVALID_TASK, "spec.kind must name a mechanism");
  EXPECT_EQ(agent->budget().spent(), 0.0);
}

TEST(NodeAgentTest, AMechanismOfAnotherAttributeIsAnInvalidTask) {
  auto agent = MakeAgent(3, Policy());
  ExpectRefusal(
      MustRespond(*agent, MakeTask("c1", v1::ATTRIBUTE_LABEL, FeatureSpec(1.0))),
      v1::REFUSAL_REASON_INVALID_TASK,
      "mechanism MECHANISM_KIND_HDS does not answer about the attribute "
      "'label'");
  ExpectRefusal(
      MustRespond(*agent, MakeTask("c1", v1::ATTRIBUTE_FEATURES, EdgeSpec(1.0))),
      v1::REFUSAL_REASON_INVALID_TASK, "'features'");
  EXPECT_EQ(agent->budget().spent(), 0.0);
}

TEST(NodeAgentTest, AnUnspecifiedAttributeIsAnInvalidTask) {
  auto agent = MakeAgent(3, Policy());
  ExpectRefusal(
      MustRespond(*agent,
                  MakeTask("c1", v1::ATTRIBUTE_UNSPECIFIED, FeatureSpec(1.0))),
      v1::REFUSAL_REASON_INVALID_TASK, "attribute must be features, label or edges");
}

TEST(NodeAgentTest, ABadEpsilonIsAnInvalidTask) {
  auto agent = MakeAgent(3, Policy());
  ExpectRefusal(MustRespond(*agent, LabelTask("c1", 0.0)),
                v1::REFUSAL_REASON_INVALID_TASK, "epsilon");
  ExpectRefusal(MustRespond(*agent, FeatureTask("c1", -1.0)),
                v1::REFUSAL_REASON_INVALID_TASK, "epsilon");
}

TEST(NodeAgentTest, ALabelNotBelowTheClassCountIsAnInvalidTask) {
  auto agent = MakeAgent(2, Policy());  // label 2
  v1::Task task = MakeTask("c1", v1::ATTRIBUTE_LABEL, LabelSpec(1.0, 2));
  ExpectRefusal(MustRespond(*agent, task), v1::REFUSAL_REASON_INVALID_TASK,
                "the class count) is 2");
  EXPECT_EQ(agent->budget().spent(), 0.0);
}

TEST(NodeAgentTest, ANodeCountNotAboveTheNeighboursIsAnInvalidTask) {
  auto agent = MakeAgent(3, Policy());  // neighbours 1, 4, 8
  ExpectRefusal(MustRespond(*agent, MakeTask("c1", v1::ATTRIBUTE_EDGES,
                                             EdgeSpec(1.0, 8))),
                v1::REFUSAL_REASON_INVALID_TASK, "the node count) is 8");
  auto high = MakeAgent(9, Policy());  // the node itself is the highest id
  ExpectRefusal(MustRespond(*high, MakeTask("c1", v1::ATTRIBUTE_EDGES,
                                            EdgeSpec(1.0, 9))),
                v1::REFUSAL_REASON_INVALID_TASK, "the node count) is 9");
  EXPECT_TRUE(MustRespond(*high, EdgeTask("c1", 1.0)).fresh);
}

TEST(NodeAgentTest, RefusalMessagesAreBounded) {
  AgentPolicy policy = Policy(1.0);
  auto agent = MakeAgent(3, policy);
  for (int i = 0; i < 50; ++i) {
    NodeAgent::Response r = MustRespond(*agent, FeatureTask("c", 5.0 + i));
    ASSERT_TRUE(r.report.has_refusal());
    EXPECT_LE(r.report.refusal().message().size(), 1024u);
  }
}

// --- NodeAgent: construction ----------------------------------------------------

TEST(NodeAgentTest, CreateRejectsABadRecord) {
  auto create = [](NodeRecord r) {
    return NodeAgent::Create(std::move(r), Policy(),
                             std::make_unique<SeededRandomForTesting>(1))
        .status();
  };
  NodeRecord nan = Record(3);
  std::vector<double> row = nan.features.Dense();
  row[2] = std::nan("");
  nan.features = NodeFeatures::FromDense(row);
  EXPECT_THAT(create(nan).message(), HasSubstr("node 3: features[2] is not finite"));
  NodeRecord unsorted = Record(3);
  unsorted.neighbours = {4, 1};
  EXPECT_THAT(create(unsorted).message(), HasSubstr("strictly ascending"));
  NodeRecord self = Record(3);
  self.neighbours = {1, 3};
  EXPECT_THAT(create(self).message(), HasSubstr("neighbours[1] is the node itself"));
  NodeRecord negative = Record(3);
  negative.label = -1;
  EXPECT_THAT(create(negative).message(), HasSubstr("label must be >= 0"));
  for (const NodeRecord& r : {nan, unsorted, self, negative}) {
    EXPECT_EQ(create(r).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(NodeAgent::Create(Record(3), Policy(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AgentPolicyTest, ValidateRejectsBadCapsAndUnknownAttributes) {
  EXPECT_TRUE(Policy().Validate().ok());
  EXPECT_THAT(Policy(0.0).Validate().message(),
              HasSubstr("total budget cap must be finite and > 0"));
  EXPECT_THAT(Policy(1.0, {{"labels", 0.5}}).Validate().message(),
              HasSubstr("budget cap of 'labels': not an attribute"));
  AgentPolicy p = Policy();
  p.attributes = {"features", "degree"};
  EXPECT_EQ(p.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.Validate().message(), HasSubstr("'degree'"));
  p.attributes = {};
  EXPECT_TRUE(p.Validate().ok());
}

// --- NodeAgent: randomness ------------------------------------------------------

uint64_t DocumentedMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

TEST(NodeNoiseSeedTest, FollowsTheDocumentedFormula) {
  for (uint64_t seed : {0ull, 1ull, 42ull, ~0ull}) {
    for (uint32_t node : {0u, 1u, 2707u, ~0u}) {
      const uint64_t s = DocumentedMix(seed ^ 0x6e6f697365763031ULL);
      EXPECT_EQ(NodeNoiseSeed(seed, node),
                DocumentedMix(s + 0x9e3779b97f4a7c15ULL * (uint64_t{node} + 1)));
    }
  }
  EXPECT_NE(NodeNoiseSeed(1, 0), NodeNoiseSeed(1, 1));
  EXPECT_NE(NodeNoiseSeed(1, 0), NodeNoiseSeed(2, 0));
}

TEST(NodeRandomSourceTest, SecureWithoutASeedSeededWithOne) {
  auto secure = NodeRandomSource(std::nullopt, 3);
  ASSERT_TRUE(secure.ok()) << secure.status();
  EXPECT_TRUE((*secure)->is_secure());
  auto seeded = NodeRandomSource(5, 3);
  ASSERT_TRUE(seeded.ok());
  EXPECT_FALSE((*seeded)->is_secure());
  SeededRandomForTesting expected(NodeNoiseSeed(5, 3));
  EXPECT_EQ((*seeded)->Next64(), expected.Next64());
}

// --- Blink ----------------------------------------------------------------

TEST(NodeAgentBlinkTest, AnsweredFromTheNodesStreamThenFromTheMemo) {
  constexpr uint64_t kSeed = 11;
  constexpr uint32_t kNode = 5;
  auto agent = MakeAgent(kNode, Policy(), kSeed);
  const v1::Task task =
      MakeTask("c1", v1::ATTRIBUTE_EDGES, BlinkSpec(2.0, 0.25));
  NodeAgent::Response first = MustRespond(*agent, task);
  ASSERT_TRUE(first.report.has_edges()) << first.report.DebugString();
  EXPECT_TRUE(first.fresh);
  ASSERT_TRUE(first.to_persist.has_value());
  EXPECT_EQ(first.to_persist->key.mechanism, "edge-blink");
  EXPECT_DOUBLE_EQ(agent->budget().spent("edges"), 2.0);

  // Exactly BlinkClient::Report on the node's true neighbours, drawn from
  // the node's seeded edge stream.
  auto blink = edges::BlinkClient::Create({.epsilon = 2.0, .delta = 0.25},
                                          kNodes);
  ASSERT_TRUE(blink.ok()) << blink.status();
  SeededRandomForTesting rng(NodeNoiseSeed(EdgeStreamSeed(kSeed), kNode));
  auto direct = (*blink)->Report(kNode, Record(kNode).neighbours, rng);
  ASSERT_TRUE(direct.ok()) << direct.status();
  const v1::EdgeReport& e = first.report.edges();
  EXPECT_EQ(std::vector<uint32_t>(e.neighbours().begin(),
                                  e.neighbours().end()),
            direct->neighbours);
  EXPECT_EQ(e.noisy_degree(), direct->noisy_degree);
  // What the curator accepts.
  EXPECT_TRUE(wire::ValidateEdgeReport(e, task.spec(), kNode).ok())
      << wire::ValidateEdgeReport(e, task.spec(), kNode);

  // A resend (another campaign, the same question) is the memoized report,
  // never fresh noise, and spends nothing.
  v1::Task again = task;
  again.set_campaign_id("c2");
  NodeAgent::Response second = MustRespond(*agent, again);
  EXPECT_FALSE(second.fresh);
  EXPECT_EQ(Body(second.report), Body(first.report));
  EXPECT_DOUBLE_EQ(agent->budget().spent("edges"), 2.0);
}

TEST(NodeAgentBlinkTest, AnotherDeltaIsAnotherQuestionWithinTheCap) {
  auto agent = MakeAgent(3, Policy(10.0, {{"edges", 1.0}}));
  ASSERT_TRUE(MustRespond(*agent, MakeTask("c1", v1::ATTRIBUTE_EDGES,
                                           BlinkSpec(0.75, 0.1)))
                  .fresh);
  // The same epsilon with another delta: a second question, over the cap.
  NodeAgent::Response r = MustRespond(
      *agent, MakeTask("c2", v1::ATTRIBUTE_EDGES, BlinkSpec(0.75, 0.2)));
  ExpectRefusal(r, v1::REFUSAL_REASON_BUDGET_EXHAUSTED, "'edges'");
  EXPECT_DOUBLE_EQ(agent->budget().spent("edges"), 0.75);
  // The first is still answered, from the memo.
  NodeAgent::Response memo = MustRespond(
      *agent, MakeTask("c3", v1::ATTRIBUTE_EDGES, BlinkSpec(0.75, 0.1)));
  EXPECT_FALSE(memo.report.has_refusal());
  EXPECT_FALSE(memo.fresh);
}

TEST(NodeAgentBlinkTest, ABadSpecIsAnInvalidTask) {
  auto agent = MakeAgent(3, Policy());
  NodeAgent::Response r = MustRespond(
      *agent, MakeTask("c1", v1::ATTRIBUTE_EDGES, BlinkSpec(1.0, 1.0)));
  ExpectRefusal(r, v1::REFUSAL_REASON_INVALID_TASK, "delta");
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 0.0);
}

TEST(NodeAgentTest, SeededAnswersEqualPerturbingDirectly) {
  constexpr uint64_t kSeed = 99;
  constexpr uint32_t kNode = 5;
  const NodeRecord record = Record(kNode);
  auto agent = MakeAgent(kNode, Policy(), kSeed);
  auto twin = MakeAgent(kNode, Policy(), kSeed);

  // The record stream, drawn in order: features, label; the edge stream
  // (EdgeStreamSeed) for the edges, which the agents answer first: an
  // edges campaign leaves the features' and the label's noise as it was.
  SeededRandomForTesting rng(NodeNoiseSeed(kSeed, kNode));
  SeededRandomForTesting edge_rng(NodeNoiseSeed(EdgeStreamSeed(kSeed), kNode));
  const v1::Task features = FeatureTask("c", 1.0);
  auto spec = wire::FromWireFeatureSpec(features.spec());
  ASSERT_TRUE(spec.ok());
  auto mech = CreateFeatureMechanism(*spec);
  ASSERT_TRUE(mech.ok());
  auto fr = (*mech)->Perturb(record.features.Dense(), rng);
  ASSERT_TRUE(fr.ok());
  auto label_rr = LabelRandomizedResponse::Create(2.0, 3);
  ASSERT_TRUE(label_rr.ok());
  auto label = (*label_rr)->Perturb(*record.label, rng);
  ASSERT_TRUE(label.ok());
  auto edge_rr = EdgeRandomizedResponse::Create(0.5, kNodes);
  ASSERT_TRUE(edge_rr.ok());
  auto edges = (*edge_rr)->Perturb(kNode, record.neighbours, edge_rng);
  ASSERT_TRUE(edges.ok());

  for (NodeAgent* a : {agent.get(), twin.get()}) {
    NodeAgent::Response e = MustRespond(*a, EdgeTask("c", 0.5));
    NodeAgent::Response f = MustRespond(*a, features);
    ASSERT_TRUE(f.report.has_features());
    EXPECT_EQ(f.report.features().SerializeAsString(),
              wire::EncodeFeatureReport(*fr).SerializeAsString());
    NodeAgent::Response l = MustRespond(*a, LabelTask("c", 2.0));
    ASSERT_TRUE(l.report.has_label());
    EXPECT_EQ(l.report.label().label(), static_cast<uint32_t>(*label));
    ASSERT_TRUE(e.report.has_edges());
    EXPECT_EQ(std::vector<uint32_t>(e.report.edges().neighbours().begin(),
                                    e.report.edges().neighbours().end()),
              *edges);
    // The curator validates what the agent sends.
    auto decoded = wire::DecodeFeatureReport(f.report.features(), **mech);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_TRUE(wire::ValidateLabelReport(l.report.label(), LabelSpec(2.0)).ok());
    EXPECT_TRUE(
        wire::ValidateEdgeReport(e.report.edges(), EdgeSpec(0.5), kNode).ok());
  }
}

TEST(NodeAgentTest, RestoredAnswersAreReusedAndCharged) {
  auto first = MakeAgent(3, Policy(), 1);
  NodeAgent::Response r = MustRespond(*first, LabelTask("c1", 1.0));
  ASSERT_TRUE(r.to_persist.has_value());
  auto second = MakeAgent(3, Policy(), 2);
  ASSERT_TRUE(second->Restore(r.to_persist->key, r.to_persist->answer).ok());
  EXPECT_DOUBLE_EQ(second->budget().spent("label"), 1.0);
  NodeAgent::Response again = MustRespond(*second, LabelTask("c2", 1.0));
  EXPECT_FALSE(again.fresh);
  EXPECT_EQ(Body(again.report), Body(r.report));
}

TEST(NodeAgentTest, RestoreRejectsAnAnswerThatIsNotABodyOfItsAttribute) {
  auto agent = MakeAgent(3, Policy());
  const QueryKey key = wire::WireQueryKey(v1::ATTRIBUTE_LABEL, LabelSpec(1.0));
  EXPECT_EQ(agent->Restore(key, "\xff\xff garbage").code(),
            absl::StatusCode::kDataLoss);
  v1::Report edges;
  edges.mutable_edges()->add_neighbours(1);
  EXPECT_EQ(agent->Restore(key, edges.SerializeAsString()).code(),
            absl::StatusCode::kDataLoss);
  v1::Report refusal;
  refusal.mutable_refusal()->set_reason(v1::REFUSAL_REASON_POLICY);
  EXPECT_EQ(agent->Restore(key, refusal.SerializeAsString()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(agent->budget().spent(), 0.0);
}

// --- AgentShard -----------------------------------------------------------------

std::vector<NodeRecord> Records(std::vector<uint32_t> nodes) {
  std::vector<NodeRecord> out;
  for (uint32_t v : nodes) out.push_back(Record(v));
  return out;
}

std::unique_ptr<AgentShard> MakeShard(const std::string& dir, uint64_t seed,
                                      AgentPolicy policy = Policy(),
                                      AgentStateStore::Options options = {}) {
  auto shard = AgentShard::Create(Records({0, 2, 5, 7}), std::move(policy),
                                  seed, dir, options);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return shard.ok() ? std::move(*shard) : nullptr;
}

ShardResponse MustRespondAll(AgentShard& shard, const v1::Task& task) {
  auto r = shard.RespondAll(task);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : ShardResponse{};
}

std::vector<std::string> Bodies(const ShardResponse& r) {
  std::vector<std::string> out;
  for (const v1::Report& report : r.reports) out.push_back(Body(report));
  return out;
}

TEST(AgentShardTest, AnswersItsNodesInTaskOrderAndSkipsOthers) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto shard = MakeShard(tmp.path(), 1);
  ASSERT_NE(shard, nullptr);
  EXPECT_THAT(shard->nodes(), ElementsAre(0, 2, 5, 7));
  ShardResponse r =
      MustRespondAll(*shard, FeatureTask("c1", 1.0, {7, 1, 2, 7, 99}));
  ASSERT_EQ(r.reports.size(), 2u);
  EXPECT_EQ(r.reports[0].node_id(), 7u);
  EXPECT_EQ(r.reports[1].node_id(), 2u);
  EXPECT_EQ(r.reports[0].campaign_id(), "c1");
  EXPECT_EQ(r.not_in_shard, 2u);
  EXPECT_EQ(r.fresh, 2u);
  EXPECT_EQ(r.memo_hits, 0u);
  EXPECT_EQ(*shard->spent(7, "features"), 1.0);
  EXPECT_EQ(*shard->spent(0), 0.0);
  EXPECT_EQ(shard->spent(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*shard->store().Count(), 2);
  EXPECT_EQ(shard->pending_rows(), 0u);

  ShardResponse again = MustRespondAll(*shard, FeatureTask("c2", 1.0, {2, 0}));
  EXPECT_EQ(again.fresh, 1u);
  EXPECT_EQ(again.memo_hits, 1u);
  ShardResponse refused = MustRespondAll(*shard, LabelTask("c3", 20.0, {0, 5}));
  EXPECT_EQ(refused.refusals, 2u);
  const ShardCounters c = shard->counters();
  EXPECT_EQ(c.fresh, 3u);
  EXPECT_EQ(c.memo_hits, 1u);
  EXPECT_EQ(c.not_in_shard, 2u);
  EXPECT_EQ(c.refusals.at(v1::REFUSAL_REASON_BUDGET_EXHAUSTED), 2u);
  EXPECT_EQ(c.restored, 0u);
}

// In parts: the same reports, counts and spend as the whole task answered at
// once (a seeded shard each), each part durable before it is sent.
TEST(AgentShardTest, AnsweringInPartsGivesTheSameReportsEachDurableFirst) {
  TempFolder whole_dir(TempFolder::kLeaveMissing), parts_dir(TempFolder::kLeaveMissing);
  auto whole = MakeShard(whole_dir.path(), 9);
  auto parts = MakeShard(parts_dir.path(), 9);
  ASSERT_NE(whole, nullptr);
  ASSERT_NE(parts, nullptr);
  for (const v1::Task& task :
       {FeatureTask("c1", 1.0, {7, 1, 2, 7, 99, 0, 5}),
        LabelTask("c2", 1.0, {2, 0, 7, 5}), FeatureTask("c3", 1.0, {5, 0, 2, 7}),
        LabelTask("c4", 20.0, {0, 5, 2})}) {
    const ShardResponse want = MustRespondAll(*whole, task);
    std::vector<std::vector<std::string>> sent;
    std::vector<int64_t> stored_when_sent;
    auto got = parts->RespondAll(task, 2, [&](std::vector<v1::Report> part) {
      stored_when_sent.push_back(*parts->store().Count());
      sent.emplace_back();
      for (const v1::Report& r : part) sent.back().push_back(Body(r));
      return absl::OkStatus();
    });
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->reports.empty());
    std::vector<std::string> all;
    for (size_t i = 0; i < sent.size(); ++i) {
      EXPECT_LE(sent[i].size(), 2u);
      all.insert(all.end(), sent[i].begin(), sent[i].end());
    }
    EXPECT_EQ(all, Bodies(want)) << task.campaign_id();
    EXPECT_EQ(got->fresh, want.fresh);
    EXPECT_EQ(got->memo_hits, want.memo_hits);
    EXPECT_EQ(got->refusals, want.refusals);
    EXPECT_EQ(got->not_in_shard, want.not_in_shard);
    // Every part's rows were stored before it was sent.
    EXPECT_EQ(stored_when_sent.back(), *whole->store().Count());
    EXPECT_EQ(parts->pending_rows(), 0u);
  }
  for (uint32_t v : {0u, 2u, 5u, 7u}) {
    EXPECT_EQ(*parts->spent(v), *whole->spent(v));
  }
  const ShardCounters a = whole->counters(), b = parts->counters();
  EXPECT_EQ(a.fresh, b.fresh);
  EXPECT_EQ(a.memo_hits, b.memo_hits);
  EXPECT_EQ(a.not_in_shard, b.not_in_shard);
  EXPECT_EQ(a.refusals, b.refusals);
}

TEST(AgentShardTest, AFailedSendStopsTheTaskAfterItsPart) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto shard = MakeShard(tmp.path(), 1);
  ASSERT_NE(shard, nullptr);
  int parts = 0;
  auto r = shard->RespondAll(FeatureTask("c1", 1.0, {0, 2, 5, 7}), 1,
                             [&](std::vector<v1::Report>) {
                               return ++parts == 2
                                          ? absl::UnavailableError("stream broke")
                                          : absl::OkStatus();
                             });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(parts, 2);
  // Two parts answered and durable (the second unsent: a retry answers it
  // from the memo); the last two not asked.
  EXPECT_EQ(*shard->store().Count(), 2);
  EXPECT_EQ(*shard->spent(5), 0.0);
  ShardResponse retry = MustRespondAll(*shard, FeatureTask("c1", 1.0, {0, 2, 5, 7}));
  EXPECT_EQ(retry.memo_hits, 2u);
  EXPECT_EQ(retry.fresh, 2u);
  EXPECT_EQ(shard->RespondAll(FeatureTask("c1", 1.0), 0,
                              [](std::vector<v1::Report>) { return absl::OkStatus(); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AgentShardTest, ARestartedShardRemembersEveryAnswerEvenWithAnotherSeed) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  const std::vector<uint32_t> all = {0, 2, 5, 7};
  const std::vector<v1::Task> tasks = {FeatureTask("c1", 1.0, all),
                                       LabelTask("c2", 0.5, all),
                                       EdgeTask("c3", 2.0, all)};
  std::vector<std::vector<std::string>> before;
  std::map<uint32_t, double> spent;
  {
    auto shard = MakeShard(tmp.path(), 1);
    ASSERT_NE(shard, nullptr);
    for (const v1::Task& t : tasks) {
      ShardResponse r = MustRespondAll(*shard, t);
      EXPECT_EQ(r.fresh, 4u);
      before.push_back(Bodies(r));
    }
    for (uint32_t v : all) spent[v] = *shard->spent(v);
  }
  auto shard = MakeShard(tmp.path(), 2);  // different noise
  ASSERT_NE(shard, nullptr);
  EXPECT_EQ(shard->counters().restored, 12u);
  for (uint32_t v : all) {
    EXPECT_DOUBLE_EQ(*shard->spent(v), spent[v]) << "node " << v;
    EXPECT_DOUBLE_EQ(*shard->spent(v), 3.5);
    EXPECT_DOUBLE_EQ(*shard->spent(v, "label"), 0.5);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    v1::Task t = tasks[i];
    t.set_campaign_id(absl::StrCat("rerun-", i));
    ShardResponse r = MustRespondAll(*shard, t);
    EXPECT_EQ(r.fresh, 0u);
    EXPECT_EQ(r.memo_hits, 4u);
    EXPECT_EQ(Bodies(r), before[i]);
    EXPECT_EQ(r.reports[0].campaign_id(), t.campaign_id());
  }
  for (uint32_t v : all) EXPECT_DOUBLE_EQ(*shard->spent(v), spent[v]);
  EXPECT_EQ(*shard->store().Count(), 12);
}

// A seeded shard restarted between two questions continues each node's
// streams where they stopped (the record stream, and the edge stream for
// edges questions): its next fresh answers are exactly those of a shard
// that never restarted (not a stream's first words again, which would tie,
// say, a node's label answer to the draws of its features).
TEST(AgentShardTest, ARestartedSeededShardContinuesEachNodesStream) {
  const std::vector<uint32_t> all = {0, 2, 5, 7};
  const std::vector<v1::Task> tasks = {
      FeatureTask("c1", 1.0, all), EdgeTask("c2", 1.0, all),
      LabelTask("c3", 2.0, all), EdgeTask("c4", 0.5, all),
      FeatureTask("c5", 0.5, all)};
  std::vector<std::vector<std::string>> straight;
  {
    TempFolder tmp(TempFolder::kLeaveMissing);
    auto shard = MakeShard(tmp.path(), 9);
    ASSERT_NE(shard, nullptr);
    for (const v1::Task& t : tasks) straight.push_back(Bodies(MustRespondAll(*shard, t)));
  }
  TempFolder tmp(TempFolder::kLeaveMissing);
  for (size_t i = 0; i < tasks.size(); ++i) {
    // A new process for every question: only agent.db carries over.
    auto shard = MakeShard(tmp.path(), 9);
    ASSERT_NE(shard, nullptr);
    EXPECT_EQ(shard->counters().restored, 4 * i);
    ShardResponse r = MustRespondAll(*shard, tasks[i]);
    EXPECT_EQ(r.fresh, 4u);
    EXPECT_EQ(Bodies(r), straight[i]) << "question " << i;
  }
  // The draws were stored with the rows: positions grow with each question.
  auto store = AgentStateStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  std::map<uint32_t, std::vector<uint64_t>> draws;
  ASSERT_TRUE((*store)
                  ->ForEach([&](const MemoRow& row) {
                    draws[row.node].push_back(row.draws);
                    return absl::OkStatus();
                  })
                  .ok());
  for (uint32_t v : all) {
    ASSERT_EQ(draws[v].size(), tasks.size());
    for (uint64_t d : draws[v]) EXPECT_GT(d, 0u) << "node " << v;
  }
}

TEST(AgentShardTest, RestoredSpendOverLoweredCapsRefusesNewQuestionsOnly) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  std::vector<std::string> before;
  {
    auto shard = MakeShard(tmp.path(), 1);
    ASSERT_NE(shard, nullptr);
    before = Bodies(MustRespondAll(*shard, FeatureTask("c1", 3.0, {0, 2})));
  }
  auto shard = MakeShard(tmp.path(), 1, Policy(1.0));
  ASSERT_NE(shard, nullptr);
  EXPECT_DOUBLE_EQ(*shard->spent(0), 3.0);  // above the new cap
  ShardResponse memo = MustRespondAll(*shard, FeatureTask("c2", 3.0, {0, 2}));
  EXPECT_EQ(Bodies(memo), before);
  ShardResponse refused = MustRespondAll(*shard, LabelTask("c3", 0.1, {0, 5}));
  ASSERT_EQ(refused.reports.size(), 2u);
  EXPECT_EQ(refused.reports[0].refusal().reason(),
            v1::REFUSAL_REASON_BUDGET_EXHAUSTED);
  // Node 5 never answered: it still has room under the lowered cap.
  EXPECT_TRUE(refused.reports[1].has_label());
}

TEST(AgentShardTest, AFailedCommitReleasesNoReportAndIsRetriedFirst) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentStateStore::Options options;
  options.busy_timeout_ms = 20;
  auto shard = MakeShard(tmp.path(), 1, Policy(), options);
  ASSERT_NE(shard, nullptr);
  const std::string db = tmp.File("agent.db");

  // Another connection holds the write lock: the commit cannot happen.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  auto failed = shard->RespondAll(FeatureTask("c1", 1.0, {0, 2}));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr(db));
  // Conservative: the budget stays charged, the rows wait.
  EXPECT_DOUBLE_EQ(*shard->spent(0), 1.0);
  EXPECT_EQ(shard->pending_rows(), 2u);
  EXPECT_EQ(shard->counters().fresh, 0u);
  // A task that needs no new row still cannot release anything.
  EXPECT_FALSE(shard->RespondAll(FeatureTask("c1", 1.0, {0})).ok());
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(other);

  // The lock is gone: the pending rows are committed with the retry, which
  // answers from the memo.
  ShardResponse r = MustRespondAll(*shard, FeatureTask("c1", 1.0, {0, 2, 5}));
  EXPECT_EQ(r.memo_hits, 2u);
  EXPECT_EQ(r.fresh, 1u);
  EXPECT_EQ(shard->pending_rows(), 0u);
  EXPECT_EQ(*shard->store().Count(), 3);
  const std::vector<std::string> released = Bodies(r);
  shard.reset();

  auto restarted = MakeShard(tmp.path(), 2);
  ASSERT_NE(restarted, nullptr);
  ShardResponse again =
      MustRespondAll(*restarted, FeatureTask("c2", 1.0, {0, 2, 5}));
  EXPECT_EQ(again.memo_hits, 3u);
  EXPECT_EQ(Bodies(again), released);
}

TEST(AgentShardTest, AFullDiskReleasesNoReport) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentStateStore::Options options;
  options.max_bytes = 8 * 4096;
  std::vector<NodeRecord> records;
  NodeRecord big = Record(0);
  big.features = NodeFeatures::FromDense(std::vector<double>(20000, 0.5));
  records.push_back(big);
  auto shard = AgentShard::Create(records, Policy(), 1, tmp.path(), options);
  ASSERT_TRUE(shard.ok()) << shard.status();
  v1::Task task = MakeTask(
      "c1", v1::ATTRIBUTE_FEATURES,
      FeatureSpec(1.0, 20000, v1::MECHANISM_KIND_LAPLACE), {0});
  auto r = (*shard)->RespondAll(task);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted)
      << r.status();
  EXPECT_EQ(*(*shard)->store().Count(), 0);
  EXPECT_EQ((*shard)->pending_rows(), 1u);
}

TEST(AgentShardTest, CreateFailsOnACorruptStateFile) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  fs::create_directories(tmp.path());
  {
    std::ofstream out(tmp.File("agent.db"), std::ios::binary);
    out << std::string(4096, '\x7f');
  }
  auto shard = AgentShard::Create(Records({0}), Policy(), 1, tmp.path());
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(shard.status().message(), HasSubstr(tmp.File("agent.db")));
}

TEST(AgentShardTest, CreateRejectsNoNodesRepeatedNodesAndBadPolicies) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  EXPECT_EQ(AgentShard::Create({}, Policy(), 1, tmp.path()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto repeated = AgentShard::Create(Records({3, 3}), Policy(), 1, tmp.path());
  EXPECT_EQ(repeated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(repeated.status().message(), HasSubstr("node 3 appears twice"));
  EXPECT_EQ(AgentShard::Create(Records({3}), Policy(-1), 1, tmp.path())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AgentShardTest, RowsOfOtherNodesAreKeptNotRestored) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  {
    auto shard = MakeShard(tmp.path(), 1);
    ASSERT_NE(shard, nullptr);
    MustRespondAll(*shard, LabelTask("c1", 1.0, {0, 2, 5, 7}));
  }
  auto shard = AgentShard::Create(Records({0, 2}), Policy(), 1, tmp.path());
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ((*shard)->counters().restored, 2u);
  EXPECT_EQ((*shard)->counters().foreign_rows, 2u);
  EXPECT_EQ(*(*shard)->store().Count(), 4);
}

TEST(AgentShardTest, ConcurrentTasksAreAllAnsweredOnce) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto shard = MakeShard(tmp.path(), 1, Policy(100.0));
  ASSERT_NE(shard, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        // Two threads share each epsilon: each question is fresh once.
        auto r = shard->RespondAll(FeatureTask(
            absl::StrCat("c", t, "-", i), 0.1 * (1 + (t % 2) * 5 + i),
            {0, 2, 5, 7}));
        EXPECT_TRUE(r.ok()) << r.status();
      }
    });
  }
  for (auto& th : threads) th.join();
  const ShardCounters c = shard->counters();
  EXPECT_EQ(c.fresh, 40u);
  EXPECT_EQ(c.memo_hits, 40u);
  EXPECT_EQ(*shard->store().Count(), 40);
}

// --- LoadShard ------------------------------------------------------------------

// 4 nodes, 2 features, labels {0, -1, 1, 0}, edges 0-1, 1-2, 0-3.
void WriteSmallDataset(const std::string& dir) {
  Dataset d;
  d.meta.name = "small";
  d.meta.classes = 2;
  auto g = Graph::FromEdges(4, std::vector<Edge>{{0, 1}, {1, 2}, {0, 3}});
  ASSERT_TRUE(g.ok()) << g.status();
  d.graph = std::move(*g);
  d.labels = {0, -1, 1, 0};
  d.features.cols = 2;
  const std::vector<uint32_t> i0 = {0}, i1 = {1}, i01 = {0, 1};
  const std::vector<float> v0 = {1.0f}, v1 = {4.0f}, v2 = {3.0f},
                           v3 = {2.0f, 2.0f};
  d.features.AppendRow(i0, v0);   // node 0: (1, 0)
  d.features.AppendRow(i1, v1);   // node 1: (0, 4)
  d.features.AppendRow(i0, v2);   // node 2: (3, 0)
  d.features.AppendRow(i01, v3);  // node 3: (2, 2)
  // The published schema: feature 0 in [0, 3], feature 1 in [0, 4].
  d.meta.feature_ranges = {{0.0, 3.0}, {0.0, 4.0}};
  ASSERT_TRUE(WriteDataset(d, dir).ok());
}

// --- neighbour substitution: the two questions -------------------------------

v1::MechanismSpec SubstitutionSpec(double eps_e, double eps_x = 1.0) {
  v1::MechanismSpec s;
  s.set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
  s.set_epsilon(eps_e);
  s.set_dimension(kNodes);
  v1::SubstitutionSpec* sub = s.mutable_substitution();
  sub->set_approach(1);
  sub->set_similarity("cosine");
  sub->set_top_k(3);
  sub->set_max_dummies(2);
  sub->set_dummy_mean(0.5);
  sub->set_dummy_std(0.5);
  sub->set_round_timeout_ms(1000);
  *sub->mutable_features() = FeatureSpec(eps_x);
  return s;
}

v1::Task SubstitutionTask(const std::string& campaign, double eps_e,
                          double eps_x = 1.0) {
  return MakeTask(campaign, v1::ATTRIBUTE_EDGES, SubstitutionSpec(eps_e, eps_x));
}

using Role = NodeAgent::SubstitutionStart::Role;

TEST(NodeAgentSubstitutionTest, FeaturesFirstThenTheListBothMemoized) {
  auto agent = MakeAgent(0, Policy(10.0));
  const v1::Task task = SubstitutionTask("c1", 1.0);
  auto start = agent->BeginSubstitution(task);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->role, Role::kTakePart);
  ASSERT_TRUE(start->own_feature.has_value());
  EXPECT_TRUE(start->fresh);
  ASSERT_TRUE(start->to_persist.has_value());
  EXPECT_EQ(start->to_persist->key.attribute, "features");
  EXPECT_DOUBLE_EQ(agent->budget().spent("features"), 1.0);
  EXPECT_DOUBLE_EQ(agent->budget().spent("edges"), 0.0);
  // The same question as a features campaign with that spec: one report.
  NodeAgent::Response features = MustRespond(*agent, FeatureTask("c2", 1.0));
  EXPECT_FALSE(features.fresh);
  EXPECT_EQ(features.report.features().SerializeAsString(),
            start->own_feature->SerializeAsString());
  // The final list: the edges question.
  auto done = agent->FinishSubstitution(task, {1, 4, 9});
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->fresh);
  EXPECT_THAT(std::vector<uint32_t>(done->report.edges().neighbours().begin(),
                                    done->report.edges().neighbours().end()),
              ElementsAre(1, 4, 9));
  EXPECT_EQ(done->report.campaign_id(), "c1");
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 2.0);
  // Asked again (another campaign): the stored answer, sent at once; the
  // node still takes part, with the dropped set that answer implies
  // (N(0) = {1, 4, 8}, listed {1, 4, 9}: 8 was dropped).
  auto again = agent->BeginSubstitution(SubstitutionTask("c3", 1.0));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->role, Role::kMemo);
  EXPECT_EQ(again->report.campaign_id(), "c3");
  EXPECT_EQ(Body(again->report), Body(done->report));
  ASSERT_TRUE(again->dropped.has_value());
  EXPECT_THAT(*again->dropped, ElementsAre(8));
  ASSERT_TRUE(again->own_feature.has_value());
  EXPECT_FALSE(again->fresh);
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 2.0);
  // Finishing the repeated question answers from the memo too.
  auto repeat = agent->FinishSubstitution(SubstitutionTask("c3", 1.0), {1});
  ASSERT_TRUE(repeat.ok());
  EXPECT_FALSE(repeat->fresh);
  EXPECT_EQ(Body(repeat->report), Body(done->report));
  // A list the protocol cannot produce is the agent's own failure.
  EXPECT_EQ(agent->FinishSubstitution(SubstitutionTask("c4", 2.0), {4, 1})
                .status()
                .code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(agent->FinishSubstitution(SubstitutionTask("c4", 2.0), {0})
                .status()
                .code(),
            absl::StatusCode::kInternal);
}

TEST(NodeAgentSubstitutionTest, NotAOneShotAnswer) {
  auto agent = MakeAgent(0, Policy(10.0));
  EXPECT_EQ(agent->Respond(SubstitutionTask("c1", 1.0)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(agent->BeginSubstitution(EdgeTask("c2", 1.0)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_DOUBLE_EQ(agent->budget().spent(), 0.0);
}

// Both questions must fit together, or the node refuses before drawing.
TEST(NodeAgentSubstitutionTest, RefusedWholeWhenTheTwoQuestionsDoNotFit) {
  auto poor = MakeAgent(0, Policy(1.5));
  auto start = poor->BeginSubstitution(SubstitutionTask("c1", 1.0));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->role, Role::kRefuse);
  EXPECT_EQ(start->report.refusal().reason(),
            v1::REFUSAL_REASON_BUDGET_EXHAUSTED);
  EXPECT_FALSE(start->own_feature.has_value());
  EXPECT_DOUBLE_EQ(poor->budget().spent(), 0.0);
  // A node that answered the feature question before pays eps_e only.
  auto enough = MakeAgent(0, Policy(2.0));
  MustRespond(*enough, FeatureTask("c0", 1.0));
  start = enough->BeginSubstitution(SubstitutionTask("c1", 1.0));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->role, Role::kTakePart);
  EXPECT_FALSE(start->fresh);
  // An edges cap counts eps_e.
  auto capped = MakeAgent(0, Policy(10.0, {{"edges", 0.5}}));
  start = capped->BeginSubstitution(SubstitutionTask("c1", 1.0));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->role, Role::kRefuse);
  EXPECT_THAT(start->report.refusal().message(), HasSubstr("'edges'"));
}

TEST(NodeAgentSubstitutionTest, PolicyAndDataRefusals) {
  AgentPolicy edges_only = Policy(10.0);
  edges_only.attributes = {"edges"};
  auto agent = MakeAgent(0, edges_only);
  auto start = agent->BeginSubstitution(SubstitutionTask("c1", 1.0));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->role, Role::kRefuse);
  EXPECT_EQ(start->report.refusal().reason(), v1::REFUSAL_REASON_POLICY);
  EXPECT_THAT(start->report.refusal().message(), HasSubstr("'features'"));

  NodeRecord bare = Record(0);
  bare.features = NodeFeatures();
  auto rng = NodeRandomSource(1, 0);
  auto no_data = NodeAgent::Create(bare, Policy(10.0), std::move(*rng));
  ASSERT_TRUE(no_data.ok());
  start = (*no_data)->BeginSubstitution(SubstitutionTask("c1", 1.0));
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->report.refusal().reason(), v1::REFUSAL_REASON_NO_DATA);

  v1::Task wrong_d = SubstitutionTask("c1", 1.0);
  wrong_d.mutable_spec()->mutable_substitution()->mutable_features()->set_dimension(5);
  start = agent->BeginSubstitution(wrong_d);
  ASSERT_TRUE(start.ok());
  // The policy is checked first; a node that allows features:
  auto full = MakeAgent(0, Policy(10.0));
  start = full->BeginSubstitution(wrong_d);
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->report.refusal().reason(), v1::REFUSAL_REASON_INVALID_TASK);
  EXPECT_THAT(start->report.refusal().message(),
              HasSubstr("spec.substitution.features.dimension is 5"));
  v1::Task raw = SubstitutionTask("c1", 1.0);
  raw.mutable_spec()->mutable_substitution()->mutable_features()->set_epsilon(
      INFINITY);
  start = full->BeginSubstitution(raw);
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->report.refusal().reason(), v1::REFUSAL_REASON_INVALID_TASK);
  EXPECT_THAT(start->report.refusal().message(),
              HasSubstr("raw features never leave an agent"));
}

TEST(AgentShardTest, SubstitutionFeaturesAreDurableBeforeTheyLeave) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto shard = MakeShard(tmp.path(), 1);
  ASSERT_NE(shard, nullptr);
  v1::Task task = SubstitutionTask("c1", 1.0);
  for (uint32_t v : {7u, 0u, 3u}) task.add_node_ids(v);
  auto begun = shard->BeginSubstitution(task);
  ASSERT_TRUE(begun.ok()) << begun.status();
  ASSERT_EQ(begun->nodes.size(), 2u);
  EXPECT_EQ(begun->nodes[0].first, 7u);
  EXPECT_EQ(begun->not_in_shard, 1u);
  EXPECT_EQ(*shard->store().Count(), 2);  // the two feature answers
  auto report = shard->FinishSubstitution(task, 7, {1, 4, 8});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->node_id(), 7u);
  EXPECT_EQ(*shard->store().Count(), 3);
  EXPECT_EQ(shard->FinishSubstitution(task, 3, {}).status().code(),
            absl::StatusCode::kNotFound);
  // A restarted shard: the same keys, the answers remembered.
  const std::string key7(shard->key_pair(7)->public_key());
  EXPECT_EQ(shard->counters().keys_generated, 4u);
  shard.reset();
  shard = MakeShard(tmp.path(), 2);
  ASSERT_NE(shard, nullptr);
  EXPECT_EQ(shard->counters().keys_generated, 0u);
  EXPECT_EQ(shard->key_pair(7)->public_key(), key7);
  EXPECT_NE(shard->key_pair(0)->public_key(), key7);
  EXPECT_EQ(shard->key_pair(3), nullptr);
  begun = shard->BeginSubstitution(task);
  ASSERT_TRUE(begun.ok());
  EXPECT_EQ(begun->nodes[0].second.role, Role::kMemo);
  EXPECT_EQ(begun->nodes[1].second.role, Role::kTakePart);
  EXPECT_FALSE(begun->nodes[1].second.fresh);
}

// Without sealing keys a shard makes and stores none, its nodes have no
// key pair (so they sit out substitution), and they answer as before.
TEST(AgentShardTest, WithoutSealingKeysMakesNone) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto shard = AgentShard::Create(Records({0, 2, 5, 7}), Policy(), 1,
                                  tmp.path(), {}, nullptr,
                                  /*sealing_keys=*/false);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ((*shard)->counters().keys_generated, 0u);
  for (uint32_t v : {0u, 2u, 5u, 7u}) EXPECT_EQ((*shard)->key_pair(v), nullptr);
  auto stored = (*shard)->store().LoadKeys();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
  v1::Task task = SubstitutionTask("c1", 1.0);
  task.add_node_ids(7);
  auto begun = (*shard)->BeginSubstitution(task);
  ASSERT_TRUE(begun.ok()) << begun.status();
  shard->reset();
  // The same folder with keys: every node gets one then.
  auto keyed = MakeShard(tmp.path(), 1);
  ASSERT_NE(keyed, nullptr);
  EXPECT_EQ(keyed->counters().keys_generated, 4u);
  EXPECT_NE(keyed->key_pair(7), nullptr);
}

TEST(LoadShardTest, GivesEachNodeItsScaledFeaturesLabelAndNeighbours) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  WriteSmallDataset(tmp.path());
  auto shard = LoadShard(tmp.path(), FeatureScaling::kUnit, 1, 4);
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_EQ(shard->size(), 3u);
  const NodeRecord& n1 = (*shard)[0];
  EXPECT_EQ(n1.node, 1u);
  EXPECT_THAT(n1.features.Dense(), ElementsAre(0.0, 1.0));
  EXPECT_FALSE(n1.label.has_value());
  EXPECT_THAT(n1.neighbours, ElementsAre(0, 2));
  const NodeRecord& n2 = (*shard)[1];
  EXPECT_THAT(n2.features.Dense(), ElementsAre(1.0, 0.0));
  EXPECT_EQ(n2.label, 1);
  EXPECT_THAT(n2.neighbours, ElementsAre(1));
  const NodeRecord& n3 = (*shard)[2];
  const std::vector<double> f3 = n3.features.Dense();
  ASSERT_EQ(f3.size(), 2u);
  EXPECT_NEAR(f3[0], 2.0 / 3.0, 1e-6);  // stored as float
  EXPECT_DOUBLE_EQ(f3[1], 0.5);
  EXPECT_EQ(n3.label, 0);
  EXPECT_THAT(n3.neighbours, ElementsAre(0));

  // Symmetric scaling maps absent zeros to -1.
  auto symmetric = LoadShard(tmp.path(), FeatureScaling::kSymmetric, 0, 1);
  ASSERT_TRUE(symmetric.ok()) << symmetric.status();
  const std::vector<double> f0 = (*symmetric)[0].features.Dense();
  EXPECT_NEAR(f0[0], -1.0 / 3.0, 1e-6);
  EXPECT_DOUBLE_EQ(f0[1], -1.0);
  // No scaling keeps the stored values.
  auto none = LoadShard(tmp.path(), FeatureScaling::kNone, 1, 2);
  ASSERT_TRUE(none.ok());
  EXPECT_THAT((*none)[0].features.Dense(), ElementsAre(0.0, 4.0));
}

TEST(LoadShardTest, RejectsAnEmptyOrOutOfRangeShard) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  WriteSmallDataset(tmp.path());
  auto empty = LoadShard(tmp.path(), FeatureScaling::kUnit, 2, 2);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("is empty"));
  auto beyond = LoadShard(tmp.path(), FeatureScaling::kUnit, 2, 5);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(beyond.status().message(), HasSubstr("beyond its 4 nodes"));
  EXPECT_EQ(LoadShard(tmp.File("missing"), FeatureScaling::kUnit, 0, 1)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(LoadShardTest, RefusesAFolderWithoutSchemaOrIndexNamingTheCommand) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  WriteSmallDataset(tmp.path());
  auto meta = LoadDatasetMeta(tmp.path());
  ASSERT_TRUE(meta.ok());
  meta->feature_ranges.clear();
  auto d = LoadDataset(tmp.path());
  ASSERT_TRUE(d.ok());
  d->meta = *meta;
  ASSERT_TRUE(WriteDataset(*d, tmp.path()).ok());
  auto refused = LoadShard(tmp.path(), FeatureScaling::kUnit, 0, 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("ldpgraph prepare --dataset " + tmp.path()));
  // Stored values need no schema.
  EXPECT_TRUE(LoadShard(tmp.path(), FeatureScaling::kNone, 0, 2).ok());
  fs::remove(tmp.File(kDeviceIndexFile));
  EXPECT_THAT(LoadShard(tmp.path(), FeatureScaling::kNone, 0, 2)
                  .status()
                  .message(),
              HasSubstr("no device index"));
}

// A host reads only its own nodes' lines: over a copy of the dataset whose
// every line outside the shard is garbage (nodes.svm, all of edges.txt),
// the same seed gives the same reports, byte for byte, when the index's
// checksums are not checked (as past kDeviceIndexChecksumBytes); with them
// checked, the garbled copy is refused as not what was indexed.
TEST(LoadShardTest, GarbageOutsideTheShardChangesNoReport) {
  TempFolder tmp;
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 400;
  o.features = 32;
  auto d = GenerateDataset(o, {});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string clean = tmp.File("clean"), dirty = tmp.File("dirty");
  ASSERT_TRUE(WriteDataset(*d, clean).ok());
  ASSERT_TRUE(WriteDataset(*d, dirty).ok());
  const uint32_t begin = 200, end = 240;
  {
    std::string svm = ReadFileToString(dirty + "/nodes.svm").value();
    size_t line = 0;
    for (size_t at = 0; at < svm.size(); at = svm.find('\n', at) + 1, ++line) {
      if (line >= begin && line < end) continue;
      for (size_t k = at; svm[k] != '\n'; ++k) svm[k] = '~';
    }
    std::ofstream(dirty + "/nodes.svm", std::ios::trunc) << svm;
    std::string edges = ReadFileToString(dirty + "/edges.txt").value();
    for (char& c : edges) c = c == '\n' ? c : '~';
    std::ofstream(dirty + "/edges.txt", std::ios::trunc) << edges;
  }
  ASSERT_FALSE(LoadDataset(dirty).ok());
  EXPECT_THAT(LoadShard(dirty, FeatureScaling::kSymmetric, begin, end)
                  .status()
                  .message(),
              HasSubstr("has changed since it was indexed"));
  std::vector<uint32_t> nodes;
  for (uint32_t v = begin; v < end; ++v) nodes.push_back(v);
  std::vector<std::string> answers[2];
  for (int k = 0; k < 2; ++k) {
    auto records =
        LoadShard(k == 0 ? clean : dirty, FeatureScaling::kSymmetric, begin,
                  end, /*checksum_bytes=*/0);
    ASSERT_TRUE(records.ok()) << records.status();
    auto shard = AgentShard::Create(std::move(*records), Policy(), 11,
                                    tmp.File(absl::StrCat("state", k)));
    ASSERT_TRUE(shard.ok()) << shard.status();
    v1::MechanismSpec spec = FeatureSpec(1.0, 32);
    spec.set_sampled(4);
    for (const auto& task :
         {MakeTask("f", v1::ATTRIBUTE_FEATURES, spec, nodes),
          MakeTask("e", v1::ATTRIBUTE_EDGES, EdgeSpec(2.0, 400), nodes)}) {
      auto r = (*shard)->RespondAll(task);
      ASSERT_TRUE(r.ok()) << r.status();
      for (const auto& report : r->reports) {
        answers[k].push_back(report.SerializeAsString());
      }
    }
  }
  ASSERT_EQ(answers[0].size(), 2u * (end - begin));
  EXPECT_EQ(answers[0], answers[1]);
}

TEST(LoadShardTest, CoraShardAnswersACampaign) {
  // Cora when the shared datasets are here; otherwise a generated dataset of
  // cora's shape (2708 nodes, 7 classes, 1433 features), so that the test
  // never stops testing for want of them.
  std::string source = SharedDatasetsDir() + "/cora";
  TempFolder prepared;
  if (!fs::exists(source + "/meta.json")) {
    const GeneratorOptions o = testing_datasets::CoraShapedOptions();
    auto generated = GenerateDataset(o);
    ASSERT_TRUE(generated.ok()) << generated.status();
    std::cerr << "no dataset at " << source
              << ": a generated dataset of cora's shape stands in\n";
    source = prepared.File("cora-shaped");
    ASSERT_TRUE(WriteDataset(*generated, source).ok());
  }
  const std::string cora = prepared.File("cora");
  ASSERT_TRUE(PrepareDataset(source, cora).ok());
  auto records = LoadShard(cora, FeatureScaling::kUnit, 1000, 1100);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 100u);
  size_t degree_sum = 0;
  // Each record's features, made on demand, are the scaled row of the
  // node's stored non-zeros, bit for bit: what the agent held before it
  // kept only those.
  auto meta = LoadDatasetMeta(cora);
  ASSERT_TRUE(meta.ok()) << meta.status();
  auto stored = ReadDeviceRecords(cora, *meta, 1000, 1100);
  ASSERT_TRUE(stored.ok()) << stored.status();
  auto schema = DeclaredFeatureSchema(*meta, cora);
  ASSERT_TRUE(schema.ok()) << schema.status();
  for (size_t i = 0; i < records->size(); ++i) {
    const std::vector<double> want = ScaleFeatureRow(
        (*stored)[i].indices, (*stored)[i].values, *schema, FeatureScaling::kUnit);
    const std::vector<double> got = (*records)[i].features.Dense();
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(double)))
        << "node " << (*records)[i].node;
  }
  for (const NodeRecord& r : *records) {
    ASSERT_EQ(r.features.dimension(), 1433u);
    for (double x : r.features.Dense()) ASSERT_TRUE(x >= 0.0 && x <= 1.0);
    ASSERT_TRUE(r.label.has_value());
    EXPECT_LT(*r.label, 7);
    degree_sum += r.neighbours.size();
  }
  EXPECT_GT(degree_sum, 100u);

  TempFolder tmp(TempFolder::kLeaveMissing);
  std::vector<uint32_t> nodes;
  for (const NodeRecord& r : *records) nodes.push_back(r.node);
  auto shard = AgentShard::Create(std::move(*records), Policy(), 3, tmp.path());
  ASSERT_TRUE(shard.ok()) << shard.status();
  v1::MechanismSpec spec = FeatureSpec(1.0, 1433);
  spec.set_sampled(10);
  auto r = (*shard)->RespondAll(
      MakeTask("cora", v1::ATTRIBUTE_FEATURES, spec, nodes));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fresh, 100u);
  auto e = (*shard)->RespondAll(
      MakeTask("cora-edges", v1::ATTRIBUTE_EDGES, EdgeSpec(2.0, 2708), nodes));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->fresh, 100u);
}

}  // namespace
}  // namespace ldpgraph::agent

namespace ldpgraph::agent {
namespace {

// Simulated poisoning in a shard: the attacker's nodes answer features with
// crafted reports on its target dimensions (valid for the curator) and
// labels with its class, spending the budget as honest answers do; a
// restarted shard re-sends the same crafted answer from its memo; honest
// nodes and edge answers are untouched.
TEST(SimulatedAttackTest, MaliciousNodesCraftThroughTheBudgetAndMemo) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  SimulatedAttack attack;
  auto adversary = poisoning::Adversary::Create(2, {1, 3});
  ASSERT_TRUE(adversary.ok());
  attack.adversary = std::move(*adversary);
  attack.nodes = {2, 7, 99};  // 99: not in the shard, ignored
  const v1::Task features = MakeTask(
      "c1", v1::ATTRIBUTE_FEATURES,
      FeatureSpec(1.0, 4, v1::MECHANISM_KIND_MULTIBIT), {0, 2, 5, 7});
  const v1::Task labels = LabelTask("c2", 1.0, {0, 2, 5, 7});
  std::vector<std::string> first;
  {
    auto shard = AgentShard::Create(Records({0, 2, 5, 7}), Policy(), 1,
                                    tmp.path(), {}, &attack);
    ASSERT_TRUE(shard.ok()) << shard.status();
    ShardResponse r = MustRespondAll(**shard, features);
    ASSERT_EQ(r.reports.size(), 4u);
    EXPECT_EQ(r.fresh, 4u);
    auto compiled = wire::CompiledSpec::Compile(features.spec());
    ASSERT_TRUE(compiled.ok());
    for (const v1::Report& report : r.reports) {
      auto decoded =
          wire::DecodeFeatureReport(report.features(), *compiled->feature());
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      if (report.node_id() == 2 || report.node_id() == 7) {
        ASSERT_EQ(decoded->indices.size(), 1u);
        EXPECT_TRUE(decoded->indices[0] == 1 || decoded->indices[0] == 3);
        EXPECT_TRUE(decoded->bits[0]);
      }
    }
    ShardResponse l = MustRespondAll(**shard, labels);
    for (const v1::Report& report : l.reports) {
      if (report.node_id() == 2 || report.node_id() == 7) {
        EXPECT_EQ(report.label().label(), 2u);
      }
    }
    EXPECT_DOUBLE_EQ(*(*shard)->spent(2), 2.0);
    EXPECT_DOUBLE_EQ(*(*shard)->spent(0), 2.0);
    first = Bodies(r);
  }
  // Restarted (even without the attack): the memo answers, no fresh draw.
  auto again = AgentShard::Create(Records({0, 2, 5, 7}), Policy(), 1,
                                  tmp.path());
  ASSERT_TRUE(again.ok()) << again.status();
  ShardResponse r = MustRespondAll(**again, features);
  EXPECT_EQ(r.memo_hits, 4u);
  EXPECT_EQ(Bodies(r), first);
}

// Honest nodes of a shard with an attack answer exactly as without one
// (same seed); edge answers of malicious nodes too.
TEST(SimulatedAttackTest, HonestAnswersAndEdgesAreUnchanged) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  SimulatedAttack attack;
  attack.adversary = std::move(*poisoning::Adversary::Create(0, {0}));
  attack.nodes = {5};
  auto a = AgentShard::Create(Records({0, 5}), Policy(), 3,
                              tmp.path() + "/with", {}, &attack);
  auto b = AgentShard::Create(Records({0, 5}), Policy(), 3,
                              tmp.path() + "/without");
  ASSERT_TRUE(a.ok() && b.ok());
  // Edges first: each node's stream is then where an honest node's is.
  const v1::Task edges = EdgeTask("c3", 1.0, {0, 5});
  EXPECT_EQ(Bodies(MustRespondAll(**a, edges)),
            Bodies(MustRespondAll(**b, edges)));
  const v1::Task features = FeatureTask("c1", 1.0, {0, 5});
  const std::vector<std::string> fa = Bodies(MustRespondAll(**a, features));
  const std::vector<std::string> fb = Bodies(MustRespondAll(**b, features));
  EXPECT_EQ(fa[0], fb[0]);
  EXPECT_NE(fa[1], fb[1]);
}

// fake-edges: the attacker's nodes answer edge randomized response and
// Blink with the EdgeAdversary's crafted reports, drawn from their own
// stream (exactly CraftRrReport / CraftBlinkReport on it), valid for the
// curator; honest nodes answer as without the attack.
TEST(SimulatedAttackTest, FakeEdgesNodesCraftTheirEdgeReports) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  constexpr uint64_t kSeed = 3;
  SimulatedAttack attack;
  attack.adversary = std::move(*poisoning::Adversary::Create(
      0, {0}, poisoning::AttackKind::kFakeEdges));
  auto edge_adversary = poisoning::EdgeAdversary::Create(kNodes, {5}, 3);
  ASSERT_TRUE(edge_adversary.ok()) << edge_adversary.status();
  attack.edge_adversary = std::move(*edge_adversary);
  attack.nodes = {5};
  auto a = AgentShard::Create(Records({0, 5}), Policy(), kSeed,
                              tmp.path() + "/with", {}, &attack);
  auto b = AgentShard::Create(Records({0, 5}), Policy(), kSeed,
                              tmp.path() + "/without");
  ASSERT_TRUE(a.ok() && b.ok());
  const v1::Task rr_task = EdgeTask("c1", 1.0, {0, 5});
  const ShardResponse ra = MustRespondAll(**a, rr_task);
  const ShardResponse rb = MustRespondAll(**b, rr_task);
  ASSERT_EQ(ra.reports.size(), 2u);
  EXPECT_EQ(Body(ra.reports[0]), Body(rb.reports[0]));  // honest node 0
  auto rr = EdgeRandomizedResponse::Create(1.0, kNodes);
  ASSERT_TRUE(rr.ok()) << rr.status();
  SeededRandomForTesting stream(NodeNoiseSeed(EdgeStreamSeed(kSeed), 5));
  auto crafted = attack.edge_adversary->CraftRrReport(**rr, 5, stream);
  ASSERT_TRUE(crafted.ok()) << crafted.status();
  const v1::EdgeReport& e = ra.reports[1].edges();
  EXPECT_EQ(std::vector<uint32_t>(e.neighbours().begin(), e.neighbours().end()),
            *crafted);
  EXPECT_TRUE(wire::ValidateEdgeReport(e, rr_task.spec(), 5).ok());
  // Blink, next in the node's edge stream: the claimed degree n - 2.
  const v1::Task blink_task =
      MakeTask("c2", v1::ATTRIBUTE_EDGES, BlinkSpec(2.0, 0.25), {5});
  const ShardResponse rblink = MustRespondAll(**a, blink_task);
  ASSERT_EQ(rblink.reports.size(), 1u);
  const v1::EdgeReport& eb = rblink.reports[0].edges();
  EXPECT_EQ(eb.noisy_degree(), attack.edge_adversary->claimed_degree());
  EXPECT_TRUE(wire::ValidateEdgeReport(eb, blink_task.spec(), 5).ok())
      << wire::ValidateEdgeReport(eb, blink_task.spec(), 5);
  EXPECT_DOUBLE_EQ(*(*a)->spent(5), 3.0);
}

// The attacker of a dataset folder: every malicious node of the dataset
// (not only a shard's) less the offline ones, and the target dimensions of
// their records.
TEST(SimulatedAttackTest, LoadSimulatedAttackPoolsTheDatasetsMaliciousNodes) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  WriteSmallDataset(tmp.path());
  poisoning::AttackSettings s{0.9, 1, 1};
  uint64_t seed = 0;
  // A seed that makes nodes 2 (class 1, feature 0) and 3 malicious.
  for (; seed < 10000; ++seed) {
    if (SimulatedMalicious(seed, 2, 0.9) && SimulatedMalicious(seed, 3, 0.9) &&
        !SimulatedMalicious(seed, 1, 0.9)) {
      break;
    }
  }
  auto attack = LoadSimulatedAttack(tmp.path(), FeatureScaling::kUnit, s, seed,
                                    [](uint32_t) { return false; });
  ASSERT_TRUE(attack.ok()) << attack.status();
  EXPECT_TRUE(attack->nodes.contains(2) && attack->nodes.contains(3));
  EXPECT_FALSE(attack->nodes.contains(1));
  EXPECT_THAT(attack->adversary->target_dims(), ElementsAre(0));
  auto offline = LoadSimulatedAttack(tmp.path(), FeatureScaling::kUnit, s, seed,
                                     [](uint32_t v) { return v == 2; });
  ASSERT_TRUE(offline.ok());
  EXPECT_FALSE(offline->nodes.contains(2));
  s.target_class = 2;  // the dataset has 2 classes
  EXPECT_EQ(LoadSimulatedAttack(tmp.path(), FeatureScaling::kUnit, s, seed,
                                [](uint32_t) { return false; })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// The attacker's kind reaches its adversary; the adaptive one also gets
// its plan (the dataset's n, its node count, the screen level it assumes,
// the whole ranking), so that its targets widen under a sampling
// mechanism; the others keep the R dimensions.
TEST(SimulatedAttackTest, LoadSimulatedAttackBuildsTheKindAndTheAdaptivePlan) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  WriteSmallDataset(tmp.path());
  auto none = [](uint32_t) { return false; };
  poisoning::AttackSettings s{0.9, 1, 1, poisoning::AttackKind::kLabelsOnly};
  auto labels_only =
      LoadSimulatedAttack(tmp.path(), FeatureScaling::kUnit, s, 7, none);
  ASSERT_TRUE(labels_only.ok()) << labels_only.status();
  EXPECT_EQ(labels_only->adversary->kind(), poisoning::AttackKind::kLabelsOnly);
  EXPECT_EQ(labels_only->edge_adversary, nullptr);
  // fake-edges: a seed that leaves an honest node to claim.
  s.kind = poisoning::AttackKind::kFakeEdges;
  auto drawn = [](uint64_t seed) {
    int m = 0;
    for (uint32_t v = 0; v < 4; ++v) m += SimulatedMalicious(seed, v, 0.9);
    return m;
  };
  uint64_t seed = 0;
  while (drawn(seed) == 0 || drawn(seed) == 4) ++seed;
  auto fake_edges = LoadSimulatedAttack(tmp.path(), FeatureScaling::kUnit, s,
                                        seed, none, 1e-3, 1);
  ASSERT_TRUE(fake_edges.ok()) << fake_edges.status();
  ASSERT_NE(fake_edges->edge_adversary, nullptr);
  EXPECT_EQ(fake_edges->edge_adversary->nodes(), 4u);
  EXPECT_EQ(fake_edges->edge_adversary->victims_per_node(), 1u);
  EXPECT_EQ(std::set<uint32_t>(fake_edges->edge_adversary->malicious().begin(),
                               fake_edges->edge_adversary->malicious().end()),
            fake_edges->nodes);
  s.kind = poisoning::AttackKind::kAdaptive;
  auto adaptive =
      LoadSimulatedAttack(tmp.path(), FeatureScaling::kUnit, s, 7, none, 0.5);
  ASSERT_TRUE(adaptive.ok()) << adaptive.status();
  EXPECT_EQ(adaptive->adversary->kind(), poisoning::AttackKind::kAdaptive);
  EXPECT_EQ(adaptive->adversary->target_dims(),
            labels_only->adversary->target_dims());
  EXPECT_EQ(adaptive->nodes, labels_only->nodes);
  // HDS samples k = 1 of d = 2: the adaptive targets are the first
  // AdaptiveTargetCount(n, its nodes, d, k, alpha, R) of the ranking.
  auto hds = CreateFeatureMechanism(
      MechanismSpec{MechanismKind::kHds, 1.0, 2, 1, -1.0, 1.0});
  ASSERT_TRUE(hds.ok()) << hds.status();
  const int r = poisoning::AdaptiveTargetCount(
      4, adaptive->nodes.size(), 2, 1, 0.5, 1);
  EXPECT_EQ(adaptive->adversary->TargetsFor(**hds).size(),
            static_cast<size_t>(r));
  // A level outside (0, 1) is refused.
  EXPECT_EQ(LoadSimulatedAttack(tmp.path(), FeatureScaling::kUnit, s, 7, none,
                                1.0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

absl::StatusOr<SimulatedAttackFlags> ParseAttack(
    const std::vector<std::string>& args) {
  std::set<std::string> names(SimulatedAttackFlagNames().begin(),
                              SimulatedAttackFlagNames().end());
  ASSIGN_OR_RETURN(CliArgs a, CliArgs::Parse(args, names, {}));
  return ParseSimulatedAttackFlags(a);
}

// ldpgraph-agent's attack flags: every setting read, defaults kept.
TEST(SimulatedAttackFlagsTest, ReadsEverySetting) {
  auto none = ParseAttack({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->settings.fraction, 0);
  EXPECT_EQ(none->settings.kind, poisoning::AttackKind::kMaximalGain);
  EXPECT_EQ(none->screen_alpha, 1e-3);
  auto f = ParseAttack({"--malicious", "0.2", "--malicious-seed", "9",
                        "--attack", "adaptive", "--attack-class", "3",
                        "--attack-dims", "4", "--attack-alpha", "0.01"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->settings.fraction, 0.2);
  EXPECT_EQ(f->seed, 9u);
  EXPECT_EQ(f->settings.kind, poisoning::AttackKind::kAdaptive);
  EXPECT_EQ(f->settings.target_class, 3);
  EXPECT_EQ(f->settings.target_dims, 4);
  EXPECT_EQ(f->screen_alpha, 0.01);
  EXPECT_EQ(f->attack_edges, poisoning::kDefaultAttackEdges);
  auto labels = ParseAttack({"--malicious", "0.1", "--attack", "labels-only"});
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->settings.kind, poisoning::AttackKind::kLabelsOnly);
  auto edges = ParseAttack(
      {"--malicious", "0.1", "--attack", "fake-edges", "--attack-edges", "7"});
  ASSERT_TRUE(edges.ok()) << edges.status();
  EXPECT_EQ(edges->attack_edges, 7);
}

// Each rejected input names its flag.
TEST(SimulatedAttackFlagsTest, BadFlagsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--attack", "labels-only"},
       "--attack applies to --malicious F with F > 0"},
      {{"--malicious", "0", "--attack", "adaptive"},
       "--attack applies to --malicious F with F > 0"},
      {{"--attack-alpha", "0.1"},
       "--attack-alpha applies to --malicious F with F > 0"},
      {{"--attack-class", "1"},
       "--attack-class applies to --malicious F with F > 0"},
      {{"--malicious", "0.1", "--attack", "flood"}, "--attack"},
      {{"--malicious", "0.1", "--attack", "flood"}, "'flood'"},
      {{"--malicious", "0.1", "--attack-alpha", "0.1"},
       "--attack-alpha applies to --attack adaptive (the attacker that knows "
       "the screen), not maximal-gain"},
      {{"--malicious", "0.1", "--attack", "adaptive", "--attack-alpha", "1"},
       "--attack-alpha must be in (0, 1), got 1"},
      {{"--malicious", "0.1", "--attack", "adaptive", "--attack-alpha", "0"},
       "--attack-alpha must be in (0, 1), got 0"},
      {{"--malicious", "1"}, "--malicious must be in [0, 1), got 1"},
      {{"--attack-edges", "5"},
       "--attack-edges applies to --malicious F with F > 0"},
      {{"--malicious", "0.1", "--attack-edges", "5"},
       "--attack-edges applies to --attack fake-edges, not maximal-gain"},
      {{"--malicious", "0.1", "--attack", "fake-edges", "--attack-edges", "0"},
       "--attack-edges must be >= 1, got 0"},
      {{"--malicious", "0.1", "--attack-dims", "0"},
       "--attack-dims must be >= 1, got 0"},
      {{"--malicious", "0.1", "--attack-class", "-1"},
       "--attack-class must be a class >= 0, got -1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrJoin(c.args, " "));
    auto f = ParseAttack(c.args);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(f.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace ldpgraph::agent

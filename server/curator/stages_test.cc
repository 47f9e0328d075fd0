// The estimate stage's report screen and the evaluate stage after it: a
// curator of 2,000 nodes, an HDS campaign over 50 dimensions (k = 1) to
// which 100 nodes send the maximal-gain attack's reports (dimensions 0 and
// 1, maximal values) and a label campaign to which they report a wrong
// class. With defence "screen" the estimate empties their rows and names
// them, and the evaluate stage trains on none of their labels.
#include "server/curator/stages.h"

#include <nlohmann/json.hpp>

#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/curator/credentials.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNodes = 2000;
constexpr uint32_t kAttackers = 100;  // nodes 0..99
constexpr int kDims = 50;
const std::string kKey(32, 'k');

class StagesScreenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::CuratorStore::Open(dir_.path(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    Curator::Options o;
    o.num_nodes = kNodes;
    o.node_key = kKey;
    auto c = Curator::Open(std::move(*store), o);
    ASSERT_TRUE(c.ok()) << c.status();
    curator_ = std::move(*c);
    // The curator's public data: a ring, two classes by parity.
    std::vector<Edge> edges;
    for (uint32_t v = 0; v < kNodes; ++v) edges.push_back({v, (v + 2) % kNodes});
    auto g = Graph::FromEdges(kNodes, edges);
    ASSERT_TRUE(g.ok()) << g.status();
    data_.graph = *std::move(g);
    data_.meta.nodes = kNodes;
    data_.meta.classes = 2;
    for (uint32_t v = 0; v < kNodes; ++v) data_.labels.push_back(v % 2);
    data_.features.cols = kDims;
    Collect();
  }
  void TearDown() override { curator_.reset(); }

  // c1: HDS features; c2: label randomized response. Honest node v reports
  // dimension v % 50 and its true label; an attacker dimension v % 2 at the
  // wave's top and the wrong label.
  void Collect() {
    v1::EnrolRequest enrol;
    for (uint32_t v = 0; v < kNodes; ++v) {
      auto* n = enrol.add_nodes();
      n->set_node_id(v);
      n->set_secret(NodeCredential(kKey, v));
    }
    auto session = curator_->Enrol(enrol);
    ASSERT_TRUE(session.ok()) << session.status();
    v1::CreateCampaignRequest hds;
    hds.set_attribute(v1::ATTRIBUTE_FEATURES);
    auto* s = hds.mutable_spec();
    s->set_kind(v1::MECHANISM_KIND_HDS);
    s->set_epsilon(1);
    s->set_dimension(kDims);
    s->set_sampled(1);
    s->set_range_low(-1);
    s->set_range_high(1);
    hds.mutable_nodes()->set_all(true);
    hds.set_quorum(1);
    ASSERT_TRUE(curator_->CreateCampaign(hds).ok());  // c1
    v1::CreateCampaignRequest label;
    label.set_attribute(v1::ATTRIBUTE_LABEL);
    label.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
    label.mutable_spec()->set_epsilon(2);
    label.mutable_spec()->set_dimension(2);
    label.mutable_nodes()->set_all(true);
    label.set_quorum(1);
    ASSERT_TRUE(curator_->CreateCampaign(label).ok());  // c2
    v1::ReportBatch batch;
    auto flush = [&] {
      auto ack = curator_->Ingest(**session, batch);
      ASSERT_TRUE(ack.ok()) << ack.status();
      for (const auto& r : ack->results()) ASSERT_EQ(r.code(), 0) << r.message();
      batch.Clear();
    };
    for (uint32_t v = 0; v < kNodes; ++v) {
      const bool attacker = v < kAttackers;
      v1::Report* f = batch.add_reports();
      f->set_campaign_id("c1");
      f->set_node_id(v);
      f->mutable_features()->add_indices(attacker ? v % 2 : v % kDims);
      // The top of the square wave at eps 1 is 1 + b; 1.5 is within it.
      f->mutable_features()->add_values(attacker ? 1.5 : 0.5);
      v1::Report* l = batch.add_reports();
      l->set_campaign_id("c2");
      l->set_node_id(v);
      l->mutable_label()->set_label(attacker ? 1 - v % 2 : v % 2);
      if (batch.reports_size() >= 500) flush();
    }
    if (batch.reports_size() > 0) flush();
  }

  absl::StatusOr<nlohmann::json> EvaluateDetails(const std::string& estimate) {
    v1::EvaluateRequest q;
    q.set_input(estimate);
    q.set_pipeline_method(v1::PIPELINE_METHOD_LPGNN);
    q.set_pipeline_task(v1::PIPELINE_TASK_NODE);
    q.set_label_campaign_id("c2");
    q.set_seed(1);
    auto r = stages_->Evaluate(q);
    if (!r.ok()) return r.status();
    return nlohmann::json::parse(r->details_json());
  }

  TempFolder dir_;
  std::unique_ptr<Curator> curator_;
  Dataset data_;
  std::unique_ptr<Stages> stages_;
};

TEST_F(StagesScreenTest, EstimateEmptiesFlaggedRowsAndEvaluateDropsThem) {
  stages_ = std::make_unique<Stages>(curator_.get(), &data_, dir_.path(),
                                     false, ReleaseBudget{}, 2);
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  auto plain = stages_->Estimate(e);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(nlohmann::json::parse(plain->details_json()).contains("screen"));
  e.set_defence("screen");
  auto screened = stages_->Estimate(e);
  ASSERT_TRUE(screened.ok()) << screened.status();
  const auto details = nlohmann::json::parse(screened->details_json());
  EXPECT_EQ(details["screen"], "applied");
  EXPECT_EQ(details["alpha"], 1e-3);
  EXPECT_EQ(details["overreported_dims"], 2);
  // Every attacker, and the honest nodes of dimensions 0 and 1 (38 each).
  EXPECT_EQ(details["flagged_nodes"], kAttackers + 76);
  std::vector<uint32_t> flagged = details["flagged"];
  for (uint32_t v = 0; v < kAttackers; ++v) EXPECT_EQ(flagged[v], v);
  auto m = stages_->Matrix(screened->id());
  auto before = stages_->Matrix(plain->id());
  ASSERT_TRUE(m.ok() && before.ok());
  for (uint32_t v : {0u, 1u, 99u, 100u, 150u}) {  // flagged: empty rows
    EXPECT_EQ(m->at(v, v % 2), 0.0f) << v;
    EXPECT_NE(before->at(v, v % 2), 0.0f) << v;
  }
  EXPECT_EQ(m->at(102, 2), before->at(102, 2));  // not flagged: as it was
  EXPECT_NE(m->at(102, 2), 0.0f);

  // Evaluate: without the screen the attackers' wrong labels are trained
  // on; after it none is.
  auto poisoned = EvaluateDetails(plain->id());
  ASSERT_TRUE(poisoned.ok()) << poisoned.status();
  EXPECT_LT((*poisoned)["label_agreement_raw"].get<double>(), 1.0);
  EXPECT_FALSE(poisoned->contains("untrusted_nodes"));
  auto clean = EvaluateDetails(screened->id());
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ((*clean)["label_agreement_raw"].get<double>(), 1.0);
  EXPECT_EQ((*clean)["untrusted_nodes"], kAttackers + 76);
}

TEST_F(StagesScreenTest, BadDefenceSettingsAreRefused) {
  stages_ = std::make_unique<Stages>(curator_.get(), &data_, dir_.path());
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  e.set_defence("filter");
  EXPECT_THAT(stages_->Estimate(e).status().message(),
              HasSubstr("defence must be one of none, screen, got 'filter'"));
  e.set_defence("none");
  e.set_screen_alpha(0.01);
  EXPECT_THAT(stages_->Estimate(e).status().message(),
              HasSubstr("screen_alpha needs defence \"screen\""));
  e.set_defence("screen");
  e.set_screen_alpha(1.5);
  EXPECT_EQ(stages_->Estimate(e).status().code(),
            absl::StatusCode::kInvalidArgument);
  e.set_screen_alpha(0.01);
  auto ok = stages_->Estimate(e);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(nlohmann::json::parse(ok->details_json())["alpha"], 0.01);
}

}  // namespace
}  // namespace ldpgraph::curator

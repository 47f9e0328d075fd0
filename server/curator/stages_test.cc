// The estimate stage's report screen and the evaluate stage after it: a
// curator of 2,000 nodes, an HDS campaign over 50 dimensions (k = 1) to
// which 100 nodes send the maximal-gain attack's reports (dimensions 0 and
// 1, maximal values) and a label campaign to which they report a wrong
// class. With defence "screen" the estimate empties their rows and names
// them, and the evaluate stage trains on none of their labels.
//
// Blink (StagesBlinkTest): a Blink campaign's graph estimated from real
// reports over the nodes that reported, its variants, and their errors.
#include "server/curator/stages.h"
#include "server/curator/test_requests.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

#include "common/edges/blink.h"
#include "common/random/random.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/dp/rdp_accountant.h"
#include "server/curator/credentials.h"
#include "server/curator/detail_lists.h"
#include "server/pipeline/edges_config.h"

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
    auto c = requests::OpenTestCurator(dir_.path(), kNodes, kKey);
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
    auto session = curator_->agents().Enrol(enrol);
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
    ASSERT_TRUE(curator_->operators().CreateCampaign(hds).ok());  // c1
    v1::CreateCampaignRequest label;
    label.set_attribute(v1::ATTRIBUTE_LABEL);
    label.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
    label.mutable_spec()->set_epsilon(2);
    label.mutable_spec()->set_dimension(2);
    label.mutable_nodes()->set_all(true);
    label.set_quorum(1);
    ASSERT_TRUE(curator_->operators().CreateCampaign(label).ok());  // c2
    v1::ReportBatch batch;
    auto flush = [&] {
      auto ack = requests::Ingest(curator_->agents(), **session, batch);
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

  absl::StatusOr<nlohmann::json> EvaluateDetails(
      const std::string& estimate, const std::string& defence = "") {
    v1::EvaluateRequest q;
    q.set_input(estimate);
    q.set_defence(defence);
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
  stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                     dir_.path(), false, ReleaseBudget{}, 2);
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
  // Every attacker, and the honest nodes of dimensions 0 and 1 (38 each):
  // the details name the first 100 (bounded), the id-list file all of them.
  EXPECT_EQ(details["flagged_nodes"], kAttackers + 76);
  std::vector<uint32_t> flagged = details["flagged"];
  ASSERT_EQ(flagged.size(), kDetailIds);
  EXPECT_EQ(details["flagged_truncated"], true);
  for (uint32_t v = 0; v < kAttackers; ++v) EXPECT_EQ(flagged[v], v);
  EXPECT_FALSE(details.contains("overreported_truncated"));  // 2 dimensions
  auto whole = stages_->IdList(screened->id(), "flagged");
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), kAttackers + 76);
  EXPECT_TRUE(std::is_sorted(whole->begin(), whole->end()));
  EXPECT_TRUE(std::equal(flagged.begin(), flagged.end(), whole->begin()));
  for (uint32_t v = kAttackers; v < kNodes; ++v) {
    const bool honest_flagged = v % kDims < 2;
    EXPECT_EQ(std::binary_search(whole->begin(), whole->end(), v),
              honest_flagged)
        << v;
  }
  EXPECT_EQ(stages_->IdList(screened->id(), "robust.dropped_nodes")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
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
  // The campaign's mechanism reaches the pipeline (LPGNN unbiases HDS).
  EXPECT_EQ((*poisoned)["input_mechanism"], "hds");
  auto clean = EvaluateDetails(screened->id());
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ((*clean)["label_agreement_raw"].get<double>(), 1.0);
  // All of them, not only the 100 the details name.
  EXPECT_EQ((*clean)["untrusted_nodes"], kAttackers + 76);

  // Without its id-list file the estimate's flagged nodes are unknown:
  // evaluate refuses rather than trust them.
  v1::StageResult recorded;
  ASSERT_TRUE(recorded.ParseFromString(
      curator_->operators().store().GetResult(2)->record));
  ASSERT_EQ(recorded.id(), screened->id());
  const std::string file = stages_->IdListFile(recorded);
  ASSERT_EQ(std::rename(file.c_str(), (file + ".away").c_str()), 0) << file;
  auto lost = EvaluateDetails(screened->id());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(lost.status().message(), HasSubstr(file));
  ASSERT_EQ(std::rename((file + ".away").c_str(), file.c_str()), 0);
}

// A result stored before id lists were cut holds its whole list in its
// details: evaluate reads it there, and ListResultIds serves it.
TEST_F(StagesScreenTest, AnOldEstimateWithTheWholeListInItsDetailsIsRead) {
  stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                     dir_.path(), false, ReleaseBudget{}, 2);
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  e.set_defence("screen");
  auto screened = stages_->Estimate(e);
  ASSERT_TRUE(screened.ok()) << screened.status();
  auto whole = stages_->IdList(screened->id(), "flagged");
  ASSERT_TRUE(whole.ok()) << whole.status();
  // The same estimate as an older curator recorded it.
  ResultStore store = curator_->operators().store();
  auto row = store.GetResult(1);
  ASSERT_TRUE(row.ok()) << row.status();
  v1::StageResult old = *screened;
  auto details = nlohmann::json::parse(old.details_json());
  details["flagged"] = *whole;
  details.erase("flagged_truncated");
  old.set_details_json(details.dump());
  old.set_created_unix_ms(1);  // no id-list file of its own
  auto id = store.AddResult(
      [&](int64_t id) {
        old.set_id(absl::StrCat("r", id));
        return old.SerializeAsString();
      },
      row->matrix_path);
  ASSERT_TRUE(id.ok()) << id.status();
  auto listed = stages_->IdList(old.id(), "flagged");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, *whole);
  auto clean = EvaluateDetails(old.id());
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_EQ((*clean)["untrusted_nodes"], kAttackers + 76);
  EXPECT_EQ((*clean)["label_agreement_raw"].get<double>(), 1.0);
}

TEST_F(StagesScreenTest, BadDefenceSettingsAreRefused) {
  stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                     dir_.path());
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  e.set_defence("filter");
  EXPECT_THAT(stages_->Estimate(e).status().message(),
              HasSubstr("defence: defence must be a comma list of none, "
                        "screen, robust, edge-consistency, got 'filter'"));
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

// Evaluate's defence "robust" reaches the pipeline and its figures the
// details. This fixture's attackers poison features only: no class is
// over-reported, so robust drops nothing and keeps the first model (its
// effect on poisoned labels: simulate_test's
// AttackKindsAndTheRobustDefenceEqualTheLibrary, poisoning_defence_test).
TEST_F(StagesScreenTest, EvaluateAppliesTheRobustDefence) {
  stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                     dir_.path(), false, ReleaseBudget{}, 2);
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  auto plain = stages_->Estimate(e);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto none = EvaluateDetails(plain->id(), " none ");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->contains("defence"));
  EXPECT_FALSE(none->contains("robust"));
  auto robust = EvaluateDetails(plain->id(), "robust");
  ASSERT_TRUE(robust.ok()) << robust.status();
  EXPECT_EQ((*robust)["defence"]["kind"], "robust");
  EXPECT_FALSE((*robust)["defence"].contains("alpha"));
  ASSERT_TRUE(robust->contains("robust")) << robust->dump();
  EXPECT_EQ((*robust)["robust"]["robust"], "applied");
  EXPECT_EQ((*robust)["robust"]["dropped"], 0);
  EXPECT_EQ((*robust)["robust"]["retrained"], false);
}

// Evaluate's defence "screen" adds nothing to the screened estimate's
// effect but asserts it, and records the estimate's level.
TEST_F(StagesScreenTest, EvaluateDefenceScreenNeedsAScreenedEstimate) {
  stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                     dir_.path(), false, ReleaseBudget{}, 2);
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  auto plain = stages_->Estimate(e);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto unscreened = EvaluateDetails(plain->id(), "screen");
  EXPECT_EQ(unscreened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unscreened.status().message(),
              HasSubstr(absl::StrCat("defence screen: estimate ", plain->id(),
                                     " was not screened")));
  e.set_defence("screen");
  e.set_screen_alpha(0.01);
  auto screened = stages_->Estimate(e);
  ASSERT_TRUE(screened.ok()) << screened.status();
  auto both = EvaluateDetails(screened->id(), "robust, screen");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ((*both)["defence"]["kind"], "screen,robust");
  EXPECT_EQ((*both)["defence"]["alpha"], 0.01);
  EXPECT_EQ((*both)["untrusted_nodes"], kAttackers + 76);
  EXPECT_TRUE(both->contains("robust"));
  // Not named: the screened estimate's flagged nodes are still left out.
  auto unnamed = EvaluateDetails(screened->id());
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  EXPECT_EQ((*unnamed)["untrusted_nodes"], kAttackers + 76);
  EXPECT_FALSE(unnamed->contains("defence"));
}

TEST_F(StagesScreenTest, BadEvaluateDefencesAreRefused) {
  stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                     dir_.path());
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  auto plain = stages_->Estimate(e);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto filter = EvaluateDetails(plain->id(), "filter");
  EXPECT_EQ(filter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(filter.status().message(), HasSubstr("defence"));
  EXPECT_THAT(filter.status().message(), HasSubstr("'filter'"));
  auto twice = EvaluateDetails(plain->id(), "robust,robust");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  // edge-consistency screens a graph campaign's reports: none is given.
  auto edges = EvaluateDetails(plain->id(), "robust,edge-consistency");
  EXPECT_EQ(edges.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(edges.status().message(),
              HasSubstr("defence edge-consistency screens the edge reports of "
                        "a graph campaign"));
  v1::EvaluateRequest link;
  link.set_input(plain->id());
  link.set_pipeline_method(v1::PIPELINE_METHOD_PRIVGE);
  link.set_pipeline_task(v1::PIPELINE_TASK_LINK);
  link.set_defence("robust");
  auto r = stages_->Evaluate(link);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("node task only"));
}

// Evaluate's baselines: scored beside the result from what the curator
// holds (the label campaign's reports, the screen's untrusted nodes), in
// the details; raw features are not the curator's to use.
TEST_F(StagesScreenTest, EvaluateScoresTheBaselinesBesideTheResult) {
  stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                     dir_.path(), false, ReleaseBudget{}, 2);
  v1::EstimateRequest e;
  e.set_campaign_id("c1");
  auto plain = stages_->Estimate(e);
  ASSERT_TRUE(plain.ok()) << plain.status();
  v1::EvaluateRequest q;
  q.set_input(plain->id());
  q.set_pipeline_method(v1::PIPELINE_METHOD_UPGNET);
  q.set_pipeline_task(v1::PIPELINE_TASK_NODE);
  q.set_label_campaign_id("c2");
  q.set_seed(1);
  // UPGNET's NFR needs a bounded mechanism; these reports are HDS's.
  auto hds = stages_->Evaluate(q);
  EXPECT_EQ(hds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hds.status().message(), HasSubstr("hds's are not"));
  q.set_pipeline_method(v1::PIPELINE_METHOD_LPGNN);
  q.add_baselines("feature-free");
  q.add_baselines("graph-labels");
  auto r = stages_->Evaluate(q);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto d = nlohmann::json::parse(r->details_json());
  EXPECT_EQ(d["method"], "lpgnn");
  for (const char* key : {"feature_free", "graph_labels"}) {
    ASSERT_TRUE(d["baselines"].contains(key)) << d.dump();
    const double v = d["baselines"][key]["value"].get<double>();
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 1.0);
    EXPECT_GE(d["baselines"][key]["seconds"].get<double>(), 0.0);
  }
  EXPECT_EQ(d["baselines"]["feature_free"]["label"],
            "graph alone (no reports)");
  // The same reports over a graph of no edge: what the graph adds (beside
  // a graph released under edge LDP, whether it adds at all).
  q.clear_baselines();
  q.add_baselines("no-graph");
  auto alone = stages_->Evaluate(q);
  ASSERT_TRUE(alone.ok()) << alone.status();
  const auto ad = nlohmann::json::parse(alone->details_json());
  ASSERT_TRUE(ad["baselines"].contains("no_graph")) << ad.dump();
  EXPECT_EQ(ad["baselines"]["no_graph"]["label"], "reports alone (no graph)");
  EXPECT_EQ(ad["value"], d["value"]);  // the method's own run unchanged
  EXPECT_NE(ad["baselines"]["no_graph"]["value"], ad["value"]);
  q.clear_baselines();
  q.add_baselines("raw");
  auto raw = stages_->Evaluate(q);
  EXPECT_EQ(raw.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(raw.status().message(), HasSubstr("'raw'"));
  q.clear_baselines();
  auto none = stages_->Evaluate(q);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(nlohmann::json::parse(none->details_json())
                   .contains("baselines"));
}

// A graph's ledger entry counts all its releases and lists the latest
// kLedgerResultIds, so that GetReleaseLedger stays bounded however many
// releases a graph has; the composition covers all of them.
TEST(StagesLedgerTest, AGraphListsItsLatestReleasesAndCountsThemAll) {
  TempFolder dir;
  store::CuratorStore::Options fast;
  fast.synchronous_full = false;
  auto curator = requests::OpenTestCurator(dir.path(), 10, kKey, fast);
  ASSERT_TRUE(curator.ok()) << curator.status();
  Dataset data;
  Stages stages(&(*curator)->operators(), &data, dir.path());
  dp::RdpAccountant curve;
  ASSERT_TRUE(curve.ComposePureDp(0.001).ok());
  const int releases = Stages::kLedgerResultIds + 25;
  for (int i = 0; i < releases; ++i) {
    v1::StageResult r;
    r.set_stage("release");
    r.set_input(i % 50 == 0 ? "campaign:c3" : "curator");
    r.set_details_json(nlohmann::json({{"rdp", curve.ToJson()},
                                       {"epsilon", 0.001},
                                       {"delta", 0.0}})
                           .dump());
    ASSERT_TRUE((*curator)
                    ->operators()
                    .store()
                    .AddResult(
                        [&](int64_t id) {
                          r.set_id(absl::StrCat("r", id));
                          return r.SerializeAsString();
                        },
                        "")
                    .ok());
  }
  auto ledger = stages.Ledger();
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  ASSERT_EQ(ledger->graphs_size(), 2);
  const v1::GraphReleases& other = ledger->graphs(0);
  EXPECT_EQ(other.graph(), "campaign:c3");
  EXPECT_EQ(other.releases(), 21u);
  EXPECT_EQ(other.result_ids_size(), 21);
  const v1::GraphReleases& g = ledger->graphs(1);
  EXPECT_EQ(g.graph(), "curator");
  const int own = releases - 21;
  EXPECT_EQ(g.releases(), static_cast<uint32_t>(own));
  ASSERT_EQ(g.result_ids_size(), Stages::kLedgerResultIds);
  EXPECT_EQ(g.result_ids(Stages::kLedgerResultIds - 1),
            absl::StrCat("r", releases));  // the latest
  EXPECT_NEAR(g.epsilon_sum(), own * 0.001, 1e-9);
}

// --- Blink -------------------------------------------------------------------

// A curator of 60 nodes whose true graph is two rings of 30 with chords;
// c1 is a Blink campaign (eps 4, delta 0.2) to which nodes 10..59 send
// their BlinkClient reports (0..9 drop out), c2 edge RR, c3 HDS features.
class StagesBlinkTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kN = 60;
  static constexpr uint32_t kFirstReporter = 10;
  static constexpr double kEps = 4.0, kDelta = 0.2;

  void SetUp() override {
    auto c = requests::OpenTestCurator(dir_.path(), kN, kKey);
    ASSERT_TRUE(c.ok()) << c.status();
    curator_ = std::move(*c);
    std::vector<Edge> edges;
    for (uint32_t v = 0; v < kN; ++v) {
      const uint32_t base = v < 30 ? 0 : 30;
      edges.push_back({v, base + (v - base + 1) % 30});
      edges.push_back({v, base + (v - base + 7) % 30});
    }
    auto g = Graph::FromEdges(kN, edges);
    ASSERT_TRUE(g.ok()) << g.status();
    truth_ = *std::move(g);
    data_.graph = *Graph::FromEdges(kN, {});  // private edges
    data_.meta.nodes = kN;
    data_.meta.classes = 2;
    for (uint32_t v = 0; v < kN; ++v) data_.labels.push_back(v < 30 ? 0 : 1);
    data_.features.cols = 4;
    Collect();
  }

  void Collect() {
    v1::EnrolRequest enrol;
    for (uint32_t v = 0; v < kN; ++v) {
      auto* n = enrol.add_nodes();
      n->set_node_id(v);
      n->set_secret(NodeCredential(kKey, v));
    }
    auto session = curator_->agents().Enrol(enrol);
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *session;
    v1::CreateCampaignRequest blink;
    blink.set_attribute(v1::ATTRIBUTE_EDGES);
    blink.mutable_spec()->set_kind(v1::MECHANISM_KIND_EDGE_BLINK);
    blink.mutable_spec()->set_epsilon(kEps);
    blink.mutable_spec()->set_dimension(kN);
    blink.mutable_spec()->mutable_blink()->set_degree_share(kDelta);
    blink.mutable_nodes()->set_all(true);
    ASSERT_TRUE(curator_->operators().CreateCampaign(blink).ok());  // c1
    v1::CreateCampaignRequest rr = blink;
    rr.mutable_spec()->set_kind(v1::MECHANISM_KIND_EDGE_RR);
    rr.mutable_spec()->clear_blink();
    ASSERT_TRUE(curator_->operators().CreateCampaign(rr).ok());  // c2
    v1::CreateCampaignRequest hds;
    hds.set_attribute(v1::ATTRIBUTE_FEATURES);
    auto* s = hds.mutable_spec();
    s->set_kind(v1::MECHANISM_KIND_HDS);
    s->set_epsilon(1);
    s->set_dimension(4);
    s->set_sampled(1);
    s->set_range_low(-1);
    s->set_range_high(1);
    hds.mutable_nodes()->set_all(true);
    ASSERT_TRUE(curator_->operators().CreateCampaign(hds).ok());  // c3

    auto client = edges::BlinkClient::Create({.epsilon = kEps, .delta = kDelta},
                                             kN);
    ASSERT_TRUE(client.ok()) << client.status();
    SeededRandomForTesting rng(3);
    v1::ReportBatch batch;
    reports_.assign(kN, {});
    for (uint32_t v = kFirstReporter; v < kN; ++v) {
      auto r = (*client)->Report(v, truth_.neighbors(v), rng);
      ASSERT_TRUE(r.ok()) << r.status();
      reports_[v] = *r;
      v1::Report* b = batch.add_reports();
      b->set_campaign_id("c1");
      b->set_node_id(v);
      b->mutable_edges()->mutable_neighbours()->Assign(r->neighbours.begin(),
                                                       r->neighbours.end());
      b->mutable_edges()->set_noisy_degree(r->noisy_degree);
      v1::Report* f = batch.add_reports();
      f->set_campaign_id("c3");
      f->set_node_id(v);
      f->mutable_features()->add_indices(v % 4);
      f->mutable_features()->add_values(v < 30 ? 0.5 : -0.5);
    }
    auto ack = requests::Ingest(curator_->agents(), *session_, batch);
    ASSERT_TRUE(ack.ok()) << ack.status();
    for (const auto& r : ack->results()) ASSERT_EQ(r.code(), 0) << r.message();
    v1::EstimateRequest e;
    e.set_campaign_id("c3");
    stages_ = std::make_unique<Stages>(&curator_->operators(), &data_,
                                       dir_.path(), /*private_edges=*/true);
    auto estimate = stages_->Estimate(e);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    estimate_ = estimate->id();
  }

  // EstimateBlinkGraph over the reporters (ids shifted down by
  // kFirstReporter, lists cut to them), its edges shifted back up.
  std::vector<Edge> ExpectedEdges(edges::BlinkVariant variant) const {
    const uint32_t m = kN - kFirstReporter;
    std::vector<edges::BlinkReport> local(m);
    for (uint32_t v = kFirstReporter; v < kN; ++v) {
      // Degrees counted among all kN nodes, scaled to the reporters.
      local[v - kFirstReporter].noisy_degree =
          reports_[v].noisy_degree * (double(m - 1) / double(kN - 1));
      for (uint32_t u : reports_[v].neighbours) {
        if (u >= kFirstReporter) {
          local[v - kFirstReporter].neighbours.push_back(u - kFirstReporter);
        }
      }
    }
    edges::BlinkEstimateOptions options;
    options.variant = variant;
    auto est = edges::EstimateBlinkGraph({.epsilon = kEps, .delta = kDelta},
                                         m, local, options);
    EXPECT_TRUE(est.ok()) << est.status();
    std::vector<Edge> out = est->graph.Edges();
    for (Edge& e : out) e = {e.u + kFirstReporter, e.v + kFirstReporter};
    return out;
  }

  absl::StatusOr<v1::StageResult> Propagate(const std::string& method,
                                            const std::string& graph,
                                            const std::string& variant) {
    v1::PropagateRequest p;
    p.set_input(estimate_);
    p.set_method(method);
    p.set_graph_campaign_id(graph);
    p.set_blink_variant(variant);
    return stages_->Propagate(p);
  }

  TempFolder dir_;
  std::unique_ptr<Curator> curator_;
  std::shared_ptr<const Session> session_;
  Graph truth_;
  Dataset data_;
  std::vector<edges::BlinkReport> reports_;
  std::string estimate_;
  std::unique_ptr<Stages> stages_;
};

TEST_F(StagesBlinkTest, TheGraphIsTheEstimateOverTheReportersOnly) {
  for (edges::BlinkVariant variant :
       {edges::BlinkVariant::kHard, edges::BlinkVariant::kTopK,
        edges::BlinkVariant::kHybrid}) {
    const std::string name(edges::kBlinkVariantNames.Name(variant));
    SCOPED_TRACE(name);
    nlohmann::json details;
    auto g = stages_->AssembledGraph("c1", name, &details);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->num_nodes(), kN);
    EXPECT_EQ(g->Edges(), ExpectedEdges(variant));
    EXPECT_EQ(g->weighted(), variant == edges::BlinkVariant::kHybrid);
    for (uint32_t v = 0; v < kFirstReporter; ++v) EXPECT_EQ(g->degree(v), 0u);
    EXPECT_GT(g->num_edges(), 0u);
    EXPECT_EQ(details["graph_mechanism"], "edge-blink");
    EXPECT_EQ(details["graph_variant"], name);
    EXPECT_EQ(details["graph_delta"], kDelta);
    EXPECT_EQ(details["graph_epsilon"], kEps);
    EXPECT_EQ(details["graph_reports"], kN - kFirstReporter);
    EXPECT_EQ(details["graph_nonreporters"], kFirstReporter);
    EXPECT_DOUBLE_EQ(details["graph_degree_scale"].get<double>(),
                     double(kN - kFirstReporter - 1) / (kN - 1));
    EXPECT_GE(details["graph_prior_iterations"].get<int>(), 1);
    EXPECT_GT(details["graph_reported_pairs"].get<uint64_t>(), 0u);
    EXPECT_TRUE(details.contains("graph_max_degree_residual"));
    EXPECT_TRUE(details.contains("graph_clipped_low"));
    EXPECT_TRUE(details.contains("graph_clipped_high"));
    EXPECT_TRUE(details.contains("graph_expected_edges"));
    EXPECT_EQ(details["graph_target_edges"].get<uint64_t>() == 0,
              variant == edges::BlinkVariant::kHard);
  }
  // "" is hard.
  auto hard = stages_->AssembledGraph("c1");
  ASSERT_TRUE(hard.ok()) << hard.status();
  EXPECT_EQ(hard->Edges(), ExpectedEdges(edges::BlinkVariant::kHard));
  EXPECT_NE(hard->Edges(), ExpectedEdges(edges::BlinkVariant::kTopK));
  // At eps 4 most of the estimate is true edges.
  ASSERT_GT(hard->num_edges(), 0u);
  size_t true_edges = 0;
  for (const Edge& e : hard->Edges()) true_edges += truth_.HasEdge(e.u, e.v);
  EXPECT_GT(true_edges * 2, hard->num_edges());
}

TEST_F(StagesBlinkTest, PropagateNamesTheGraphAndRefusesWhatCannotWork) {
  auto kprop = Propagate("kprop", "c1", "hybrid");
  ASSERT_TRUE(kprop.ok()) << kprop.status();
  const auto details = nlohmann::json::parse(kprop->details_json());
  EXPECT_EQ(details["graph"], "c1");
  EXPECT_EQ(details["graph_mechanism"], "edge-blink");
  EXPECT_EQ(details["graph_variant"], "hybrid");
  EXPECT_EQ(details["graph_edges"],
            ExpectedEdges(edges::BlinkVariant::kHybrid).size());
  // PPR reads structure only: a weighted graph is refused, clearly.
  auto ppr = Propagate("ppr", "c1", "hybrid");
  EXPECT_EQ(ppr.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(ppr.status().message(), HasSubstr("weighted"));
  EXPECT_TRUE(Propagate("ppr", "c1", "topk").ok());
  // The variant: known, and for a Blink graph only.
  auto unknown = Propagate("kprop", "c1", "soft");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("blink_variant must be one of hard, topk, hybrid"));
  EXPECT_THAT(Propagate("kprop", "c2", "topk").status().message(),
              HasSubstr("MECHANISM_KIND_EDGE_RR"));
  auto curators = Propagate("kprop", "", "topk");
  EXPECT_EQ(curators.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(curators.status().message(), HasSubstr("the curator's graph"));
  // Evaluate: PrivGE on the weighted graph fails cleanly; LPGNN trains.
  v1::EvaluateRequest q;
  q.set_input(estimate_);
  q.set_pipeline_task(v1::PIPELINE_TASK_NODE);
  q.set_pipeline_method(v1::PIPELINE_METHOD_PRIVGE);
  q.set_graph_campaign_id("c1");
  q.set_blink_variant("hybrid");
  EXPECT_EQ(stages_->Evaluate(q).status().code(),
            absl::StatusCode::kUnimplemented);
  q.set_pipeline_method(v1::PIPELINE_METHOD_LPGNN);
  q.set_seed(1);
  auto lpgnn = stages_->Evaluate(q);
  ASSERT_TRUE(lpgnn.ok()) << lpgnn.status();
  EXPECT_THAT(lpgnn->details_json(), HasSubstr(R"("graph_variant":"hybrid")"));
  // A release embeds the structure: hybrid is refused before anything runs.
  v1::ReleaseRequest release;
  release.set_pipeline_method(v1::PIPELINE_METHOD_DPNE);
  release.set_epsilon(1);
  release.set_graph_campaign_id("c1");
  release.set_blink_variant("hybrid");
  auto refused = stages_->Release(release);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("hybrid"));
}

TEST_F(StagesBlinkTest, AForgedDegreeIsRejectedAtIngest) {
  v1::ReportBatch batch;
  v1::Report* b = batch.add_reports();
  b->set_campaign_id("c1");
  b->set_node_id(0);
  b->mutable_edges()->add_neighbours(1);
  b->mutable_edges()->set_noisy_degree(0x1.0p-40);  // below any grid step
  auto ack = requests::Ingest(curator_->agents(), *session_, batch);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_NE(ack->results(0).code(), 0);
  EXPECT_THAT(ack->results(0).message(), HasSubstr("noisy_degree"));
  nlohmann::json details;
  ASSERT_TRUE(stages_->AssembledGraph("c1", "", &details).ok());
  EXPECT_EQ(details["graph_nonreporters"], kFirstReporter);
}

// --defence edge-consistency on a Blink graph: node 0 (which had not
// reported) sends a forged report, every other node claimed at Blink's
// noisy degree of a node with two neighbours. The screen flags it (its
// bits and degree disagree by far more than the bound), the graph is then
// exactly the graph without its report (a flagged node is a non-reporter),
// without the screen it is not, and evaluate leaves node 0 out of training
// and validation.
TEST_F(StagesBlinkTest, EdgeConsistencyTreatsAFlaggedNodeAsANonReporter) {
  auto before = stages_->AssembledGraph("c1");
  ASSERT_TRUE(before.ok()) << before.status();
  auto client = edges::BlinkClient::Create({.epsilon = kEps, .delta = kDelta},
                                           kN);
  ASSERT_TRUE(client.ok());
  SeededRandomForTesting rng(11);
  auto honest = (*client)->Report(0, truth_.neighbors(0), rng);
  ASSERT_TRUE(honest.ok());
  v1::ReportBatch batch;
  v1::Report* b = batch.add_reports();
  b->set_campaign_id("c1");
  b->set_node_id(0);
  for (uint32_t u = 1; u < kN; ++u) b->mutable_edges()->add_neighbours(u);
  b->mutable_edges()->set_noisy_degree(honest->noisy_degree);
  auto ack = requests::Ingest(curator_->agents(), *session_, batch);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_EQ(ack->results(0).code(), 0) << ack->results(0).message();

  auto forged = stages_->AssembledGraph("c1");
  ASSERT_TRUE(forged.ok()) << forged.status();
  EXPECT_GT(forged->degree(0), 0u);  // unscreened, the forgery is in
  nlohmann::json details;
  std::vector<uint32_t> flagged;
  auto screened = stages_->AssembledGraph(
      "c1", "", pipeline::kDefaultEdgeScreenAlpha, &details, &flagged);
  ASSERT_TRUE(screened.ok()) << screened.status();
  EXPECT_EQ(flagged, std::vector<uint32_t>({0}));
  EXPECT_EQ(screened->Edges(), before->Edges());
  EXPECT_EQ(details["graph_defence"], "edge-consistency");
  EXPECT_EQ(details["graph_screen"]["reporters"], kN - kFirstReporter + 1);
  EXPECT_EQ(details["graph_screen"]["degree"]["flagged_nodes"], 1);
  EXPECT_EQ(details["graph_nonreporters"], kFirstReporter);

  v1::EvaluateRequest q;
  q.set_input(estimate_);
  q.set_pipeline_task(v1::PIPELINE_TASK_NODE);
  q.set_pipeline_method(v1::PIPELINE_METHOD_LPGNN);
  q.set_graph_campaign_id("c1");
  q.set_seed(1);
  q.set_defence("edge-consistency");
  auto evaluated = stages_->Evaluate(q);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  const auto ed = nlohmann::json::parse(evaluated->details_json());
  EXPECT_EQ(ed["untrusted_nodes"], 1);
  EXPECT_EQ(ed["graph_screen"]["flagged"], nlohmann::json::array({0}));
  EXPECT_EQ(ed["graph_edges"], before->num_edges());
  // It screens a graph campaign's reports, nothing else.
  q.clear_graph_campaign_id();
  auto without = stages_->Evaluate(q);
  EXPECT_EQ(without.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(without.status().message(), HasSubstr("give graph_campaign_id"));
}

}  // namespace
}  // namespace ldpgraph::curator

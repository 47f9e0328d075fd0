// What each defence holds against its attacker, on cora, as the poisoning
// table of docs/scenarios.md ("Every attacker against every defence,
// measured") claims it (tests/bench/poisoning_bench.py CLAIMS): LPGNN
// with Multi-bit at eps_x = 3 and label randomized response at eps_y = 3,
// seed 1, one run, 10 % of the nodes malicious, attack class 0. No claim
// is made for labels-only: at 10 % it moves neither figure by 2 points, and
// at 20 % robust does not hold it (the table).
//  - the undefended attack moves the target rate up, or the accuracy down,
//    by more than 2 points (the test sees the attack work);
//  - with the defence, both are within 2 points of the unattacked run.
// Seeded runs are deterministic: the thresholds are judged on one run, the
// spread over runs is in the table. Labelled slow (about 25 s a run on two
// cores; not under the sanitizers). Skipped, saying so, without the shared
// cora dataset.
#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "common/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::pipeline {
namespace {

constexpr double kBound = 0.02;

struct Outcome {
  double accuracy = 0;
  double target_rate = 0;
};

class PoisoningDefenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Cora only: the bounds are cora's (a generated dataset of its shape
    // moves the adaptive attack's rate past 0.02), so there is no stand-in
    // and, like the checks of the datasets' own contents, the test skips
    // without the shared datasets, in CI too (tests/run.sh).
    const std::string dir = integration::DatasetsDir() + "/cora";
    if (!std::filesystem::exists(dir + "/meta.json")) return;
    auto d = LoadDataset(dir);
    ASSERT_TRUE(d.ok()) << d.status();
    cora_ = new Dataset(std::move(*d));
    unattacked_ = new Outcome(Run(poisoning::AttackKind::kMaximalGain, 0,
                                  Defences{}));
  }
  static void TearDownTestSuite() {
    delete cora_;
    delete unattacked_;
    cora_ = nullptr;
    unattacked_ = nullptr;
  }
  void SetUp() override {
    if (cora_ == nullptr) {
      GTEST_SKIP()
          << "no cora under " << integration::DatasetsDir()
          << " (set LDPGRAPH_DATASETS to the datasets folder)";
    }
  }

  static Outcome Run(poisoning::AttackKind kind, double fraction,
                     Defences defences) {
    PipelineConfig c =
        DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
    c.epsilon = 3;
    c.label_epsilon = 3;
    c.dataset_settings = true;
    c.attack_class = 0;
    c.attack_fraction = fraction;
    c.attack_kind = kind;
    c.defences = defences;
    auto r = RunPipeline(*cora_, c, /*seed=*/1, /*run=*/0);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    return {r->metric, r->target_rate.value_or(0)};
  }

  // The claim: the attack at `share` moves a figure by more than kBound,
  // and `defences` holds both within kBound of the unattacked run.
  static void ExpectDefenceHolds(poisoning::AttackKind kind,
                                 Defences defences, double share = 0.1) {
    const Outcome base = *unattacked_;
    const Outcome attacked = Run(kind, share, Defences{});
    const Outcome defended = Run(kind, share, defences);
    const std::string name(poisoning::kAttackNames.Name(kind));
    EXPECT_GT(std::max(attacked.target_rate - base.target_rate,
                       base.accuracy - attacked.accuracy),
              kBound)
        << name << " does not move the run: accuracy " << attacked.accuracy
        << " vs " << base.accuracy << ", target rate "
        << attacked.target_rate << " vs " << base.target_rate;
    EXPECT_LE(defended.target_rate - base.target_rate, kBound)
        << name << " with " << DefencesName(defences) << ": target rate "
        << defended.target_rate << " vs unattacked " << base.target_rate;
    EXPECT_LE(base.accuracy - defended.accuracy, kBound)
        << name << " with " << DefencesName(defences) << ": accuracy "
        << defended.accuracy << " vs unattacked " << base.accuracy;
  }

  static Dataset* cora_;
  static Outcome* unattacked_;
};

Dataset* PoisoningDefenceTest::cora_ = nullptr;
Outcome* PoisoningDefenceTest::unattacked_ = nullptr;

TEST_F(PoisoningDefenceTest, ScreenHoldsTheMaximalGainAttack) {
  ExpectDefenceHolds(poisoning::AttackKind::kMaximalGain,
                     Defences{.screen = true});
}

// The adaptive attacker stays under the screen's threshold; its labels
// give it away to the robust defence.
TEST_F(PoisoningDefenceTest, RobustHoldsTheAdaptiveAttack) {
  ExpectDefenceHolds(poisoning::AttackKind::kAdaptive,
                     Defences{.robust = true});
}

// With nobody attacking, robust finds no over-reported class and changes
// nothing: the run is the undefended one, to the last digit.
TEST_F(PoisoningDefenceTest, RobustCostsNothingWithoutAnAttack) {
  const Outcome robust =
      Run(poisoning::AttackKind::kMaximalGain, 0, Defences{.robust = true});
  EXPECT_EQ(robust.accuracy, unattacked_->accuracy);
  EXPECT_EQ(robust.target_rate, unattacked_->target_rate);
}

}  // namespace
}  // namespace ldpgraph::pipeline

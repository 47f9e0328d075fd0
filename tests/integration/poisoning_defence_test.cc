// What each defence does against its attacker, on cora, as the poisoning
// section of docs/scenarios.md ("Every attacker against every defence,
// measured") states it (tests/bench/poisoning_bench.py CLAIMS): LPGNN with
// Multi-bit at eps_x = 3 and label randomized response at eps_y = 3, 10 %
// of the nodes malicious, attack class 0.
//
// Every claim is a statement about a mean over kRuns paired runs, never
// about one run's digits: run r of every arm is (seed 1, run r), the same
// split, the same honest reports and the same initial weights, so the
// per-run difference between two arms is the attack's (or the defence's)
// effect, with a much smaller spread than the runs' own. One run's digits
// move with the processor: OpenBLAS picks its kernels per CPU
// (OPENBLAS_CORETYPE), and under Prescott's kernels robust found no
// over-reported class in one run of five where Haswell's found one in
// every run. Each bound stands at least 3.5 standard errors of a 5-run
// mean from the mean measured over 15 paired runs, 5 under each of three
// OpenBLAS core types (Haswell, Prescott, SkylakeX; thread count does not
// change the digits). Measured, in points, mean +- standard error per core
// type (Haswell, Prescott, SkylakeX), and the margin to the bound in
// standard errors of a 5-run mean (pooled spread):
//  - maximal-gain raises the target rate by 3.7 +- 0.6, 4.4 +- 0.4,
//    4.3 +- 0.5; adaptive by 3.6 +- 0.4, 4.5 +- 1.0, 3.7 +- 0.7: claimed
//    > 1 point (6.3 and 4.1 standard errors);
//  - the screen flags every maximal-gain attacker in every run (exact), and
//    the target rate comes back to -0.2 +- 0.6, +0.0 +- 0.4, +0.1 +- 0.7 of
//    the unattacked run: claimed <= 2 points (3.6); the accuracy it loses
//    with the flagged nodes, 1.7 +- 0.5, 1.4 +- 0.6, 0.4 +- 0.2: claimed
//    <= 3 points (4.0);
//  - robust takes 1.9 +- 0.2, 1.2 +- 0.5, 1.5 +- 0.4 points off the
//    adaptive attack's increase: claimed > 0 (3.7), at an accuracy of
//    +0.5 +- 0.4, +0.6 +- 0.6, +0.5 +- 0.7 against the undefended attack:
//    claimed >= -1.5 (3.8). It does not bring the target rate back within
//    2 points of the unattacked run (+1.7 +- 0.5, +3.4 +- 1.2,
//    +2.2 +- 0.6): no such claim is made.
// No claim for labels-only (robust takes 1.0 point off its increase on
// Haswell's kernels, not significantly) or at 20 % (docs/scenarios.md).
// The failure messages print the mean, its standard error, the per-run
// values and the margin.
//
// With nobody attacking, robust changes nothing: the same digits, an
// exact check. Labelled slow (about 4 minutes on two cores; not under the
// sanitizers). Skipped, saying so, without the shared cora dataset.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::pipeline {
namespace {

constexpr int kRuns = 5;
constexpr double kShare = 0.1;

// One configuration's kRuns runs; run r is (seed 1, run r).
struct Arm {
  std::vector<double> accuracy;     // in points (percent)
  std::vector<double> target_rate;  // in points
  std::vector<nlohmann::json> screen, robust;
};

// The mean and standard error of the per-run differences a - b.
struct Shift {
  double mean = 0;
  double se = 0;
  std::vector<double> values;
};

Shift Paired(const std::vector<double>& a, const std::vector<double>& b) {
  Shift s;
  for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
    s.values.push_back(a[r] - b[r]);
  }
  const double n = static_cast<double>(s.values.size());
  for (double v : s.values) s.mean += v / n;
  double ss = 0;
  for (double v : s.values) ss += (v - s.mean) * (v - s.mean);
  s.se = n > 1 ? std::sqrt(ss / (n - 1) / n) : 0;
  return s;
}

// "mean +- se (values; N standard errors from the bound B)".
std::string Describe(const Shift& s, double bound) {
  std::ostringstream o;
  o.precision(3);
  o << s.mean << " +- " << s.se << " points over " << s.values.size()
    << " paired runs (";
  for (size_t r = 0; r < s.values.size(); ++r) {
    o << (r ? ", " : "") << s.values[r];
  }
  o << "; " << (s.se > 0 ? std::abs(s.mean - bound) / s.se : 0)
    << " standard errors from the bound " << bound << ")";
  return o.str();
}

enum class Op { kAbove, kAtMost, kAtLeast };

// Checks that s's mean is above, at most or at least the bound, and prints
// the figures whether it holds or not, so that a passing run shows its
// margins too.
void ExpectClaim(const std::string& what, const Shift& s, Op op,
                 double bound) {
  const std::string figures = Describe(s, bound);
  std::cerr << "claim: " << what << ": " << figures << "\n";
  switch (op) {
    case Op::kAbove:
      EXPECT_GT(s.mean, bound) << what << ": " << figures;
      break;
    case Op::kAtMost:
      EXPECT_LE(s.mean, bound) << what << ": " << figures;
      break;
    case Op::kAtLeast:
      EXPECT_GE(s.mean, bound) << what << ": " << figures;
      break;
  }
}

class PoisoningDefenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Cora only: the bounds are cora's, so there is no stand-in and, like
    // the checks of the datasets' own contents, the test skips without the
    // shared datasets, in CI too (tests/run.sh).
    const std::string dir = integration::DatasetsDir() + "/cora";
    if (!std::filesystem::exists(dir + "/meta.json")) return;
    auto d = LoadDataset(dir);
    ASSERT_TRUE(d.ok()) << d.status();
    cora_ = new Dataset(std::move(*d));
    unattacked_ = new Arm(Run(poisoning::AttackKind::kMaximalGain, 0, {}));
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

  static Arm Run(poisoning::AttackKind kind, double fraction,
                 Defences defences, int runs = kRuns) {
    PipelineConfig c =
        DefaultConfig(v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
    c.epsilon = 3;
    c.label_epsilon = 3;
    c.dataset_settings = true;
    c.attack_class = 0;
    c.attack_fraction = fraction;
    c.attack_kind = kind;
    c.defences = defences;
    Arm arm;
    for (int r = 0; r < runs; ++r) {
      auto got = RunPipeline(*cora_, c, /*seed=*/1, r);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return {};
      arm.accuracy.push_back(100 * got->metric);
      arm.target_rate.push_back(100 * got->target_rate.value_or(0));
      arm.screen.push_back(got->screen);
      arm.robust.push_back(got->robust);
    }
    return arm;
  }

  // The undefended attack raises the target rate by more than 1 point on
  // average (measured 3.6 to 4.5: the attack is seen to work).
  static void ExpectAttackWorks(const Arm& attacked, const std::string& name) {
    const Shift up = Paired(attacked.target_rate, unattacked_->target_rate);
    ExpectClaim(name + ", undefended: target rate raised by", up, Op::kAbove,
                1.0);
  }

  // The attack undefended (checked to work) and with `defences`, whose
  // per-run record (`record` of the arm: screen or robust) must show that
  // `caught` of the attacker's nodes were caught: more than none, or all.
  static std::pair<Arm, Arm> AttackedAndDefended(
      poisoning::AttackKind kind, Defences defences,
      std::vector<nlohmann::json> Arm::*record, const std::string& caught,
      bool all) {
    const std::string name(poisoning::kAttackNames.Name(kind));
    Arm attacked = Run(kind, kShare, Defences{});
    ExpectAttackWorks(attacked, name);
    Arm defended = Run(kind, kShare, defences);
    const std::vector<nlohmann::json>& runs = defended.*record;
    EXPECT_EQ(runs.size(), static_cast<size_t>(kRuns));
    for (size_t r = 0; r < runs.size(); ++r) {
      const nlohmann::json& j = runs[r];
      if (!j.contains(caught) || !j.contains("malicious")) {
        ADD_FAILURE() << "run " << r << ": no " << caught << " in " << j.dump();
        continue;
      }
      EXPECT_GT(j[caught].get<int>(), 0) << name << ", run " << r;
      if (all) EXPECT_EQ(j[caught], j["malicious"]) << name << ", run " << r;
    }
    return {std::move(attacked), std::move(defended)};
  }

  static Dataset* cora_;
  static Arm* unattacked_;
};

Dataset* PoisoningDefenceTest::cora_ = nullptr;
Arm* PoisoningDefenceTest::unattacked_ = nullptr;

// The screen flags every maximal-gain attacker in every run and the target
// rate comes back within 2 points of the unattacked run; the accuracy does
// not all come back (at most 3 points lost): the flagged nodes' labels and
// features are lost to training, as they are to the attack.
TEST_F(PoisoningDefenceTest, ScreenHoldsTheMaximalGainAttacksTargetRate) {
  const auto [attacked, screened] = AttackedAndDefended(
      poisoning::AttackKind::kMaximalGain, Defences{.screen = true},
      &Arm::screen, "malicious_flagged", /*all=*/true);
  const Shift rate = Paired(screened.target_rate, unattacked_->target_rate);
  ExpectClaim("maximal-gain with the screen: target rate over unattacked",
              rate, Op::kAtMost, 2.0);
  const Shift lost = Paired(unattacked_->accuracy, screened.accuracy);
  ExpectClaim("maximal-gain with the screen: accuracy lost", lost,
              Op::kAtMost, 3.0);
}

// The adaptive attacker stays under the screen's threshold; its labels
// give it away to robust, which takes part of its increase of the target
// rate off, at most 1.5 points of accuracy below the undefended attack's.
TEST_F(PoisoningDefenceTest, RobustCutsTheAdaptiveAttack) {
  const auto [attacked, robust] = AttackedAndDefended(
      poisoning::AttackKind::kAdaptive, Defences{.robust = true},
      &Arm::robust, "malicious_dropped", /*all=*/false);
  const Shift cut = Paired(attacked.target_rate, robust.target_rate);
  ExpectClaim("adaptive: target rate robust takes off", cut, Op::kAbove,
              0.0);
  const Shift cost = Paired(robust.accuracy, attacked.accuracy);
  ExpectClaim("adaptive: robust's accuracy against the undefended attack's",
              cost, Op::kAtLeast, -1.5);
}

// With nobody attacking, robust finds no over-reported class and changes
// nothing: the run is the undefended one, to the last digit.
// Two runs: an exact check needs no more.
TEST_F(PoisoningDefenceTest, RobustCostsNothingWithoutAnAttack) {
  const Arm robust = Run(poisoning::AttackKind::kMaximalGain, 0,
                         Defences{.robust = true}, /*runs=*/2);
  ASSERT_EQ(robust.accuracy.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(robust.accuracy[r], unattacked_->accuracy[r]) << "run " << r;
    EXPECT_EQ(robust.target_rate[r], unattacked_->target_rate[r])
        << "run " << r;
  }
}

}  // namespace
}  // namespace ldpgraph::pipeline

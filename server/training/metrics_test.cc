#include "server/training/metrics.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::training {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Expects INVALID_ARGUMENT whose message contains every one of `parts`.
template <typename T>
void ExpectInvalid(const absl::StatusOr<T>& r,
                   std::initializer_list<const char*> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
      << r.status();
  for (const char* p : parts) {
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(p));
  }
}

// The definition, O(P * N): wins count 1, ties 1/2.
double PairwiseAuc(const std::vector<float>& pos,
                   const std::vector<float>& neg) {
  double wins = 0;
  for (float p : pos) {
    for (float n : neg) {
      if (p > n) {
        wins += 1;
      } else if (p == n) {
        wins += 0.5;
      }
    }
  }
  return wins / (static_cast<double>(pos.size()) * neg.size());
}

// ---- Accuracy -------------------------------------------------------------

TEST(AccuracyTest, CountsMatches) {
  const std::vector<int32_t> predicted = {0, 1, 2, 2, 1};
  const std::vector<int32_t> truth = {0, 1, 1, 2, 0};
  absl::StatusOr<double> a = Accuracy(predicted, truth);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_DOUBLE_EQ(*a, 3.0 / 5.0);
}

TEST(AccuracyTest, AllRightAndAllWrong) {
  const std::vector<int32_t> truth = {3, 1, 4, 1};
  EXPECT_DOUBLE_EQ(*Accuracy(truth, truth), 1.0);
  const std::vector<int32_t> wrong = {0, 0, 0, 0};
  EXPECT_DOUBLE_EQ(*Accuracy(wrong, truth), 0.0);
}

TEST(AccuracyTest, Errors) {
  const std::vector<int32_t> three = {0, 1, 2};
  const std::vector<int32_t> two = {0, 1};
  ExpectInvalid(Accuracy(three, two), {"3", "2"});
  ExpectInvalid(Accuracy({}, {}), {"empty"});
}

// ---- F1 -------------------------------------------------------------------

// Hand-worked, 3 classes:
//   truth     = 0 0 0 1 1 2
//   predicted = 0 0 1 1 2 2
// class 0: TP 2 (positions 0, 1), FP 0, FN 1 (position 2) -> 4/5
// class 1: TP 1 (3), FP 1 (2), FN 1 (4)                   -> 2/4 = 1/2
// class 2: TP 1 (5), FP 1 (4), FN 0                       -> 2/3
// macro = (4/5 + 1/2 + 2/3) / 3 = (24 + 15 + 20) / 90 = 59/90
// micro: TP 4, FP 2, FN 2 -> 8/12 = 2/3 = accuracy 4/6.
const std::vector<int32_t> kTruth = {0, 0, 0, 1, 1, 2};
const std::vector<int32_t> kPredicted = {0, 0, 1, 1, 2, 2};

TEST(F1Test, HandWorkedConfusionMatrix) {
  absl::StatusOr<double> macro = MacroF1(kPredicted, kTruth, 3);
  ASSERT_TRUE(macro.ok()) << macro.status();
  EXPECT_DOUBLE_EQ(*macro, 59.0 / 90.0);
  absl::StatusOr<double> micro = MicroF1(kPredicted, kTruth, 3);
  ASSERT_TRUE(micro.ok()) << micro.status();
  EXPECT_DOUBLE_EQ(*micro, 2.0 / 3.0);
}

TEST(F1Test, MacroSkipsClassesInNeitherList) {
  // Classes 3 and 4 never appear: if they counted with F1 = 0 the result
  // would be 59/150.
  EXPECT_DOUBLE_EQ(*MacroF1(kPredicted, kTruth, 5), 59.0 / 90.0);
}

TEST(F1Test, MacroCountsClassOnlyPredicted) {
  // truth = 0 0 1 1, predicted = 0 0 1 2:
  // class 0: 2TP 4, FP 0, FN 0 -> 1
  // class 1: 2TP 2, FP 0, FN 1 -> 2/3
  // class 2 (only predicted): TP 0, FP 1 -> 0
  // macro = (1 + 2/3 + 0) / 3 = 5/9.
  const std::vector<int32_t> truth = {0, 0, 1, 1};
  const std::vector<int32_t> predicted = {0, 0, 1, 2};
  EXPECT_DOUBLE_EQ(*MacroF1(predicted, truth, 3), 5.0 / 9.0);
}

TEST(F1Test, MacroCountsClassNeverPredicted) {
  // truth = 0 1 1, predicted = 1 1 1: class 0 has F1 0, class 1 has
  // 2*2 / (2*2 + 1 + 0) = 4/5; macro = 2/5.
  const std::vector<int32_t> truth = {0, 1, 1};
  const std::vector<int32_t> predicted = {1, 1, 1};
  EXPECT_DOUBLE_EQ(*MacroF1(predicted, truth, 2), 2.0 / 5.0);
}

TEST(F1Test, MicroEqualsAccuracyOnRandomLabels) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 200; ++trial) {
    const int classes = 1 + static_cast<int>(rng() % 7);
    const size_t n = 1 + rng() % 50;
    std::vector<int32_t> truth(n), predicted(n);
    for (size_t i = 0; i < n; ++i) {
      truth[i] = static_cast<int32_t>(rng() % classes);
      // Biased towards right so both branches happen.
      predicted[i] = rng() % 2 ? truth[i]
                               : static_cast<int32_t>(rng() % classes);
    }
    absl::StatusOr<double> micro = MicroF1(predicted, truth, classes);
    absl::StatusOr<double> accuracy = Accuracy(predicted, truth);
    ASSERT_TRUE(micro.ok()) << micro.status();
    ASSERT_TRUE(accuracy.ok()) << accuracy.status();
    EXPECT_DOUBLE_EQ(*micro, *accuracy) << "trial " << trial;
  }
}

TEST(F1Test, PerfectPredictions) {
  EXPECT_DOUBLE_EQ(*MicroF1(kTruth, kTruth, 3), 1.0);
  EXPECT_DOUBLE_EQ(*MacroF1(kTruth, kTruth, 3), 1.0);
}

TEST(F1Test, Errors) {
  const std::vector<int32_t> three = {0, 1, 2};
  const std::vector<int32_t> two = {0, 1};
  for (auto* f : {&MicroF1, &MacroF1}) {
    ExpectInvalid((*f)(three, two, 3), {"3", "2"});
    ExpectInvalid((*f)({}, {}, 3), {"empty"});
    ExpectInvalid((*f)(three, three, 0), {"classes = 0"});
    // Out of range in predicted, above and below.
    const std::vector<int32_t> high = {0, 1, 3};
    ExpectInvalid((*f)(high, three, 3), {"predicted[2] = 3", "[0, 3)"});
    const std::vector<int32_t> negative = {0, -1, 2};
    ExpectInvalid((*f)(three, negative, 3), {"truth[1] = -1", "[0, 3)"});
  }
}

// ---- ROC AUC --------------------------------------------------------------

TEST(RocAucTest, HandWorkedWithTie) {
  // Positives {0.9, 0.8, 0.4} against negatives {0.5, 0.4, 0.1}:
  //   0.9 beats 0.5, 0.4, 0.1             -> 3
  //   0.8 beats 0.5, 0.4, 0.1             -> 3
  //   0.4 loses to 0.5, ties 0.4, beats 0.1 -> 0 + 1/2 + 1 = 3/2
  // AUC = (3 + 3 + 3/2) / 9 = 7.5 / 9 = 5/6.
  const std::vector<float> pos = {0.9f, 0.8f, 0.4f};
  const std::vector<float> neg = {0.5f, 0.4f, 0.1f};
  absl::StatusOr<double> auc = RocAuc(pos, neg);
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_DOUBLE_EQ(*auc, 5.0 / 6.0);
  // Order of the inputs does not matter.
  const std::vector<float> pos_shuffled = {0.4f, 0.9f, 0.8f};
  const std::vector<float> neg_shuffled = {0.1f, 0.5f, 0.4f};
  EXPECT_DOUBLE_EQ(*RocAuc(pos_shuffled, neg_shuffled), 5.0 / 6.0);
}

TEST(RocAucTest, AllTiesIsOneHalf) {
  const std::vector<float> pos = {0.3f, 0.3f, 0.3f};
  const std::vector<float> neg = {0.3f, 0.3f};
  EXPECT_DOUBLE_EQ(*RocAuc(pos, neg), 0.5);
}

TEST(RocAucTest, PerfectAndReversed) {
  const std::vector<float> high = {0.7f, 0.9f, 1.0f, 0.6f};
  const std::vector<float> low = {0.1f, 0.5f, 0.2f};
  EXPECT_DOUBLE_EQ(*RocAuc(high, low), 1.0);
  EXPECT_DOUBLE_EQ(*RocAuc(low, high), 0.0);
}

TEST(RocAucTest, InfinitiesAndSignedZeros) {
  // +inf beats everything, -inf loses to everything, -0 ties +0:
  // pairs (inf, -0) 1, (inf, -inf) 1, (0, -0) 1/2, (0, -inf) 1 -> 3.5 / 4.
  const std::vector<float> pos = {kInf, 0.0f};
  const std::vector<float> neg = {-0.0f, -kInf};
  EXPECT_DOUBLE_EQ(*RocAuc(pos, neg), 3.5 / 4.0);
}

TEST(RocAucTest, MatchesPairwiseOnRandomTiedScores) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t p = 1 + rng() % 40;
    const size_t n = 1 + rng() % 40;
    // Few levels, so ties within and across the lists are common.
    const int levels = 1 + static_cast<int>(rng() % 6);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    auto draw = [&] {
      return std::round(unit(rng) * levels) / static_cast<float>(levels);
    };
    std::vector<float> pos(p), neg(n);
    for (float& x : pos) x = draw();
    for (float& x : neg) x = draw();
    absl::StatusOr<double> auc = RocAuc(pos, neg);
    ASSERT_TRUE(auc.ok()) << auc.status();
    EXPECT_DOUBLE_EQ(*auc, PairwiseAuc(pos, neg))
        << "trial " << trial << ", P " << p << ", N " << n << ", levels "
        << levels;
  }
}

TEST(RocAucTest, Errors) {
  const std::vector<float> some = {0.1f, 0.2f};
  const std::vector<float> none;
  ExpectInvalid(RocAuc(none, some), {"positive_scores", "empty"});
  ExpectInvalid(RocAuc(some, none), {"negative_scores", "empty"});
  const std::vector<float> nan_second = {0.1f, kNaN};
  ExpectInvalid(RocAuc(nan_second, some), {"positive_scores[1]", "NaN"});
  ExpectInvalid(RocAuc(some, nan_second), {"negative_scores[1]", "NaN"});
}

// ---- ArgmaxRows -----------------------------------------------------------

TEST(ArgmaxRowsTest, PicksLargestLowestIndexOnTies) {
  // 4 x 3, row-major.
  const std::vector<float> data = {
      0.1f, 0.7f, 0.2f,   // clear maximum at 1
      0.5f, 0.9f, 0.9f,   // tie between 1 and 2 -> 1
      2.0f, 2.0f, 2.0f,   // all equal -> 0
      -3.0f, -1.0f, -1.0f,  // negatives, tie -> 1
  };
  EXPECT_THAT(ArgmaxRows(data, 4, 3), ElementsAre(1, 1, 0, 1));
}

TEST(ArgmaxRowsTest, SkipsNaN) {
  const std::vector<float> data = {
      kNaN, 0.2f, 0.1f,  // NaN first is not picked -> 1
      0.3f, kNaN, 0.4f,  // -> 2
      kNaN, kNaN, kNaN,  // all NaN -> 0
  };
  EXPECT_THAT(ArgmaxRows(data, 3, 3), ElementsAre(1, 2, 0));
}

TEST(ArgmaxRowsTest, EmptyAndSingleColumn) {
  EXPECT_TRUE(ArgmaxRows({}, 0, 5).empty());
  const std::vector<float> column = {3.0f, -1.0f};
  EXPECT_THAT(ArgmaxRows(column, 2, 1), ElementsAre(0, 0));
}

TEST(ArgmaxRowsDeathTest, ShapeMismatchAborts) {
  const std::vector<float> data = {1, 2, 3, 4, 5};
  EXPECT_DEATH(ArgmaxRows(data, 2, 3), "5 entries");
  EXPECT_DEATH(ArgmaxRows(data, 5, 0), "at least one column");
}

// ---- Summarize ------------------------------------------------------------

TEST(SummarizeTest, KnownValues) {
  // Mean 5; squared deviations 9 1 1 1 0 0 4 16 sum to 32; sample variance
  // 32 / 7.
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  Summary s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(32.0 / 7.0));
}

TEST(SummarizeTest, TwoValues) {
  // Mean 2, deviations +-1, variance 2 / 1.
  const std::vector<double> v = {1, 3};
  Summary s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(2.0));
}

TEST(SummarizeTest, SingleAndEmpty) {
  const std::vector<double> one = {0.83};
  Summary s = Summarize(one);
  EXPECT_DOUBLE_EQ(s.mean, 0.83);
  EXPECT_EQ(s.std, 0.0);
  Summary e = Summarize({});
  EXPECT_EQ(e.mean, 0.0);
  EXPECT_EQ(e.std, 0.0);
}

TEST(SummarizeTest, ConstantValuesHaveZeroStd) {
  const std::vector<double> v = {0.7, 0.7, 0.7, 0.7};
  Summary s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.mean, 0.7);
  EXPECT_NEAR(s.std, 0.0, 1e-15);
}

}  // namespace
}  // namespace ldpgraph::training

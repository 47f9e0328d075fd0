// Tests for the per-node privacy budget: composition, caps, refusals and the
// memo that answers repeated identical questions without spending.
#include "common/dp/accounting.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/mechanisms/feature_mechanism.h"

namespace ldpgraph {
namespace {

using ::testing::HasSubstr;

QueryKey Key(const std::string& attribute, double eps,
             const std::string& params = "d=4,sampled=1,alpha=-1,beta=1") {
  return QueryKey{attribute, "hds", params, eps};
}

std::unique_ptr<PrivacyBudget> MakeBudget(double total,
                                          std::map<std::string, double> per = {}) {
  auto b = PrivacyBudget::Create(BudgetCaps{total, std::move(per)});
  EXPECT_TRUE(b.ok()) << b.status();
  return std::move(*b);
}

TEST(PrivacyBudgetTest, RejectsNonPositiveTotalCap) {
  auto b = PrivacyBudget::Create(BudgetCaps{0.0, {}});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("total budget cap must be finite and > 0"));
}

TEST(PrivacyBudgetTest, RejectsInfiniteTotalCap) {
  auto b = PrivacyBudget::Create(BudgetCaps{INFINITY, {}});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("total budget cap"));
}

TEST(PrivacyBudgetTest, RejectsBadAttributeCap) {
  auto b = PrivacyBudget::Create(BudgetCaps{1.0, {{"label", -1.0}}});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), HasSubstr("budget cap of 'label'"));
}

TEST(PrivacyBudgetTest, SequentialCompositionSumsDistinctQuestions) {
  auto budget = MakeBudget(10.0);
  int calls = 0;
  auto perturb = [&]() -> absl::StatusOr<std::string> {
    ++calls;
    return std::string("report") + std::to_string(calls);
  };
  ASSERT_TRUE(budget->Answer(Key("features", 1.0), perturb).ok());
  ASSERT_TRUE(budget->Answer(Key("features", 0.5), perturb).ok());
  ASSERT_TRUE(budget->Answer(Key("label", 2.0), perturb).ok());
  EXPECT_EQ(calls, 3);
  EXPECT_DOUBLE_EQ(budget->spent(), 3.5);
  EXPECT_DOUBLE_EQ(budget->spent("features"), 1.5);
  EXPECT_DOUBLE_EQ(budget->spent("label"), 2.0);
  EXPECT_DOUBLE_EQ(budget->spent("edges"), 0.0);
}

TEST(PrivacyBudgetTest, RepeatedIdenticalQuestionGetsStoredAnswerForFree) {
  auto budget = MakeBudget(1.0);
  int calls = 0;
  auto perturb = [&]() -> absl::StatusOr<std::string> {
    return "answer-" + std::to_string(++calls);
  };
  auto first = budget->Answer(Key("features", 1.0), perturb);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->from_memo);
  EXPECT_DOUBLE_EQ(first->charged, 1.0);
  // The cap is used up, yet the same question is answered again, from the
  // memo, with no fresh randomness and no spend.
  for (int i = 0; i < 5; ++i) {
    auto again = budget->Answer(Key("features", 1.0), perturb);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(again->from_memo);
    EXPECT_EQ(again->answer, "answer-1");
    EXPECT_EQ(again->charged, 0.0);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(budget->spent(), 1.0);
}

TEST(PrivacyBudgetTest, DifferentParametersAreANewQuestion) {
  auto budget = MakeBudget(10.0);
  auto perturb = []() -> absl::StatusOr<std::string> { return "x"; };
  ASSERT_TRUE(budget->Answer(Key("features", 1.0, "d=4,sampled=1"), perturb).ok());
  auto other = budget->Answer(Key("features", 1.0, "d=4,sampled=2"), perturb);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->from_memo);
  QueryKey mech = Key("features", 1.0, "d=4,sampled=1");
  mech.mechanism = "multibit";
  auto third = budget->Answer(mech, perturb);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->from_memo);
  EXPECT_DOUBLE_EQ(budget->spent(), 3.0);
}

TEST(PrivacyBudgetTest, RefusesOverTotalCapAndSaysWhy) {
  auto budget = MakeBudget(1.0);
  int calls = 0;
  auto perturb = [&]() -> absl::StatusOr<std::string> {
    ++calls;
    return "x";
  };
  ASSERT_TRUE(budget->Answer(Key("features", 0.75), perturb).ok());
  auto refused = budget->Answer(Key("label", 0.5), perturb);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("budget exhausted"));
  EXPECT_THAT(refused.status().message(), HasSubstr("'label'"));
  EXPECT_THAT(refused.status().message(), HasSubstr("cap 1"));
  EXPECT_THAT(refused.status().message(), HasSubstr("spent 0.75"));
  EXPECT_EQ(calls, 1);  // the refused question never perturbed
  EXPECT_DOUBLE_EQ(budget->spent(), 0.75);
  EXPECT_FALSE(budget->Lookup(Key("label", 0.5)).has_value());
}

TEST(PrivacyBudgetTest, RefusesOverAttributeCap) {
  auto budget = MakeBudget(10.0, {{"label", 1.0}});
  auto perturb = []() -> absl::StatusOr<std::string> { return "x"; };
  ASSERT_TRUE(budget->Answer(Key("label", 0.8), perturb).ok());
  auto refused = budget->Answer(Key("label", 0.3), perturb);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("'label'"));
  EXPECT_THAT(refused.status().message(), HasSubstr("its cap 1"));
  // Other attributes still have room.
  EXPECT_TRUE(budget->Answer(Key("features", 3.0), perturb).ok());
  EXPECT_TRUE(budget->CanSpend("features", 6.0).ok());
  EXPECT_FALSE(budget->CanSpend("features", 6.5).ok());
}

TEST(PrivacyBudgetTest, TenTenthsFitACapOfOne) {
  auto budget = MakeBudget(1.0);
  auto perturb = []() -> absl::StatusOr<std::string> { return "x"; };
  for (int i = 0; i < 10; ++i) {
    auto a = budget->Answer(Key("features", 0.1, "round=" + std::to_string(i)),
                            perturb);
    ASSERT_TRUE(a.ok()) << "round " << i << ": " << a.status();
  }
  EXPECT_EQ(budget->Answer(Key("features", 0.1, "round=10"), perturb)
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(PrivacyBudgetTest, FailedPerturbationChargesNothing) {
  auto budget = MakeBudget(1.0);
  auto failing = []() -> absl::StatusOr<std::string> {
    return absl::InvalidArgumentError("input[2] is NaN");
  };
  auto r = budget->Answer(Key("features", 0.5), failing);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(budget->spent(), 0.0);
  EXPECT_FALSE(budget->Lookup(Key("features", 0.5)).has_value());
}

TEST(PrivacyBudgetTest, RejectsNonPositiveEpsilon) {
  auto budget = MakeBudget(1.0);
  auto perturb = []() -> absl::StatusOr<std::string> { return "x"; };
  auto r = budget->Answer(Key("features", 0.0), perturb);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("epsilon must be finite and > 0"));
}

TEST(PrivacyBudgetTest, RestoreChargesAndAnswersFromTheMemo) {
  auto budget = MakeBudget(5.0, {{"label", 2.0}});
  ASSERT_TRUE(budget->Restore(Key("features", 1.5), MemoEntry{"old-f", 1.5}).ok());
  ASSERT_TRUE(budget->Restore(Key("label", 0.5), MemoEntry{"old-l", 0.5}).ok());
  EXPECT_DOUBLE_EQ(budget->spent(), 2.0);
  EXPECT_DOUBLE_EQ(budget->spent("features"), 1.5);
  EXPECT_DOUBLE_EQ(budget->spent("label"), 0.5);
  int calls = 0;
  auto perturb = [&]() -> absl::StatusOr<std::string> {
    ++calls;
    return "fresh";
  };
  auto again = budget->Answer(Key("features", 1.5), perturb);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->from_memo);
  EXPECT_EQ(again->answer, "old-f");
  EXPECT_EQ(again->charged, 0.0);
  EXPECT_EQ(calls, 0);
  auto lookup = budget->Lookup(Key("label", 0.5));
  ASSERT_TRUE(lookup.has_value());
  EXPECT_EQ(lookup->answer, "old-l");
  EXPECT_EQ(lookup->epsilon, 0.5);
  // Restored spend counts against the caps of new questions.
  auto refused = budget->Answer(Key("label", 1.6), perturb);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("spent 0.5"));
  EXPECT_EQ(calls, 0);
}

TEST(PrivacyBudgetTest, RestoreIgnoresCapsThenRefusesEveryNewQuestion) {
  auto budget = MakeBudget(1.0, {{"label", 0.5}});
  // The caps were lowered after these answers left the agent: restoring them
  // must not fail, and leaves the node over its caps.
  ASSERT_TRUE(budget->Restore(Key("features", 0.75), MemoEntry{"a", 0.75}).ok());
  ASSERT_TRUE(budget->Restore(Key("label", 0.75), MemoEntry{"b", 0.75}).ok());
  EXPECT_DOUBLE_EQ(budget->spent(), 1.5);
  EXPECT_DOUBLE_EQ(budget->spent("label"), 0.75);
  int calls = 0;
  auto perturb = [&]() -> absl::StatusOr<std::string> {
    ++calls;
    return "x";
  };
  for (const char* attribute : {"features", "label", "edges"}) {
    auto r = budget->Answer(Key(attribute, 0.01), perturb);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted)
        << attribute;
  }
  EXPECT_EQ(calls, 0);
  EXPECT_DOUBLE_EQ(budget->spent(), 1.5);
  // The restored questions are still answered, for free.
  auto memo = budget->Answer(Key("label", 0.75), perturb);
  ASSERT_TRUE(memo.ok()) << memo.status();
  EXPECT_EQ(memo->answer, "b");
}

TEST(PrivacyBudgetTest, RestoringAnIdenticalEntryTwiceChargesOnce) {
  auto budget = MakeBudget(1.0);
  ASSERT_TRUE(budget->Restore(Key("features", 0.5), MemoEntry{"a", 0.5}).ok());
  ASSERT_TRUE(budget->Restore(Key("features", 0.5), MemoEntry{"a", 0.5}).ok());
  EXPECT_DOUBLE_EQ(budget->spent(), 0.5);
}

TEST(PrivacyBudgetTest, RestoringAfterAnIdenticalAnswerChargesNothing) {
  auto budget = MakeBudget(1.0);
  auto perturb = []() -> absl::StatusOr<std::string> { return "a"; };
  ASSERT_TRUE(budget->Answer(Key("features", 0.5), perturb).ok());
  ASSERT_TRUE(budget->Restore(Key("features", 0.5), MemoEntry{"a", 0.5}).ok());
  EXPECT_DOUBLE_EQ(budget->spent(), 0.5);
}

TEST(PrivacyBudgetTest, RestoreRejectsADifferentAnswerToAStoredQuestion) {
  auto budget = MakeBudget(1.0);
  ASSERT_TRUE(budget->Restore(Key("features", 0.5), MemoEntry{"a", 0.5}).ok());
  absl::Status s = budget->Restore(Key("features", 0.5), MemoEntry{"b", 0.5});
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("a different answer to features|hds|"));
  EXPECT_DOUBLE_EQ(budget->spent(), 0.5);
  EXPECT_EQ(budget->Lookup(Key("features", 0.5))->answer, "a");
}

TEST(PrivacyBudgetTest, RestoreRejectsAnEntryCostingOtherThanItsKey) {
  auto budget = MakeBudget(1.0);
  absl::Status s = budget->Restore(Key("features", 0.5), MemoEntry{"a", 0.25});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("restored entry costs 0.25"));
  EXPECT_EQ(budget->spent(), 0.0);
  EXPECT_FALSE(budget->Lookup(Key("features", 0.5)).has_value());
}

TEST(PrivacyBudgetTest, RestoreRejectsNonPositiveEpsilon) {
  auto budget = MakeBudget(1.0);
  absl::Status s = budget->Restore(Key("features", -1.0), MemoEntry{"a", -1.0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("epsilon must be finite and > 0"));
  EXPECT_EQ(budget->spent(), 0.0);
}

// Several questions of one task are checked together, memo hits free.
TEST(PrivacyBudgetTest, CanAnswerAllSumsTheNewQuestions) {
  auto budget = MakeBudget(2.0, {{"edges", 1.0}});
  const QueryKey features = Key("features", 1.0);
  const QueryKey edges = Key("edges", 1.0, "n=10");
  EXPECT_TRUE(budget->CanAnswerAll({features, edges}).ok());
  // A repeated key counts once.
  EXPECT_TRUE(budget->CanAnswerAll({features, edges, features}).ok());
  ASSERT_TRUE(budget->Answer(Key("label", 0.5, "classes=3"), [] {
                return absl::StatusOr<std::string>("l");
              }).ok());
  absl::Status s = budget->CanAnswerAll({features, edges});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("2 new questions costing 2"));
  // Each alone would fit: only the combination is refused.
  EXPECT_TRUE(budget->CanSpend("features", 1.0).ok());
  EXPECT_TRUE(budget->CanSpend("edges", 1.0).ok());
  // An answered question is free.
  auto b2 = MakeBudget(2.0, {{"edges", 1.0}});
  ASSERT_TRUE(b2->Answer(features, [] {
                return absl::StatusOr<std::string>("x");
              }).ok());
  EXPECT_TRUE(b2->CanAnswerAll({features, edges}).ok());
  // The per-attribute cap.
  auto b3 = MakeBudget(5.0, {{"edges", 1.0}});
  s = b3->CanAnswerAll({edges, Key("edges", 0.5, "n=11")});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("on 'edges'"));
  EXPECT_EQ(b2->CanAnswerAll({Key("edges", 0.0)}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(b2->spent(), 1.0);
}

// spent(attribute) is the running total, in the order answered, as a map of
// sums would hold it: bit for bit, not merely close.
TEST(PrivacyBudgetTest, SpendSumsInTheOrderAnswered) {
  auto budget = MakeBudget(10.0);
  auto perturb = []() -> absl::StatusOr<std::string> { return std::string("r"); };
  const double eps[] = {0.1, 0.7, 0.2, 0.3, 1e-3};
  const char* attribute[] = {"features", "label", "features", "features",
                             "label"};
  double features = 0, label = 0, total = 0;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(budget->Answer(Key(attribute[i], eps[i]), perturb).ok());
    (i == 1 || i == 4 ? label : features) += eps[i];
    total += eps[i];
  }
  EXPECT_EQ(budget->spent("features"), features);  // exactly
  EXPECT_EQ(budget->spent("label"), label);
  EXPECT_EQ(budget->spent(), total);
}

// Many budgets over one caps object: each its own spend and answers, though
// their questions are the same (kept once per process).
TEST(PrivacyBudgetTest, BudgetsSharingCapsKeepTheirOwnAnswers) {
  auto caps = std::make_shared<const BudgetCaps>(
      BudgetCaps{2.0, {{"label", 0.5}}});
  auto a = PrivacyBudget::Create(caps);
  auto b = PrivacyBudget::Create(caps);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(&(*a)->caps(), &(*b)->caps());
  auto answer = [](std::string s) {
    return [s]() -> absl::StatusOr<std::string> { return s; };
  };
  ASSERT_EQ((*a)->Answer(Key("features", 1.0), answer("from a"))->answer, "from a");
  ASSERT_EQ((*b)->Answer(Key("features", 1.0), answer("from b"))->answer, "from b");
  EXPECT_EQ((*a)->Answer(Key("features", 1.0), answer("x"))->answer, "from a");
  EXPECT_EQ((*b)->Lookup(Key("features", 1.0))->answer, "from b");
  EXPECT_TRUE((*a)->Answer(Key("label", 0.5), answer("l")).ok());
  // b's label cap is its own: untouched by a's answer.
  EXPECT_EQ((*b)->spent("label"), 0.0);
  EXPECT_TRUE((*b)->CanSpend("label", 0.5).ok());
  EXPECT_EQ((*a)->CanSpend("label", 0.1).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(PrivacyBudget::Create(std::shared_ptr<const BudgetCaps>()).ok());
  EXPECT_FALSE(PrivacyBudget::Create(std::make_shared<const BudgetCaps>(
                                         BudgetCaps{-1.0, {}}))
                   .ok());
}

TEST(PrivacyBudgetTest, KeyFromMechanismIncludesParametersAndEpsilon) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kHds;
  spec.epsilon = 1.5;
  spec.dimension = 1433;
  spec.sampled = 10;
  auto mech = CreateFeatureMechanism(spec);
  ASSERT_TRUE(mech.ok());
  const QueryKey key = MakeQueryKey("features", **mech);
  EXPECT_EQ(key.Canonical(), "features|hds|d=1433,sampled=10,alpha=-1,beta=1|1.5");
}

}  // namespace
}  // namespace ldpgraph

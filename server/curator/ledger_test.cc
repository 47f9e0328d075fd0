#include "server/curator/ledger.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

QueryKey Key(std::string attribute, double epsilon, std::string mech = "hds") {
  return QueryKey{std::move(attribute), std::move(mech), "d=4", epsilon};
}

v1::BudgetCaps Caps(double total,
                    std::vector<std::pair<std::string, double>> on = {}) {
  v1::BudgetCaps c;
  c.set_total(total);
  for (auto& [attribute, cap] : on)
    (*c.mutable_per_attribute())[attribute] = cap;
  return c;
}

// No open campaign asks anything.
void NothingPending(uint32_t,
                    absl::FunctionRef<void(const Ledger::Question&)>) {}

TEST(LedgerTest, EqualQuestionsInternToOneId) {
  Ledger ledger(4);
  auto a = ledger.Intern({Key("features", 1), Key("edges", 0.5, "rr")});
  auto b = ledger.Intern({Key("edges", 0.5, "rr"), Key("features", 2)});
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[1].id, b[0].id);
  EXPECT_NE(a[0].id, b[1].id);  // another epsilon: another question
  EXPECT_EQ(a[0].attribute, "features");
  EXPECT_DOUBLE_EQ(a[0].epsilon, 1);
}

TEST(LedgerTest, AQuestionIsChargedOncePerNode) {
  Ledger ledger(4);
  auto q = ledger.Intern({Key("edges", 1, "sub"), Key("features", 1.5)});
  auto features = ledger.Intern({Key("features", 1.5)});
  ledger.Charge(0, q);
  ledger.Charge(0, q);         // a resend
  ledger.Charge(0, features);  // the same features question, asked alone
  ledger.Charge(1, features);
  auto b = ledger.Budgets({0, 1, 2, 9});  // 9: outside the graph
  ASSERT_EQ(b.size(), 3u);
  EXPECT_DOUBLE_EQ(b[0].total_spent(), 2.5);
  EXPECT_DOUBLE_EQ(b[0].spent().at("edges"), 1);
  EXPECT_DOUBLE_EQ(b[0].spent().at("features"), 1.5);
  EXPECT_DOUBLE_EQ(b[1].total_spent(), 1.5);
  EXPECT_EQ(b[2].spent_size(), 0);
  EXPECT_FALSE(b[2].caps_known());
  // Without nodes: those with caps or spend.
  ledger.SetCaps(3, Caps(2));
  auto all = ledger.Budgets({});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].node_id(), 3u);
  EXPECT_TRUE(all[2].caps_known());
  EXPECT_DOUBLE_EQ(all[2].caps().total(), 2);
}

TEST(LedgerTest, SeveralDebitsAtOnce) {
  Ledger ledger(3);
  auto q = ledger.Intern({Key("label", 0.5, "rr")});
  std::vector<Ledger::Debit> debits = {{0, q}, {2, q}, {0, q}};
  ledger.Charge(debits);
  auto b = ledger.Budgets({0, 1, 2});
  EXPECT_DOUBLE_EQ(b[0].total_spent(), 0.5);
  EXPECT_DOUBLE_EQ(b[1].total_spent(), 0);
  EXPECT_DOUBLE_EQ(b[2].total_spent(), 0.5);
}

TEST(LedgerTest, CannotAffordCountsSpendPendingAndTheNewQuestionsOnce) {
  Ledger ledger(4);
  auto spent = ledger.Intern({Key("features", 1)});
  auto open = ledger.Intern({Key("features", 0.5, "multibit")});
  auto asked = ledger.Intern({Key("features", 0.75, "duchi")});
  for (uint32_t v : {0u, 1u, 2u}) ledger.SetCaps(v, Caps(2.2));
  // Node 3's caps are unknown: it can always afford.
  for (uint32_t v : {0u, 1u, 2u, 3u}) ledger.Charge(v, spent);
  // An open campaign still waits for nodes 0 and 1.
  auto pending = [&](uint32_t v,
                     absl::FunctionRef<void(const Ledger::Question&)> ask) {
    if (v <= 1) {
      for (const auto& q : open) ask(q);
      for (const auto& q : asked) ask(q);  // counted once with the new one
    }
  };
  std::vector<uint32_t> targets = {0, 1, 2, 3};
  auto s = ledger.CannotAfford(targets, asked, pending);
  EXPECT_EQ(s.nodes, 2u);  // 1 + 0.5 + 0.75 = 2.25 > 2.2
  EXPECT_EQ(s.first, "node 0: total 2.25 > cap 2.2");
  // Nothing pending: 1.75 fits.
  EXPECT_EQ(ledger.CannotAfford(targets, asked, NothingPending).nodes, 0u);
  // A question already charged costs nothing, so it is always affordable
  // (and pending is not consulted).
  int consulted = 0;
  auto count = [&](uint32_t, absl::FunctionRef<void(const Ledger::Question&)>) {
    ++consulted;
  };
  EXPECT_EQ(ledger.CannotAfford(targets, spent, count).nodes, 0u);
  EXPECT_EQ(consulted, 0);
}

TEST(LedgerTest, CannotAffordChecksTheCapsOnTheAskedAttributes) {
  Ledger ledger(2);
  ledger.SetCaps(0, Caps(10, {{"edges", 1}, {"label", 0.1}}));
  auto edges = ledger.Intern({Key("edges", 1.5, "rr")});
  auto features = ledger.Intern({Key("features", 3)});
  std::vector<uint32_t> targets = {0, 1};
  auto s = ledger.CannotAfford(targets, edges, NothingPending);
  EXPECT_EQ(s.nodes, 1u);
  EXPECT_THAT(s.first, HasSubstr("node 0: edges 1.5 > cap 1"));
  // The label cap does not matter to a features question.
  EXPECT_EQ(ledger.CannotAfford(targets, features, NothingPending).nodes, 0u);
  // Within the slack of comparisons: affordable.
  auto exact = ledger.Intern({Key("edges", 1 + 1e-12, "rr")});
  EXPECT_EQ(ledger.CannotAfford(targets, exact, NothingPending).nodes, 0u);
}

TEST(LedgerTest, SummaryListsSpendPerAttributeAndNodesAtACap) {
  Ledger ledger(5);
  auto f = ledger.Intern({Key("features", 1)});
  auto e = ledger.Intern({Key("edges", 0.5, "rr")});
  LedgerSummary s = ledger.Summary();
  EXPECT_TRUE(s.spent.empty());
  EXPECT_EQ(s.nodes_at_cap, 0u);
  ledger.SetCaps(0, Caps(1.5));
  ledger.SetCaps(1, Caps(5, {{"edges", 0.5}}));
  ledger.SetCaps(4, Caps(1));  // spends nothing: not at its cap
  ledger.Charge(0, f);
  ledger.Charge(0, f);  // once
  ledger.Charge(1, e);
  ledger.Charge(2, f);
  ledger.Charge(2, e);
  s = ledger.Summary();
  // In node order, one entry per node that spent on the attribute.
  EXPECT_THAT(s.spent.at("features"), ::testing::ElementsAre(1.0, 1.0));
  EXPECT_THAT(s.spent.at("edges"), ::testing::ElementsAre(0.5, 0.5));
  EXPECT_EQ(s.nodes_at_cap, 1u);  // node 1, on edges
  // Node 0 reaches its total; node 1 raises its cap.
  ledger.Charge(0, e);
  ledger.SetCaps(1, Caps(5));
  s = ledger.Summary();
  EXPECT_THAT(s.spent.at("edges"), ::testing::ElementsAre(0.5, 0.5, 0.5));
  EXPECT_EQ(s.nodes_at_cap, 1u);  // node 0 now
  // Within a billionth of the cap counts as at it.
  auto almost = ledger.Intern({Key("label", 1 - 1e-12, "rr")});
  ledger.Charge(4, almost);
  EXPECT_EQ(ledger.Summary().nodes_at_cap, 2u);
}

}  // namespace
}  // namespace ldpgraph::curator

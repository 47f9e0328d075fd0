// The robust defence's rule (robust.h): a node is dropped when its label is
// not the posteriors' arg-max; unlabelled nodes never are; bad input is
// named. Its effect on a whole run is in poisoning_defence_test.
#include "server/pipeline/robust.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ldpgraph::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

DenseMatrix Posteriors() {
  DenseMatrix p(5, 3);
  const float rows[5][3] = {{0.7f, 0.2f, 0.1f},
                            {0.1f, 0.8f, 0.1f},
                            {0.3f, 0.3f, 0.4f},
                            {0.4f, 0.4f, 0.2f},  // a tie: class 0 predicted
                            {0.2f, 0.2f, 0.6f}};
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 3; ++j) p.at(i, j) = rows[i][j];
  }
  return p;
}

TEST(RobustTest, DropsTheNodesTheModelContradicts) {
  const std::vector<int32_t> labels = {0, 2, 2, 1, -1};
  auto dropped = ContradictedNodes(Posteriors(), {4, 0, 1, 2, 3}, labels);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_THAT(*dropped, ElementsAre(1, 3));  // 4 is unlabelled
  auto none = ContradictedNodes(Posteriors(), {0, 2}, labels);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(RobustTest, NamesBadInput) {
  const std::vector<int32_t> labels = {0, 1, 7, 1, 0};
  EXPECT_THAT(ContradictedNodes(Posteriors(), {2}, labels).status().message(),
              HasSubstr("node 2's label 7 is not one of 3 classes"));
  EXPECT_THAT(ContradictedNodes(Posteriors(), {5}, labels).status().message(),
              HasSubstr("node 5 is beyond"));
}

// 1,000 nodes predicted evenly over 4 classes; 600 labelled nodes report
// as randomized response would (keep 0.7, other 0.1), then 60 attackers
// report class 2: only class 2 is over-reported.
TEST(RobustTest, FindsTheOverReportedClass) {
  DenseMatrix p(1000, 4);
  for (int v = 0; v < 1000; ++v) p.at(v, v % 4) = 1.0f;
  std::vector<int32_t> labels(1000, -1);
  std::vector<uint32_t> nodes;
  for (uint32_t v = 0; v < 600; ++v) {
    nodes.push_back(v);
    // 70 % keep their class, 10 % each move to one of the others.
    const int r = v / 4 % 10;
    labels[v] = r < 7 ? v % 4 : (v % 4 + r - 6) % 4;
  }
  auto honest = OverReportedClasses(p, nodes, labels, 0.7, 0.1, 1e-3);
  ASSERT_TRUE(honest.ok()) << honest.status();
  EXPECT_TRUE(honest->empty());
  for (uint32_t v = 0; v < 600; v += 10) labels[v] = 2;  // 60 attackers
  auto attacked = OverReportedClasses(p, nodes, labels, 0.7, 0.1, 1e-3);
  ASSERT_TRUE(attacked.ok());
  EXPECT_THAT(*attacked, ElementsAre(2));
  EXPECT_FALSE(OverReportedClasses(p, nodes, labels, 1.5, 0, 1e-3).ok());
}

TEST(RobustTest, JsonCountsTheAttackersCaughtWhenKnown) {
  const std::vector<bool> malicious = {false, true, false, true, true};
  nlohmann::json j = RobustToJson({1, 2}, 1, 1, 0.75, {0}, malicious);
  EXPECT_EQ(j["dropped"], 2);
  EXPECT_EQ(j["malicious"], 3);
  EXPECT_EQ(j["malicious_dropped"], 1);
  EXPECT_EQ(j["first_validation"], 0.75);
  EXPECT_EQ(j["overreported_classes"], nlohmann::json::array({0}));
  EXPECT_FALSE(RobustToJson({1}, 1, 0, 0.5, {}, {}).contains("malicious"));
}

}  // namespace
}  // namespace ldpgraph::pipeline

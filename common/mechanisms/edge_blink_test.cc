// Tests for Blink's local randomizer: the degree noise has the Laplace's
// moments on its grid, the bits are edge randomized response at eps_a, and
// bad parameters or neighbour lists are refused with messages naming what
// was wrong. The curator's side: common/edges/blink_test.cc.
#include "common/mechanisms/edge_blink.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ldpgraph {
namespace {

using ::testing::HasSubstr;

TEST(BlinkClientTest, DegreeNoiseHasTheLaplaceMoments) {
  BlinkParams params{.epsilon = 5, .delta = 0.1};  // eps_d = 0.5: scale 2
  auto client = BlinkClient::Create(params, 50);
  ASSERT_TRUE(client.ok());
  EXPECT_LE((*client)->degree_granularity(), 1.0);
  const std::vector<uint32_t> neighbours = {1, 4, 9, 16, 25};
  SeededRandomForTesting rng(42);
  const int draws = 40000;
  double sum = 0, sq = 0;
  for (int i = 0; i < draws; ++i) {
    auto r = (*client)->Report(0, neighbours, rng);
    ASSERT_TRUE(r.ok());
    sum += r->noisy_degree - 5;
    sq += (r->noisy_degree - 5) * (r->noisy_degree - 5);
    // On the grid: a whole number of granularity steps.
    const double steps = r->noisy_degree / (*client)->degree_granularity();
    ASSERT_EQ(steps, std::floor(steps));
  }
  EXPECT_NEAR(sum / draws, 0, 0.06);
  EXPECT_NEAR(sq / draws, 8.0, 0.4);  // 2 / eps_d^2
}

TEST(BlinkClientTest, BitsAreRandomizedResponseAtTheAdjacencyBudget) {
  const BlinkParams params{.epsilon = 2, .delta = 0.25};
  EXPECT_DOUBLE_EQ(params.degree_epsilon(), 0.5);
  EXPECT_DOUBLE_EQ(params.adjacency_epsilon(), 1.5);
  auto client = BlinkClient::Create(params, 10);
  ASSERT_TRUE(client.ok());
  EXPECT_DOUBLE_EQ((*client)->flip_probability(), 1 / (1 + std::exp(1.5)));
  EXPECT_EQ((*client)->degree_granularity(), params.degree_granularity());
}

TEST(BlinkClientTest, BadInputsAreRefused) {
  const std::vector<std::pair<BlinkParams, std::string>> params = {
      {{.epsilon = 0, .delta = 0.1}, "Blink epsilon must be finite and > 0, got 0"},
      {{.epsilon = -1, .delta = 0.1}, "epsilon must be finite and > 0"},
      {{.epsilon = INFINITY, .delta = 0.1}, "epsilon must be finite"},
      {{.epsilon = 1, .delta = 0},
       "Blink delta (the degree's share of epsilon) must be in (0, 1), got 0"},
      {{.epsilon = 1, .delta = 1}, "must be in (0, 1), got 1"},
      {{.epsilon = 1, .delta = NAN}, "must be in (0, 1)"},
  };
  for (const auto& [p, message] : params) {
    auto c = BlinkClient::Create(p, 10);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(message));
  }
  const BlinkParams ok{.epsilon = 1, .delta = 0.1};
  EXPECT_EQ(BlinkClient::Create(ok, 2).status().message(),
            "Blink needs n >= 3 nodes, got 2");
  auto client = BlinkClient::Create(ok, 10);
  ASSERT_TRUE(client.ok());
  SeededRandomForTesting rng(1);
  for (const std::vector<uint32_t>& bad :
       {std::vector<uint32_t>{4, 2}, std::vector<uint32_t>{0},
        std::vector<uint32_t>{10}}) {
    EXPECT_EQ((*client)->Report(0, bad, rng).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ldpgraph

#include "common/observability/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::observability {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(MetricsRegistryTest, RendersCounterWithLabelsSortedAndEscaped) {
  MetricsRegistry registry;
  auto counter = registry.AddCounter("ldpgraph_reports_total",
                                     "Reports received.\nBy mechanism \\ code.",
                                     {"mechanism", "code"});
  ASSERT_TRUE(counter.ok()) << counter.status();
  (*counter)->With({"multibit", "OK"})->Increment(3);
  (*counter)->With({"hds", "OK"})->Increment();
  (*counter)->With({"hds", "OK"})->Increment(2);
  (*counter)->With({"a\"b\\c\nd", "INVALID_ARGUMENT"})->Increment(0.5);

  EXPECT_EQ(registry.Render(),
            "# HELP ldpgraph_reports_total Reports received.\\nBy mechanism "
            "\\\\ code.\n"
            "# TYPE ldpgraph_reports_total counter\n"
            "ldpgraph_reports_total{mechanism=\"a\\\"b\\\\c\\nd\",code="
            "\"INVALID_ARGUMENT\"} 0.5\n"
            "ldpgraph_reports_total{mechanism=\"hds\",code=\"OK\"} 3\n"
            "ldpgraph_reports_total{mechanism=\"multibit\",code=\"OK\"} 3\n");
}

TEST(MetricsRegistryTest, UnlabelledFamiliesRenderAtZeroBeforeFirstUpdate) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.AddCounter("c_total", "A counter.", {}).ok());
  ASSERT_TRUE(registry.AddGauge("g", "A gauge.", {}).ok());
  ASSERT_TRUE(registry.AddGauge("labelled", "No children yet.", {"x"}).ok());
  EXPECT_EQ(registry.Render(),
            "# HELP c_total A counter.\n"
            "# TYPE c_total counter\n"
            "c_total 0\n"
            "# HELP g A gauge.\n"
            "# TYPE g gauge\n"
            "g 0\n"
            "# HELP labelled No children yet.\n"
            "# TYPE labelled gauge\n");
}

TEST(MetricsRegistryTest, RendersGaugeValues) {
  MetricsRegistry registry;
  auto gauge = registry.AddGauge("ldpgraph_campaign_progress", "Progress.",
                                 {"campaign"});
  ASSERT_TRUE(gauge.ok()) << gauge.status();
  Gauge::Child* a = (*gauge)->With({"a"});
  a->Set(10);
  a->Increment(2.5);
  a->Decrement();
  (*gauge)->With({"b"})->Set(-0.25);
  (*gauge)->With({"c"})->Set(std::numeric_limits<double>::infinity());
  (*gauge)->With({"d"})->Set(std::nan(""));
  (*gauge)->With({"e"})->Set(1e300);
  (*gauge)->With({"f"})->Set(-std::numeric_limits<double>::infinity());
  (*gauge)->With({"g"})->Set(0.00001);
  (*gauge)->With({"h"})->Set(123456.789);
  (*gauge)->With({"i"})->Set(0.1 + 0.2);
  EXPECT_EQ(registry.Render(),
            "# HELP ldpgraph_campaign_progress Progress.\n"
            "# TYPE ldpgraph_campaign_progress gauge\n"
            "ldpgraph_campaign_progress{campaign=\"a\"} 11.5\n"
            "ldpgraph_campaign_progress{campaign=\"b\"} -0.25\n"
            "ldpgraph_campaign_progress{campaign=\"c\"} +Inf\n"
            "ldpgraph_campaign_progress{campaign=\"d\"} NaN\n"
            "ldpgraph_campaign_progress{campaign=\"e\"} 1e+300\n"
            "ldpgraph_campaign_progress{campaign=\"f\"} -Inf\n"
            "ldpgraph_campaign_progress{campaign=\"g\"} 1e-05\n"
            "ldpgraph_campaign_progress{campaign=\"h\"} 123456.789\n"
            "ldpgraph_campaign_progress{campaign=\"i\"} 0.30000000000000004\n");
}

TEST(MetricsRegistryTest, RendersHistogramCumulativeWithInfBucket) {
  MetricsRegistry registry;
  auto histogram = registry.AddHistogram(
      "ldpgraph_epsilon_spent", "Epsilon per report.", {"attribute"},
      {0.5, 1, 2});
  ASSERT_TRUE(histogram.ok()) << histogram.status();
  Histogram::Child* features = (*histogram)->With({"features"});
  for (double v : {0.25, 0.5, 0.75, 2.0, 8.0}) features->Observe(v);
  features->Observe(std::nan(""));  // ignored
  (*histogram)->With({"label"})->Observe(1);

  EXPECT_EQ(features->Count(), 5u);
  EXPECT_EQ(features->Sum(), 11.5);
  EXPECT_EQ(features->BucketCounts(), (std::vector<uint64_t>{2, 1, 1, 1}));
  EXPECT_EQ(registry.Render(),
            "# HELP ldpgraph_epsilon_spent Epsilon per report.\n"
            "# TYPE ldpgraph_epsilon_spent histogram\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"0.5\"} 2\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"1\"} 3\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"2\"} 4\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"+Inf\"} 5\n"
            "ldpgraph_epsilon_spent_sum{attribute=\"features\"} 11.5\n"
            "ldpgraph_epsilon_spent_count{attribute=\"features\"} 5\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"0.5\"} 0\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"1\"} 1\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"2\"} 1\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"+Inf\"} 1\n"
            "ldpgraph_epsilon_spent_sum{attribute=\"label\"} 1\n"
            "ldpgraph_epsilon_spent_count{attribute=\"label\"} 1\n");
}

TEST(MetricsRegistryTest, RendersUnlabelledHistogramAndDropsExplicitInf) {
  MetricsRegistry registry;
  auto histogram = registry.AddHistogram(
      "rpc_seconds", "RPC latency.", {},
      {0.001, std::numeric_limits<double>::infinity()});
  ASSERT_TRUE(histogram.ok()) << histogram.status();
  EXPECT_EQ((*histogram)->bounds(), std::vector<double>{0.001});
  (*histogram)->With({})->Observe(0.0005);
  EXPECT_EQ(registry.Render(),
            "# HELP rpc_seconds RPC latency.\n"
            "# TYPE rpc_seconds histogram\n"
            "rpc_seconds_bucket{le=\"0.001\"} 1\n"
            "rpc_seconds_bucket{le=\"+Inf\"} 1\n"
            "rpc_seconds_sum 0.0005\n"
            "rpc_seconds_count 1\n");
}

TEST(MetricsRegistryTest, FamiliesRenderInRegistrationOrder) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.AddGauge("zzz", "z", {}).ok());
  ASSERT_TRUE(registry.AddCounter("aaa_total", "a", {}).ok());
  const std::string text = registry.Render();
  EXPECT_LT(text.find("# HELP zzz"), text.find("# HELP aaa_total"));
}

TEST(MetricsRegistryTest, WithReturnsTheSameChild) {
  MetricsRegistry registry;
  auto counter = registry.AddCounter("c_total", "c", {"k"});
  ASSERT_TRUE(counter.ok());
  Counter::Child* first = (*counter)->With({"x"});
  for (int i = 0; i < 100; ++i) (*counter)->With({absl::StrCat("other", i)});
  EXPECT_EQ((*counter)->With({"x"}), first);
}

TEST(MetricsRegistryTest, CounterIgnoresNegativeAndNanIncrements) {
  MetricsRegistry registry;
  auto counter = registry.AddCounter("c_total", "c", {});
  ASSERT_TRUE(counter.ok());
  Counter::Child* c = (*counter)->With({});
  c->Increment(2);
  c->Increment(-1);
  c->Increment(std::nan(""));
  EXPECT_EQ(c->Value(), 2);
}

TEST(MetricsRegistryTest, ConcurrentUpdatesSumExactly) {
  MetricsRegistry registry;
  auto counter = registry.AddCounter("c_total", "c", {"k"});
  auto gauge = registry.AddGauge("g", "g", {});
  auto histogram = registry.AddHistogram("h", "h", {}, {1, 2});
  ASSERT_TRUE(counter.ok() && gauge.ok() && histogram.ok());
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads look the child up every time, half keep it.
      Counter::Child* kept = (*counter)->With({"k"});
      for (int i = 0; i < kPerThread; ++i) {
        if (t % 2 == 0) {
          (*counter)->With({"k"})->Increment();
        } else {
          kept->Increment();
        }
        (*gauge)->With({})->Increment(2);
        (*gauge)->With({})->Decrement();
        (*histogram)->With({})->Observe(i % 3);
        if (i % 1000 == 0) registry.Render();  // renders race with updates
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ((*counter)->With({"k"})->Value(), kThreads * kPerThread);
  EXPECT_EQ((*gauge)->With({})->Value(), kThreads * kPerThread);
  Histogram::Child* h = (*histogram)->With({});
  EXPECT_EQ(h->Count(), static_cast<uint64_t>(kThreads * kPerThread));
  // i % 3 over 20000 values: 6667 zeros, 6667 ones, 6666 twos.
  EXPECT_EQ(h->BucketCounts(),
            (std::vector<uint64_t>{kThreads * 13334, kThreads * 6666, 0}));
  EXPECT_EQ(h->Sum(), kThreads * (6667 + 2 * 6666));
}

TEST(MetricsRegistryTest, RejectsInvalidMetricName) {
  MetricsRegistry registry;
  for (const std::string name : {"", "1abc", "has-dash", "has space", "é"}) {
    auto counter = registry.AddCounter(name, "h", {});
    EXPECT_EQ(counter.status().code(), absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_THAT(counter.status().message(), HasSubstr("metric name"));
  }
  EXPECT_TRUE(registry.AddCounter("ok:with_colon_1", "h", {}).ok());
}

TEST(MetricsRegistryTest, RejectsInvalidLabelName) {
  MetricsRegistry registry;
  for (const std::string label : {"", "1a", "a:b", "__reserved", "a-b"}) {
    auto gauge = registry.AddGauge("g", "h", {label});
    EXPECT_EQ(gauge.status().code(), absl::StatusCode::kInvalidArgument)
        << label;
    EXPECT_THAT(gauge.status().message(), HasSubstr("label name"));
  }
  EXPECT_TRUE(registry.AddGauge("g", "h", {"_ok", "ok2"}).ok());
}

TEST(MetricsRegistryTest, RejectsRepeatedLabelName) {
  MetricsRegistry registry;
  auto gauge = registry.AddGauge("g", "h", {"a", "a"});
  EXPECT_EQ(gauge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gauge.status().message(), HasSubstr("repeats"));
}

TEST(MetricsRegistryTest, RejectsLeLabelOnHistogram) {
  MetricsRegistry registry;
  auto histogram = registry.AddHistogram("h", "h", {"le"}, {1});
  EXPECT_EQ(histogram.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(histogram.status().message(), HasSubstr("le is reserved"));
}

TEST(MetricsRegistryTest, RejectsUnsortedBounds) {
  MetricsRegistry registry;
  auto histogram = registry.AddHistogram("h", "h", {}, {1, 1});
  EXPECT_EQ(histogram.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(histogram.status().message(), HasSubstr("strictly increasing"));
}

TEST(MetricsRegistryTest, RejectsNanBound) {
  MetricsRegistry registry;
  auto histogram = registry.AddHistogram("h", "h", {}, {std::nan("")});
  EXPECT_EQ(histogram.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MetricsRegistryTest, RejectsInfiniteBoundBeforeTheLast) {
  MetricsRegistry registry;
  auto histogram = registry.AddHistogram(
      "h", "h", {}, {std::numeric_limits<double>::infinity(), 5});
  EXPECT_EQ(histogram.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MetricsRegistryTest, RejectsDuplicateName) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.AddCounter("x", "h", {}).ok());
  auto again = registry.AddGauge("x", "h", {});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("x"));
}

TEST(MetricsRegistryTest, RejectsNameCollidingWithHistogramSamples) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.AddHistogram("lat", "h", {}, {1}).ok());
  EXPECT_EQ(registry.AddCounter("lat_count", "h", {}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddGauge("lat_sum", "h", {}).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddCounter("rpc_count", "h", {}).ok());
  EXPECT_EQ(registry.AddHistogram("rpc", "h", {}, {1}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(MetricsRegistryTest, FailedRegistrationLeavesNoTrace) {
  MetricsRegistry registry;
  ASSERT_FALSE(registry.AddCounter("bad name", "h", {}).ok());
  EXPECT_EQ(registry.Render(), "");
}

TEST(MetricsRegistryDeathTest, WrongNumberOfLabelValuesStops) {
  MetricsRegistry registry;
  auto counter = registry.AddCounter("c_total", "h", {"a", "b"});
  ASSERT_TRUE(counter.ok());
  EXPECT_DEATH((*counter)->With({"only one"}),
               "metric c_total: 1 label values given for the 2 labels");
}

TEST(MetricsRegistryTest, GaugeCallbackIsReadAtRender) {
  MetricsRegistry registry;
  double value = 1;
  ASSERT_TRUE(
      registry.AddGaugeCallback("cb", "Read late.", [&value] { return value; })
          .ok());
  value = 42;
  EXPECT_EQ(registry.Render(),
            "# HELP cb Read late.\n# TYPE cb gauge\ncb 42\n");
  EXPECT_EQ(registry.AddGaugeCallback("cb2", "h", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsRegistryTest, CounterCallbackIsReadAtRenderAndTypedCounter) {
  MetricsRegistry registry;
  double value = 1;
  ASSERT_TRUE(registry
                  .AddCounterCallback("reports_total", "Reports.",
                                      [&value] { return value; })
                  .ok());
  value = 7;
  EXPECT_EQ(registry.Render(),
            "# HELP reports_total Reports.\n"
            "# TYPE reports_total counter\n"
            "reports_total 7\n");
}

TEST(MetricsRegistryTest, LabelledCounterCallbackRendersSortedSamples) {
  MetricsRegistry registry;
  MetricsRegistry::CounterSamples samples = {{{"policy"}, 2},
                                             {{"budget_exhausted"}, 0},
                                             {{"no \"data\""}, 1.5}};
  ASSERT_TRUE(registry
                  .AddCounterCallback("refusals_total", "Refusals.", {"reason"},
                                      [&samples] { return samples; })
                  .ok());
  EXPECT_EQ(registry.Render(),
            "# HELP refusals_total Refusals.\n"
            "# TYPE refusals_total counter\n"
            "refusals_total{reason=\"budget_exhausted\"} 0\n"
            "refusals_total{reason=\"no \\\"data\\\"\"} 1.5\n"
            "refusals_total{reason=\"policy\"} 2\n");
  // Read again at the next render: a sample may appear.
  samples.push_back({{"invalid_task"}, 3});
  EXPECT_THAT(registry.Render(),
              HasSubstr("refusals_total{reason=\"invalid_task\"} 3\n"));
}

TEST(MetricsRegistryTest, CounterCallbackLeavesOutWrongArityAndRepeats) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry
                  .AddCounterCallback(
                      "c_total", "c", {"a", "b"},
                      []() -> MetricsRegistry::CounterSamples {
                        return {{{"x", "1"}, 1},
                                {{"only one"}, 2},
                                {{"x", "1"}, 3},  // repeats: the first is kept
                                {{"x", "2", "extra"}, 4},
                                {{"w", "1"}, 5}};
                      })
                  .ok());
  EXPECT_EQ(registry.Render(),
            "# HELP c_total c\n"
            "# TYPE c_total counter\n"
            "c_total{a=\"w\",b=\"1\"} 5\n"
            "c_total{a=\"x\",b=\"1\"} 1\n");
}

TEST(MetricsRegistryTest, CounterCallbackRejectsBadRegistrations) {
  MetricsRegistry registry;
  EXPECT_EQ(registry.AddCounterCallback("c_total", "h", nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry
                .AddCounterCallback("c_total", "h", {"k"},
                                    std::function<MetricsRegistry::CounterSamples()>())
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto read = [] { return MetricsRegistry::CounterSamples{}; };
  const absl::Status bad_name =
      registry.AddCounterCallback("bad name", "h", {"k"}, read);
  EXPECT_EQ(bad_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_name.message(), HasSubstr("metric name"));
  const absl::Status bad_label =
      registry.AddCounterCallback("c_total", "h", {"__k"}, read);
  EXPECT_EQ(bad_label.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_label.message(), HasSubstr("label name"));
  ASSERT_TRUE(registry.AddCounterCallback("c_total", "h", {"k"}, read).ok());
  const absl::Status again =
      registry.AddCounterCallback("c_total", "h", [] { return 1.0; });
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("c_total"));
  EXPECT_EQ(registry.AddGauge("c_total", "h", {}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(HistogramSnapshotTest, BucketsAsObserveDoes) {
  const std::vector<double> bounds = {0.5, 1, 2};
  const std::vector<double> values = {0.25, 0.5, 0.75, 2.0, 8.0,
                                      std::nan("")};
  HistogramSnapshot s = HistogramSnapshot::Of(bounds, values);
  EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{2, 1, 1, 1}));
  EXPECT_EQ(s.sum, 11.5);

  // The same observations through a Histogram child.
  MetricsRegistry registry;
  auto histogram = registry.AddHistogram("h", "h", {}, bounds);
  ASSERT_TRUE(histogram.ok());
  for (double v : values) (*histogram)->With({})->Observe(v);
  EXPECT_EQ((*histogram)->With({})->BucketCounts(), s.bucket_counts);
  EXPECT_EQ((*histogram)->With({})->Sum(), s.sum);

  // A last +Inf bound is dropped, as AddHistogram drops it; no bounds: only
  // the +Inf bucket.
  s = HistogramSnapshot::Of({1, std::numeric_limits<double>::infinity()},
                            {0.5, 3});
  EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{1, 1}));
  s = HistogramSnapshot::Of({}, {0.5, 3});
  EXPECT_EQ(s.bucket_counts, (std::vector<uint64_t>{2}));
  EXPECT_EQ(s.sum, 3.5);
}

TEST(MetricsRegistryTest, HistogramCallbackRendersLikeAHistogram) {
  MetricsRegistry registry;
  const std::vector<double> bounds = {0.5, 1, 2};
  std::vector<double> features = {0.25, 0.5, 0.75, 2.0, 8.0};
  ASSERT_TRUE(registry
                  .AddHistogramCallback(
                      "ldpgraph_epsilon_spent", "Epsilon per report.",
                      {"attribute"}, bounds,
                      [&]() -> MetricsRegistry::HistogramSamples {
                        return {{{"label"}, HistogramSnapshot::Of(bounds, {1})},
                                {{"features"},
                                 HistogramSnapshot::Of(bounds, features)},
                                {{"edges"}, HistogramSnapshot::Of(bounds, {})}};
                      })
                  .ok());
  // The same text as RendersHistogramCumulativeWithInfBucket, plus an empty
  // child.
  EXPECT_EQ(registry.Render(),
            "# HELP ldpgraph_epsilon_spent Epsilon per report.\n"
            "# TYPE ldpgraph_epsilon_spent histogram\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"edges\",le=\"0.5\"} 0\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"edges\",le=\"1\"} 0\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"edges\",le=\"2\"} 0\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"edges\",le=\"+Inf\"} 0\n"
            "ldpgraph_epsilon_spent_sum{attribute=\"edges\"} 0\n"
            "ldpgraph_epsilon_spent_count{attribute=\"edges\"} 0\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"0.5\"} 2\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"1\"} 3\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"2\"} 4\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"features\",le=\"+Inf\"} 5\n"
            "ldpgraph_epsilon_spent_sum{attribute=\"features\"} 11.5\n"
            "ldpgraph_epsilon_spent_count{attribute=\"features\"} 5\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"0.5\"} 0\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"1\"} 1\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"2\"} 1\n"
            "ldpgraph_epsilon_spent_bucket{attribute=\"label\",le=\"+Inf\"} 1\n"
            "ldpgraph_epsilon_spent_sum{attribute=\"label\"} 1\n"
            "ldpgraph_epsilon_spent_count{attribute=\"label\"} 1\n");
  // Read at every render.
  features.push_back(0.1);
  EXPECT_THAT(registry.Render(),
              HasSubstr("ldpgraph_epsilon_spent_count{attribute=\"features\"} 6\n"));
}

TEST(MetricsRegistryTest, HistogramCallbackLeavesOutMalformedSamples) {
  MetricsRegistry registry;
  ASSERT_TRUE(
      registry
          .AddHistogramCallback(
              "h", "h", {"k"}, {1, std::numeric_limits<double>::infinity()},
              []() -> MetricsRegistry::HistogramSamples {
                return {{{"three buckets"}, HistogramSnapshot{{1, 2, 3}, 6}},
                        {{"a", "b"}, HistogramSnapshot{{1, 1}, 2}},
                        {{"ok"}, HistogramSnapshot{{1, 1}, 2.5}},
                        {{"ok"}, HistogramSnapshot{{5, 5}, 9}}};
              })
          .ok());
  EXPECT_EQ(registry.Render(),
            "# HELP h h\n"
            "# TYPE h histogram\n"
            "h_bucket{k=\"ok\",le=\"1\"} 1\n"
            "h_bucket{k=\"ok\",le=\"+Inf\"} 2\n"
            "h_sum{k=\"ok\"} 2.5\n"
            "h_count{k=\"ok\"} 2\n");
}

TEST(MetricsRegistryTest, HistogramCallbackRejectsBadRegistrations) {
  MetricsRegistry registry;
  auto read = [] { return MetricsRegistry::HistogramSamples{}; };
  EXPECT_EQ(registry
                .AddHistogramCallback(
                    "h", "h", {}, {1},
                    std::function<MetricsRegistry::HistogramSamples()>())
                .code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status le = registry.AddHistogramCallback("h", "h", {"le"}, {1}, read);
  EXPECT_EQ(le.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(le.message(), HasSubstr("le is reserved"));
  const absl::Status unsorted =
      registry.AddHistogramCallback("h", "h", {}, {2, 1}, read);
  EXPECT_EQ(unsorted.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unsorted.message(), HasSubstr("strictly increasing"));
  EXPECT_EQ(registry.AddHistogramCallback("h", "h", {}, {std::nan("")}, read)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogramCallback("bad name", "h", {}, {1}, read).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.AddHistogramCallback("h", "h", {}, {1}, read).ok());
  EXPECT_EQ(registry.AddHistogramCallback("h", "h", {}, {1}, read).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCounter("h_count", "h", {}).status().code(),
            absl::StatusCode::kAlreadyExists);
  // Failed registrations left nothing; the one family has no child yet.
  EXPECT_EQ(registry.Render(), "# HELP h h\n# TYPE h histogram\n");
}

TEST(ProcessMetricsTest, RegistersStartTimeAndResidentMemory) {
  MetricsRegistry registry;
  ASSERT_TRUE(RegisterProcessMetrics(registry).ok());
  const std::string text = registry.Render();
  EXPECT_THAT(text, MatchesRegex("(.|\n)*\nprocess_start_time_seconds "
                                 "1[0-9]{9}(\\.[0-9]+)?\n(.|\n)*"));
  EXPECT_THAT(text, MatchesRegex("(.|\n)*\nprocess_resident_memory_bytes "
                                 "[1-9][0-9]{5,}\n(.|\n)*"));
  EXPECT_EQ(RegisterProcessMetrics(registry).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(ScopedTimerTest, ObservesOnceAndToleratesNull) {
  MetricsRegistry registry;
  auto histogram =
      registry.AddHistogram("t_seconds", "h", {}, LatencySecondsBuckets());
  ASSERT_TRUE(histogram.ok());
  Histogram::Child* child = (*histogram)->With({});
  {
    ScopedTimer timer(child);
    const double seconds = timer.Stop();
    EXPECT_GE(seconds, 0);
    EXPECT_LT(seconds, 10);
    EXPECT_EQ(timer.Stop(), 0);
  }
  { ScopedTimer timer(child); }
  EXPECT_EQ(child->Count(), 2u);
  { ScopedTimer no_op(nullptr); }
}

TEST(BucketsTest, ExponentialBuckets) {
  auto bounds = ExponentialBuckets(1, 2, 4);
  ASSERT_TRUE(bounds.ok()) << bounds.status();
  EXPECT_EQ(*bounds, (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(ExponentialBuckets(0, 2, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExponentialBuckets(1, 1, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExponentialBuckets(1, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExponentialBuckets(1e300, 1e10, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ldpgraph::observability

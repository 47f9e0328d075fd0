#include "server/pipeline/private_graph.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/dataset/feature_schema.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "common/wire/codec.h"
#include "server/pipeline/feature_reports.h"
#include "server/pipeline/private_edges.h"

namespace ldpgraph::pipeline {

absl::StatusOr<std::shared_ptr<const edges::ExchangeFeatures>>
MakeExchangeFeatures(const PipelineConfig& c, const Dataset& d) {
  if (c.mechanism == "none") {
    auto range = ScaledRange(c.scaling, d.meta);
    if (!range) {
      return absl::InvalidArgumentError("raw features need a public range");
    }
    return edges::ExchangeFeatures::RawForResearch(
        static_cast<int>(d.features.cols), range->first, range->second);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<FeatureMechanism> mech,
                   BuildFeatureMechanism(c, d));
  return edges::ExchangeFeatures::Private(
      std::shared_ptr<const FeatureMechanism>(std::move(mech)));
}

absl::StatusOr<std::vector<v1::FeatureReport>> NodeFeatureReports(
    const Dataset& d, const PipelineConfig& c,
    const edges::ExchangeFeatures& features, uint64_t seed, int run,
    RandomSource* secure, SparseRows* estimates) {
  const SparseRows x = ScaleDatasetFeatures(d, c.scaling);
  std::unique_ptr<FeatureMechanism> mech;
  if (c.mechanism != "none") {
    ASSIGN_OR_RETURN(mech, BuildFeatureMechanism(c, d));
  }
  if (estimates != nullptr) {
    *estimates = SparseRows();
    estimates->cols = x.cols;
  }
  const uint64_t noise_seed = NoiseSeed(seed, run);
  std::vector<v1::FeatureReport> out;
  out.reserve(x.rows);
  std::vector<double> row(x.cols), estimate(x.cols);
  for (size_t v = 0; v < x.rows; ++v) {
    x.RowToDense(v, absl::MakeSpan(row));
    // The stream the pipeline perturbs node v's features with, fresh: the
    // report is its first draw, as in SimulateFeatureReports.
    SeededRandomForTesting stream(
        NodeNoiseSeed(noise_seed, static_cast<uint32_t>(v)));
    RandomSource& rng = secure != nullptr ? *secure : stream;
    ASSIGN_OR_RETURN(v1::FeatureReport report, features.Encode(row, rng));
    if (estimates != nullptr) {
      if (mech == nullptr) {
        estimates->AppendRow(x.row_indices(v), x.row_values(v));
      } else {
        ASSIGN_OR_RETURN(SparseReport sr,
                         wire::DecodeFeatureReport(report, *mech));
        std::fill(estimate.begin(), estimate.end(), 0.0);
        RETURN_IF_ERROR(mech->Estimate(sr, absl::MakeSpan(estimate)));
        estimates->AppendDenseRow(estimate);
      }
    }
    out.push_back(std::move(report));
  }
  return out;
}

absl::StatusOr<EdgeNoise> EdgeNoise::Create(size_t nodes, bool secure) {
  EdgeNoise out;
  if (secure) {
    // One source per node: RunSubstitution advances nodes on several
    // threads, and a RandomSource is not thread-safe.
    out.secure_.reserve(nodes);
    for (size_t v = 0; v < nodes; ++v) {
      ASSIGN_OR_RETURN(auto s, SecureRandom::Create());
      out.secure_.push_back(std::move(s));
    }
  } else {
    out.seeded_.assign(nodes, SeededRandomForTesting(0));
  }
  return out;
}

void EdgeNoise::Reset(uint64_t seed, int run) {
  const uint64_t s = EdgeNoiseSeed(seed, run);
  for (size_t v = 0; v < seeded_.size(); ++v) {
    seeded_[v] = SeededRandomForTesting(
        NodeNoiseSeed(s, static_cast<uint32_t>(v)));
  }
}

RandomSource* EdgeNoise::at(uint32_t v) {
  if (!secure_.empty()) return secure_[v].get();
  return &seeded_[v];
}

absl::string_view EdgeNoise::name() const {
  return secure_.empty() ? "seeded-not-private" : "secure";
}

double ExpectedRrEdges(size_t nodes, double eps_e) {
  const double pairs = 0.5 * static_cast<double>(nodes) *
                       (static_cast<double>(nodes) - 1.0);
  return pairs / (1.0 + std::exp(eps_e));
}

absl::StatusOr<PrivateGraph> BuildPrivateGraph(
    const Graph& truth, const PrivateGraphConfig& c,
    std::shared_ptr<const edges::ExchangeFeatures> features,
    const std::vector<v1::FeatureReport>& own, EdgeNoise& noise) {
  const auto start = std::chrono::steady_clock::now();
  const uint32_t n = static_cast<uint32_t>(truth.num_nodes());
  PrivateGraph out;
  if (c.kind == PrivateGraphKind::kRr || c.kind == PrivateGraphKind::kBlink) {
    // Every node's report from its own stream, and the curator's estimate
    // (rr: the lower endpoint's bit of each pair; blink: EstimateBlinkGraph).
    PrivateEdgesConfig pc;
    pc.kind = c.kind == PrivateGraphKind::kRr ? EdgeMechanism::kRr
                                              : EdgeMechanism::kBlink;
    pc.epsilon = c.epsilon;
    pc.blink_delta = c.blink_delta;
    pc.blink_variant = c.blink_variant;
    pc.blink_iterations = c.blink_iterations;
    pc.max_reported_pairs = c.max_reported_pairs;
    ASSIGN_OR_RETURN(
        PrivateEdges pe,
        BuildPrivateEdges(
            truth, pc, /*adversary=*/nullptr,
            [&](uint32_t v) -> RandomSource& { return *noise.at(v); }));
    out.graph = std::move(pe.graph);
    out.blink = std::move(pe.blink);
    out.seconds = SecondsSince(start);
    return out;
  }
  edges::SubstitutionParams p = c.substitution;
  p.approach = c.kind == PrivateGraphKind::kNs1
                   ? edges::Approach::kCandidateRelay
                   : edges::Approach::kSimilarityQuery;
  p.epsilon = c.epsilon;
  edges::RunOptions ro;
  ro.threads = c.threads;
  ASSIGN_OR_RETURN(
      edges::RunOutput run,
      edges::RunSubstitution(truth, p, std::move(features), own,
                             [&](uint32_t v) { return noise.at(v); }, ro));
  out.reports.resize(n);
  out.node_stats.resize(n);
  for (uint32_t v = 0; v < n; ++v) {
    out.reports[v] = std::move(run.results[v].neighbours);
    out.node_stats[v] = run.results[v].stats;
  }
  out.stats = run.stats;
  ASSIGN_OR_RETURN(out.graph, edges::AssembleGraph(
                                  n, out.reports, edges::Symmetrisation::kUnion));
  out.seconds = SecondsSince(start);
  return out;
}

}  // namespace ldpgraph::pipeline

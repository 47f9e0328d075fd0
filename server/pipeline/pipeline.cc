#include "server/pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/splits.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/embedding/release.h"
#include "server/pipeline/internal/stages.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::pipeline {
namespace internal {

Mat<float> ToEigen(const DenseMatrix& m) {
  return Eigen::Map<const Mat<float>>(m.data.data(), m.rows, m.cols);
}

ColumnMoments StandardizeMoments(const float* column, size_t n,
                                 size_t stride) {
  double sum = 0, sq = 0;
  for (size_t i = 0; i < n; ++i) sum += column[i * stride];
  const double mean = sum / static_cast<double>(n);
  for (size_t i = 0; i < n; ++i) {
    const double d = column[i * stride] - mean;
    sq += d * d;
  }
  const double sd = std::sqrt(sq / static_cast<double>(n));
  return {mean, sd > 0 ? static_cast<float>(1.0 / sd) : 0.0f};
}

std::vector<ColumnMoments> StandardizeMoments(const SparseRows& z) {
  const size_t n = z.rows, d = z.cols;
  std::vector<double> sum(d, 0.0), sq(d, 0.0);
  std::vector<uint64_t> stored(d, 0);
  for (size_t p = 0; p < z.nnz(); ++p) sum[z.indices[p]] += z.values[p];
  std::vector<ColumnMoments> out(d);
  for (size_t j = 0; j < d; ++j) out[j].mean = sum[j] / static_cast<double>(n);
  for (size_t p = 0; p < z.nnz(); ++p) {
    const double dev = z.values[p] - out[z.indices[p]].mean;
    sq[z.indices[p]] += dev * dev;
    ++stored[z.indices[p]];
  }
  for (size_t j = 0; j < d; ++j) {
    const double mean = out[j].mean;
    sq[j] += static_cast<double>(n - stored[j]) * mean * mean;
    const double sd = std::sqrt(sq[j] / static_cast<double>(n));
    out[j].scale = sd > 0 ? static_cast<float>(1.0 / sd) : 0.0f;
  }
  return out;
}

void Standardize(Mat<float>* m, double clip) {
  const Eigen::Index n = m->rows();
  const float bound = clip > 0 ? static_cast<float>(clip)
                               : std::numeric_limits<float>::infinity();
  for (Eigen::Index j = 0; j < m->cols(); ++j) {
    const auto [mean, scale] = StandardizeMoments(
        m->data() + j, static_cast<size_t>(n), static_cast<size_t>(m->cols()));
    for (Eigen::Index i = 0; i < n; ++i) {
      (*m)(i, j) = std::clamp(
          static_cast<float>(((*m)(i, j) - mean) * scale), -bound, bound);
    }
  }
}

absl::StatusOr<DenseMatrix> RunRelease(const Graph& g, const PipelineConfig& c,
                                       uint64_t seed, int run, RunResult* r) {
  std::unique_ptr<RandomSource> rng;
  if (c.secure_noise) {
    ASSIGN_OR_RETURN(rng, SecureRandom::Create());
  } else {
    rng = std::make_unique<SeededRandomForTesting>(NoiseSeed(seed, run));
  }
  ASSIGN_OR_RETURN(
      embedding::Release release,
      embedding::ReleaseEmbedding(g, ReleaseConfigOf(c), *rng,
                                  StageSeed(seed, run, Stage::kModel)));
  r->propagate_seconds = release.seconds;
  r->noise_source = c.mechanism == "none" ? "none" : std::string(rng->name());
  r->release = std::move(release.details);
  return std::move(release.embedding);
}

}  // namespace internal
namespace {

using internal::CollectFeatures;
using internal::Mat;
using internal::NoiseStreams;
using internal::RunNode;
using internal::RunRelease;
using internal::Standardize;
using internal::ToEigen;

absl::StatusOr<RunResult> RunLink(const Dataset& d, const PipelineConfig& c,
                                  const Collected* collected, uint64_t seed,
                                  int run, const SparseRows* features) {
  RunResult r;
  const uint64_t split_seed =
      StageSeed(seed, c.fixed_split ? 0 : run, Stage::kSplit);
  ASSIGN_OR_RETURN(EdgeSplit split,
                   RandomEdgeSplit(d.graph, c.link_validation_fraction,
                                   c.link_test_fraction, split_seed));
  std::vector<Edge> held_out = split.validation;
  held_out.insert(held_out.end(), split.test.begin(), split.test.end());
  // The curator learns from the training edges only.
  ASSIGN_OR_RETURN(Graph train_graph, d.graph.WithoutEdges(held_out));
  // PrivGE's Z stays dense here: the pair features z_u * z_v of the
  // standardised Z are dense rows (formed chunk by chunk, TrainLinkPredictor).
  // One n x d copy, written by push in place.
  Mat<float> embeddings;
  if (IsReleaseMethod(c.method)) {
    ASSIGN_OR_RETURN(const DenseMatrix z,
                     RunRelease(train_graph, c, seed, run, &r));
    embeddings = ToEigen(z);
  } else {
    ASSIGN_OR_RETURN(NoiseStreams noise,
                     NoiseStreams::Create(c, NoiseSeed(seed, run),
                                          collected ? 0 : d.graph.num_nodes()));
    std::vector<uint32_t> untrusted;  // rows emptied; no labels to drop
    ASSIGN_OR_RETURN(SparseRows x,
                     CollectFeatures(d, c, collected, features, nullptr, noise,
                                     &r, &untrusted));
    const auto t_prop = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(PprPushByDensity(train_graph, x, PprOptionsOf(c), 0,
                                     [&] {
                                       embeddings.resize(x.rows, x.cols);
                                       return absl::MakeSpan(
                                           embeddings.data(),
                                           embeddings.size());
                                     })
                        .status());
    r.propagate_seconds = SecondsSince(t_prop);
  }
  if (c.standardize) Standardize(&embeddings);
  training::LinkTaskData data;
  data.embeddings = &embeddings;
  data.train_positive = std::move(split.train);
  data.train_negative = std::move(split.train_negative);
  data.validation_positive = std::move(split.validation);
  data.validation_negative = std::move(split.validation_negative);
  data.test_positive = std::move(split.test);
  data.test_negative = std::move(split.test_negative);
  training::LinkModelConfig model = c.link_model;
  model.threads = c.threads;
  ASSIGN_OR_RETURN(training::LinkTaskResult t,
                   training::TrainLinkPredictor(
                       data, model, StageSeed(seed, run, Stage::kModel)));
  r.metric = t.test_auc;
  r.training = t.training;
  r.train_seconds = t.training.seconds;
  return r;
}

}  // namespace

absl::StatusOr<RunResult> RunPipeline(const Dataset& dataset,
                                      const PipelineConfig& c, uint64_t seed,
                                      int run, const RunOverrides& overrides) {
  RETURN_IF_ERROR(ValidateConfig(c));
  if (overrides.graph != nullptr) {
    if (c.task != v1::PIPELINE_TASK_NODE) {
      return absl::InvalidArgumentError(
          "a replacement graph applies to the node task only");
    }
    if (overrides.graph->num_nodes() != dataset.graph.num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the replacement graph has ", overrides.graph->num_nodes(),
          " nodes; the dataset has ", dataset.graph.num_nodes()));
    }
  }
  if (c.task == v1::PIPELINE_TASK_NODE) {
    PipelineConfig resolved = c;
    ResolveDatasetSettings(dataset.meta, &resolved);
    return RunNode(dataset, resolved, nullptr, seed, run, overrides);
  }
  return RunLink(dataset, c, nullptr, seed, run, overrides.features);
}

absl::StatusOr<RunResult> RunPipelineOnCollected(const Dataset& public_data,
                                                 const PipelineConfig& c,
                                                 const Collected& collected,
                                                 uint64_t seed) {
  RETURN_IF_ERROR(ValidateConfig(c));
  if (IsReleaseMethod(c.method)) {
    return absl::InvalidArgumentError(absl::StrCat(
        MethodName(c.method), " uses no collected reports: it is a release "
        "of the curator's graph (the release stage)"));
  }
  if (collected.label_reports && !c.label_epsilon) {
    return absl::InvalidArgumentError(
        "collected label reports need the label campaign's epsilon "
        "(label_epsilon)");
  }
  if (c.task == v1::PIPELINE_TASK_NODE) {
    PipelineConfig resolved = c;
    ResolveDatasetSettings(public_data.meta, &resolved);
    return RunNode(public_data, resolved, &collected, seed, 0, RunOverrides{});
  }
  if (collected.label_reports) {
    return absl::InvalidArgumentError("link prediction uses no labels");
  }
  return RunLink(public_data, c, &collected, seed, 0, nullptr);
}

nlohmann::json RunResultToJson(const RunResult& r) {
  nlohmann::json j = {{"epochs", r.training.epochs},
                      {"best_epoch", r.training.best_epoch},
                      {"validation", r.training.best_validation},
                      {"seconds_per_epoch", r.training.seconds_per_epoch},
                      {"perturb_seconds", r.perturb_seconds},
                      {"propagate_seconds", r.propagate_seconds},
                      {"train_seconds", r.train_seconds},
                      {"micro_f1", r.micro_f1},
                      {"macro_f1", r.macro_f1}};
  if (r.label_agreement) {
    j["label_agreement"] = *r.label_agreement;
    j["label_agreement_raw"] = r.label_agreement_raw.value_or(0.0);
  }
  if (!r.confusion.empty()) j["confusion"] = r.confusion;
  if (r.target_rate) j["target_rate"] = *r.target_rate;
  if (!r.tuning.is_null()) j["tuning"] = r.tuning;
  if (!r.release.is_null()) j["release"] = r.release;
  if (!r.screen.is_null()) j["screen"] = r.screen;
  if (!r.robust.is_null()) j["robust"] = r.robust;
  if (!r.smooth.is_null()) j["smooth"] = r.smooth;
  return j;
}

}  // namespace ldpgraph::pipeline

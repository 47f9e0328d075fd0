#include "server/pipeline/feature_reports.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/dataset/feature_schema.h"
#include "common/mechanisms/hds.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/pipeline/internal/stages.h"

namespace ldpgraph::pipeline {

absl::StatusOr<std::unique_ptr<FeatureMechanism>> BuildFeatureMechanism(
    const PipelineConfig& c, const Dataset& d) {
  if (c.mechanism == "none") {
    return absl::InvalidArgumentError(
        "mechanism none: the raw features are used, no mechanism is built");
  }
  auto range = ScaledRange(c.scaling, d.meta);
  if (!range) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling none needs a public feature range and dataset '",
                     d.meta.name, "' declares none"));
  }
  ASSIGN_OR_RETURN(MechanismKind kind, ParseMechanismName(c.mechanism));
  MechanismSpec spec;
  spec.kind = kind;
  spec.epsilon = c.epsilon;
  spec.dimension = static_cast<int>(d.features.cols);
  spec.sampled = c.sampled;
  spec.alpha = range->first;
  spec.beta = range->second;
  return CreateFeatureMechanism(spec);
}

absl::StatusOr<SparseRows> SimulateFeatureReports(const SparseRows& x,
                                                  const FeatureMechanism& mech,
                                                  RandomSource& rng) {
  return SimulateFeatureReports(x, mech,
                                [&](size_t) -> RandomSource& { return rng; });
}

absl::StatusOr<SparseRows> SimulateFeatureReports(
    const SparseRows& x, const FeatureMechanism& mech,
    absl::FunctionRef<RandomSource&(size_t row)> rng_of_row,
    const Poisoning* poisoning, ReportedDims* dims) {
  if (poisoning != nullptr && poisoning->malicious.size() != x.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "poisoning marks ", poisoning->malicious.size(), " nodes for ",
        x.rows, " feature rows"));
  }
  SparseRows out;
  out.cols = x.cols;
  std::vector<double> row(x.cols), estimate(x.cols);
  for (size_t v = 0; v < x.rows; ++v) {
    x.RowToDense(v, absl::MakeSpan(row));
    const bool crafted = poisoning != nullptr && poisoning->malicious[v];
    ASSIGN_OR_RETURN(
        SparseReport report,
        crafted ? poisoning->adversary->CraftFeatureReport(mech, row,
                                                          rng_of_row(v))
                : mech.Perturb(row, rng_of_row(v)));
    if (dims != nullptr && !report.dense) {
      dims->Add(static_cast<uint32_t>(v), report.indices);
    }
    std::fill(estimate.begin(), estimate.end(), 0.0);
    RETURN_IF_ERROR(mech.Estimate(report, absl::MakeSpan(estimate)));
    // Every non-zero of the estimate is kept: unreported dimensions are not
    // always zero (Multi-bit's rectifier puts (alpha + beta) / 2 there).
    out.AppendDenseRow(estimate);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Poisoning>> PreparePoisoning(
    const Dataset& d, const PipelineConfig& c, uint64_t seed) {
  if (!(c.attack_fraction > 0)) return nullptr;
  RETURN_IF_ERROR(ValidateAttack(c));
  if (*c.attack_class >= d.meta.classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack class ", *c.attack_class, " is not one of dataset '",
        d.meta.name, "''s ", d.meta.classes, " classes"));
  }
  const uint32_t n = static_cast<uint32_t>(d.graph.num_nodes());
  const std::vector<uint32_t> nodes =
      poisoning::MaliciousNodes(n, seed, c.attack_fraction);
  // What the attacker holds: its nodes' records, scaled as every agent's.
  const SparseRows x = ScaleDatasetFeatures(d, c.scaling);
  ASSIGN_OR_RETURN(std::vector<uint32_t> ranking,
                   poisoning::RankDims(x, d.labels, nodes, *c.attack_class));
  std::vector<uint32_t> dims(
      ranking.begin(),
      ranking.begin() + std::min<size_t>(ranking.size(), c.attack_dims));
  std::sort(dims.begin(), dims.end());
  std::optional<poisoning::AdaptivePlan> plan;
  if (c.attack_kind == poisoning::AttackKind::kAdaptive) {
    // The attacker knows the screen's public settings: n and alpha.
    plan = poisoning::AdaptivePlan{n, nodes.size(), c.screen_alpha,
                                   std::move(ranking)};
  }
  auto out = std::make_unique<Poisoning>();
  ASSIGN_OR_RETURN(out->adversary,
                   poisoning::Adversary::Create(*c.attack_class, std::move(dims),
                                                c.attack_kind, std::move(plan)));
  out->malicious.assign(n, false);
  for (uint32_t v : nodes) out->malicious[v] = true;
  return out;
}

namespace internal {
namespace {

// The simulated reports of x (the malicious nodes' crafted, with
// poisoning) estimated, screened when c asks for it: the
// flagged nodes' rows emptied and added to *untrusted, the screen's
// figures in r->screen.
absl::StatusOr<SparseRows> SimulateAndScreen(const SparseRows& x,
                                             const FeatureMechanism& mech,
                                             const PipelineConfig& c,
                                             const Poisoning* poisoning,
                                             NoiseStreams& noise,
                                             std::vector<uint32_t>* untrusted,
                                             RunResult* r) {
  const bool screen = c.defences.screen;
  ReportedDims dims;
  ASSIGN_OR_RETURN(
      SparseRows est,
      SimulateFeatureReports(
          x, mech,
          [&](size_t v) -> RandomSource& {
            return noise.at(static_cast<NodeId>(v));
          },
          poisoning, screen && ScreenApplies(mech) ? &dims : nullptr));
  if (!screen) return est;
  ASSIGN_OR_RETURN(ScreenResult s, ScreenReports(dims, mech, c.screen_alpha));
  r->screen = ScreenToJson(s);
  if (poisoning != nullptr) {
    // A simulation knows the attacker's nodes: how many the screen caught.
    uint32_t malicious = 0, caught = 0;
    for (bool m : poisoning->malicious) malicious += m;
    for (uint32_t v : s.flagged) caught += poisoning->malicious[v];
    r->screen["malicious"] = malicious;
    r->screen["malicious_flagged"] = caught;
  }
  if (s.flagged.empty()) return est;
  *untrusted = s.flagged;
  return WithEmptyRows(est, s.flagged);
}

}  // namespace

absl::StatusOr<SparseRows> CollectFeatures(const Dataset& d,
                                           const PipelineConfig& c,
                                           const Collected* collected,
                                           const SparseRows* given,
                                           const Poisoning* poisoning,
                                           NoiseStreams& noise, RunResult* r,
                                           std::vector<uint32_t>* untrusted) {
  if (given != nullptr) {
    if (given->rows != d.graph.num_nodes() || given->cols != d.features.cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "overriding features are ", given->rows, " x ", given->cols,
          "; the dataset needs ", d.graph.num_nodes(), " x ",
          d.features.cols));
    }
    r->noise_source = c.mechanism == "none" ? "none" : std::string(noise.name());
    return *given;
  }
  if (collected != nullptr) {
    if (collected->features.rows != d.graph.num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collected features hold ", collected->features.rows,
          " rows for a graph of ", d.graph.num_nodes(), " nodes"));
    }
    r->noise_source = "agents";
    *untrusted = collected->untrusted;
    return collected->features;
  }
  auto range = ScaledRange(c.scaling, d.meta);
  if (!range) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling none needs a public feature range and dataset '",
                     d.meta.name, "' declares none"));
  }
  SparseRows x = ScaleDatasetFeatures(d, c.scaling);
  if (c.mechanism == "none") {
    r->noise_source = "none";
    return x;
  }
  ASSIGN_OR_RETURN(auto mech, BuildFeatureMechanism(c, d));
  r->noise_source = std::string(noise.name());
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(SparseRows est, SimulateAndScreen(x, *mech, c, poisoning,
                                                     noise, untrusted, r));
  r->perturb_seconds = SecondsSince(t);
  return est;
}

// LPGNN learns from unbiased estimates in the scaled range (Multi-bit's
// rectifier gives them). HDS's are not: PrivGE uses its report as it is,
// C * x in [-1, 1] with C = (k/d) * ... about 0.004 at eps 1 over 64
// features, which a GraphSAGE of hidden 16 with weight decay cannot scale
// up (accuracy at chance). So for LPGNN every HDS value becomes
// alpha + (beta - alpha) * (out / C + 1) / 2: unbiased, in the scaled range,
// (alpha + beta) / 2 on unreported dimensions, as Multi-bit's.
// Post-processing of the reports: no privacy cost.
absl::Status UnbiasHdsForLpgnn(const Dataset& d, const PipelineConfig& c,
                               SparseRows* x) {
  if (c.method != v1::PIPELINE_METHOD_LPGNN) return absl::OkStatus();
  if (c.mechanism != "hds" && c.mechanism != "square-wave") {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto mech, BuildFeatureMechanism(c, d));
  const auto* hds = dynamic_cast<const HdsMechanism*>(mech.get());
  if (hds == nullptr) return absl::InternalError("HDS mechanism expected");
  const auto range = ScaledRange(c.scaling, d.meta);
  const double lo = range->first, half = (range->second - range->first) / 2;
  const double inv_c = 1.0 / hds->c();
  SparseRows out;
  out.cols = x->cols;
  std::vector<double> row(x->cols);
  for (size_t v = 0; v < x->rows; ++v) {
    x->RowToDense(v, absl::MakeSpan(row));
    for (double& value : row) value = lo + half * (value * inv_c + 1.0);
    out.AppendDenseRow(row);
  }
  *x = std::move(out);
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ldpgraph::pipeline

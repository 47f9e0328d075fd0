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
namespace {

// Whether an entry of value v is stored in rows held against fill: those
// that differ from it as floats; against 0, those that are not 0 (as
// SparseRows::AppendDenseRow decides).
bool Differs(double v, float fill) {
  return fill == 0.0f ? v != 0.0 : static_cast<float>(v) != fill;
}

// Appends the dense row held against fill.
void AppendAgainst(absl::Span<const double> dense, float fill,
                   SparseRows* out) {
  for (size_t j = 0; j < dense.size(); ++j) {
    if (Differs(dense[j], fill)) {
      out->indices.push_back(static_cast<uint32_t>(j));
      out->values.push_back(static_cast<float>(dense[j]));
    }
  }
  out->offsets.push_back(out->indices.size());
  ++out->rows;
}

// The estimate of the report's first unreported dimension (0 when it
// reports every one).
float UnreportedEstimate(const SparseReport& report,
                         absl::Span<const double> estimate) {
  if (report.dense) return 0.0f;
  size_t j = 0;
  for (uint32_t reported : report.indices) {
    if (reported != j) break;
    ++j;
  }
  return j < estimate.size() ? static_cast<float>(estimate[j]) : 0.0f;
}

}  // namespace

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
    const Poisoning* poisoning, ReportedDims* dims, float* fill) {
  return SimulateFeatureReports(
      x.rows, x.cols,
      [&](size_t v, absl::Span<double> out) { x.RowToDense(v, out); }, mech,
      rng_of_row, poisoning, dims, fill);
}

absl::StatusOr<SparseRows> SimulateFeatureReports(
    size_t rows, size_t cols,
    absl::FunctionRef<void(size_t row, absl::Span<double> out)> row_of,
    const FeatureMechanism& mech,
    absl::FunctionRef<RandomSource&(size_t row)> rng_of_row,
    const Poisoning* poisoning, ReportedDims* dims, float* fill) {
  if (poisoning != nullptr && poisoning->malicious.size() != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "poisoning marks ", poisoning->malicious.size(), " nodes for ",
        rows, " feature rows"));
  }
  SparseRows out;
  out.cols = cols;
  std::vector<double> row(cols), estimate(cols);
  if (fill != nullptr) *fill = 0.0f;
  for (size_t v = 0; v < rows; ++v) {
    row_of(v, absl::MakeSpan(row));
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
    // Held against a fill, only those that differ from it.
    if (fill == nullptr) {
      out.AppendDenseRow(estimate);
      continue;
    }
    if (v == 0) *fill = UnreportedEstimate(report, estimate);
    AppendAgainst(estimate, *fill, &out);
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

// rows (held against fill) with the given nodes' rows (ascending) zeroed,
// as a silent node's row is: emptied against 0, every entry a stored 0
// against another fill.
SparseRows WithZeroRows(const SparseRows& rows,
                        absl::Span<const uint32_t> nodes, float fill) {
  if (fill == 0.0f) return WithEmptyRows(rows, nodes);
  SparseRows out;
  out.cols = rows.cols;
  const std::vector<double> zeros(rows.cols, 0.0);
  size_t next = 0;
  for (size_t v = 0; v < rows.rows; ++v) {
    if (next < nodes.size() && nodes[next] == v) {
      AppendAgainst(zeros, fill, &out);
      ++next;
    } else {
      out.AppendRow(rows.row_indices(v), rows.row_values(v));
    }
  }
  return out;
}

// x (absent entries 0) held against a fill when that stores fewer
// entries: the value most of the first row that stores more than half its
// entries holds (Multi-bit's (alpha + beta) / 2 on a reporting node's
// unreported dimensions). *fill = 0 and x as it is otherwise (a row of
// zeros, a silent node's, stores every entry against another fill).
SparseRows HeldAgainstFill(const SparseRows& x, float* fill) {
  *fill = 0.0f;
  size_t v = 0;
  while (v < x.rows && 2 * x.row_values(v).size() <= x.cols) ++v;
  if (v == x.rows) return x;
  std::vector<float> values(x.row_values(v).begin(), x.row_values(v).end());
  std::sort(values.begin(), values.end());
  size_t best = 0;
  float value = 0.0f;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j < values.size() && values[j] == values[i]) ++j;
    if (j - i > best) {
      best = j - i;
      value = values[i];
    }
    i = j;
  }
  if (value == 0.0f) return x;
  // Against value: every entry but those holding it (absent ones hold 0).
  size_t equal = 0;
  for (float stored : x.values) equal += stored == value;
  const size_t against = x.rows * x.cols - equal;
  if (against >= x.nnz()) return x;
  *fill = value;
  SparseRows out;
  out.cols = x.cols;
  std::vector<double> row(x.cols);
  for (size_t r = 0; r < x.rows; ++r) {
    x.RowToDense(r, absl::MakeSpan(row));
    AppendAgainst(row, value, &out);
  }
  return out;
}

// The simulated reports of d's features scaled by c.scaling, each row
// scaled when its agent reports it (the malicious nodes' crafted, with
// poisoning), estimated, screened when c asks for it: the flagged nodes'
// rows emptied and added to *untrusted, the screen's figures in r->screen.
absl::StatusOr<SparseRows> SimulateAndScreen(const Dataset& d,
                                             const FeatureMechanism& mech,
                                             const PipelineConfig& c,
                                             const Poisoning* poisoning,
                                             NoiseStreams& noise,
                                             std::vector<uint32_t>* untrusted,
                                             RunResult* r, float* fill) {
  const bool screen = c.defences.screen;
  ReportedDims dims;
  const FeatureSchema schema = DatasetFeatureSchema(d);
  auto scaled_row = [&](size_t v, absl::Span<double> out) {
    const std::vector<double> row =
        ScaleFeatureRow(d.features.row_indices(v), d.features.row_values(v),
                        schema, c.scaling);
    std::copy(row.begin(), row.end(), out.begin());
  };
  ASSIGN_OR_RETURN(
      SparseRows est,
      SimulateFeatureReports(
          d.features.rows, d.features.cols, scaled_row, mech,
          [&](size_t v) -> RandomSource& {
            return noise.at(static_cast<NodeId>(v));
          },
          poisoning, screen && ScreenApplies(mech) ? &dims : nullptr, fill));
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
  return WithZeroRows(est, s.flagged, fill != nullptr ? *fill : 0.0f);
}

}  // namespace

absl::StatusOr<SparseRows> CollectFeatures(const Dataset& d,
                                           const PipelineConfig& c,
                                           const Collected* collected,
                                           const SparseRows* given,
                                           const Poisoning* poisoning,
                                           NoiseStreams& noise, RunResult* r,
                                           std::vector<uint32_t>* untrusted,
                                           float* fill) {
  if (fill != nullptr) *fill = 0.0f;
  if (given != nullptr) {
    if (given->rows != d.graph.num_nodes() || given->cols != d.features.cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "overriding features are ", given->rows, " x ", given->cols,
          "; the dataset needs ", d.graph.num_nodes(), " x ",
          d.features.cols));
    }
    r->noise_source = c.mechanism == "none" ? "none" : std::string(noise.name());
    return fill != nullptr ? HeldAgainstFill(*given, fill) : *given;
  }
  if (collected != nullptr) {
    if (collected->features.rows != d.graph.num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collected features hold ", collected->features.rows,
          " rows for a graph of ", d.graph.num_nodes(), " nodes"));
    }
    r->noise_source = "agents";
    *untrusted = collected->untrusted;
    return fill != nullptr ? HeldAgainstFill(collected->features, fill)
                           : collected->features;
  }
  auto range = ScaledRange(c.scaling, d.meta);
  if (!range) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling none needs a public feature range and dataset '",
                     d.meta.name, "' declares none"));
  }
  if (c.mechanism == "none") {
    r->noise_source = "none";
    return ScaleDatasetFeatures(d, c.scaling);
  }
  ASSIGN_OR_RETURN(auto mech, BuildFeatureMechanism(c, d));
  r->noise_source = std::string(noise.name());
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(SparseRows est, SimulateAndScreen(d, *mech, c, poisoning,
                                                     noise, untrusted, r, fill));
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
                               SparseRows* x, float* fill) {
  if (!IsGnnMethod(c.method)) return absl::OkStatus();
  if (c.mechanism != "hds" && c.mechanism != "square-wave") {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto mech, BuildFeatureMechanism(c, d));
  const auto* hds = dynamic_cast<const HdsMechanism*>(mech.get());
  if (hds == nullptr) return absl::InternalError("HDS mechanism expected");
  const auto range = ScaledRange(c.scaling, d.meta);
  const double lo = range->first, half = (range->second - range->first) / 2;
  const double inv_c = 1.0 / hds->c();
  auto unbias = [&](double value) { return lo + half * (value * inv_c + 1.0); };
  // The map is entrywise: the absent entries (*fill) map to the new fill,
  // the stored ones each to its own value.
  const float mapped_fill = static_cast<float>(unbias(*fill));
  SparseRows out;
  out.cols = x->cols;
  for (size_t v = 0; v < x->rows; ++v) {
    auto idx = x->row_indices(v);
    auto val = x->row_values(v);
    for (size_t i = 0; i < idx.size(); ++i) {
      const double mapped = unbias(val[i]);
      if (Differs(mapped, mapped_fill)) {
        out.indices.push_back(idx[i]);
        out.values.push_back(static_cast<float>(mapped));
      }
    }
    out.offsets.push_back(out.indices.size());
    ++out.rows;
  }
  *x = std::move(out);
  *fill = mapped_fill;
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ldpgraph::pipeline

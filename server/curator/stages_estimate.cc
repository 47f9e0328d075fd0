// The estimate stage (Stages::Estimate, Stages::EstimateRows): every
// node's features estimated from a features campaign's reports, screened
// first with defence "screen".
#include "server/curator/stages.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "common/wire/codec.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/report_screen.h"

namespace ldpgraph::curator {
namespace {

// An estimate request's defence: the screen's level, or none.
absl::StatusOr<std::optional<double>> RequestScreen(
    const v1::EstimateRequest& q) {
  pipeline::Defences defences;
  if (!q.defence().empty()) {
    ASSIGN_OR_RETURN(defences, pipeline::ParseDefences(q.defence(), "defence"));
  }
  if (defences.robust || defences.edge_consistency) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an estimate applies the screen only, got defence '", q.defence(),
        "' (robust belongs to evaluate, edge-consistency to the graph)"));
  }
  if (q.screen_alpha() != 0) {
    if (!defences.screen) {
      return absl::InvalidArgumentError(
          "screen_alpha needs defence \"screen\"");
    }
    RETURN_IF_ERROR(pipeline::ValidateScreenAlpha(q.screen_alpha()));
  }
  if (!defences.screen) return std::nullopt;
  return q.screen_alpha() != 0 ? q.screen_alpha()
                               : pipeline::kDefaultScreenAlpha;
}

}  // namespace

absl::StatusOr<SparseRows> Stages::EstimateRows(
    const v1::Campaign& campaign, const wire::CompiledSpec& spec,
    uint32_t num_nodes,
    const std::vector<std::pair<uint32_t, v1::Report>>& reports,
    int threads, pipeline::ReportedDims* dims) {
  if (campaign.attribute() != v1::ATTRIBUTE_FEATURES ||
      spec.feature() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", campaign.id(), " collects ",
        v1::Attribute_Name(campaign.attribute()), ", not features"));
  }
  const FeatureMechanism* const mech = spec.feature();
  const size_t d = static_cast<size_t>(mech->dimension());
  // The reports are decoded and estimated in fixed parts of kPart reports
  // across the pipeline's threads (each part its own rows, joined in order:
  // the same result for any thread count), then laid out one row per node.
  constexpr size_t kPart = 4096;
  const size_t parts = (reports.size() + kPart - 1) / kPart;
  std::vector<SparseRows> piece(parts);
  std::vector<pipeline::ReportedDims> piece_dims(dims != nullptr ? parts : 0);
  std::vector<absl::Status> failed(parts);
  ParallelFor(parts, ResolveThreads(threads), [&](int, size_t p) {
    piece[p].cols = d;
    std::vector<double> estimate(d);
    for (size_t i = p * kPart; i < std::min(reports.size(), (p + 1) * kPart);
         ++i) {
      absl::StatusOr<SparseReport> r =
          wire::DecodeFeatureReport(reports[i].second.features(), *mech);
      absl::Status status = r.status();
      if (status.ok()) {
        std::fill(estimate.begin(), estimate.end(), 0.0);
        status = mech->Estimate(*r, absl::MakeSpan(estimate));
      }
      if (!status.ok()) {
        failed[p] = status;
        return;
      }
      piece[p].AppendDenseRow(estimate);
      if (dims != nullptr && !r->dense) {
        piece_dims[p].Add(reports[i].first, r->indices);
      }
    }
  });
  for (const absl::Status& s : failed) RETURN_IF_ERROR(s);
  for (const pipeline::ReportedDims& p : piece_dims) {
    for (size_t i = 0; i < p.size(); ++i) dims->Add(p.nodes[i], p.row(i));
  }
  SparseRows out;
  out.cols = d;
  size_t next = 0;
  for (uint32_t v = 0; v < num_nodes; ++v) {
    if (next < reports.size() && reports[next].first == v) {
      const SparseRows& p = piece[next / kPart];
      const size_t row = next % kPart;
      out.AppendRow(p.row_indices(row), p.row_values(row));
      ++next;
    } else {
      out.AppendRow({}, {});  // no report: an empty row
    }
  }
  return out;
}

absl::StatusOr<v1::StageResult> Stages::Estimate(const v1::EstimateRequest& q) {
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(v1::Campaign campaign,
                   curator_->campaigns().Get(q.campaign_id()));
  ASSIGN_OR_RETURN(auto reports,
                   curator_->campaigns().Reports(q.campaign_id()));
  if (reports.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("campaign ", q.campaign_id(), " holds no report yet"));
  }
  ASSIGN_OR_RETURN(const std::optional<double> screen_alpha,
                   RequestScreen(q));
  // The mechanism the reports came from: the campaign's, compiled when it
  // was created.
  ASSIGN_OR_RETURN(std::shared_ptr<const wire::CompiledSpec> spec,
                   curator_->campaigns().Spec(q.campaign_id()));
  pipeline::ReportedDims dims;
  ASSIGN_OR_RETURN(SparseRows rows,
                   EstimateRows(campaign, *spec, curator_->num_nodes(), reports,
                                pipeline_threads_,
                                screen_alpha ? &dims : nullptr));
  nlohmann::json screen;
  if (screen_alpha) {
    ASSIGN_OR_RETURN(pipeline::ScreenResult s,
                     pipeline::ScreenReports(dims, *spec->feature(),
                                             *screen_alpha));
    if (!s.flagged.empty()) rows = pipeline::WithEmptyRows(rows, s.flagged);
    screen = pipeline::ScreenToJson(s);
  }
  DenseMatrix m = rows.ToDense();
  v1::StageResult r;
  r.set_stage("estimate");
  r.set_input(q.campaign_id());
  nlohmann::json details = {
      {"campaign", q.campaign_id()},
      {"mechanism", v1::MechanismKind_Name(campaign.spec().kind())},
      {"epsilon", campaign.spec().epsilon()},
      {"reports", reports.size()},
      {"nodes", curator_->num_nodes()},
      {"campaign_state", v1::CampaignState_Name(campaign.state())}};
  if (!screen.is_null()) details.update(screen);
  r.set_seconds(SecondsSince(t));
  return Record(std::move(r), std::move(details), &m);
}

}  // namespace ldpgraph::curator

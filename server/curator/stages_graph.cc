// The graph a stage runs on (stages.h's file comment): the curator's, or
// one assembled from an edges campaign's stored reports (randomized
// response, neighbour substitution, Blink), optionally screened first by the
// edge-consistency defence.
#include "server/curator/stages.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"
#include "server/pipeline/edge_screen.h"
#include "server/pipeline/private_edges.h"

namespace ldpgraph::curator {
namespace {

// The edge-consistency screen (server/pipeline/edge_screen.h) over an
// randomized response or Blink campaign's reports at level alpha, as
// `ldpgraph eval --defence edge-consistency` screens the simulated ones
// (pipeline::BuildPrivateEdges): the public p (and eps_d for Blink) from
// the campaign's spec, the nodes without a report no evidence. A flagged
// node is then treated as one that did not report: its report is removed
// from *reports and, for randomized response, every entry naming it from
// the others' (a distrusted node is isolated; Blink's estimate filters the
// lists to the reporters itself). FAILED_PRECONDITION for a substitution
// campaign (its lists are not bits the screen has a law for).
absl::StatusOr<pipeline::EdgeScreenResult> ScreenGraphReports(
    const v1::Campaign& campaign, const wire::CompiledSpec& spec, uint32_t n,
    double alpha, std::vector<std::pair<uint32_t, v1::Report>>* reports) {
  const v1::MechanismKind kind = campaign.spec().kind();
  pipeline::PrivateEdgesConfig pc;
  pc.epsilon = campaign.spec().epsilon();
  if (kind == v1::MECHANISM_KIND_EDGE_RR) {
    pc.kind = pipeline::EdgeMechanism::kRr;
  } else if (kind == v1::MECHANISM_KIND_EDGE_BLINK && spec.blink() != nullptr) {
    pc.kind = pipeline::EdgeMechanism::kBlink;
    pc.blink_delta = spec.blink()->params().delta;
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "defence edge-consistency screens randomized response or Blink edge "
        "reports; campaign ", campaign.id(), " is ",
        wire::kMechanismKindNames.Name(kind)));
  }
  pipeline::EdgeScreenParams sp;
  sp.nodes = n;
  sp.flip_probability = pc.flip_probability();
  sp.alpha = alpha;
  if (pc.kind == pipeline::EdgeMechanism::kBlink) {
    sp.degree_epsilon = pc.blink_delta * pc.epsilon;
  }
  pipeline::EdgeReports er;
  er.neighbours.resize(n);
  er.reported.assign(n, false);
  if (sp.degree_epsilon) er.noisy_degrees.assign(n, 0.0);
  for (const auto& [v, report] : *reports) {
    if (v >= n) continue;
    er.reported[v] = true;
    er.neighbours[v].assign(report.edges().neighbours().begin(),
                            report.edges().neighbours().end());
    if (sp.degree_epsilon) er.noisy_degrees[v] = report.edges().noisy_degree();
  }
  absl::StatusOr<pipeline::EdgeScreenResult> screen =
      pipeline::ScreenEdgeReports(sp, er);
  if (!screen.ok()) {
    return absl::Status(screen.status().code(),
                        absl::StrCat("campaign ", campaign.id(),
                                     ": edge-consistency: ",
                                     screen.status().message()));
  }
  er = {};
  std::vector<bool> flagged(n, false);
  for (uint32_t v : screen->flagged) flagged[v] = true;
  if (!screen->flagged.empty()) {
    std::erase_if(*reports, [&](const auto& r) {
      return r.first < n && flagged[r.first];
    });
    if (pc.kind == pipeline::EdgeMechanism::kRr) {
      for (auto& [v, report] : *reports) {
        auto* list = report.mutable_edges()->mutable_neighbours();
        list->erase(std::remove_if(list->begin(), list->end(),
                                   [&](uint32_t u) {
                                     return u < n && flagged[u];
                                   }),
                    list->end());
      }
    }
  }
  return screen;
}

// A request's blink_variant for a graph campaign of `kind` (the campaign's
// mechanism, or UNSPECIFIED for the curator's graph): "" is hard; set for
// anything but a Blink campaign, or unknown, INVALID_ARGUMENT.
absl::StatusOr<edges::BlinkVariant> RequestBlinkVariant(
    absl::string_view variant, v1::MechanismKind kind) {
  if (kind != v1::MECHANISM_KIND_EDGE_BLINK) {
    if (variant.empty()) return edges::BlinkVariant::kHard;
    return absl::InvalidArgumentError(absl::StrCat(
        "blink_variant '", variant, "' applies to a Blink graph campaign "
        "(edge-blink) only, not to ",
        kind == v1::MECHANISM_KIND_UNSPECIFIED ? "the curator's graph"
                                               : v1::MechanismKind_Name(kind)));
  }
  if (variant.empty()) return edges::BlinkVariant::kHard;
  return edges::kBlinkVariantNames.Parse(variant, "blink_variant");
}

// A Blink campaign's graph on the curator's n nodes: EstimateBlinkGraph
// over the m nodes that reported (ids remapped to 0..m-1 in ascending
// order, each list filtered to reporters), mapped back, non-reporters
// isolated. A noisy degree counts the node's neighbours among all n, of
// which the estimate sees the reporters only: it is scaled by
// (m - 1) / (n - 1), the share of a node's possible neighbours that
// reported (unbiased when reporting does not depend on adjacency; exact, a
// factor 1, when every node reported). Post-processing of public values,
// so no privacy cost. Its figures into details. FAILED_PRECONDITION below 3
// reporters.
absl::StatusOr<Graph> BlinkGraph(
    const v1::Campaign& campaign, const edges::BlinkParams& params, uint32_t n,
    const std::vector<std::pair<uint32_t, v1::Report>>& reports,
    edges::BlinkVariant variant, nlohmann::json* details) {
  std::vector<uint32_t> reporters;  // global ids, ascending
  constexpr uint32_t kAbsent = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> local(n, kAbsent);
  for (const auto& [v, report] : reports) {
    if (v >= n || local[v] != kAbsent) continue;
    local[v] = static_cast<uint32_t>(reporters.size());
    reporters.push_back(v);
  }
  const uint32_t m = static_cast<uint32_t>(reporters.size());
  if (m < 3) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", campaign.id(), ": Blink estimates from at least 3 "
        "reporting nodes, it holds ", m));
  }
  std::vector<edges::BlinkReport> local_reports(m);
  const double degree_scale =
      m == n ? 1.0 : static_cast<double>(m - 1) / static_cast<double>(n - 1);
  for (const auto& [v, report] : reports) {
    if (v >= n) continue;
    edges::BlinkReport& r = local_reports[local[v]];
    r.noisy_degree = report.edges().noisy_degree() * degree_scale;
    r.neighbours.clear();
    for (uint32_t u : report.edges().neighbours()) {
      // u < n: the report was validated against the campaign's n.
      if (u < n && local[u] != kAbsent) r.neighbours.push_back(local[u]);
    }
  }
  edges::BlinkEstimateOptions options;
  options.variant = variant;
  ASSIGN_OR_RETURN(edges::BlinkEstimate est,
                   edges::EstimateBlinkGraph(params, m, local_reports, options));
  std::vector<Edge> edges = est.graph.Edges();
  for (Edge& e : edges) e = Edge{reporters[e.u], reporters[e.v]};
  absl::StatusOr<Graph> g =
      est.graph.weighted()
          ? Graph::FromWeightedEdges(n, edges, est.graph.EdgeWeights())
          : Graph::FromEdges(n, edges);
  if (!g.ok()) return g.status();
  (*details)["graph_delta"] = params.delta;
  (*details)["graph_variant"] = std::string(edges::kBlinkVariantNames.Name(variant));
  (*details)["graph_reports"] = m;
  (*details)["graph_nonreporters"] = n - m;
  (*details)["graph_degree_scale"] = degree_scale;
  (*details)["graph_prior_iterations"] = est.prior.iterations;
  (*details)["graph_prior_converged"] = est.prior.converged;
  (*details)["graph_max_degree_residual"] = est.prior.max_degree_residual;
  (*details)["graph_reported_pairs"] = est.reported_pairs;
  (*details)["graph_target_edges"] = est.target_edges;
  (*details)["graph_expected_edges"] = est.expected_edges;
  (*details)["graph_clipped_low"] = est.clipped_low;
  (*details)["graph_clipped_high"] = est.clipped_high;
  return g;
}

}  // namespace

absl::StatusOr<Graph> Stages::AssembledGraph(
    absl::string_view campaign_id, absl::string_view blink_variant,
    nlohmann::json* details) const {
  return AssembledGraph(campaign_id, blink_variant, std::nullopt, details,
                        nullptr);
}

absl::StatusOr<Graph> Stages::AssembledGraph(
    absl::string_view campaign_id, absl::string_view blink_variant,
    std::optional<double> edge_screen_alpha, nlohmann::json* details,
    std::vector<uint32_t>* flagged) const {
  ASSIGN_OR_RETURN(v1::Campaign campaign,
                   curator_->campaigns().Get(campaign_id));
  const v1::MechanismKind kind = campaign.spec().kind();
  if (campaign.attribute() != v1::ATTRIBUTE_EDGES ||
      (kind != v1::MECHANISM_KIND_EDGE_RR &&
       kind != v1::MECHANISM_KIND_EDGE_SUBSTITUTION &&
       kind != v1::MECHANISM_KIND_EDGE_BLINK)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", campaign_id, " does not collect edges (",
        v1::MechanismKind_Name(kind), "): a graph comes from an edges "
        "campaign (edge-rr, edge-substitution or edge-blink)"));
  }
  ASSIGN_OR_RETURN(edges::BlinkVariant variant,
                   RequestBlinkVariant(blink_variant, kind));
  ASSIGN_OR_RETURN(auto reports, curator_->campaigns().Reports(campaign_id));
  if (reports.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("campaign ", campaign_id, " holds no report yet"));
  }
  const uint32_t n = curator_->num_nodes();
  nlohmann::json ignored;
  nlohmann::json& d = details != nullptr ? *details : ignored;
  d["graph"] = std::string(campaign_id);
  d["graph_epsilon"] = campaign.spec().epsilon();
  // The campaign's parameters, as compiled when it was created.
  ASSIGN_OR_RETURN(std::shared_ptr<const wire::CompiledSpec> spec,
                   curator_->campaigns().Spec(campaign_id));
  if (edge_screen_alpha) {
    ASSIGN_OR_RETURN(pipeline::EdgeScreenResult screen,
                     ScreenGraphReports(campaign, *spec, n,
                                        *edge_screen_alpha, &reports));
    d["graph_defence"] = "edge-consistency";
    d["graph_screen"] = pipeline::EdgeScreenToJson(screen);
    if (flagged != nullptr) *flagged = std::move(screen.flagged);
  }
  if (kind == v1::MECHANISM_KIND_EDGE_BLINK) {
    d["graph_mechanism"] = std::string(wire::kMechanismKindNames.Name(kind));
    return BlinkGraph(campaign, spec->blink()->params(), n, reports, variant,
                      &d);
  }
  const bool substitution = kind == v1::MECHANISM_KIND_EDGE_SUBSTITUTION;
  const edges::Symmetrisation rule = substitution
                                         ? edges::Symmetrisation::kUnion
                                         : edges::Symmetrisation::kLowerId;
  d["graph_mechanism"] = std::string(wire::kMechanismKindNames.Name(kind));
  if (substitution) {
    d["graph_approach"] = campaign.spec().substitution().approach();
  }
  d["graph_rule"] = std::string(edges::SymmetrisationName(rule));
  d["graph_reports"] = campaign.progress().reported();
  std::vector<std::vector<uint32_t>> lists(n);
  for (const auto& [v, report] : reports) {
    if (v >= n) continue;
    lists[v].assign(report.edges().neighbours().begin(),
                    report.edges().neighbours().end());
  }
  return edges::AssembleGraph(n, lists, rule);
}

absl::StatusOr<Stages::StageGraph> Stages::GraphFor(
    const std::string& campaign_id, const std::string& blink_variant,
    nlohmann::json* details, bool edge_consistency) const {
  StageGraph out;
  if (campaign_id.empty() && edge_consistency) {
    return absl::InvalidArgumentError(
        "defence edge-consistency screens the edge reports of a graph "
        "campaign: give graph_campaign_id, a randomized response or Blink "
        "edges campaign (ldpctl pipeline evaluate --graph-campaign ID)");
  }
  if (campaign_id.empty()) {
    RETURN_IF_ERROR(RequestBlinkVariant(blink_variant,
                                        v1::MECHANISM_KIND_UNSPECIFIED)
                        .status());
    if (private_edges_) {
      return absl::FailedPreconditionError(
          "this curator keeps no edges (--private-edges): give "
          "graph_campaign_id, an edges campaign whose reports make the graph "
          "(ldpctl pipeline ... --graph-campaign ID)");
    }
    out.curators = &data_->graph;
    (*details)["graph"] = "curator";
    (*details)["graph_edges"] = data_->graph.num_edges();
    return out;
  }
  ASSIGN_OR_RETURN(
      Graph g,
      AssembledGraph(campaign_id, blink_variant,
                     edge_consistency ? std::optional<double>(
                                            pipeline::kDefaultEdgeScreenAlpha)
                                      : std::nullopt,
                     details, &out.flagged));
  (*details)["graph_edges"] = g.num_edges();
  out.assembled = std::move(g);
  return out;
}

}  // namespace ldpgraph::curator

#include "server/curator/stages.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <initializer_list>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/npy.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"
#include "common/random.h"
#include "server/curator/detail_lists.h"
#include "server/embedding/release.h"
#include "server/pipeline/baselines.h"
#include "server/pipeline/edge_screen.h"
#include "server/pipeline/private_edges.h"
#include "server/pipeline/pipeline.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::curator {
namespace {

SparseRows ToSparse(const DenseMatrix& m) {
  SparseRows s;
  s.cols = m.cols;
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (size_t i = 0; i < m.rows; ++i) {
    idx.clear();
    val.clear();
    auto row = m.row(i);
    for (size_t j = 0; j < m.cols; ++j) {
      if (row[j] != 0.0f) {
        idx.push_back(static_cast<uint32_t>(j));
        val.push_back(row[j]);
      }
    }
    s.AppendRow(idx, val);
  }
  return s;
}

// Makes a written file durable: fsync of the file and its directory.
absl::Status SyncFile(const std::string& path, const std::string& dir) {
  for (const std::string& p : {path, dir}) {
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0 || ::fsync(fd) != 0) {
      if (fd >= 0) ::close(fd);
      return absl::InternalError(absl::StrCat("cannot sync ", p));
    }
    ::close(fd);
  }
  return absl::OkStatus();
}

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

// A request's pipeline_method, which must be one of `among`:
// INVALID_ARGUMENT "pipeline_method is unspecified; ..." when unset, and
// "pipeline_method must be one of <among>, got '<name>'" otherwise.
absl::StatusOr<pipeline::Method> RequestMethod(
    v1::PipelineMethod m, std::initializer_list<pipeline::Method> among) {
  const auto& names = pipeline::kMethodNames;
  if (m == v1::PIPELINE_METHOD_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline_method is unspecified; it must be one of ",
                     names.Choices(among)));
  }
  for (pipeline::Method allowed : among) {
    if (m == allowed) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline_method must be one of ", names.Choices(among),
                   ", got '", names.Name(m), "'"));
}

// A request's pipeline_task: INVALID_ARGUMENT "pipeline_task is
// unspecified; ..." when unset or not a task of the proto.
absl::StatusOr<pipeline::Task> RequestTask(v1::PipelineTask t) {
  const auto& names = pipeline::kTaskNames;
  if (!names.Contains(t)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline_task is unspecified; it must be one of ", names.Choices()));
  }
  return t;
}

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

// An evaluate request's defences (EvaluateRequest.defence): robust and
// edge-consistency are applied, screen asserts that the input was screened.
absl::StatusOr<pipeline::Defences> RequestEvaluateDefences(
    const v1::EvaluateRequest& q) {
  pipeline::Defences defences;
  if (!q.defence().empty()) {
    ASSIGN_OR_RETURN(defences, pipeline::ParseDefences(q.defence(), "defence"));
  }
  return defences;
}

// The level of an estimate's screen (its details' "alpha" beside "screen":
// "applied" or "not applicable"), or nullopt when it was not screened.
std::optional<double> ScreenAlphaOf(const v1::StageResult& estimate) {
  const auto details = nlohmann::json::parse(estimate.details_json(), nullptr,
                                             /*allow_exceptions=*/false);
  if (!details.is_object() || !details.contains("screen") ||
      !details.contains("alpha") || !details["alpha"].is_number()) {
    return std::nullopt;
  }
  return details["alpha"].get<double>();
}

// A result's details; DATA_LOSS when they do not parse.
absl::StatusOr<nlohmann::json> DetailsOf(const v1::StageResult& r) {
  auto details = nlohmann::json::parse(r.details_json(), nullptr,
                                       /*allow_exceptions=*/false);
  if (details.is_discarded()) {
    return absl::DataLossError(
        absl::StrCat("result ", r.id(), " has unreadable details"));
  }
  return details;
}

// The nodes an estimate's screen flagged (its details' "flagged", whole:
// from its id-list file when the details hold the first ones only), empty
// when it was not screened.
absl::StatusOr<std::vector<uint32_t>> FlaggedNodes(
    const v1::StageResult& estimate, const std::string& id_list_file) {
  ASSIGN_OR_RETURN(const nlohmann::json details, DetailsOf(estimate));
  if (!details.is_object() || !details.contains("flagged")) {
    return std::vector<uint32_t>();
  }
  ASSIGN_OR_RETURN(std::vector<uint32_t> out,
                   WholeIdList(details, "flagged", id_list_file));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

absl::StatusOr<int64_t> ParseResultId(absl::string_view id) {
  int64_t n = 0;
  if (id.size() < 2 || id[0] != 'r' || !absl::SimpleAtoi(id.substr(1), &n) ||
      n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("result id must look like r1, r2, ...; got '", id, "'"));
  }
  return n;
}

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

absl::StatusOr<store::ResultRow> Stages::Find(absl::string_view id) const {
  ASSIGN_OR_RETURN(int64_t n, ParseResultId(id));
  return curator_->store().GetResult(n);
}

absl::StatusOr<store::ResultRow> Stages::FindEstimate(
    absl::string_view id, absl::string_view stage) const {
  ASSIGN_OR_RETURN(store::ResultRow row, Find(id));
  v1::StageResult r;
  if (!r.ParseFromString(row.record)) {
    return absl::DataLossError(absl::StrCat("result ", id, " does not parse"));
  }
  if (r.stage() != "estimate") {
    return absl::FailedPreconditionError(absl::StrCat(
        stage, " needs an estimate result; ", id, " is a ", r.stage(),
        " result"));
  }
  return row;
}

absl::StatusOr<DenseMatrix> Stages::Matrix(absl::string_view id) const {
  ASSIGN_OR_RETURN(store::ResultRow row, Find(id));
  if (row.matrix_path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("result ", id, " holds no matrix"));
  }
  return ReadNpy(row.matrix_path);
}

absl::StatusOr<std::vector<uint32_t>> Stages::IdList(
    absl::string_view id, absl::string_view list) const {
  ASSIGN_OR_RETURN(store::ResultRow row, Find(id));
  v1::StageResult r;
  if (!r.ParseFromString(row.record)) {
    return absl::DataLossError(absl::StrCat("result ", id, " does not parse"));
  }
  ASSIGN_OR_RETURN(const nlohmann::json details, DetailsOf(r));
  absl::StatusOr<std::vector<uint32_t>> ids =
      WholeIdList(details, list, IdListFile(r));
  if (!ids.ok()) {
    return absl::Status(ids.status().code(),
                        absl::StrCat("result ", id, ": ", ids.status().message()));
  }
  return ids;
}

std::string Stages::FileStem(const v1::StageResult& r) const {
  return absl::StrCat(dir_, "/", r.stage(), "-", r.created_unix_ms(), "-",
                      r.input());
}

absl::StatusOr<v1::StageResult> Stages::Record(v1::StageResult r,
                                               nlohmann::json details,
                                               const DenseMatrix* m) {
  r.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  // Named after the time and stage until the store assigns the id; the
  // files are complete and synced before the result that names them
  // exists.
  const IdLists whole = TruncateIdLists(&details);
  r.set_details_json(details.dump());
  if (r.details_json().size() > kMaxDetailsBytes) {
    return absl::InternalError(absl::StrCat(
        "the ", r.stage(), " stage's details are ", r.details_json().size(),
        " bytes, over the bound of ", kMaxDetailsBytes,
        " (a list in them is not cut); nothing was stored"));
  }
  if (!whole.empty()) {
    const std::string lists = IdListFile(r);
    RETURN_IF_ERROR(WriteIdLists(lists, whole));
    RETURN_IF_ERROR(SyncFile(lists, dir_));
  }
  std::string path;
  if (m != nullptr) {
    path = FileStem(r) + ".npy";
    RETURN_IF_ERROR(WriteNpy(path, *m));
    RETURN_IF_ERROR(SyncFile(path, dir_));
    r.set_rows(static_cast<uint32_t>(m->rows));
    r.set_cols(static_cast<uint32_t>(m->cols));
  }
  ASSIGN_OR_RETURN(int64_t id, curator_->store().AddResult(
                                   [&](int64_t id) {
                                     r.set_id(absl::StrCat("r", id));
                                     return r.SerializeAsString();
                                   },
                                   path));
  (void)id;
  results_.fetch_add(1);
  RETURN_IF_ERROR(curator_->store().Audit(
      "admin", absl::StrCat("pipeline.", r.stage()),
      absl::StrCat(R"({"result":")", r.id(), R"(","input":")", r.input(),
                   "\"}")));
  return r;
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

absl::StatusOr<v1::StageResult> Stages::Propagate(
    const v1::PropagateRequest& q) {
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(store::ResultRow input, FindEstimate(q.input(), "propagate"));
  ASSIGN_OR_RETURN(DenseMatrix x, ReadNpy(input.matrix_path));
  nlohmann::json details = {{"input", q.input()}};
  ASSIGN_OR_RETURN(StageGraph sg, GraphFor(q.graph_campaign_id(),
                                           q.blink_variant(), &details));
  const Graph& graph = sg.get();
  DenseMatrix z;
  const std::string method = q.method().empty() ? "ppr" : q.method();
  if (method == "ppr") {
    PprOptions o = pipeline::DefaultConfig(v1::PIPELINE_METHOD_PRIVGE,
                                           v1::PIPELINE_TASK_NODE)
                       .ppr;
    if (q.alpha() > 0) o.alpha = q.alpha();
    if (q.r() > 0) o.r = q.r();
    if (q.rmax() > 0) o.rmax = q.rmax();
    o.threads = pipeline_threads_;
    RETURN_IF_ERROR(ValidatePprOptions(o));
    ASSIGN_OR_RETURN(z, PprPush(graph, ToSparse(x), o));
    details["method"] = "ppr";
    details["alpha"] = o.alpha;
    details["r"] = o.r;
    details["rmax"] = o.rmax;
  } else if (method == "kprop") {
    const int steps = q.steps() > 0 ? static_cast<int>(q.steps()) : 16;
    ASSIGN_OR_RETURN(z, KProp(graph, x, steps, false, pipeline_threads_));
    details["method"] = "kprop";
    details["steps"] = steps;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("method must be ppr or kprop, got '", method, "'"));
  }
  v1::StageResult r;
  r.set_stage("propagate");
  r.set_input(q.input());
  r.set_seconds(SecondsSince(t));
  return Record(std::move(r), std::move(details), &z);
}

absl::StatusOr<v1::StageResult> Stages::Evaluate(const v1::EvaluateRequest& q) {
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(
      const pipeline::Method method,
      RequestMethod(q.pipeline_method(),
                    {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN,
                     v1::PIPELINE_METHOD_UPGNET}));
  ASSIGN_OR_RETURN(const pipeline::Task task, RequestTask(q.pipeline_task()));
  ASSIGN_OR_RETURN(const pipeline::Defences defences,
                   RequestEvaluateDefences(q));
  ASSIGN_OR_RETURN(const std::vector<pipeline::Baseline> baselines,
                   pipeline::ParseDeployedBaselines(
                       absl::StrJoin(q.baselines(), ","), "baselines"));
  if (!baselines.empty() && task != v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError("baselines apply to the node task");
  }
  ASSIGN_OR_RETURN(store::ResultRow input, FindEstimate(q.input(), "evaluate"));
  if (task == v1::PIPELINE_TASK_NODE && data_->meta.classes < 2) {
    return absl::FailedPreconditionError(
        "node classification needs the curator's labels (a dataset with "
        "classes)");
  }
  nlohmann::json graph_details = nlohmann::json::object();
  ASSIGN_OR_RETURN(StageGraph sg,
                   GraphFor(q.graph_campaign_id(), q.blink_variant(),
                            &graph_details, defences.edge_consistency));
  // The curator's public data with the stage's graph: a copy only when the
  // graph is an assembled one.
  std::optional<Dataset> with_graph;
  if (sg.assembled) {
    with_graph.emplace();
    with_graph->meta = data_->meta;
    with_graph->meta.edges = sg.assembled->num_edges();
    with_graph->labels = data_->labels;
    with_graph->features.cols = data_->features.cols;
    with_graph->graph = std::move(*sg.assembled);
  }
  const Dataset& public_data = with_graph ? *with_graph : *data_;
  ASSIGN_OR_RETURN(DenseMatrix x, ReadNpy(input.matrix_path));
  pipeline::PipelineConfig c = pipeline::DefaultConfig(method, task);
  c.threads = pipeline_threads_;
  pipeline::Collected collected;
  collected.features = ToSparse(x);
  x = DenseMatrix();
  if (!q.label_campaign_id().empty()) {
    ASSIGN_OR_RETURN(v1::Campaign lc,
                     curator_->campaigns().Get(q.label_campaign_id()));
    if (lc.attribute() != v1::ATTRIBUTE_LABEL) {
      return absl::FailedPreconditionError(absl::StrCat(
          "campaign ", q.label_campaign_id(), " does not collect labels"));
    }
    ASSIGN_OR_RETURN(auto reports,
                     curator_->campaigns().Reports(q.label_campaign_id()));
    std::vector<int32_t> labels(curator_->num_nodes(), -1);
    for (const auto& [v, report] : reports) {
      labels[v] = static_cast<int32_t>(report.label().label());
    }
    collected.label_reports = std::move(labels);
    c.label_epsilon = lc.spec().epsilon();
  }
  v1::StageResult estimate;
  std::string input_mechanism;  // the features campaign's, when known
  const bool parsed = estimate.ParseFromString(input.record);
  // The defences: robust is the pipeline's to apply; screen was the
  // estimate's, recorded with its level.
  c.defences.robust = defences.robust;
  if (defences.screen) {
    const std::optional<double> alpha =
        parsed ? ScreenAlphaOf(estimate) : std::nullopt;
    if (!alpha) {
      return absl::FailedPreconditionError(absl::StrCat(
          "defence screen: estimate ", q.input(), " was not screened (estimate "
          "with defence \"screen\" first)"));
    }
    c.defences.screen = true;
    c.screen_alpha = *alpha;
  }
  if (parsed) {
    // LPGNN's settings follow the budgets the reports were collected at:
    // the features campaign's (the estimate's input) and the labels'.
    // Both from its spec, compiled when it was created.
    auto fc = curator_->campaigns().Spec(estimate.input());
    const v1::MechanismSpec* fw = fc.ok() ? &(*fc)->wire() : nullptr;
    if (fw != nullptr && fw->epsilon() > 0) c.epsilon = fw->epsilon();
    // And the mechanism the reports came from (LPGNN unbiases HDS's), its
    // sampled dimensions as the campaign gave them (0: the default).
    if (fw != nullptr && (*fc)->feature() != nullptr) {
      c.mechanism = std::string(MechanismName((*fc)->feature()->kind()));
      c.sampled = fw->sampled() != 0
                      ? std::optional<int>(static_cast<int>(fw->sampled()))
                      : std::nullopt;
      input_mechanism = c.mechanism;
    }
    // The nodes the estimate's screen flagged are not trusted.
    ASSIGN_OR_RETURN(collected.untrusted,
                     FlaggedNodes(estimate, IdListFile(estimate)));
  }
  // Nor, with their labels, the nodes the edge screen caught (as ldpgraph
  // eval's RunOverrides::untrusted).
  if (!sg.flagged.empty()) {
    std::vector<uint32_t> both;
    std::set_union(collected.untrusted.begin(), collected.untrusted.end(),
                   sg.flagged.begin(), sg.flagged.end(),
                   std::back_inserter(both));
    collected.untrusted = std::move(both);
  }
  pipeline::ResolveDatasetSettings(public_data.meta, &c);
  ASSIGN_OR_RETURN(pipeline::RunResult run,
                   pipeline::RunPipelineOnCollected(public_data, c, collected,
                                                    q.seed()));
  nlohmann::json details = pipeline::ConfigToJson(c);
  details["input"] = q.input();
  // The reports came from the agents; these settings were theirs.
  details["noise"] = "agents";
  details.erase("mechanism");
  // What the reports were: LPGNN unbiases HDS's (pipeline.h).
  if (!input_mechanism.empty()) details["input_mechanism"] = input_mechanism;
  details.erase("epsilon");
  details.erase("sampled");
  details.erase("scale");
  details["label_campaign"] = q.label_campaign_id();
  details.update(graph_details);
  details["seed"] = q.seed();
  if (!collected.untrusted.empty()) {
    details["untrusted_nodes"] = collected.untrusted.size();
  }
  details["metric"] = task == v1::PIPELINE_TASK_NODE ? "accuracy" : "roc_auc";
  details["value"] = run.metric;
  details.update(pipeline::RunResultToJson(run));
  for (const pipeline::Baseline b : baselines) {
    const auto tb = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const pipeline::RunResult br,
                     pipeline::RunCollectedBaseline(public_data, c, b,
                                                    collected, q.seed()));
    details["baselines"][std::string(pipeline::BaselineKey(b))] = {
        {"label", b == pipeline::Baseline::kFeatureFree
                      ? "graph alone (no reports)"
                  : b == pipeline::Baseline::kNoGraph
                      ? "reports alone (no graph)"
                      : "graph and labels alone"},
        {"value", br.metric},
        {"seconds", SecondsSince(tb)}};
  }
  v1::StageResult r;
  r.set_stage("evaluate");
  r.set_input(q.input());
  r.set_metric(run.metric);
  r.set_seconds(SecondsSince(t));
  return Record(std::move(r), std::move(details), nullptr);
}

namespace {

// The ledger key of a release's graph.
std::string GraphKey(const std::string& campaign_id) {
  return campaign_id.empty() ? std::string("curator")
                             : absl::StrCat("campaign:", campaign_id);
}

// The composed epsilon of releases at delta: the RDP composition of their
// curves, or the plain sum of their epsilons when their deltas sum to at
// most delta (basic composition; tighter for a few pure-DP releases, whose
// RDP conversion always costs a little more than epsilon), whichever is
// smaller. Both are valid (epsilon, delta) statements.
absl::StatusOr<double> ComposedEpsilon(const dp::RdpAccountant& curve,
                                       const std::vector<double>& epsilons,
                                       const std::vector<double>& deltas,
                                       double delta) {
  ASSIGN_OR_RETURN(dp::DpGuarantee g, curve.Guarantee(delta));
  double es = 0, ds = 0;
  for (double e : epsilons) es += e;
  for (double d : deltas) ds += d;
  return ds <= delta ? std::min(g.epsilon, es) : g.epsilon;
}

}  // namespace

absl::StatusOr<std::map<std::string, Stages::GraphLedger>> Stages::Ledgers()
    const {
  std::map<std::string, GraphLedger> out;
  ASSIGN_OR_RETURN(auto rows, curator_->store().ListResults());
  for (const store::ResultRow& row : rows) {
    v1::StageResult r;
    if (!r.ParseFromString(row.record) || r.stage() != "release") continue;
    const auto details =
        nlohmann::json::parse(r.details_json(), nullptr, /*allow_exceptions=*/false);
    if (details.is_discarded() || !details.contains("rdp") ||
        !details["rdp"].is_string()) {
      return absl::DataLossError(absl::StrCat(
          "release ", r.id(), " has no readable RDP curve in its details"));
    }
    ASSIGN_OR_RETURN(dp::RdpAccountant curve,
                     dp::RdpAccountant::FromJson(details["rdp"].get<std::string>()));
    GraphLedger& g = out[r.input()];
    g.ids.push_back(r.id());
    g.epsilons.push_back(details.value("epsilon", 0.0));
    g.deltas.push_back(details.value("delta", 0.0));
    RETURN_IF_ERROR(g.spent.Compose(curve));
  }
  return out;
}

absl::StatusOr<v1::ReleaseLedger> Stages::Ledger() const {
  ASSIGN_OR_RETURN(auto ledgers, Ledgers());
  v1::ReleaseLedger out;
  out.set_epsilon_cap(release_budget_.epsilon_cap);
  out.set_delta(release_budget_.delta);
  for (const auto& [key, g] : ledgers) {
    v1::GraphReleases* gr = out.add_graphs();
    gr->set_graph(key);
    gr->set_releases(static_cast<uint32_t>(g.ids.size()));
    const size_t listed = std::min<size_t>(g.ids.size(), kLedgerResultIds);
    for (size_t i = g.ids.size() - listed; i < g.ids.size(); ++i) {
      gr->add_result_ids(g.ids[i]);
    }
    ASSIGN_OR_RETURN(double total,
                     ComposedEpsilon(g.spent, g.epsilons, g.deltas,
                                     release_budget_.delta));
    gr->set_epsilon(total);
    double es = 0, ds = 0;
    for (double e : g.epsilons) es += e;
    for (double d : g.deltas) ds += d;
    gr->set_epsilon_sum(es);
    gr->set_delta_sum(ds);
  }
  return out;
}

absl::StatusOr<v1::StageResult> Stages::Release(const v1::ReleaseRequest& q) {
  const auto t = std::chrono::steady_clock::now();
  if (q.blink_variant() == edges::kBlinkVariantNames.Name(
                               edges::BlinkVariant::kHybrid)) {
    return absl::InvalidArgumentError(
        "blink_variant 'hybrid' weights the graph by its posteriors, which "
        "a release ignores (it embeds the structure): use topk or hard");
  }
  absl::MutexLock lock(&release_mu_);
  embedding::ReleaseConfig c;
  ASSIGN_OR_RETURN(
      const pipeline::Method method,
      RequestMethod(q.pipeline_method(), {v1::PIPELINE_METHOD_SE_PRIVGEMB,
                                          v1::PIPELINE_METHOD_DPNE}));
  c.method = *embedding::ReleaseMethodOf(method);  // one of the two above
  c.private_release = true;
  c.epsilon = q.epsilon();
  c.delta = release_budget_.delta;
  if (q.dim() > 0) {
    c.se_privgemb.dim = static_cast<int>(q.dim());
    c.dpne.dim = static_cast<int>(q.dim());
  }
  const bool se = c.method == embedding::ReleaseMethod::kSePrivGemb;
  if (!se && (q.noise_multiplier() != 0 || q.max_epochs() != 0 ||
              !q.proximity().empty() || q.batch_size() != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise_multiplier, max_epochs, proximity and batch_size apply to ",
        embedding::ReleaseMethodName(embedding::ReleaseMethod::kSePrivGemb)));
  }
  if (q.noise_multiplier() != 0) c.se_privgemb.noise_multiplier = q.noise_multiplier();
  if (q.max_epochs() > 0) c.se_privgemb.max_epochs = static_cast<int>(q.max_epochs());
  if (q.batch_size() > 0) c.se_privgemb.batch_size = static_cast<int>(q.batch_size());
  if (!q.proximity().empty()) {
    ASSIGN_OR_RETURN(c.se_privgemb.proximity,
                     embedding::ParseProximity(q.proximity()));
  }
  RETURN_IF_ERROR(embedding::ValidateReleaseConfig(c));
  if (c.epsilon > release_budget_.epsilon_cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a release of epsilon ", c.epsilon, " exceeds the cap of ",
        release_budget_.epsilon_cap, " per graph on its own"));
  }
  const std::string key = GraphKey(q.graph_campaign_id());
  ASSIGN_OR_RETURN(auto ledgers, Ledgers());
  GraphLedger ledger = ledgers[key];
  ASSIGN_OR_RETURN(double before,
                   ComposedEpsilon(ledger.spent, ledger.epsilons,
                                   ledger.deltas, release_budget_.delta));
  if (before >= release_budget_.epsilon_cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "graph ", key, " has spent its release budget: epsilon ", before,
        " of ", release_budget_.epsilon_cap, " at delta ",
        release_budget_.delta));
  }
  nlohmann::json details;
  ASSIGN_OR_RETURN(StageGraph sg, GraphFor(q.graph_campaign_id(),
                                           q.blink_variant(), &details));
  ASSIGN_OR_RETURN(auto noise, SecureRandom::Create());
  ASSIGN_OR_RETURN(embedding::Release release,
                   embedding::ReleaseEmbedding(sg.get(), c, *noise, q.seed()));
  RETURN_IF_ERROR(ledger.spent.Compose(*release.cost));
  ledger.epsilons.push_back(release.epsilon);
  ledger.deltas.push_back(release.delta);
  ASSIGN_OR_RETURN(double total,
                   ComposedEpsilon(ledger.spent, ledger.epsilons,
                                   ledger.deltas, release_budget_.delta));
  if (total > release_budget_.epsilon_cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "graph ", key, ": this release (epsilon ", release.epsilon,
        ") with the earlier ones (epsilon ", before,
        ") composes to epsilon ", total, " at delta ",
        release_budget_.delta, ", over the cap of ",
        release_budget_.epsilon_cap, "; the release was discarded"));
  }
  details.update(release.details);
  details["epsilon"] = release.epsilon;
  details["delta"] = release.delta;
  details["rdp"] = release.cost->ToJson();
  details["ledger"] = {{"graph", key},
                       {"epsilon_before", before},
                       {"epsilon_after", total},
                       {"delta", release_budget_.delta},
                       {"cap", release_budget_.epsilon_cap}};
  details["seed"] = q.seed();
  v1::StageResult r;
  r.set_stage("release");
  r.set_input(key);
  r.set_seconds(SecondsSince(t));
  return Record(std::move(r), std::move(details), &release.embedding);
}

}  // namespace ldpgraph::curator

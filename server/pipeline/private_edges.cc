#include "server/pipeline/private_edges.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/edges/substitution.h"
#include "common/mechanisms/edge_rr.h"
#include "common/status_macros.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::pipeline {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}

// Every node's report: honest from its own stream, or the attacker's.
struct SentReports {
  std::vector<std::vector<uint32_t>> lists;
  std::vector<double> degrees;  // Blink only
  uint64_t entries = 0;
};

absl::StatusOr<SentReports> CollectReports(
    const Graph& truth, const PrivateEdgesConfig& c,
    const poisoning::EdgeAdversary* adversary,
    absl::FunctionRef<RandomSource&(uint32_t)> rng_of_node,
    bool keep_full_rows) {
  const uint32_t n = static_cast<uint32_t>(truth.num_nodes());
  SentReports out;
  out.lists.resize(n);
  std::unique_ptr<EdgeRandomizedResponse> rr;
  std::unique_ptr<edges::BlinkClient> blink;
  if (c.kind == EdgeMechanism::kRr) {
    ASSIGN_OR_RETURN(rr, EdgeRandomizedResponse::Create(c.epsilon, n));
  } else {
    ASSIGN_OR_RETURN(blink, edges::BlinkClient::Create(
                                {.epsilon = c.epsilon, .delta = c.blink_delta},
                                n));
    out.degrees.resize(n);
  }
  for (uint32_t v = 0; v < n; ++v) {
    RandomSource& rng = rng_of_node(v);
    const bool crafted = adversary != nullptr && adversary->Controls(v);
    std::vector<uint32_t>& list = out.lists[v];
    if (rr != nullptr) {
      ASSIGN_OR_RETURN(list, crafted ? adversary->CraftRrReport(*rr, v, rng)
                                     : rr->Perturb(v, truth.neighbors(v), rng));
    } else {
      edges::BlinkReport report;
      ASSIGN_OR_RETURN(report,
                       crafted ? adversary->CraftBlinkReport(*blink, v, rng)
                               : blink->Report(v, truth.neighbors(v), rng));
      list = std::move(report.neighbours);
      out.degrees[v] = report.noisy_degree;
    }
    out.entries += list.size();
    if (rr != nullptr && !keep_full_rows) {
      // kLowerId reads the lower endpoint's bit of each pair only.
      list.erase(list.begin(), std::upper_bound(list.begin(), list.end(), v));
      list.shrink_to_fit();
    }
  }
  return out;
}

// Drops the rows of the flagged nodes and every entry naming one.
void DropFlagged(const std::vector<bool>& flagged,
                 std::vector<std::vector<uint32_t>>* lists) {
  for (uint32_t v = 0; v < lists->size(); ++v) {
    auto& list = (*lists)[v];
    if (flagged[v]) {
      list.clear();
      list.shrink_to_fit();
      continue;
    }
    std::erase_if(list, [&](uint32_t u) { return flagged[u]; });
  }
}

// The Blink estimate over the unflagged nodes, mapped back to n nodes (the
// curator's handling of non-reporters, server/curator/stages_graph.cc).
absl::StatusOr<Graph> EstimateBlink(const PrivateEdgesConfig& c, uint32_t n,
                                    SentReports& reports,
                                    const std::vector<bool>& flagged,
                                    PrivateEdges* out) {
  const edges::BlinkParams params{.epsilon = c.epsilon,
                                  .delta = c.blink_delta};
  edges::BlinkEstimateOptions eo;
  eo.variant = c.blink_variant;
  eo.beta.max_iterations = c.blink_iterations;
  std::vector<uint32_t> kept;  // global ids, ascending
  constexpr uint32_t kAbsent = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> local(n, kAbsent);
  for (uint32_t v = 0; v < n; ++v) {
    if (flagged.empty() || !flagged[v]) {
      local[v] = static_cast<uint32_t>(kept.size());
      kept.push_back(v);
    }
  }
  const uint32_t m = static_cast<uint32_t>(kept.size());
  if (m < 3) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Blink estimates from at least 3 trusted nodes; the screen left ", m));
  }
  std::vector<edges::BlinkReport> local_reports(m);
  out->degree_scale =
      m == n ? 1.0 : static_cast<double>(m - 1) / static_cast<double>(n - 1);
  for (uint32_t i = 0; i < m; ++i) {
    const uint32_t v = kept[i];
    edges::BlinkReport& r = local_reports[i];
    r.noisy_degree = reports.degrees[v] * out->degree_scale;
    if (m == n) {
      r.neighbours = std::move(reports.lists[v]);
      continue;
    }
    for (uint32_t u : reports.lists[v]) {
      if (local[u] != kAbsent) r.neighbours.push_back(local[u]);
    }
    reports.lists[v] = {};
  }
  ASSIGN_OR_RETURN(edges::BlinkEstimate est,
                   edges::EstimateBlinkGraph(params, m, local_reports, eo));
  Graph graph = std::move(est.graph);
  est.graph = Graph();
  out->blink = std::move(est);
  if (m == n) return graph;
  std::vector<Edge> edge_list = graph.Edges();
  for (Edge& e : edge_list) e = Edge{kept[e.u], kept[e.v]};
  return graph.weighted() ? Graph::FromWeightedEdges(n, edge_list,
                                                     graph.EdgeWeights())
                          : Graph::FromEdges(n, edge_list);
}

}  // namespace

uint64_t EdgeNoiseSeed(uint64_t seed, int run) {
  return EdgeStreamSeed(NoiseSeed(seed, run));
}

double ExpectedReportedPairs(uint32_t nodes, const PrivateEdgesConfig& c) {
  const double n = static_cast<double>(nodes);
  return 0.5 * n * (n - 1.0) * c.flip_probability();
}

absl::StatusOr<PrivateEdges> BuildPrivateEdges(
    const Graph& truth, const PrivateEdgesConfig& c,
    const poisoning::EdgeAdversary* adversary,
    absl::FunctionRef<RandomSource&(uint32_t)> rng_of_node) {
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(c.Validate());
  const uint32_t n = static_cast<uint32_t>(truth.num_nodes());
  if (n < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("an edges campaign needs n >= 3 nodes, got ", n));
  }
  if (adversary != nullptr && adversary->nodes() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the edge attacker's graph has ", adversary->nodes(),
                     " nodes; the campaign's has ", n));
  }
  const double expected = ExpectedReportedPairs(n, c);
  if (expected > static_cast<double>(c.max_reported_pairs)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s reports of ~%.0f pairs at eps_e %g on %u nodes: more than the "
        "cap of %d",
        kEdgeMechanismNames.Name(c.kind), expected, c.epsilon, n,
        c.max_reported_pairs));
  }
  PrivateEdges out;
  out.kind = c.kind;
  if (adversary != nullptr) {
    out.malicious = adversary->malicious();
    out.victims_per_node = adversary->victims_per_node();
  }
  ASSIGN_OR_RETURN(SentReports reports,
                   CollectReports(truth, c, adversary, rng_of_node,
                                  /*keep_full_rows=*/c.edge_consistency));
  out.reported_entries = reports.entries;

  std::vector<bool> flagged;
  if (c.edge_consistency) {
    EdgeScreenParams sp;
    sp.nodes = n;
    sp.flip_probability = c.flip_probability();
    sp.alpha = c.screen_alpha;
    if (c.kind == EdgeMechanism::kBlink) {
      sp.degree_epsilon = c.blink_delta * c.epsilon;
    }
    EdgeReports er;
    er.neighbours = std::move(reports.lists);
    er.noisy_degrees = std::move(reports.degrees);
    ASSIGN_OR_RETURN(out.screen, ScreenEdgeReports(sp, er));
    reports.lists = std::move(er.neighbours);
    reports.degrees = std::move(er.noisy_degrees);
    flagged.assign(n, false);
    for (uint32_t v : out.screen->flagged) flagged[v] = true;
    for (uint32_t v : out.malicious) out.malicious_flagged += flagged[v];
  }

  if (c.kind == EdgeMechanism::kRr) {
    if (!flagged.empty()) {
      DropFlagged(flagged, &reports.lists);
      for (uint32_t v = 0; v < n; ++v) {
        auto& list = reports.lists[v];
        list.erase(list.begin(),
                   std::upper_bound(list.begin(), list.end(), v));
      }
    }
    ASSIGN_OR_RETURN(out.graph,
                     edges::AssembleGraph(n, reports.lists,
                                          edges::Symmetrisation::kLowerId));
  } else {
    ASSIGN_OR_RETURN(out.graph, EstimateBlink(c, n, reports, flagged, &out));
  }
  if (!out.malicious.empty()) {
    std::vector<bool> bad(n, false);
    for (uint32_t v : out.malicious) bad[v] = true;
    for (uint32_t v = 0; v < n; ++v) {
      for (uint32_t u : out.graph.neighbors(v)) {
        // Each undirected edge once: from its lower end.
        if (u >= v && (bad[u] || bad[v])) ++out.malicious_edges;
      }
    }
  }
  out.seconds = SecondsSince(start);
  return out;
}

nlohmann::json PrivateEdgesToJson(const PrivateEdges& e) {
  nlohmann::json j;
  j["mechanism"] = std::string(kEdgeMechanismNames.Name(e.kind));
  j["edges"] = e.graph.num_edges();
  j["reported_entries"] = e.reported_entries;
  j["malicious"] = e.malicious.size();
  j["victims_per_node"] = e.victims_per_node;
  j["malicious_edges"] = e.malicious_edges;
  j["seconds"] = e.seconds;
  if (e.screen) {
    j["screen"] = EdgeScreenToJson(*e.screen);
    j["malicious_flagged"] = e.malicious_flagged;
  } else {
    j["screen"] = nullptr;
  }
  if (e.blink) {
    const edges::BlinkEstimate& b = *e.blink;
    j["blink"] = {{"degree_scale", e.degree_scale},
                  {"prior_iterations", b.prior.iterations},
                  {"prior_converged", b.prior.converged},
                  {"max_degree_residual", b.prior.max_degree_residual},
                  {"reported_pairs", b.reported_pairs},
                  {"expected_edges", b.expected_edges},
                  {"target_edges", b.target_edges},
                  {"clipped_low", b.clipped_low},
                  {"clipped_high", b.clipped_high}};
  }
  return j;
}

}  // namespace ldpgraph::pipeline

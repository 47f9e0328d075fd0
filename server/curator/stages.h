// The curator's pipeline over collected reports: estimate, propagate,
// evaluate, export. Each stage reads a campaign's stored reports or an
// earlier stage's stored matrix, writes its own matrix (float32 .npy under
// <data-dir>/results/) and records a StageResult in the store, so results
// survive restarts and can be exported later.
//
// A result's details hold at most the first 100 ids of each id list
// (detail_lists.h: an estimate's screen's "flagged" nodes, an evaluate's
// robust "dropped_nodes"); the whole lists of a result go to its id-list
// file, <results>/<stage>-<created_unix_ms>-<input>.ids.json beside its
// matrix (<...>.npy, the same stem), written and synced before the result
// is stored. IdList reads a list back, whole; Evaluate reads an
// estimate's flagged nodes that way.
//
// The curator's public data: its graph and the labels it trains on and
// tests against (PrivGE's setting; LPGNN replaces the training labels with
// a label campaign's reports). It never holds the nodes' features: only
// their reports.
//
// The graph: propagate and evaluate run over the curator's graph, or, with
// graph_campaign_id, over the graph assembled from an edges campaign's
// stored reports (edges::AssembleGraph: neighbour substitution by union,
// randomized response by the lower node id; a node without a report
// contributes no list). The result's details say which ("graph": "curator"
// or the campaign, with its mechanism, rule, reports and edges).
//
// Blink campaigns (edge-blink): the graph is edges::EstimateBlinkGraph's,
// in the request's blink_variant (hard, topk, hybrid; "" = hard), over the
// nodes that reported only: their ids remapped to 0..m-1, each neighbour
// list filtered to reporters, each noisy degree (which counts neighbours
// among all n) scaled by (m - 1) / (n - 1), the estimate mapped back to
// the curator's n nodes. Nodes without a report
// (dropped out, not targeted) are isolated in the graph: their degree is
// unknown, and a posterior from their neighbours' bits alone would need a
// prior the curator has not got. The details add graph_delta,
// graph_variant, graph_reports (m), graph_nonreporters (n - m),
// graph_degree_scale and the
// estimate's figures (graph_prior_iterations, graph_prior_converged,
// graph_max_degree_residual, graph_reported_pairs, graph_target_edges,
// graph_expected_edges, graph_clipped_low, graph_clipped_high). hybrid is
// weighted: PPR propagation refuses it (UNIMPLEMENTED), and so does a
// release (INVALID_ARGUMENT: embeddings read the structure only). A curator
// whose edges are private (ldpgraph-curator --private-edges) holds none:
// there, a stage without graph_campaign_id is FAILED_PRECONDITION.
//
// The edge-consistency defence (EvaluateRequest.defence "edge-consistency",
// randomized response and Blink campaigns): before the graph is assembled
// its reports are screened (server/pipeline/edge_screen.h, at the default
// level 1e-3), and a flagged node is treated as one that did not report
// (randomized response: its row and every bit about it dropped; Blink:
// left out of the estimate), and evaluate leaves it out of training and
// validation: what `ldpgraph eval --edges rr|blink --defence
// edge-consistency` does with the simulated reports, so a seeded
// deployment equals it. The details add "graph_defence" and
// "graph_screen" (pipeline::EdgeScreenToJson; its "flagged" list cut as
// every id list is).
//
// Releases (SE-PrivGEmb, DPNE; server/embedding/release.h) are the one
// stage whose output leaves the curator with a central-DP guarantee. Each
// graph (the curator's, or an edges campaign's assembled graph) has a
// release ledger: the RDP curves of its releases, composed and converted at
// ReleaseBudget::delta, must stay within ReleaseBudget::epsilon_cap. The
// ledger is the list of stored "release" results (each holds its curve in
// its details), so it is as durable as they are. A release is checked
// twice: before training (the graph's spend so far must leave room) and
// after (the composition with the trained release's actual curve); a
// release refused after training is discarded, never stored or exported.
// Releases run one at a time, so two cannot both pass the check.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/dataset/dataset.h"
#include "common/dp/rdp_accountant.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/admin.pb.h"
#include "server/curator/operator_side.h"
#include "server/pipeline/report_screen.h"

namespace ldpgraph::curator {

// The curator's cap on what the releases of one graph may cost.
struct ReleaseBudget {
  double epsilon_cap = 10.0;
  double delta = 1e-5;
};

// The stages reach the curator through its operator side (operator_side.h):
// campaigns, their stored reports and compiled specs from the campaign
// book, results and the audit log from the store.
class Stages {
 public:
  // `curator` is not owned and must outlive the stages.
  // public_data.features is ignored (and should be empty); results_dir
  // must exist. private_edges: public_data.graph holds no edges because the
  // curator must not know them (not because the graph has none).
  // pipeline_threads: threads of propagate and evaluate (PipelineConfig::
  // threads), 0 = every core.
  Stages(OperatorSide* curator, const Dataset* public_data,
         std::string results_dir, bool private_edges = false,
         ReleaseBudget release_budget = {}, int pipeline_threads = 0)
      : curator_(curator),
        data_(public_data),
        dir_(std::move(results_dir)),
        private_edges_(private_edges),
        release_budget_(release_budget),
        pipeline_threads_(pipeline_threads) {
    auto rows = curator_->store().ListResults();
    results_.store(rows.ok() ? rows->size() : 0);
  }

  // The curator's estimate of every node's features from a features
  // campaign's reports (open or closed): row v is the mechanism's estimate
  // from v's report, zero for a node that did not report. With defence
  // "screen" the reports are screened first (server/pipeline/
  // report_screen.h): a flagged node's row is zero too, and the details
  // name the flagged nodes, which Evaluate on this estimate leaves out of
  // training and validation. FAILED_PRECONDITION for a campaign of another
  // attribute or without reports; INVALID_ARGUMENT for a bad defence or
  // screen_alpha.
  absl::StatusOr<v1::StageResult> Estimate(const v1::EstimateRequest& r);
  absl::StatusOr<v1::StageResult> Propagate(const v1::PropagateRequest& r);
  // The method's pipeline on an estimate (RunPipelineOnCollected). With
  // defence "robust" (node task) it trains, leaves out the training and
  // validation nodes whose label the first model contradicts and trains
  // again (server/pipeline/robust.h); "screen" asserts the estimate was
  // screened. The details record the defences ("defence": {"kind", and
  // the screen's "alpha"}) and the pipeline's figures. INVALID_ARGUMENT
  // naming the field when pipeline_task or pipeline_method is unspecified,
  // or the method is not privge or lpgnn; for a defence name that is not
  // one, edge-consistency, or robust with the link task.
  // FAILED_PRECONDITION for the node task without the curator's labels, or
  // defence screen on an estimate that was not screened.
  absl::StatusOr<v1::StageResult> Evaluate(const v1::EvaluateRequest& r);
  // See the file comment. INVALID_ARGUMENT for a bad request (naming
  // pipeline_method when it is unspecified or not se-privgemb or dpne),
  // RESOURCE_EXHAUSTED when the graph's ledger cannot afford it,
  // FAILED_PRECONDITION when SE-PrivGEmb cannot afford one step.
  absl::StatusOr<v1::StageResult> Release(const v1::ReleaseRequest& r)
      ABSL_LOCKS_EXCLUDED(release_mu_);
  // Every graph's releases, by graph; each graph's result_ids are the
  // latest kLedgerResultIds of its releases (releases counts them all).
  absl::StatusOr<v1::ReleaseLedger> Ledger() const;
  static constexpr int kLedgerResultIds = 1000;

  // The stored matrix of an estimate or propagate result.
  absl::StatusOr<DenseMatrix> Matrix(absl::string_view result_id) const;
  // The whole id list `list` (a dotted path: "flagged",
  // "robust.dropped_nodes") of a result, though its details hold only the
  // first 100 ids (see the file comment). NOT_FOUND for an unknown result,
  // INVALID_ARGUMENT naming the result's lists for a list it has not,
  // DATA_LOSS when its id-list file is missing or damaged.
  absl::StatusOr<std::vector<uint32_t>> IdList(absl::string_view result_id,
                                               absl::string_view list) const;
  // Where the whole id lists of the result r (as recorded) are.
  std::string IdListFile(const v1::StageResult& r) const {
    return FileStem(r) + ".ids.json";
  }
  // How many results are recorded, without reading the store (GetStatus).
  size_t ResultCount() const { return results_.load(); }

  // The estimate as the library computes it, without the store: what
  // Estimate writes, for a caller that holds the reports (sorted by node)
  // and the campaign's compiled spec, whose mechanism decodes and estimates
  // them (FAILED_PRECONDITION for a campaign that is not a features one).
  // On `threads` threads (0 = every core); the result does not depend on it.
  // Given dims, adds each decoded report's sampled dimensions there, in the
  // reports' order (none for a mechanism whose reports are dense).
  static absl::StatusOr<SparseRows> EstimateRows(
      const v1::Campaign& campaign, const wire::CompiledSpec& spec,
      uint32_t num_nodes,
      const std::vector<std::pair<uint32_t, v1::Report>>& reports,
      int threads = 0, pipeline::ReportedDims* dims = nullptr);

  // The graph of an edges campaign's stored reports (open or closed), as
  // the stages assemble it (see the file comment). blink_variant: a Blink
  // campaign's variant, "" = hard; INVALID_ARGUMENT when set for another
  // campaign or unknown. details, if given, receives the graph_* fields
  // (all but graph_edges). FAILED_PRECONDITION for a campaign of another
  // attribute or without reports (Blink: fewer than 3); NOT_FOUND for an
  // unknown campaign.
  absl::StatusOr<Graph> AssembledGraph(absl::string_view campaign_id,
                                       absl::string_view blink_variant = "",
                                       nlohmann::json* details = nullptr) const;
  // The same, the reports screened first when edge_screen_alpha is set
  // (defence edge-consistency at that level; see the file comment): the
  // flagged nodes, ascending, into *flagged (if given), the screen's
  // figures into details ("graph_defence", "graph_screen"). A substitution
  // campaign is then FAILED_PRECONDITION.
  absl::StatusOr<Graph> AssembledGraph(absl::string_view campaign_id,
                                       absl::string_view blink_variant,
                                       std::optional<double> edge_screen_alpha,
                                       nlohmann::json* details,
                                       std::vector<uint32_t>* flagged) const;

 private:
  // Stores r with details (their id lists cut, the whole lists into the
  // id-list file) and its matrix m, if any. INTERNAL if the details, once
  // cut, pass kMaxDetailsBytes (no stage's should come near).
  absl::StatusOr<v1::StageResult> Record(v1::StageResult r,
                                         nlohmann::json details,
                                         const DenseMatrix* m);
  static constexpr size_t kMaxDetailsBytes = size_t{1} << 20;
  // A result's files: <dir>/<stage>-<created_unix_ms>-<input>, then .npy
  // (the matrix) or .ids.json (the whole id lists).
  std::string FileStem(const v1::StageResult& r) const;
  absl::StatusOr<store::ResultRow> Find(absl::string_view id) const;
  // The stored result id, which must be an estimate (FAILED_PRECONDITION
  // naming `stage` otherwise).
  absl::StatusOr<store::ResultRow> FindEstimate(absl::string_view id,
                                                absl::string_view stage) const;

  // The graph a stage runs on (see the file comment), and its description
  // into details. blink_variant set without a Blink campaign:
  // INVALID_ARGUMENT. edge_consistency: the campaign's reports screened
  // first (at the default level), INVALID_ARGUMENT without a campaign.
  struct StageGraph {
    std::optional<Graph> assembled;  // set: the stage's graph
    const Graph* curators = nullptr;  // else this one
    std::vector<uint32_t> flagged;  // the edge screen's, ascending
    const Graph& get() const { return assembled ? *assembled : *curators; }
  };
  absl::StatusOr<StageGraph> GraphFor(const std::string& campaign_id,
                                      const std::string& blink_variant,
                                      nlohmann::json* details,
                                      bool edge_consistency = false) const;

  // One graph's ledger: its release ids and their composed curve.
  struct GraphLedger {
    std::vector<std::string> ids;
    std::vector<double> epsilons, deltas;
    dp::RdpAccountant spent;
  };
  absl::StatusOr<std::map<std::string, GraphLedger>> Ledgers() const;


  OperatorSide* curator_;
  const Dataset* data_;
  std::string dir_;
  bool private_edges_ = false;
  ReleaseBudget release_budget_;
  int pipeline_threads_ = 0;
  absl::Mutex release_mu_;
  std::atomic<size_t> results_{0};
};

// Parses "r<id>"; INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> ParseResultId(absl::string_view id);

}  // namespace ldpgraph::curator

#include "server/ldpgraph/edges_grid.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dataset/generator.h"
#include "common/random/random.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "ldpgraph/v1/mechanism.pb.h"
#include "server/attacks/link_inference.h"
#include "server/ldpgraph/edges_report.h"
#include "server/ldpgraph/tool_util.h"
#include "server/pipeline/pipeline.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::tool {
namespace {

using nlohmann::json;
using pipeline::PipelineConfig;
using training::NodeModelKind;

// The attacks' non-edges: drawn from their own seed, public randomness.
constexpr uint64_t kAttackTag = 0x61747461636b7631ULL;  // "attackv1"

}  // namespace

PipelineConfig CellConfig(const EdgesOptions& o, const DatasetMeta& meta,
                          double eps_x, double eps_y, NodeModelKind model) {
  PipelineConfig c = pipeline::DefaultConfig(v1::PIPELINE_METHOD_LPGNN,
                                             v1::PIPELINE_TASK_NODE);
  if (std::isinf(eps_x)) {
    c.mechanism = "none";
  } else {
    c.mechanism = "multibit";
    c.epsilon = eps_x;
  }
  c.scaling = FeatureScaling::kUnit;
  if (!std::isinf(eps_y)) c.label_epsilon = eps_y;
  // The thesis (Chapter 4.1): K_x = 16, K_y = 2 for cora, K_y = 0 for
  // pubmed and lastfm.
  c.feature_steps = o.feature_steps.value_or(16);
  const bool no_label_steps = meta.name == "pubmed" || meta.name == "lastfm";
  c.label_steps = o.label_steps.value_or(no_label_steps ? 0 : 2);
  c.node_model.kind = model;
  if (model == NodeModelKind::kMlp) {
    // The graph-free baseline: no KProp of features or labels.
    c.feature_steps = 0;
    c.label_steps = 0;
  }
  // The thesis's pipeline, as these figures were first measured: KProp by
  // the mean, labels by vote, early stopping after 50 epochs.
  c.dataset_settings = false;
  c.kprop_norm = KPropNorm::kMean;
  c.label_denoising = pipeline::LabelDenoising::kVote;
  c.node_model.train.patience = 50;
  if (o.epochs) c.node_model.train.max_epochs = *o.epochs;
  if (o.patience) c.node_model.train.patience = *o.patience;
  c.secure_noise = o.secure;
  c.keep_node_outputs = true;
  return c;
}

absl::StatusOr<pipeline::PrivateGraphConfig> GraphConfig(
    EdgeGraph g, double eps_e, const EdgesOptions& o) {
  pipeline::PrivateGraphConfig c;
  switch (g) {
    case EdgeGraph::kNs1: c.kind = pipeline::PrivateGraphKind::kNs1; break;
    case EdgeGraph::kNs2: c.kind = pipeline::PrivateGraphKind::kNs2; break;
    case EdgeGraph::kRr: c.kind = pipeline::PrivateGraphKind::kRr; break;
    case EdgeGraph::kBlink: c.kind = pipeline::PrivateGraphKind::kBlink; break;
    case EdgeGraph::kTrue:
    case EdgeGraph::kMlp:
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", EdgeGraphName(g), " row has no private graph to build"));
  }
  c.epsilon = eps_e;
  c.substitution.similarity = o.similarity;
  c.substitution.top_k = o.top_k;
  c.substitution.max_dummies = o.max_dummies;
  c.substitution.dummy_mean = o.dummy_mean;
  c.substitution.dummy_std = o.dummy_std;
  c.threads = o.threads;
  c.blink_delta = o.blink_delta;
  c.blink_variant = o.blink_variant;
  c.blink_iterations = o.blink_iterations;
  c.max_reported_pairs = o.max_rr_edges;
  return c;
}

namespace {

// The grid's rows for a graph of `nodes` nodes: each graph of o at each
// edge budget (true and mlp once), those over o.max_rr_edges skipped.
std::vector<GridRow> Rows(const EdgesOptions& o, size_t nodes) {
  std::vector<GridRow> rows;
  for (EdgeGraph g : o.graphs) {
    if (g == EdgeGraph::kTrue || g == EdgeGraph::kMlp) {
      rows.push_back({g, std::nullopt, std::nullopt});
      continue;
    }
    for (double e : o.edge_epsilons) {
      GridRow r{g, e, std::nullopt};
      if (g == EdgeGraph::kRr) {
        const double expected = pipeline::ExpectedRrEdges(nodes, e);
        if (expected > static_cast<double>(o.max_rr_edges)) {
          r.skipped = absl::StrFormat(
              "RR graph of ~%.0f edges (more than --max-rr-edges %d)",
              expected, o.max_rr_edges);
        }
      }
      if (g == EdgeGraph::kBlink) {
        const double expected =
            pipeline::ExpectedRrEdges(nodes, (1 - o.blink_delta) * e);
        if (expected > static_cast<double>(o.max_rr_edges)) {
          r.skipped = absl::StrFormat(
              "Blink reports of ~%.0f pairs (more than --max-rr-edges %d)",
              expected, o.max_rr_edges);
        }
      }
      rows.push_back(r);
    }
  }
  return rows;
}

// One grid's run: its cells, the noise every private graph draws from, the
// attack's non-edges, and the progress lines. Run fills the cells run by
// run, feature budget by feature budget, graph row by graph row; TakeResults
// hands them to the report (edges_report.h).
class EdgesGrid {
 public:
  EdgesGrid(const Dataset& d, const EdgesOptions& o, std::ostream* progress,
            pipeline::EdgeNoise noise, std::vector<Edge> non_edges)
      : d_(d),
        o_(o),
        progress_(progress),
        n_(d.graph.num_nodes()),
        rows_(Rows(o, n_)),
        nx_(o.feature_epsilons.size()),
        ny_(o.label_epsilons.size()),
        nm_(o.models.size()),
        cells_(nm_ * rows_.size() * nx_ * ny_),
        noise_(std::move(noise)),
        non_edges_(std::move(non_edges)) {
    no_edges_ = *Graph::FromEdges(n_, {});
    linkteller_sources_ =
        link_inference::LinkTellerSources(n_, o.linkteller_sources, o.seed);
    size_t active_rows = 0;
    for (const GridRow& r : rows_) active_rows += !r.skipped;
    total_ = o.runs * nx_ * active_rows * ny_ * nm_;
    substitution_ =
        std::any_of(o.graphs.begin(), o.graphs.end(), [](EdgeGraph g) {
          return g == EdgeGraph::kNs1 || g == EdgeGraph::kNs2;
        });
  }

  absl::Status Run() {
    if (o_.secure) {
      ASSIGN_OR_RETURN(feature_source_, SecureRandom::Create());
    }
    for (int run = 0; run < o_.runs; ++run) {
      for (size_t xi = 0; xi < nx_; ++xi) RETURN_IF_ERROR(RunFeatures(run, xi));
    }
    if (o_.secure) noise_source_ = "secure";
    return absl::OkStatus();
  }

  // What the run collected; the grid is spent.
  GridResults TakeResults() {
    GridResults out;
    out.rows = rows_;
    out.cells = std::move(cells_);
    out.negatives = non_edges_.size();
    out.linkteller_sources_drawn = static_cast<size_t>(std::count(
        linkteller_sources_.begin(), linkteller_sources_.end(), true));
    out.noise_source = noise_source_;
    return out;
  }

 private:
  // What the rows of one (run, eps_x) share: the exchange's features, the
  // nodes' own feature reports (substitution exchanges them) and, with
  // secure noise, the estimates of those very reports.
  struct FeaturePass {
    size_t xi;
    double eps_x;
    std::shared_ptr<const edges::ExchangeFeatures> features;
    std::vector<v1::FeatureReport> own;
    SparseRows estimates;
    bool hand_over = false;
  };

  GridCell& cell(size_t m, size_t r, size_t x, size_t y) {
    return cells_[((m * rows_.size() + r) * nx_ + x) * ny_ + y];
  }

  absl::Status RunFeatures(int run, size_t xi);
  absl::Status RunRow(int run, size_t ri, FeaturePass& f);
  // One cell's training and attacks, in TrainCells' order.
  struct CellRun {
    double accuracy = 0, similarity_auc = 0, linkteller_auc = 0;
    double seconds = 0, linkteller_seconds = 0;
    std::string noise_source = "none";
  };
  absl::StatusOr<CellRun> TrainCell(int run, const FeaturePass& f,
                                    const Graph& graph,
                                    const pipeline::RunOverrides& overrides,
                                    double eps_y, NodeModelKind model);
  // Trains every (eps_y, model) cell of one private graph and attacks it.
  absl::Status TrainCells(int run, size_t ri, const FeaturePass& f,
                          const Graph& graph, const pipeline::PrivateGraph& pg,
                          const std::string& label);

  const Dataset& d_;
  const EdgesOptions& o_;
  std::ostream* progress_;
  const size_t n_;
  const std::vector<GridRow> rows_;
  const size_t nx_, ny_, nm_;
  std::vector<GridCell> cells_;
  pipeline::EdgeNoise noise_;
  // The attack's non-edges: public randomness, the same for every cell.
  const std::vector<Edge> non_edges_;
  // The mlp row's graph: the n nodes, no edge.
  Graph no_edges_;
  // LinkTeller's sources (link_inference::LinkTellerSources).
  std::vector<bool> linkteller_sources_;
  std::unique_ptr<SecureRandom> feature_source_;
  bool substitution_ = false;
  size_t total_ = 0, done_ = 0;
  std::string noise_source_ = "seeded-not-private";
};

absl::Status EdgesGrid::RunFeatures(int run, size_t xi) {
  FeaturePass f;
  f.xi = xi;
  f.eps_x = o_.feature_epsilons[xi];
  const PipelineConfig base =
      CellConfig(o_, d_.meta, f.eps_x, kNoPrivacy, NodeModelKind::kGcn);
  ASSIGN_OR_RETURN(f.features, pipeline::MakeExchangeFeatures(base, d_));
  // Secure noise cannot be replayed by the pipeline: hand it the estimates
  // of the very reports the neighbours exchange.
  f.hand_over = o_.secure && base.mechanism != "none";
  if (substitution_ || f.hand_over) {
    const auto t = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(f.own, pipeline::NodeFeatureReports(
                                d_, base, *f.features, o_.seed, run,
                                feature_source_.get(),
                                f.hand_over ? &f.estimates : nullptr));
    if (progress_ != nullptr) {
      *progress_ << absl::StrFormat(
          "[run %d/%d] eps_x=%s: %zu feature reports (%.2f s)\n", run + 1,
          o_.runs, FormatBudget(f.eps_x), f.own.size(), SecondsSince(t));
    }
  }
  for (size_t ri = 0; ri < rows_.size(); ++ri) {
    if (rows_[ri].skipped) continue;
    RETURN_IF_ERROR(RunRow(run, ri, f));
  }
  return absl::OkStatus();
}

absl::Status EdgesGrid::RunRow(int run, size_t ri, FeaturePass& f) {
  const GridRow& row = rows_[ri];
  pipeline::PrivateGraph pg;
  const Graph* graph =
      row.graph == EdgeGraph::kMlp ? &no_edges_ : &d_.graph;
  std::string label(EdgeGraphName(row.graph));
  if (row.graph != EdgeGraph::kTrue && row.graph != EdgeGraph::kMlp) {
    absl::StrAppend(&label, " eps_e=", FormatBudget(*row.eps_e));
    noise_.Reset(o_.seed, run);
    ASSIGN_OR_RETURN(const pipeline::PrivateGraphConfig gc,
                     GraphConfig(row.graph, *row.eps_e, o_));
    ASSIGN_OR_RETURN(pg, pipeline::BuildPrivateGraph(d_.graph, gc, f.features,
                                                     f.own, noise_));
    graph = &pg.graph;
    if (progress_ != nullptr) {
      std::string stats;
      if (pg.stats) {
        stats = absl::StrFormat(
            "; dropped %d, substituted %d, unresolved %d, %d messages",
            pg.stats->dropped, pg.stats->substituted, pg.stats->unresolved,
            pg.stats->messages);
      }
      if (pg.blink) {
        stats = absl::StrFormat(
            "; %s, prior after %d iterations (residual %.2g), %d reported "
            "pairs, %.0f expected edges",
            edges::kBlinkVariantNames.Name(o_.blink_variant),
            pg.blink->prior.iterations, pg.blink->prior.max_degree_residual,
            pg.blink->reported_pairs, pg.blink->expected_edges);
      }
      *progress_ << absl::StrFormat(
          "[run %d/%d] eps_x=%s %s: graph of %d edges, homophily %.3f%s "
          "(%.2f s)\n",
          run + 1, o_.runs, FormatBudget(f.eps_x), label, pg.graph.num_edges(),
          EdgeHomophily(pg.graph, d_.labels), stats, pg.seconds);
    }
  }
  return TrainCells(run, ri, f, *graph, pg, label);
}

absl::StatusOr<EdgesGrid::CellRun> EdgesGrid::TrainCell(
    int run, const FeaturePass& f, const Graph& graph,
    const pipeline::RunOverrides& overrides, double eps_y,
    NodeModelKind model) {
  PipelineConfig c = CellConfig(o_, d_.meta, f.eps_x, eps_y, model);
  c.keep_node_model = o_.linkteller_attack;
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(pipeline::RunResult r,
                   pipeline::RunPipeline(d_, c, o_.seed, run, overrides));
  if (!r.node_outputs) {
    return absl::InternalError("the pipeline kept no node outputs");
  }
  CellRun out;
  out.accuracy = r.metric;
  out.noise_source = r.noise_source;
  if (o_.similarity_attack) {
    ASSIGN_OR_RETURN(out.similarity_auc,
                     link_inference::SimilarityAttackAuc(
                         d_.graph, *r.node_outputs, non_edges_));
  }
  out.seconds = SecondsSince(t);
  if (o_.linkteller_attack) {
    const auto t_lt = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(out.linkteller_auc,
                     link_inference::LinkTellerAttackAuc(
                         d_.graph, non_edges_, graph, c, r,
                         &linkteller_sources_, o_.threads));
    out.linkteller_seconds = SecondsSince(t_lt);
  }
  return out;
}

absl::Status EdgesGrid::TrainCells(int run, size_t ri, const FeaturePass& f,
                                   const Graph& graph,
                                   const pipeline::PrivateGraph& pg,
                                   const std::string& label) {
  const GridRow& row = rows_[ri];
  // What the private graph keeps of the true one, and how often its edges
  // join two nodes of one class (the signal GNNs live on).
  const double homophily = EdgeHomophily(graph, d_.labels);
  size_t kept = 0;
  for (const Edge& e : d_.graph.Edges()) kept += graph.HasEdge(e.u, e.v);
  const double kept_fraction =
      static_cast<double>(kept) / std::max<size_t>(1, d_.graph.num_edges());
  pipeline::RunOverrides overrides;
  if (row.graph != EdgeGraph::kTrue) overrides.graph = &graph;
  if (f.hand_over) overrides.features = &f.estimates;
  const bool mlp = row.graph == EdgeGraph::kMlp;
  for (size_t yi = 0; yi < ny_; ++yi) {
    const double eps_y = o_.label_epsilons[yi];
    CellRun cr;
    for (size_t mi = 0; mi < nm_; ++mi) {
      // The MLP does not depend on --models: trained once, reported in
      // every model's table.
      const bool train = !mlp || mi == 0;
      const NodeModelKind model = mlp ? NodeModelKind::kMlp : o_.models[mi];
      if (train) {
        ASSIGN_OR_RETURN(cr, TrainCell(run, f, graph, overrides, eps_y, model));
      }
      if (cr.noise_source != "none") noise_source_ = cr.noise_source;
      GridCell& cl = cell(mi, ri, f.xi, yi);
      cl.accuracy.push_back(cr.accuracy);
      if (o_.similarity_attack) cl.attack_auc.push_back(cr.similarity_auc);
      if (o_.linkteller_attack) {
        cl.linkteller_auc.push_back(cr.linkteller_auc);
        cl.linkteller_seconds.push_back(cr.linkteller_seconds);
      }
      cl.seconds.push_back(cr.seconds);
      cl.graph_edges.push_back(static_cast<double>(graph.num_edges()));
      cl.graph_seconds.push_back(pg.seconds);
      cl.graph_homophily.push_back(homophily);
      cl.true_edges_kept.push_back(kept_fraction);
      if (pg.stats) {
        json s = SubstitutionStatsJson(*pg.stats, n_, pg.seconds);
        s["run"] = run;
        cl.substitution_runs.push_back(s);
      }
      if (pg.blink) {
        json b = BlinkJson(*pg.blink);
        b["run"] = run;
        cl.blink_runs.push_back(b);
      }
      ++done_;
      if (progress_ != nullptr && train) {
        std::string attacks;
        if (o_.similarity_attack) {
          absl::StrAppendFormat(&attacks, ", similarity AUC %.4f",
                                cr.similarity_auc);
        }
        if (o_.linkteller_attack) {
          absl::StrAppendFormat(&attacks, ", LinkTeller AUC %.4f (%.1f s)",
                                cr.linkteller_auc, cr.linkteller_seconds);
        }
        *progress_ << absl::StrFormat(
            "  [%zu/%zu] %s %s eps_x=%s eps_y=%s: accuracy %.4f%s (%.1f s)\n",
            done_, total_, EdgesModelName(model), label, FormatBudget(f.eps_x),
            FormatBudget(eps_y), cr.accuracy, attacks, cr.seconds);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> RunEdgesGrid(const Dataset& d, const EdgesOptions& o,
                                  std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const size_t n = d.graph.num_nodes();
  ASSIGN_OR_RETURN(pipeline::EdgeNoise noise,
                   pipeline::EdgeNoise::Create(n, o.secure));
  std::vector<Edge> non_edges =
      link_inference::SampleNonEdges(d.graph, d.graph.num_edges(),
                                     SeedMix(o.seed ^ kAttackTag));
  if (non_edges.empty() || d.graph.num_edges() == 0) {
    return absl::FailedPreconditionError(
        "the attack needs a graph with at least one edge and one non-edge");
  }
  EdgesGrid grid(d, o, progress, std::move(noise), std::move(non_edges));
  RETURN_IF_ERROR(grid.Run());
  GridResults results = grid.TakeResults();
  return GridJson(d, o, results, SecondsSince(start));
}

}  // namespace ldpgraph::tool

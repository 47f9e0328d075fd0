#include "server/ldpgraph/edges_command.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cmath>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/dataset/feature_schema.h"
#include "common/dataset/generator.h"
#include "common/dataset/splits.h"
#include "common/mechanisms/edge_rr.h"
#include "common/seed_mix.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "server/ldpgraph/charts.h"
#include "server/ldpgraph/tool_util.h"
#include "server/pipeline/private_edges.h"
#include "server/propagation/propagation.h"
#include "server/training/linkteller.h"
#include "server/training/metrics.h"

namespace ldpgraph::tool {
namespace {

using nlohmann::json;
using pipeline::PipelineConfig;
using training::NodeModelKind;

// Independent seeds, by splitmix64 steps (common/seed_mix.h).
constexpr auto Mix = SeedMix;
constexpr uint64_t kAttackTag = 0x61747461636b7631ULL;  // "attackv1"
constexpr uint64_t kLinkTellerTag = 0x6c696e6b74656c6cULL;  // "linktell"

absl::string_view ModelName(NodeModelKind k) {
  switch (k) {
    case NodeModelKind::kMlp: return "mlp";
    case NodeModelKind::kGcn: return "gcn";
    case NodeModelKind::kSage: return "sage";
  }
  return "?";
}

std::string Budget(double e) {
  return std::isinf(e) ? "inf" : absl::StrFormat("%g", e);
}
json BudgetJson(double e) { return std::isinf(e) ? json(nullptr) : json(e); }

// A comma-separated list of budgets > 0, "inf" allowed when allow_inf;
// no repeats.
absl::StatusOr<std::vector<double>> ParseBudgetList(absl::string_view flag,
                                                    absl::string_view list,
                                                    bool allow_inf) {
  std::vector<double> out;
  for (absl::string_view s : absl::StrSplit(list, ',')) {
    double v;
    if (s == "inf" && allow_inf) {
      v = kNoPrivacy;
    } else if (!absl::SimpleAtod(s, &v) || !(v > 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " takes budgets > 0", allow_inf ? " or inf" : "",
          ", comma separated; got '", s, "'",
          allow_inf ? ""
                    : " (the true graph, eps_e = inf, is --graphs true)"));
    }
    if (std::find(out.begin(), out.end(), v) != out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " lists ", Budget(v), " twice"));
    }
    out.push_back(v);
  }
  return out;
}

// A comma-separated list of choices, no repeats; their positions.
absl::StatusOr<std::vector<int>> ParseChoiceList(
    absl::string_view flag, absl::string_view list,
    std::initializer_list<absl::string_view> choices) {
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(list, ',')) {
    ASSIGN_OR_RETURN(int i, ParseChoice(flag, s, choices));
    if (std::find(out.begin(), out.end(), i) != out.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " lists '", s, "' twice"));
    }
    out.push_back(i);
  }
  return out;
}

// Number of UTF-8 code points (for aligning "±").
size_t DisplayWidth(absl::string_view s) {
  size_t w = 0;
  for (unsigned char ch : s) w += (ch & 0xC0) != 0x80;
  return w;
}
std::string Pad(absl::string_view s, size_t width) {
  std::string out(s);
  for (size_t w = DisplayWidth(s); w < width; ++w) out += ' ';
  return out;
}

json SummaryJson(const std::vector<double>& values) {
  const training::Summary s = training::Summarize(values);
  return json{{"mean", s.mean}, {"std", s.std}, {"values", values}};
}

// --blink-delta, --blink-variant, --blink-iterations, --attacks and
// --linkteller-sources into *out.
absl::Status ParseBlinkAndAttackFlags(const CliArgs& a, EdgesOptions* out) {
  EdgesOptions& o = *out;
  ASSIGN_OR_RETURN(auto blink_delta, a.GetDouble("blink-delta"));
  if (blink_delta) {
    if (!(*blink_delta > 0 && *blink_delta < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--blink-delta must be in (0, 1), got ", *blink_delta));
    }
    o.blink_delta = *blink_delta;
  }
  if (auto v = a.Get("blink-variant")) {
    ASSIGN_OR_RETURN(o.blink_variant,
                     edges::kBlinkVariantNames.Parse(*v, "--blink-variant"));
  }
  ASSIGN_OR_RETURN(auto blink_it, a.GetInt("blink-iterations"));
  if (blink_it) {
    ASSIGN_OR_RETURN(o.blink_iterations,
                     FlagToInt(*blink_it, "blink-iterations", 1));
  }
  if (auto list = a.Get("attacks")) {
    ASSIGN_OR_RETURN(auto idx, ParseChoiceList("attacks", *list,
                                               {"similarity", "linkteller"}));
    o.similarity_attack =
        std::find(idx.begin(), idx.end(), 0) != idx.end();
    o.linkteller_attack =
        std::find(idx.begin(), idx.end(), 1) != idx.end();
  }
  ASSIGN_OR_RETURN(auto lt_sources, a.GetInt("linkteller-sources"));
  if (lt_sources) {
    ASSIGN_OR_RETURN(int count,
                     FlagToInt(*lt_sources, "linkteller-sources", 0));
    o.linkteller_sources = static_cast<uint32_t>(count);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EdgesOptions> ParseEdgesOptions(
    const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(args,
                     {"dataset", "edge-epsilons", "feature-epsilons",
                      "label-epsilons", "models", "graphs", "runs", "seed",
                      "similarity", "top-k", "max-dummies", "dummy-mean",
                      "dummy-std", "feature-steps", "label-steps", "epochs",
                      "patience", "max-rr-edges", "threads", "format",
                      "save-json", "blink-delta", "blink-variant",
                      "blink-iterations", "attacks", "linkteller-sources",
                      "plot"},
                     {"secure", "help"}));
  EdgesOptions o;
  auto dataset = a.Get("dataset");
  if (!dataset) return absl::InvalidArgumentError("--dataset is required");
  o.dataset = *dataset;
  if (auto e = a.Get("edge-epsilons")) {
    ASSIGN_OR_RETURN(o.edge_epsilons,
                     ParseBudgetList("edge-epsilons", *e, false));
  }
  if (auto e = a.Get("feature-epsilons")) {
    ASSIGN_OR_RETURN(o.feature_epsilons,
                     ParseBudgetList("feature-epsilons", *e, true));
  }
  if (auto e = a.Get("label-epsilons")) {
    ASSIGN_OR_RETURN(o.label_epsilons,
                     ParseBudgetList("label-epsilons", *e, true));
  }
  if (auto m = a.Get("models")) {
    ASSIGN_OR_RETURN(auto idx, ParseChoiceList("models", *m, {"gcn", "sage"}));
    o.models.clear();
    for (int i : idx) {
      o.models.push_back(i == 0 ? NodeModelKind::kGcn : NodeModelKind::kSage);
    }
  }
  if (auto g = a.Get("graphs")) {
    o.graphs.clear();
    for (absl::string_view s : absl::StrSplit(*g, ',')) {
      ASSIGN_OR_RETURN(EdgeGraph graph, kEdgeGraphNames.Parse(s, "--graphs"));
      if (std::find(o.graphs.begin(), o.graphs.end(), graph) !=
          o.graphs.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--graphs lists '", s, "' twice"));
      }
      o.graphs.push_back(graph);
    }
  }
  ASSIGN_OR_RETURN(auto runs, a.GetInt("runs"));
  if (runs) { ASSIGN_OR_RETURN(o.runs, FlagToInt(*runs, "runs", 1)); }
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  if (seed) o.seed = *seed;
  if (auto s = a.Get("similarity")) {
    ASSIGN_OR_RETURN(int i, ParseChoice("similarity", *s, {"cosine", "l2"}));
    o.similarity = i == 0 ? edges::Similarity::kCosine : edges::Similarity::kL2;
  }
  ASSIGN_OR_RETURN(auto top_k, a.GetInt("top-k"));
  if (top_k) { ASSIGN_OR_RETURN(o.top_k, FlagToInt(*top_k, "top-k", 1)); }
  ASSIGN_OR_RETURN(auto dummies, a.GetInt("max-dummies"));
  if (dummies) {
    ASSIGN_OR_RETURN(o.max_dummies, FlagToInt(*dummies, "max-dummies", 0));
  }
  ASSIGN_OR_RETURN(auto mean, a.GetDouble("dummy-mean"));
  if (mean) o.dummy_mean = *mean;  // GetDouble refuses non-finite values
  ASSIGN_OR_RETURN(auto sd, a.GetDouble("dummy-std"));
  if (sd) {
    if (!(*sd >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dummy-std must be >= 0, got ", *sd));
    }
    o.dummy_std = *sd;
  }
  ASSIGN_OR_RETURN(auto ks, a.GetInt("feature-steps"));
  if (ks) { ASSIGN_OR_RETURN(o.feature_steps, FlagToInt(*ks, "feature-steps", 0)); }
  ASSIGN_OR_RETURN(auto ky, a.GetInt("label-steps"));
  if (ky) { ASSIGN_OR_RETURN(o.label_steps, FlagToInt(*ky, "label-steps", 0)); }
  ASSIGN_OR_RETURN(auto epochs, a.GetInt("epochs"));
  if (epochs) { ASSIGN_OR_RETURN(o.epochs, FlagToInt(*epochs, "epochs", 1)); }
  ASSIGN_OR_RETURN(auto patience, a.GetInt("patience"));
  if (patience) {
    ASSIGN_OR_RETURN(o.patience, FlagToInt(*patience, "patience", 1));
  }
  RETURN_IF_ERROR(ParseBlinkAndAttackFlags(a, &o));
  ASSIGN_OR_RETURN(auto max_rr, a.GetUint("max-rr-edges"));
  if (max_rr) o.max_rr_edges = *max_rr;
  ASSIGN_OR_RETURN(auto threads, a.GetInt("threads"));
  if (threads) { ASSIGN_OR_RETURN(o.threads, FlagToInt(*threads, "threads", 1)); }
  o.secure = a.Flag("secure");
  if (auto f = a.Get("format")) {
    ASSIGN_OR_RETURN(int i, ParseChoice("format", *f, {"table", "json"}));
    o.json = i == 1;
  }
  if (auto f = a.Get("save-json")) {
    if (f->empty()) {
      return absl::InvalidArgumentError("--save-json needs a file name");
    }
    o.save_json = *f;
  }
  if (auto f = a.Get("plot")) {
    RETURN_IF_ERROR(CheckPlotPath(*f));
    if (std::all_of(o.graphs.begin(), o.graphs.end(), [](EdgeGraph g) {
          return g == EdgeGraph::kTrue || g == EdgeGraph::kMlp;
        })) {
      return absl::InvalidArgumentError(
          "--plot draws against eps_e: --graphs needs ns1, ns2, rr or blink");
    }
    o.plot = *f;
  }
  // The substitution parameters, checked once by the library's validator.
  edges::SubstitutionParams p;
  p.similarity = o.similarity;
  p.top_k = o.top_k;
  p.max_dummies = o.max_dummies;
  p.dummy_mean = o.dummy_mean;
  p.dummy_std = o.dummy_std;
  absl::Status valid = p.Validate();
  if (!valid.ok()) return valid;
  return o;
}

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

uint64_t EdgeNoiseSeed(uint64_t seed, int run) {
  return pipeline::EdgeNoiseSeed(seed, run);
}

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
                   pipeline::BuildFeatureMechanism(c, d));
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
    ASSIGN_OR_RETURN(mech, pipeline::BuildFeatureMechanism(c, d));
  }
  if (estimates != nullptr) {
    *estimates = SparseRows();
    estimates->cols = x.cols;
  }
  const uint64_t noise_seed = pipeline::NoiseSeed(seed, run);
  std::vector<v1::FeatureReport> out;
  out.reserve(x.rows);
  std::vector<double> row(x.cols), estimate(x.cols);
  for (size_t v = 0; v < x.rows; ++v) {
    x.RowToDense(v, absl::MakeSpan(row));
    // The stream the pipeline perturbs node v's features with, fresh: the
    // report is its first draw, as in pipeline::SimulateFeatureReports.
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
    EdgeGraph g, double eps_e, const Graph& truth, const EdgesOptions& o,
    std::shared_ptr<const edges::ExchangeFeatures> features,
    const std::vector<v1::FeatureReport>& own, EdgeNoise& noise) {
  const auto start = std::chrono::steady_clock::now();
  const uint32_t n = static_cast<uint32_t>(truth.num_nodes());
  PrivateGraph out;
  if (g == EdgeGraph::kTrue || g == EdgeGraph::kMlp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", EdgeGraphName(g), " row has no private graph to build"));
  }
  if (g == EdgeGraph::kRr || g == EdgeGraph::kBlink) {
    // Every node's report from its own stream, and the curator's estimate
    // (rr: the lower endpoint's bit of each pair; blink: EstimateBlinkGraph).
    pipeline::PrivateEdgesConfig pc;
    pc.kind = g == EdgeGraph::kRr ? pipeline::EdgeMechanism::kRr
                                  : pipeline::EdgeMechanism::kBlink;
    pc.epsilon = eps_e;
    pc.blink_delta = o.blink_delta;
    pc.blink_variant = o.blink_variant;
    pc.blink_iterations = o.blink_iterations;
    pc.max_reported_pairs = o.max_rr_edges;
    ASSIGN_OR_RETURN(
        pipeline::PrivateEdges pe,
        pipeline::BuildPrivateEdges(
            truth, pc, /*adversary=*/nullptr,
            [&](uint32_t v) -> RandomSource& { return *noise.at(v); }));
    out.graph = std::move(pe.graph);
    out.blink = std::move(pe.blink);
    out.seconds = SecondsSince(start);
    return out;
  }
  edges::SubstitutionParams p;
  p.approach = g == EdgeGraph::kNs1 ? edges::Approach::kCandidateRelay
                                    : edges::Approach::kSimilarityQuery;
  p.similarity = o.similarity;
  p.epsilon = eps_e;
  p.top_k = o.top_k;
  p.max_dummies = o.max_dummies;
  p.dummy_mean = o.dummy_mean;
  p.dummy_std = o.dummy_std;
  edges::RunOptions ro;
  ro.threads = o.threads;
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

std::vector<Edge> SampleNonEdges(const Graph& g, size_t count, uint64_t seed) {
  const uint64_t n = g.num_nodes();
  const uint64_t pairs = n < 2 ? 0 : n * (n - 1) / 2;
  const uint64_t edges = g.num_edges() - g.num_self_loops();
  const uint64_t available = pairs - std::min(pairs, edges);
  count = std::min<uint64_t>(count, available);
  PublicRandom rng(seed);
  std::vector<Edge> out;
  out.reserve(count);
  if (count == available) {
    // Every non-edge (tiny graphs): no rejection loop that could stall.
    for (NodeId u = 0; u < n; ++u) {
      for (NodeId v = u + 1; v < n; ++v) {
        if (!g.HasEdge(u, v)) out.push_back(Edge{u, v});
      }
    }
    return out;
  }
  DrawRandomNonEdges(g, count, rng, &out);
  return out;
}

absl::StatusOr<double> SimilarityAttackAuc(const Graph& truth,
                                           const DenseMatrix& outputs,
                                           const std::vector<Edge>& non_edges) {
  if (outputs.rows < truth.num_nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("outputs hold ", outputs.rows, " rows for a graph of ",
                     truth.num_nodes(), " nodes"));
  }
  std::vector<double> norm(outputs.rows);
  for (size_t v = 0; v < outputs.rows; ++v) {
    double s = 0;
    for (float x : outputs.row(v)) s += double(x) * x;
    norm[v] = std::sqrt(s);
  }
  auto score = [&](NodeId u, NodeId v) -> float {
    if (norm[u] == 0 || norm[v] == 0) return 0.0f;
    double dot = 0;
    auto a = outputs.row(u), b = outputs.row(v);
    for (size_t j = 0; j < outputs.cols; ++j) dot += double(a[j]) * b[j];
    return static_cast<float>(dot / (norm[u] * norm[v]));
  };
  std::vector<float> pos, neg;
  for (const Edge& e : truth.Edges()) {
    if (e.u != e.v) pos.push_back(score(e.u, e.v));
  }
  for (const Edge& e : non_edges) {
    if (e.u >= outputs.rows || e.v >= outputs.rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "non-edge (", e.u, ", ", e.v, ") names a node without an output"));
    }
    neg.push_back(score(e.u, e.v));
  }
  return training::RocAuc(pos, neg);
}

absl::StatusOr<double> LinkTellerAttackAuc(const Graph& truth,
                                           const std::vector<Edge>& non_edges,
                                           const Graph& graph,
                                           const PipelineConfig& c,
                                           const pipeline::RunResult& r,
                                           const std::vector<bool>* sources,
                                           int threads) {
  if (r.node_model == nullptr || r.node_features == nullptr) {
    return absl::InvalidArgumentError(
        "LinkTeller needs the run's model and features (keep_node_model)");
  }
  if (graph.num_nodes() != truth.num_nodes() || non_edges.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinkTeller: the model's graph has ", graph.num_nodes(),
        " nodes, the truth ", truth.num_nodes(), "; ", non_edges.size(),
        " non-edges"));
  }
  const DenseMatrix dense = r.node_features->ToDense();
  const training::Mat<double> x =
      Eigen::Map<const training::Mat<float>>(
          dense.data.data(), static_cast<Eigen::Index>(dense.rows),
          static_cast<Eigen::Index>(dense.cols))
          .cast<double>();
  // KProp's step over the graph the model answers on, as the pipeline
  // propagated (c.feature_self_loops, c.kprop_norm).
  training::SpMat<double> t;
  if (c.feature_steps > 0) {
    std::vector<Eigen::Triplet<double, int64_t>> entries;
    for (const KPropEntry& e :
         KPropOperator(graph, c.feature_self_loops, c.kprop_norm)) {
      entries.emplace_back(e.row, e.col, e.weight);
    }
    t.resize(graph.num_nodes(), graph.num_nodes());
    t.setFromTriplets(entries.begin(), entries.end());
  }
  ASSIGN_OR_RETURN(training::LinkTeller attack,
                   training::LinkTeller::Create(
                       {r.node_model.get(), &graph, &x, &t, c.feature_steps}));
  std::vector<Edge> pairs;
  for (const Edge& e : truth.Edges()) {
    if (e.u != e.v) pairs.push_back(e);
  }
  const size_t positives = pairs.size();
  pairs.insert(pairs.end(), non_edges.begin(), non_edges.end());
  ASSIGN_OR_RETURN(std::vector<double> scores,
                   attack.DirectedScores(pairs, sources, threads));
  std::vector<float> pos, neg;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) continue;  // its source was not queried
    (i / 2 < positives ? pos : neg).push_back(static_cast<float>(scores[i]));
  }
  if (pos.empty() || neg.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinkTeller's sources are in ", pos.size(), " edge and ", neg.size(),
        " non-edge directions: more sources are needed"));
  }
  return training::RocAuc(pos, neg);
}

std::vector<bool> LinkTellerSources(size_t n, uint32_t count, uint64_t seed) {
  if (count == 0 || count >= n) return std::vector<bool>(n, true);
  std::vector<bool> out(n, false);
  PublicRandom rng(Mix(seed ^ kLinkTellerTag));
  for (uint32_t v :
       rng.SampleWithoutReplacement(static_cast<uint32_t>(n), count)) {
    out[v] = true;
  }
  return out;
}

namespace {

// One row of a model's table: a graph, and its edge budget (none for the
// true graph).
struct GridRow {
  EdgeGraph graph;
  std::optional<double> eps_e;
  std::optional<std::string> skipped;  // "RR graph of ~N edges"
};

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
        const double expected = ExpectedRrEdges(nodes, e);
        if (expected > static_cast<double>(o.max_rr_edges)) {
          r.skipped = absl::StrFormat(
              "RR graph of ~%.0f edges (more than --max-rr-edges %d)",
              expected, o.max_rr_edges);
        }
      }
      if (g == EdgeGraph::kBlink) {
        const double expected =
            ExpectedRrEdges(nodes, (1 - o.blink_delta) * e);
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

// What one cell collects over the runs.
struct Cell {
  std::vector<double> accuracy, attack_auc, linkteller_auc, seconds;
  std::vector<double> linkteller_seconds;
  std::vector<double> graph_edges, graph_seconds;
  std::vector<double> graph_homophily, true_edges_kept;
  json substitution_runs = json::array();
  json blink_runs = json::array();
};

// What the Blink curator found in one run.
json BlinkJson(const edges::BlinkEstimate& b) {
  return json{{"iterations", b.prior.iterations},
              {"converged", b.prior.converged},
              {"exact_sums", b.prior.exact_sums},
              {"max_degree_residual", b.prior.max_degree_residual},
              {"clipped_low", b.clipped_low},
              {"clipped_high", b.clipped_high},
              {"reported_pairs", b.reported_pairs},
              {"both_reported_pairs", b.both_reported_pairs},
              {"expected_edges", b.expected_edges},
              {"target_edges", b.target_edges},
              {"threshold", b.threshold},
              {"graph_reported_edges", b.graph_reported_edges}};
}

json StatsJson(const edges::RunStats& s, size_t nodes, double seconds) {
  const double n = static_cast<double>(nodes);
  return json{{"degree", s.degree},
              {"dropped", s.dropped},
              {"substituted", s.substituted},
              {"unresolved", s.unresolved},
              {"dropped_per_node", s.dropped / n},
              {"substituted_per_node", s.substituted / n},
              {"unresolved_per_node", s.unresolved / n},
              {"messages", s.messages},
              {"message_bytes", s.message_bytes},
              {"vectors_sent", s.vectors_sent},
              {"seconds", seconds}};
}

}  // namespace

namespace {

// One grid's run: its cells, the noise every private graph draws from, the
// attack's non-edges, and the progress lines. Run fills the cells run by
// run, feature budget by feature budget, graph row by graph row; Json
// reports them.
class EdgesGrid {
 public:
  EdgesGrid(const Dataset& d, const EdgesOptions& o, std::ostream* progress,
            EdgeNoise noise, std::vector<Edge> non_edges)
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
        LinkTellerSources(n_, o.linkteller_sources, o.seed);
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

  json Json(double seconds) const;

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

  Cell& cell(size_t m, size_t r, size_t x, size_t y) {
    return cells_[((m * rows_.size() + r) * nx_ + x) * ny_ + y];
  }
  const Cell& cell(size_t m, size_t r, size_t x, size_t y) const {
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
                          const Graph& graph, const PrivateGraph& pg,
                          const std::string& label);
  json CellJson(size_t mi, size_t ri, size_t xi, size_t yi) const;
  json ParamsJson() const;
  json AttacksJson() const;

  const Dataset& d_;
  const EdgesOptions& o_;
  std::ostream* progress_;
  const size_t n_;
  const std::vector<GridRow> rows_;
  const size_t nx_, ny_, nm_;
  std::vector<Cell> cells_;
  EdgeNoise noise_;
  // The attack's non-edges: public randomness, the same for every cell.
  const std::vector<Edge> non_edges_;
  // The mlp row's graph: the n nodes, no edge.
  Graph no_edges_;
  // LinkTeller's sources (LinkTellerSources).
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
  ASSIGN_OR_RETURN(f.features, MakeExchangeFeatures(base, d_));
  // Secure noise cannot be replayed by the pipeline: hand it the estimates
  // of the very reports the neighbours exchange.
  f.hand_over = o_.secure && base.mechanism != "none";
  if (substitution_ || f.hand_over) {
    const auto t = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(f.own, NodeFeatureReports(
                                d_, base, *f.features, o_.seed, run,
                                feature_source_.get(),
                                f.hand_over ? &f.estimates : nullptr));
    if (progress_ != nullptr) {
      *progress_ << absl::StrFormat(
          "[run %d/%d] eps_x=%s: %zu feature reports (%.2f s)\n", run + 1,
          o_.runs, Budget(f.eps_x), f.own.size(), SecondsSince(t));
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
  PrivateGraph pg;
  const Graph* graph =
      row.graph == EdgeGraph::kMlp ? &no_edges_ : &d_.graph;
  std::string label(EdgeGraphName(row.graph));
  if (row.graph != EdgeGraph::kTrue && row.graph != EdgeGraph::kMlp) {
    absl::StrAppend(&label, " eps_e=", Budget(*row.eps_e));
    noise_.Reset(o_.seed, run);
    ASSIGN_OR_RETURN(pg, BuildPrivateGraph(row.graph, *row.eps_e, d_.graph,
                                           o_, f.features, f.own, noise_));
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
          run + 1, o_.runs, Budget(f.eps_x), label, pg.graph.num_edges(),
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
                     SimilarityAttackAuc(d_.graph, *r.node_outputs,
                                         non_edges_));
  }
  out.seconds = SecondsSince(t);
  if (o_.linkteller_attack) {
    const auto t_lt = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(out.linkteller_auc,
                     LinkTellerAttackAuc(d_.graph, non_edges_, graph, c, r,
                                         &linkteller_sources_, o_.threads));
    out.linkteller_seconds = SecondsSince(t_lt);
  }
  return out;
}

absl::Status EdgesGrid::TrainCells(int run, size_t ri, const FeaturePass& f,
                                   const Graph& graph, const PrivateGraph& pg,
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
      Cell& cl = cell(mi, ri, f.xi, yi);
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
        json s = StatsJson(*pg.stats, n_, pg.seconds);
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
            done_, total_, ModelName(model), label, Budget(f.eps_x),
            Budget(eps_y), cr.accuracy, attacks, cr.seconds);
      }
    }
  }
  return absl::OkStatus();
}

json EdgesGrid::CellJson(size_t mi, size_t ri, size_t xi, size_t yi) const {
  const GridRow& row = rows_[ri];
  const Cell& cl = cell(mi, ri, xi, yi);
  json j = {{"model", ModelName(o_.models[mi])},
            {"graph", EdgeGraphName(row.graph)},
            {"edge_epsilon", row.eps_e ? json(*row.eps_e) : json(nullptr)},
            {"feature_epsilon", BudgetJson(o_.feature_epsilons[xi])},
            {"label_epsilon", BudgetJson(o_.label_epsilons[yi])},
            {"skipped", row.skipped ? json(*row.skipped) : json(nullptr)}};
  if (row.skipped) {
    j["expected_edges"] = ExpectedRrEdges(n_, *row.eps_e);
    return j;
  }
  j["accuracy"] = SummaryJson(cl.accuracy);
  j["attack_auc"] =
      o_.similarity_attack ? SummaryJson(cl.attack_auc) : json(nullptr);
  j["linkteller_auc"] =
      o_.linkteller_attack ? SummaryJson(cl.linkteller_auc) : json(nullptr);
  j["linkteller_seconds"] = o_.linkteller_attack
                                ? SummaryJson(cl.linkteller_seconds)
                                : json(nullptr);
  j["graph_edges"] = SummaryJson(cl.graph_edges);
  j["graph_homophily"] = SummaryJson(cl.graph_homophily);
  j["true_edges_kept"] = SummaryJson(cl.true_edges_kept);
  j["graph_seconds"] = SummaryJson(cl.graph_seconds);
  j["seconds"] = SummaryJson(cl.seconds);
  j["substitution"] = json(nullptr);
  if (!cl.substitution_runs.empty()) {
    json s;
    for (const char* key :
         {"dropped", "substituted", "unresolved", "dropped_per_node",
          "substituted_per_node", "unresolved_per_node", "messages",
          "message_bytes", "vectors_sent", "seconds"}) {
      double sum = 0;
      for (const json& r : cl.substitution_runs) sum += r[key].get<double>();
      s[key] = sum / cl.substitution_runs.size();
    }
    s["per_run"] = cl.substitution_runs;
    j["substitution"] = s;
  }
  j["blink"] = json(nullptr);
  if (!cl.blink_runs.empty()) {
    json b;
    for (const char* key :
         {"iterations", "max_degree_residual", "clipped_low", "clipped_high",
          "reported_pairs", "both_reported_pairs", "expected_edges",
          "target_edges", "graph_reported_edges"}) {
      double sum = 0;
      for (const json& r : cl.blink_runs) sum += r[key].get<double>();
      b[key] = sum / cl.blink_runs.size();
    }
    b["per_run"] = cl.blink_runs;
    j["blink"] = b;
  }
  return j;
}

json EdgesGrid::AttacksJson() const {
  json out = json::array();
  if (o_.similarity_attack) out.push_back("similarity");
  if (o_.linkteller_attack) out.push_back("linkteller");
  return out;
}

json EdgesGrid::ParamsJson() const {
  const EdgesOptions& o = o_;
  json params = {
      {"edge_epsilons", o.edge_epsilons},
      {"feature_epsilons", json::array()},
      {"label_epsilons", json::array()},
      {"models", json::array()},
      {"graphs", json::array()},
      {"similarity", edges::SimilarityName(o.similarity)},
      {"top_k", o.top_k},
      {"max_dummies", o.max_dummies},
      {"dummy_mean", o.dummy_mean},
      {"dummy_std", o.dummy_std},
      {"max_rr_edges", o.max_rr_edges},
      {"blink_delta", o.blink_delta},
      {"blink_variant", edges::kBlinkVariantNames.Name(o.blink_variant)},
      {"blink_iterations", o.blink_iterations},
      {"threads", o.threads},
      {"attacks", AttacksJson()},
      {"linkteller",
       {{"delta", training::kLinkTellerDelta},
        {"query",
         "x_u -> (1 + delta) x_u in the curator's estimated features, the "
         "model answering over its own graph after its KProp steps"},
        {"score",
         "I(u -> v) = ||change of v's posteriors|| / delta"},
        {"sources", o.linkteller_sources},
        {"sources_drawn",
         static_cast<size_t>(std::count(linkteller_sources_.begin(),
                                        linkteller_sources_.end(), true))},
        {"items",
         "each direction (source s, other end t) of an evaluated pair with s "
         "among the sources: I(s -> t)"}}},
      {"rr_symmetrisation", edges::SymmetrisationName(edges::Symmetrisation::kLowerId)},
      {"substitution_symmetrisation",
       edges::SymmetrisationName(edges::Symmetrisation::kUnion)},
      {"pipeline", pipeline::ConfigToJson(CellConfig(
                       o, d_.meta, 1.0, 1.0, NodeModelKind::kGcn))}};
  for (double e : o.feature_epsilons) params["feature_epsilons"].push_back(BudgetJson(e));
  for (double e : o.label_epsilons) params["label_epsilons"].push_back(BudgetJson(e));
  for (NodeModelKind m : o.models) params["models"].push_back(ModelName(m));
  for (EdgeGraph g : o.graphs) params["graphs"].push_back(EdgeGraphName(g));
  return params;
}

json EdgesGrid::Json(double seconds) const {
  json out_cells = json::array();
  for (size_t mi = 0; mi < nm_; ++mi) {
    for (size_t ri = 0; ri < rows_.size(); ++ri) {
      for (size_t xi = 0; xi < nx_; ++xi) {
        for (size_t yi = 0; yi < ny_; ++yi) {
          out_cells.push_back(CellJson(mi, ri, xi, yi));
        }
      }
    }
  }
  return json{{"dataset", d_.meta.name},
              {"nodes", n_},
              {"edges", d_.graph.num_edges()},
              {"seed", o_.seed},
              {"runs", o_.runs},
              {"noise_source", noise_source_},
              {"attack",
               {{"score", "cosine similarity of the two nodes' class posteriors"},
                {"positives", d_.graph.num_edges() - d_.graph.num_self_loops()},
                {"negatives", non_edges_.size()}}},
              {"attacks", AttacksJson()},
              {"parameters", ParamsJson()},
              {"cells", out_cells},
              {"seconds", seconds}};
}

}  // namespace

absl::StatusOr<json> RunEdgesGrid(const Dataset& d, const EdgesOptions& o,
                                  std::ostream* progress) {
  const auto start = std::chrono::steady_clock::now();
  const size_t n = d.graph.num_nodes();
  ASSIGN_OR_RETURN(EdgeNoise noise, EdgeNoise::Create(n, o.secure));
  std::vector<Edge> non_edges =
      SampleNonEdges(d.graph, d.graph.num_edges(), Mix(o.seed ^ kAttackTag));
  if (non_edges.empty() || d.graph.num_edges() == 0) {
    return absl::FailedPreconditionError(
        "the attack needs a graph with at least one edge and one non-edge");
  }
  EdgesGrid grid(d, o, progress, std::move(noise), std::move(non_edges));
  RETURN_IF_ERROR(grid.Run());
  return grid.Json(SecondsSince(start));
}

namespace {

// A table cell: `accuracy±std` and the mean AUC of each attack run, in
// percent.
std::string CellText(const json& c) {
  std::string out = absl::StrFormat(
      "%.1f±%.1f", 100 * c["accuracy"]["mean"].get<double>(),
      100 * c["accuracy"]["std"].get<double>());
  for (const char* key : {"attack_auc", "linkteller_auc"}) {
    if (c.contains(key) && !c[key].is_null()) {
      absl::StrAppendFormat(&out, " / %.1f",
                            100 * c[key]["mean"].get<double>());
    }
  }
  return out;
}

}  // namespace

std::string EdgesTables(const json& grid) {
  std::string out;
  const json& p = grid["parameters"];
  const auto budget = BudgetText;
  std::vector<std::string> footnotes;
  // A grid saved before --attacks ran the similarity attack alone.
  bool similarity = !grid.contains("attacks"), linkteller = false;
  for (const json& a : grid.value("attacks", json::array())) {
    similarity |= a == "similarity";
    linkteller |= a == "linkteller";
  }
  std::string attacks_title;
  if (similarity) attacks_title += " / similarity attack AUC %";
  if (linkteller) attacks_title += " / LinkTeller attack AUC %";
  for (const json& model : p["models"]) {
    const std::string name = model.get<std::string>();
    // Rows in order of appearance; columns (eps_x, eps_y).
    std::vector<std::pair<std::string, std::string>> row_keys;
    std::vector<std::vector<std::string>> row_cells;
    std::vector<std::pair<double, int>> row_graph_s, row_run_s, row_lt_s;
    std::vector<std::string> columns;
    for (const json& x : p["feature_epsilons"]) {
      for (const json& y : p["label_epsilons"]) {
        columns.push_back(absl::StrCat("x=", budget(x), " y=", budget(y)));
      }
    }
    for (const json& c : grid["cells"]) {
      if (c["model"] != name) continue;
      std::pair<std::string, std::string> key{
          c["graph"].get<std::string>(),
          c["edge_epsilon"].is_null() ? "-" : budget(c["edge_epsilon"])};
      if (row_keys.empty() || row_keys.back() != key) {
        row_keys.push_back(key);
        row_cells.emplace_back();
        row_graph_s.emplace_back(0.0, 0);
        row_run_s.emplace_back(0.0, 0);
        row_lt_s.emplace_back(0.0, 0);
      }
      if (!c["skipped"].is_null()) {
        row_cells.back().push_back("skipped");
        const std::string note = absl::StrCat(
            key.first, " eps_e=", key.second, ": skipped: ",
            c["skipped"].get<std::string>());
        if (std::find(footnotes.begin(), footnotes.end(), note) ==
            footnotes.end()) {
          footnotes.push_back(note);
        }
        continue;
      }
      row_cells.back().push_back(CellText(c));
      row_graph_s.back().first += c["graph_seconds"]["mean"].get<double>();
      ++row_graph_s.back().second;
      row_run_s.back().first += c["seconds"]["mean"].get<double>();
      ++row_run_s.back().second;
      if (linkteller) {
        row_lt_s.back().first += c["linkteller_seconds"]["mean"].get<double>();
        ++row_lt_s.back().second;
      }
    }
    std::vector<size_t> width(columns.size() + 5, 0);
    std::vector<std::string> header = {"graph", "eps_e"};
    header.insert(header.end(), columns.begin(), columns.end());
    header.push_back("graph s");
    header.push_back("run s");
    if (linkteller) header.push_back("LT s");
    std::vector<std::vector<std::string>> table;
    table.push_back(header);
    for (size_t r = 0; r < row_keys.size(); ++r) {
      std::vector<std::string> line = {row_keys[r].first, row_keys[r].second};
      line.insert(line.end(), row_cells[r].begin(), row_cells[r].end());
      auto mean = [](const std::pair<double, int>& s) {
        return s.second == 0 ? std::string("-")
                             : absl::StrFormat("%.2f", s.first / s.second);
      };
      const bool built =
          row_keys[r].first != "true" && row_keys[r].first != "mlp";
      line.push_back(built ? mean(row_graph_s[r]) : "-");
      line.push_back(mean(row_run_s[r]));
      if (linkteller) line.push_back(mean(row_lt_s[r]));
      table.push_back(line);
    }
    for (const auto& line : table) {
      for (size_t i = 0; i < line.size() && i < width.size(); ++i) {
        width[i] = std::max(width[i], DisplayWidth(line[i]));
      }
    }
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%s on %s: test accuracy %% (mean±std of %d runs)%s (means)\n",
            name == "gcn" ? "GCN" : "GraphSAGE",
            grid["dataset"].get<std::string>(), grid["runs"].get<int>(),
            attacks_title));
    for (size_t li = 0; li < table.size(); ++li) {
      std::string text = "|";
      for (size_t i = 0; i < table[li].size(); ++i) {
        absl::StrAppend(&text, " ", Pad(table[li][i], width[i]), " |");
      }
      absl::StrAppend(&out, text, "\n");
      if (li == 0) {
        std::string rule = "|";
        for (size_t i = 0; i < table[li].size(); ++i) {
          absl::StrAppend(&rule, std::string(width[i] + 2, '-'), "|");
        }
        absl::StrAppend(&out, rule, "\n");
      }
    }
    absl::StrAppend(&out, "\n");
  }
  for (const std::string& f : footnotes) absl::StrAppend(&out, f, "\n");
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "x = eps_x (Multi-bit features), y = eps_y (label RR), inf = off; "
          "graph s: seconds to build the private graph; run s: seconds per "
          "pipeline run and similarity attack%s. mlp: no graph (an MLP, the "
          "same in every model's table). Noise: %s. Total %.0f s.\n",
          linkteller ? "; LT s: seconds per LinkTeller attack" : "",
          grid["noise_source"].get<std::string>(),
          grid["seconds"].get<double>()));
  return out;
}

std::string EdgesHelp() {
  return R"(ldpgraph edges: private edges (the edge LDP thesis, "Structural Differential Privacy in Graph Neural Networks"), its grid reproduced, with two link-inference attacks

Usage: ldpgraph edges --dataset DIR [flags]

For each run, feature budget eps_x and graph, the curator learns LPGNN's
pipeline (Multi-bit features on [0, 1] at eps_x, K_x KProp steps, labels of
training and validation nodes through randomized response at eps_y with K_y
KProp steps, a 2-layer GCN or GraphSAGE, hidden 16, SELU, dropout 0.5, lr
0.01, weight decay 1e-3, 50/25/25 split) on a graph released under edge LDP,
and an adversary attacks the released model.

Graphs (--graphs, default ns1,ns2,rr,true; also blink and mlp):
  ns1    degree-preserving neighbour substitution, approach 1 (thesis
         Algorithm 2): each node drops each neighbour with probability
         q = 1/(1 + e^eps_e) and replaces it by the 2-hop candidate (relayed
         by its neighbours among dummies) whose privatized features are most
         similar; the curator takes the union of the nodes' lists
  ns2    the same, approach 2 (Algorithm 3): candidates come from neighbours'
         answers to similarity queries
  rr     randomized response on the neighbour bit vector (Qin et al.): every
         bit flipped with probability q; the curator keeps the lower-id
         endpoint's report of each pair. Dense: about n(n-1)/2 * q edges
  blink  Blink (Zhu et al., CCS 2023) at total budget eps_e: each node
         reports its bit vector by randomized response at
         (1 - delta) eps_e and its degree plus Laplace noise at delta eps_e;
         the curator fits a beta-model prior to the degrees, takes each
         pair's posterior from both endpoints' bits and releases the pairs of
         posterior > 1/2 (hard) or the K most likely pairs, K the expected
         edge count (topk; unweighted)
  true   the true graph (no edge privacy; does not depend on eps_e, run once
         per eps_x, eps_y and model): the reference
  mlp    no graph at all: a 2-layer MLP (hidden 16, SELU, dropout 0.5) on
         the estimated features and labels, K_x = K_y = 0. Run once per
         eps_x and eps_y (not per eps_e nor per model; the same numbers in
         every model's table): what the features alone reveal
The nodes exchange the same Multi-bit report the curator trains on (one
report per node, as in a deployment); at eps_x = inf, the raw features.

Attacks (--attacks LIST, default similarity,linkteller): each scores the
same pairs, every true edge against as many uniformly sampled true
non-edges (the same sample for every cell, drawn from --seed); the AUC is
the ROC-AUC of the edges' scores against the non-edges'. 0.5: nothing
revealed about the edges.
  similarity  every node's class posteriors are released; a pair (u, v)
              scores the cosine similarity of u's and v's posteriors
  linkteller  LinkTeller's influence attack (Wu, Yang, Pan and Yuan, IEEE
              S&P 2022): the adversary queries the released model, which
              answers over the graph it was trained on (the private graph),
              with input features of its choice. The input it perturbs is
              the curator's estimated feature matrix, the one the model
              trains on, before the model's K_x KProp steps: it scales row
              u by (1 + delta), delta = 1e-4, and reads how far v's
              posteriors move, I(u -> v) = ||change|| / delta. The adversary
              queries a public sample of sources (--linkteller-sources);
              each direction (s, t) of an evaluated pair whose source s is
              sampled is one scored item I(s -> t). Computed exactly (in
              double) over each source's receptive field (K_x + 2 hops; the
              rest is exactly 0), never a full forward pass per source: its
              cost grows with K_x and the private graph's density. On an
              MLP no node influences another: its AUC is exactly 0.5
  --linkteller-sources N   LinkTeller's sources: N nodes drawn uniformly
                           once from --seed, the same for every cell
                           (default 100, about 800 scored edge directions
                           on cora; 0: every node). Each source costs up
                           to 0.1 s on a dense RR graph with K_x = 16

Budgets:
  --edge-epsilons LIST     eps_e for ns1, ns2, rr (default 0.1,1,2,8; > 0)
  --feature-epsilons LIST  eps_x, Multi-bit (default 1,2,3,inf; inf: raw)
  --label-epsilons LIST    eps_y, label RR (default 1,3,inf; inf: clean)
Substitution (public configuration, never derived from the data):
  --similarity S           cosine (default) or l2: how candidates are ranked
  --top-k K                candidates tried per dropped neighbour (default 10)
  --max-dummies F          ns1: the most dummies per relay (default 5)
  --dummy-mean M --dummy-std S   ns1: dummies are raw vectors drawn per
                           dimension from N(M, S^2) clipped to [0, 1], then
                           encoded like a real report (default 0.5, 0.5)
Blink:
  --blink-delta D          the degree's share of eps_e, in (0, 1) (default
                           0.1)
  --blink-variant V        hard (default: the pairs of posterior > 1/2;
                           at a small eps_e few pairs pass, and the model
                           learns from the features, as it should), topk,
                           or hybrid (topk's pairs weighted by their
                           posteriors; GCN and GraphSAGE then aggregate
                           with the weights). Blink's own
                           measurements train a plain GCN: add
                           --feature-steps 0 (16 KProp steps over an
                           estimated graph cost 1-15 points on cora)
  --blink-iterations N     at most N iterations for the prior's fixed point
                           (default 200; Anderson-accelerated, it stops once
                           no beta moves by 1e-9: 10-12 iterations on cora;
                           the cells report them and the residual)
  --max-rr-edges N         skip an rr graph whose expected edge count
                           n(n-1)/2 * q exceeds N (default 20000000); its
                           cells say "skipped: RR graph of ~N edges"; the
                           same for blink's reported pairs (q at
                           (1 - delta) eps_e)
  --threads T              threads for the substitution rounds and the
                           LinkTeller attack (default 1; results do not
                           depend on it)
Learning:
  --models LIST            gcn,sage (default both)
  --feature-steps K        K_x (default 16, the thesis's)
  --label-steps K          K_y (default: 2, or 0 for pubmed and lastfm, the
                           thesis's)
  --epochs N --patience P  training: at most N epochs (default 500), early
                           stopping on validation accuracy after P epochs
                           without improvement (default 50). The thesis
                           trains a fixed 100 epochs.
Runs and output:
  --runs R                 runs per cell (default 2); run r redraws split,
                           feature, label and edge noise and weights from
                           (--seed, r)
  --seed S                 base seed (default 1)
  --secure                 draw all privacy noise from OpenSSL. Without it the
                           noise is SEEDED: reproducible, NOT private (a
                           simulation; the tool says so)
  --format F               table (default) or json
  --save-json FILE         also write the JSON object to FILE (a long
                           grid's full record beside its table)
  --plot FILE              also draw the grid as SVG charts (default: none),
                           after the table or JSON. For each (model, eps_x,
                           eps_y): FILE, test accuracy against eps_e (log
                           axis), one line per private graph, error bars the
                           std over runs, true and mlp as dashed reference
                           lines; for each attack run,
                             FILE-attack-similarity (or -linkteller): the
                             attack's AUC against eps_e, likewise;
                             FILE-tradeoff-similarity (or -linkteller):
                             accuracy against the attack's AUC, each point
                             labelled with its eps_e.
                           With several (model, eps_x, eps_y), each name gets
                           MODEL-xEPS_X-yEPS_Y before the extension: out.svg
                           gives out-gcn-x1-yinf.svg,
                           out-gcn-x1-yinf-attack-similarity.svg, ... Needs
                           a graph with eps_e (ns1, ns2, rr or blink) and
                           FILE's directory; a chart that cannot be written
                           is an error (exit 1) after the output
  --help                   this text

Table: one per model; rows (graph, eps_e), columns (eps_x, eps_y); each
cell `accuracy±std / similarity AUC / LinkTeller AUC` in percent (the
attacks asked for), then the seconds to build the private graph, per
pipeline run (with the similarity attack) and per LinkTeller attack.
Progress goes to stderr.

JSON: dataset, nodes, edges, seed, runs, noise_source, attack (the
similarity score, positives, negatives), attacks (those run), parameters
(every setting, the pipeline's included; linkteller: delta, query, score,
sources), seconds, and cells: one per (model, graph, eps_e, eps_x, eps_y)
with model, graph, edge_epsilon (null for true and mlp), feature_epsilon
and label_epsilon (null for inf), skipped (null, or why; then
expected_edges), accuracy, attack_auc (the similarity attack) and
linkteller_auc ({mean, std, values}; null when not run), graph_edges,
graph_seconds, seconds, linkteller_seconds (likewise), and substitution
(null but for ns1 and ns2: mean over runs of dropped, substituted,
unresolved, the same per node, messages, message_bytes, vectors_sent,
seconds; and per_run), and blink (null but for blink: mean over runs of
iterations, max_degree_residual (of the beta model's fit), clipped_low,
clipped_high (noisy degrees clipped to 1 and to n - 2), reported_pairs
(pairs some report lists), both_reported_pairs, expected_edges (sum of the
posteriors), target_edges (K for topk), graph_reported_edges (edges among
the reported pairs); and per_run, which also has converged, exact_sums and
threshold).

Examples:
  ldpgraph edges --dataset ../shared/datasets/cora
  ldpgraph edges --dataset ../shared/datasets/cora --graphs blink,rr,mlp,true \
      --edge-epsilons 1,4,8 --models gcn --feature-steps 0 --runs 10
  ldpgraph edges --dataset ../shared/datasets/pubmed --graphs ns1,ns2,true \
      --models gcn --threads 2 --format json
)";
}

int RunEdges(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
  if (WantsHelp(args)) {
    out << EdgesHelp();
    return kExitOk;
  }
  auto parsed = ParseEdgesOptions(args);
  if (!parsed.ok()) return UsageError("edges", parsed.status(), err);
  const EdgesOptions& o = *parsed;
  auto dataset = LoadDataset(o.dataset);
  if (!dataset.ok()) {
    err << "ldpgraph edges: " << dataset.status().message() << "\n";
    return kExitRuntimeError;
  }
  if (!o.secure) err << kSeededWarning << "\n";
  auto grid = RunEdgesGrid(*dataset, o, &err);
  if (!grid.ok()) {
    err << "ldpgraph edges: " << grid.status().message() << "\n";
    return grid.status().code() == absl::StatusCode::kInvalidArgument ||
                   grid.status().code() ==
                       absl::StatusCode::kFailedPrecondition
               ? kExitUsageError
               : kExitRuntimeError;
  }
  if (!o.save_json.empty()) {
    std::ofstream f(o.save_json);
    f << grid->dump() << "\n";
    f.close();
    if (!f) {
      err << "ldpgraph edges: cannot write " << o.save_json << "\n";
      return kExitRuntimeError;
    }
  }
  if (o.json) {
    out << grid->dump() << "\n";
  } else {
    out << EdgesTables(*grid);
  }
  if (!o.plot.empty()) {
    out.flush();
    return WritePlot("edges", o.plot, EdgesCharts(*grid), err);
  }
  return kExitOk;
}

}  // namespace ldpgraph::tool

#include "server/ldpgraph/edges_options.h"

#include <algorithm>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "server/ldpgraph/charts.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

using training::NodeModelKind;

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

// --edge-epsilons, --feature-epsilons, --label-epsilons, --models and
// --graphs into *out: the grid's axes.
absl::Status ParseEdgesGridFlags(const CliArgs& a, EdgesOptions* out) {
  EdgesOptions& o = *out;
  // Budgets > 0, no repeats; eps_e finite.
  constexpr BudgetListRules kFinite = {
      .allow_inf = false,
      .unique = true,
      .note = " (the true graph, eps_e = inf, is --graphs true)"};
  constexpr BudgetListRules kOrInf = {
      .allow_inf = true, .unique = true, .note = ""};
  if (auto e = a.Get("edge-epsilons")) {
    ASSIGN_OR_RETURN(o.edge_epsilons,
                     ParseBudgetList("edge-epsilons", *e, kFinite));
  }
  if (auto e = a.Get("feature-epsilons")) {
    ASSIGN_OR_RETURN(o.feature_epsilons,
                     ParseBudgetList("feature-epsilons", *e, kOrInf));
  }
  if (auto e = a.Get("label-epsilons")) {
    ASSIGN_OR_RETURN(o.label_epsilons,
                     ParseBudgetList("label-epsilons", *e, kOrInf));
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
  return absl::OkStatus();
}

// --similarity, --top-k, --max-dummies, --dummy-mean and --dummy-std into
// *out (checked together later, by ValidateEdgesSubstitution).
absl::Status ParseEdgesSubstitutionFlags(const CliArgs& a, EdgesOptions* out) {
  EdgesOptions& o = *out;
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
  return absl::OkStatus();
}

// --feature-steps, --label-steps, --epochs and --patience into *out.
absl::Status ParseEdgesLearningFlags(const CliArgs& a, EdgesOptions* out) {
  EdgesOptions& o = *out;
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
  return absl::OkStatus();
}

// --max-rr-edges, --threads, --secure, --format, --save-json and --plot
// into *out (--plot after --graphs: it needs a graph with eps_e).
absl::Status ParseEdgesOutputFlags(const CliArgs& a, EdgesOptions* out) {
  EdgesOptions& o = *out;
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
  return absl::OkStatus();
}

// The substitution parameters, checked once by the library's validator.
absl::Status ValidateEdgesSubstitution(const EdgesOptions& o) {
  edges::SubstitutionParams p;
  p.similarity = o.similarity;
  p.top_k = o.top_k;
  p.max_dummies = o.max_dummies;
  p.dummy_mean = o.dummy_mean;
  p.dummy_std = o.dummy_std;
  return p.Validate();
}

}  // namespace

absl::string_view EdgesModelName(NodeModelKind k) {
  switch (k) {
    case NodeModelKind::kMlp: return "mlp";
    case NodeModelKind::kGcn: return "gcn";
    case NodeModelKind::kSage: return "sage";
  }
  return "?";
}

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
  RETURN_IF_ERROR(ParseEdgesGridFlags(a, &o));
  ASSIGN_OR_RETURN(auto runs, a.GetInt("runs"));
  if (runs) { ASSIGN_OR_RETURN(o.runs, FlagToInt(*runs, "runs", 1)); }
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  if (seed) o.seed = *seed;
  RETURN_IF_ERROR(ParseEdgesSubstitutionFlags(a, &o));
  RETURN_IF_ERROR(ParseEdgesLearningFlags(a, &o));
  RETURN_IF_ERROR(ParseBlinkAndAttackFlags(a, &o));
  RETURN_IF_ERROR(ParseEdgesOutputFlags(a, &o));
  RETURN_IF_ERROR(ValidateEdgesSubstitution(o));
  return o;
}

namespace {

// The --help text of `ldpgraph edges`.
constexpr char kEdgesHelp[] = R"(ldpgraph edges: private edges (the edge LDP thesis, "Structural Differential Privacy in Graph Neural Networks"), its grid reproduced, with two link-inference attacks

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

}  // namespace

std::string EdgesHelp() { return kEdgesHelp; }

}  // namespace ldpgraph::tool

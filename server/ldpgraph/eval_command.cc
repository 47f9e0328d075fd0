#include "server/ldpgraph/eval_command.h"

#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/status_macros.h"
#include "server/ldpgraph/config_flags.h"
#include "server/ldpgraph/eval_baselines.h"
#include "server/ldpgraph/eval_edges.h"
#include "server/ldpgraph/tool_util.h"
#include "server/training/metrics.h"

namespace ldpgraph::tool {
namespace {

using pipeline::Method;
using pipeline::PipelineConfig;
using pipeline::Task;

struct EvalOptions {
  std::string dataset;
  PipelineConfig config;
  int runs = 5;
  uint64_t seed = 1;
  bool json = false;
  EvalEdgesOptions edges;  // --edges (eval_edges.h)
  bool baselines = false;  // --baselines (eval_baselines.h)
};

// --runs, --seed and --format.
absl::Status ParseRunFlags(const CliArgs& a, EvalOptions* options) {
  EvalOptions& o = *options;
  ASSIGN_OR_RETURN(auto runs, a.GetInt("runs"));
  if (runs) { ASSIGN_OR_RETURN(o.runs, FlagToInt(*runs, "runs", 1)); }
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  if (seed) o.seed = *seed;
  if (auto f = a.Get("format")) {
    ASSIGN_OR_RETURN(int i, ParseChoice("format", *f, {"table", "json"}));
    o.json = i == 1;
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalOptions> ParseEvalOptions(
    const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(
          args,
          {"dataset", "task", "method", "mechanism", "epsilon", "k", "m",
           "label-epsilon", "label-steps", "feature-steps", "lpgnn-settings",
           "scale", "alpha", "standardize-clip", "auto-ppr-max-nodes",
           "z-storage", "scratch-dir",
           "propagation", "label-denoising", "kprop-norm", "tune-feature-steps",
           "tune-label-steps", "tune-nfr", "aggregator", "nfr", "inputs", "positional-features",
           "tune-lr", "tune-weight-decay", "tune-dropout",
           "r", "rmax", "model", "hidden", "layers", "dropout", "lr",
           "weight-decay", "epochs", "patience", "loss", "link-batch", "node-batch",
           "batch-lr", "batch-epochs", "batch-patience", "batch-decays",
           "epoch-rows", "validation-rows", "split",
           "runs",
           "seed", "format", "activation", "init", "input-dropout", "dim",
           "negatives", "batch", "release-lr", "release-epochs",
           "release-steps", "release-optimizer", "clip", "noise-multiplier", "proximity", "noised-rows", "delta", "sweeps",
           "sensitivity", "lambda", "mu", "threads", "malicious",
           "attack-class", "attack-dims", "attack", "defence",
           "screen-alpha", "edges", "edge-epsilon", "blink-delta",
           "blink-variant", "attack-edges"},
          {"secure", "label-self-loops", "feature-self-loops", "standardize",
           "no-standardize", "baselines", "smooth", "help"}));
  EvalOptions o;
  auto dataset = a.Get("dataset");
  if (!dataset) return absl::InvalidArgumentError("--dataset is required");
  o.dataset = *dataset;
  ASSIGN_OR_RETURN(o.config, ParsePipelineFlags(a));
  RETURN_IF_ERROR(ParseRunFlags(a, &o));
  ASSIGN_OR_RETURN(o.edges, ParseEvalEdgesFlags(a, o.config));
  o.baselines = a.Flag("baselines");
  if (o.baselines && o.config.task != v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError(
        "--baselines applies to the node task (--task node)");
  }
  return o;
}

}  // namespace

absl::StatusOr<nlohmann::json> EvaluateRuns(const Dataset& d,
                                            const PipelineConfig& c, int runs,
                                            uint64_t seed,
                                            std::ostream* progress,
                                            const EvalEdgesOptions& edges,
                                            bool baselines) {
  using nlohmann::json;
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> values, target_rates;
  const std::vector<EvalBaseline> baseline_list =
      baselines ? EvalBaselinesFor(c, edges) : std::vector<EvalBaseline>();
  std::vector<std::vector<double>> baseline_values(baseline_list.size());
  double baseline_seconds = 0;
  json per_run = json::array();
  std::string noise;
  for (int run = 0; run < runs; ++run) {
    ASSIGN_OR_RETURN(EvalRunGraph run_edges,
                     BuildEvalRunGraph(d, c, edges, seed, run));
    ASSIGN_OR_RETURN(pipeline::RunResult r,
                     pipeline::RunPipeline(d, c, seed, run,
                                           run_edges.overrides()));
    values.push_back(r.metric);
    if (r.target_rate) target_rates.push_back(*r.target_rate);
    noise = r.noise_source;
    json jr = pipeline::RunResultToJson(r);
    jr["run"] = run;
    jr["metric"] = r.metric;
    run_edges.AddTo(&jr);
    if (progress != nullptr) {
      *progress << absl::StrFormat(
          "  run %d/%d: %s %.4f (%d epochs, best %d, %.1f s)\n", run + 1, runs,
          c.task == v1::PIPELINE_TASK_NODE ? "accuracy" : "roc_auc", r.metric,
          r.training.epochs, r.training.best_epoch,
          r.perturb_seconds + r.propagate_seconds + r.train_seconds);
    }
    if (!baseline_list.empty()) {
      const auto t_base = std::chrono::steady_clock::now();
      std::string line;
      for (size_t b = 0; b < baseline_list.size(); ++b) {
        ASSIGN_OR_RETURN(pipeline::RunResult rb,
                         RunEvalBaseline(d, c, baseline_list[b], run_edges,
                                         seed, run));
        baseline_values[b].push_back(rb.metric);
        jr["baselines"][baseline_list[b].key] = rb.metric;
        absl::StrAppend(&line, b == 0 ? "" : ", ", baseline_list[b].key, " ",
                        absl::StrFormat("%.4f", rb.metric));
      }
      const double spent = SecondsSince(t_base);
      baseline_seconds += spent;
      if (progress != nullptr) {
        *progress << absl::StrFormat("  run %d/%d baselines: %s (%.1f s)\n",
                                     run + 1, runs, line, spent);
      }
    }
    per_run.push_back(jr);
  }
  const training::Summary s = training::Summarize(values);
  json j;
  j["task"] = pipeline::TaskName(c.task);
  j["metric"] = c.task == v1::PIPELINE_TASK_NODE ? "accuracy" : "roc_auc";
  j["mean"] = s.mean;
  j["std"] = s.std;
  j["runs"] = runs;
  j["values"] = values;
  j["seconds"] = SecondsSince(start);
  j["dataset"] = d.meta.name;
  j["seed"] = seed;
  j["parameters"] = pipeline::ConfigToJson(c);
  AddEdgesSettings(edges, c, &j["parameters"]);
  j["noise_source"] = noise;
  j["per_run"] = per_run;
  if (!baseline_list.empty()) {
    json b = BaselinesToJson(baseline_list, baseline_values, values);
    j["baselines_summary"] = std::move(b["summary"]);
    b.erase("summary");
    j["baselines"] = std::move(b);
    j["baselines_seconds"] = baseline_seconds;
  }
  if (!target_rates.empty()) {
    const training::Summary t = training::Summarize(target_rates);
    j["target_rate"] = {{"mean", t.mean}, {"std", t.std}, {"values", target_rates}};
  }
  return j;
}

// eval --help, part by part: the usage, the pipeline and privacy flags;
constexpr char kEvalHelpPipeline[] = R"(ldpgraph eval: train and evaluate on perturbed data, R runs, mean and spread

Usage: ldpgraph eval --dataset DIR [flags]

Every node perturbs its own features (and, with --label-epsilon, its label)
as its agent would; the curator estimates, propagates, trains with early
stopping on the validation set, and scores the test set. Each run redraws the
split, the noise and the initial weights from (--seed, run).

Pipeline:
  --dataset DIR          dataset folder (meta.json, edges.txt, nodes.svm)
  --task T               node (accuracy; default) or link (ROC-AUC on held-out
                         edges against as many sampled non-edges; 85/5/10)
  --method M             privge (default: PPR push + MLP / Hadamard scorer),
                         lpgnn (KProp + GCN/GraphSAGE, node task only),
                         upgnet (UPGNET: NFR of the reports, HOA over K = 32
                         hops, GraphSAGE; Multi-bit, or --mechanism
                         piecewise with k = floor(eps / 2.5); node task
                         only), or a
                         structure embedding released under central DP:
                         se-privgemb (DP skip-gram) or dpne (objective-
                         perturbed factorisation); no features are used,
                         the classifier is logistic regression on a 10/10/80
                         split, the link scorer learns on the training edges
Privacy:
  --mechanism M          hds (privge default), multibit (lpgnn default),
                         piecewise, laplace, onebit, square-wave, or none
                         (raw features: the non-private baseline). lpgnn
                         learns from unbiased estimates: it divides HDS's
                         and the square wave's reports (C x, PrivGE's, used
                         as they are) by C
  --epsilon E            feature budget per node (default 1)
  --k K / --m M          sampled dimensions (mechanism default when omitted)
  --label-epsilon E      node task: labels of training and validation nodes
                         through k-ary randomized response; the curator
                         denoises them by KProp and trains with forward
                         correction (LPGNN's Drop). Omit for clean labels.
  --label-steps K        K_y: KProp steps over the noisy labels (lpgnn
                         default: LPGNN's published value for the dataset
                         and budgets, e.g. 8 on cora at eps_x = eps_y = 1)
  --label-denoising D    published (default): LPGNN as its authors' code
                         runs it: targets argmax softmax(A^K_y Y) with A =
                         D^-1/2 A D^-1/2, the model's beliefs through the
                         channel and K_y steps of A before the loss, the
                         capped selection rule on the raw validation
                         reports, no early stopping; vote: ldpgraph's
                         earlier variant (KProp mean vote, forward
                         correction per node, early stopping)
  --label-self-loops     vote: include a node's own report in its label mean
  --tune-feature-steps LIST, --tune-label-steps LIST
                         lpgnn: choose K_x (and K_y) per run from these
                         comma-separated grids ("default": 2,4,8,16 and
                         0,2,4,8) by the validation accuracy against the
                         label reports alone (no clean label needed); the
                         validation reports stay out of the propagation
                         while tuning. Costs one training per pair.
  --secure               draw the privacy noise from OpenSSL (default: the
                         seeded generator: reproducible, NOT private)
)";
// the central-DP release flags;
constexpr char kEvalHelpRelease[] = R"(Central-DP release (se-privgemb, dpne; --mechanism none: non-private):
  --epsilon E            the release's budget (default 1)
  --delta D              se-privgemb's delta (default 1e-5)
  --dim D                embedding dimension (se-privgemb 128, dpne 100)
  --negatives K --batch B --release-lr LR --release-epochs N
                         se-privgemb: negatives per edge (5), edges per step
                         (16), learning rate (0.5), epoch cap (50); training
                         stops earlier when the budget is spent
  --release-optimizer O  se-privgemb: sgd (default) or adam (the published
                         code's; beta 0.9/0.999, every row of W and C,
                         untouched rows moving on their moments). Either
                         only post-processes the noised gradient: the
                         accounting is the same
  --release-steps N      se-privgemb: step cap instead of the epoch cap (the
                         published code's 500 "epochs" are 500 batches)
  --clip C --noise-multiplier S   se-privgemb: per-example clip (1), noise
                         std S*C (5)
  --proximity P          se-privgemb negatives: deepwalk (default), degree,
                         uniform (independent of the graph)
  --noised-rows R        se-privgemb: touched (the paper's) or all
  --sweeps N --lambda L --mu M --sensitivity S   dpne: ALS sweeps (10),
                         weights of ||W||^2 (10; the paper's 0.001) and
                         ||H||^2 (0.001), Delta (sqrt 2, the paper's)
)";
// propagation;
constexpr char kEvalHelpPropagation[] = R"(Propagation:
  --scale S              symmetric ([-1,1], privge default), unit ([0,1],
                         lpgnn default and with --mechanism none) or none
                         (meta.json's feature_range)
  --propagation P        privge, node task: ppr (the paper's personalised
                         PageRank), kprop (--feature-steps KProp steps,
                         default 16) or auto (default: both, and each run
                         keeps the one with the better validation accuracy;
                         PPR on a tie; KProp alone on graphs of more than
                         --auto-ppr-max-nodes). PPR cannot separate the
                         classes from the noise on large graphs whatever
                         --alpha (docs/papers.md: "Accuracy as the graph
                         grows"). The link task uses PPR
  --auto-ppr-max-nodes N the largest graph on which auto trains PPR too
                         (default 100000; PPR scored 0.29 there and 0.24
                         from 1M to 10M nodes, at chance)
  --alpha A --r R --rmax T   privge PPR (defaults 0.05, 0.5, 1e-4)
  --standardize / --no-standardize   scale each column of Z (privge) or of
                         the aggregated features (lpgnn, upgnet) to zero
                         mean, unit variance before the classifier (default
                         on for privge's node task and for upgnet, off with
                         --mechanism none)
  --standardize-clip C   privge, node task: clamp the standardised Z to
                         [-C, C] deviations (default 10; 0: no clamp). A
                         node whose propagation gathers few reports keeps
                         most of one report's noise, far out in its column;
                         clamped, those rows stop swaying the mini-batch
                         training (docs/papers.md, "Heavy-tailed Z")
  --z-storage S          privge, node task: where Z is kept for the MLP:
                         memory (an n x d matrix, or compressed rows when
                         mostly zeros), file (propagated by slices of
                         columns into a file of rows that training reads a
                         batch at a time: bounded memory, 4 n d bytes of
                         disk, the same results) or auto (default: file
                         when Z has at least 1024 columns and passes
                         256 MiB, unless predictions are propagated with
                         label reports)
  --scratch-dir DIR      where --z-storage puts its file (default $TMPDIR,
                         else /tmp); the file is unlinked as it is made
  --feature-steps K      K_x: KProp steps over the features (privge with
                         --propagation kprop or auto: default 16; lpgnn:
                         LPGNN's published value for the dataset and
                         budgets, e.g. 2 on cora at eps_x = eps_y = 1, 16
                         with clean labels). For lpgnn, a value given
                         with --feature-steps, --label-steps, --lr,
                         --weight-decay or --dropout stays; the table
                         sets the others.
  --lpgnn-settings FILE  lpgnn: rows to add to (or replace in) the settings
                         table: K_x, K_y, learning rate, weight decay and
                         dropout per dataset name and budgets, in the CSV
                         layout of server/pipeline/lpgnn_settings.csv (the
                         built-in rows: the authors' settings for cora,
                         pubmed, facebook and lastfm; a dataset without
                         rows takes cora's)
  --kprop-norm N         KProp: symmetric (D^-1/2 A D^-1/2 as LPGNN's code;
                         lpgnn's default) or mean (D^-1 A, as its paper
                         writes; privge's default)
  --feature-self-loops   include a node in its own KProp aggregation
  --aggregator A         lpgnn, upgnet: kprop (K KProp steps: the K-hop
                         scale alone; lpgnn's default) or hoa (the mean of
                         steps 1..K: every scale; upgnet's default)
  --nfr TAU              lpgnn, upgnet: shrink every estimate towards 0 by
                         TAU times the mechanism's output bound before
                         aggregating (UPGNET's NFR; multibit, onebit,
                         piecewise; upgnet's default 0.9; 0: off)
  --inputs I             lpgnn, upgnet: what the model reads: reports (the
                         estimates; default), positional (public N(0, 1)
                         columns alone: no private data), both (side by
                         side, standardised after aggregation) or auto
                         (each run trains all three and keeps the best
                         validation: three trainings)
  --positional-features N   the positional columns' width (default 512)
  --smooth               node task: after training, spread the training
                         labels the curator holds over the model's class
                         posteriors (C&S's smoothing: Z <- a S Z + (1 - a)
                         Z0, S = D^-1/2 A D^-1/2, Z0 the posteriors with
                         the training nodes' labels), a chosen per run from
                         0 (off), 0.5, 0.8, 0.9, 0.99 by validation; the
                         JSON's per-run "smooth" holds the model's own
                         accuracy. Post-processing: no privacy cost
  --tune-nfr LIST        lpgnn, upgnet: choose TAU per run from this grid
                         ("default": 0,0.1,0.3,0.5,0.7,0.9) by validation,
                         with --tune-feature-steps (upgnet's "default" K
                         grid: 0,2,4,8,16,32,64)
  --tune-lr LIST, --tune-weight-decay LIST, --tune-dropout LIST
                         lpgnn, upgnet: the model's settings chosen the same
                         way ("default": 0.01,0.001,0.0001; 0,0.0001,0.001,
                         0.01; 0.25,0.5,0.75). Every combination of every
                         grid trains once per run: the "default" grids
                         together are 7 x 6 x 3 x 4 x 3 = 1512 trainings
)";
// the model and its training;
constexpr char kEvalHelpModel[] = R"(Model:
  --model M              node: mlp (privge), gcn, sage (lpgnn default);
                         link: lr (logistic regression; default) or mlp
  --hidden H --layers L --activation relu|selu
  --dropout P            dropout between layers
  --input-dropout P      dropout on the input features
  --init I               gcn, sage: how the layers start: glorot (default;
                         Glorot-uniform weights, zero bias) or torch
                         (weights and bias U(+-1/sqrt(fan_in)), PyTorch's
                         and PyG's default, as LPGNN's code starts)
  --lr LR --weight-decay W --epochs N --patience P
  --loss L               link: pairwise (PrivGE's; default) or logistic
  --link-batch B         link: training edges per Adam step: auto (default:
                         full batch while the training pairs' Hadamard
                         features fit 2^26 floats, else 512), full, or N
                         (N edges and N non-edges, reshuffled every epoch;
                         then at most 100 epochs, patience 5). The features
                         are formed batch by batch, never all at once
  --node-batch B         node, MLP: training rows per Adam step: auto
                         (default: full batch while the training rows hold
                         at most 2^24 features, else 4096), full, or N (then
                         at most 100 epochs, patience 10)
  --batch-lr LR          Adam's learning rate with mini-batches (default
                         0.001; --lr is the full batch's)
  --batch-epochs N --batch-patience P
                         with mini-batches: the most passes over the
                         training rows or pairs, and the passes without a
                         better validation score before stopping (link:
                         100 and 5, node: 100 and 10; --epochs and
                         --patience are the full batch's)
  --epoch-rows N         node, MLP with mini-batches: the most training rows
                         an epoch steps through, a fresh shuffle each epoch
                         (default 524288 = 2^19; 0: all), so that an
                         epoch's work stops growing with the graph
  --validation-rows N    node, MLP: the validation rows scored each epoch,
                         a sample drawn once from the seed (default 262144
                         = 2^18; 0: all). The test set is scored whole
  --batch-decays N       link, with mini-batches: after a pass without a
                         better validation ROC-AUC, go back to the best
                         pass and halve the learning rate, at most N times
                         (default 4; 0: a fixed step size, as before)
  --split S              random (default; node: 50/25/25 of the labelled
                         nodes, link: 85/5/10 of the edges), drawn again
                         every run; fixed: the same random split in every
                         run (run 0's: the runs differ in noise and weights
                         only, as the LPGNN and PrivGE scripts run); or
                         planetoid (node)
)";
// the attack simulation;
constexpr char kEvalHelpAttack[] = R"(Attack simulation (node task; default: off):
  --malicious F          a fraction F in [0, 1) of the nodes is an attacker's
                         (each node on its own, drawn from --seed and its
                         id, the same nodes in every run): they send what
                         --attack says in place of honest answers (Cao, Jia
                         and Gong, USENIX Security 2021). Reports are valid;
                         the budget is spent as honest ones spend it.
                         maximal-gain and adaptive: not with laplace (no
                         maximal output)
)";
constexpr char kEvalHelpAttackTarget[] = R"(  --attack-class C       the class the attacker wants predicted (default
                         0); given alone (or with --malicious 0) it only
                         measures: target_rate, the fraction of test nodes
                         of other classes predicted C
  --attack-dims R        target dimensions: the R most indicative of C in
                         the attacker's own records (default 10)
)";
// runs, output and examples.
constexpr char kEvalHelpRuns[] = R"(Runs and output:
  --runs R               runs (default 5)
  --seed S               base seed (default 1)
  --threads N            threads for the parallel stages (propagation);
                         0 (default) = every core. Results do not depend
                         on it
  --format F             table (default) or json: one object with task,
                         metric, mean, std, runs, values, seconds, dataset,
                         parameters (every setting, defaults included) and
                         per-run figures (node task: confusion, the test
                         nodes' [true][predicted] counts; target_rate with
                         an attack class, and its summary target_rate)
  --baselines            node task: beside every run, on its split (and
                         graph), what the curator learns without the
                         private features: feature-free (N(0, 1) features
                         of the raw width, HOA, the same model and tuning:
                         no private data at all), graph-labels (label
                         propagation from the training labels alone) and
                         raw (the method on raw features); with --edges
                         also no-graph and true-graph. JSON: "baselines"
                         (each one's mean, std, values and its difference
                         from the method, paired by run) and
                         "baselines_summary"; the table says what the
                         method adds over each, or that the baseline wins.
                         Costs about one training per baseline and run
  --help                 this text

Examples:
  ldpgraph eval --dataset ../shared/datasets/cora --mechanism hds --epsilon 1
  ldpgraph eval --dataset ../shared/datasets/cora --task link --epsilon 1
  ldpgraph eval --dataset ../shared/datasets/cora --method lpgnn \
      --mechanism multibit --epsilon 1 --label-epsilon 1 --format json
  ldpgraph eval --dataset ../shared/datasets/cora --method upgnet \
      --epsilon 1 --baselines
  ldpgraph eval --dataset ../shared/datasets/cora --method dpne --epsilon 1
  ldpgraph eval --dataset ../shared/datasets/cora --method se-privgemb \
      --task link --epsilon 2 --runs 3
)";

// The table's line for --defence screen: flagged nodes and over-reported
// dimensions per run.
std::string ScreenSummary(const nlohmann::json& per_run) {
  std::vector<std::string> runs;
  for (const auto& r : per_run) {
    const auto& s = r["screen"];
    runs.push_back(s["screen"] == "applied"
                       ? absl::StrFormat("%d flagged, %d dims",
                                         s["flagged_nodes"].get<int>(),
                                         s["overreported_dims"].get<int>())
                       : std::string("not applicable"));
  }
  return absl::StrCat("report screen per run: ", absl::StrJoin(runs, "; "));
}

std::string EvalHelp() {
  return absl::StrCat(kEvalHelpPipeline, pipeline::kDefenceHelp,
                      kEvalHelpRelease, kEvalHelpPropagation, kEvalHelpModel,
                      kEvalHelpAttack, poisoning::kAttackHelp,
                      kEvalHelpAttackTarget, kEvalEdgesHelp, kEvalHelpRuns);
}

int RunEval(const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err) {
  auto parsed =
      ParseCommand("eval", args, EvalHelp, ParseEvalOptions, out, err);
  if (!parsed.ok()) return parsed.exit_code();
  EvalOptions& o = *parsed;
  auto dataset = LoadDataset(o.dataset);
  if (!dataset.ok()) {
    err << "ldpgraph eval: " << dataset.status().message() << "\n";
    return kExitRuntimeError;
  }
  pipeline::ResolveDatasetSettings(dataset->meta, &o.config);
  if (!o.config.secure_noise && o.config.mechanism != "none") {
    err << kSeededWarning << "\n";
  }
  auto result = EvaluateRuns(*dataset, o.config, o.runs, o.seed, &err,
                             o.edges, o.baselines);
  if (!result.ok()) {
    err << "ldpgraph eval: " << result.status().message() << "\n";
    return result.status().code() == absl::StatusCode::kInvalidArgument ||
                   result.status().code() ==
                       absl::StatusCode::kFailedPrecondition
               ? kExitUsageError
               : kExitRuntimeError;
  }
  const nlohmann::json& j = *result;
  if (o.json) {
    out << j.dump() << "\n";
    return kExitOk;
  }
  out << absl::StrFormat(
      "%s on %s, %s, %s: %s %.2f ± %.2f %% over %d runs (%.1f s)\n",
      pipeline::MethodName(o.config.method), dataset->meta.name,
      pipeline::TaskName(o.config.task),
      o.config.mechanism == "none"
          ? std::string(pipeline::IsReleaseMethod(o.config.method)
                            ? "non-private"
                            : "raw features")
          : absl::StrFormat("%s eps %g", o.config.mechanism,
                            o.config.epsilon),
      j["metric"].get<std::string>(), 100 * j["mean"].get<double>(),
      100 * j["std"].get<double>(), o.runs, j["seconds"].get<double>());
  if (j.contains("target_rate")) {
    out << absl::StrFormat(
        "  malicious %g, attack class %d: target rate %.2f ± %.2f %%\n",
        o.config.attack_fraction, *o.config.attack_class,
        100 * j["target_rate"]["mean"].get<double>(),
        100 * j["target_rate"]["std"].get<double>());
  }
  if (o.config.defences.screen) {
    out << ScreenSummary(j["per_run"]) << "\n";
  }
  if (o.edges.enabled()) out << EdgesSummary(o.edges, j["per_run"]) << "\n";
  if (j.contains("baselines_summary")) {
    out << absl::StrFormat("beside it, on the same splits (%.1f s):\n",
                           j["baselines_seconds"].get<double>());
    for (const auto& line : j["baselines_summary"]) {
      out << "  " << line.get<std::string>() << "\n";
    }
  }
  return kExitOk;
}

}  // namespace ldpgraph::tool

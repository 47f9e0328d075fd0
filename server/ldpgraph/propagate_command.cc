#include "server/ldpgraph/propagate_command.h"

#include <chrono>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/dataset/dataset.h"
#include "common/dataset/feature_schema.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/names.h"
#include "common/linalg/npy.h"
#include "common/status_macros.h"
#include "common/parallel.h"
#include "server/ldpgraph/tool_util.h"
#include "server/pipeline/pipeline.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::tool {
namespace {

using Clock = std::chrono::steady_clock;

enum class Method { kPush, kPower, kGcn, kKProp };

// --method's names.
constexpr auto kMethodNames = MakeNameTable<Method>(
    "method", {{Method::kPush, "push"},
               {Method::kPower, "power"},
               {Method::kGcn, "gcn"},
               {Method::kKProp, "kprop"}});

struct Options {
  std::string dataset;
  std::string out;
  FeatureScaling scaling = FeatureScaling::kSymmetric;
  std::optional<std::string> mechanism;
  double epsilon = 1.0;
  std::optional<int64_t> sampled;
  std::optional<uint64_t> seed;
  Method method = Method::kPush;
  PprOptions ppr;
  int steps = 2;
  bool self_loops = false;
  bool json = false;
};

// --dataset, --out and --scale.
absl::Status ParseInputFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  auto dataset = a.Get("dataset");
  if (!dataset) return absl::InvalidArgumentError("--dataset is required");
  o.dataset = *dataset;
  auto out = a.Get("out");
  if (!out) return absl::InvalidArgumentError("--out is required");
  o.out = *out;
  if (auto s = a.Get("scale")) {
    auto parsed = ParseFeatureScaling(*s);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--scale: ", parsed.status().message()));
    }
    o.scaling = *parsed;
  }
  return absl::OkStatus();
}

// --mechanism, --epsilon, --k or --m and --seed, checked before the dataset
// is loaded, so that a typo costs nothing.
absl::Status ParsePerturbationFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  o.mechanism = a.Get("mechanism");
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  if (eps) {
    if (!o.mechanism) {
      return absl::InvalidArgumentError("--epsilon needs --mechanism");
    }
    o.epsilon = *eps;
  } else if (o.mechanism) {
    return absl::InvalidArgumentError("--mechanism needs --epsilon");
  }
  ASSIGN_OR_RETURN(auto k, a.GetInt("k"));
  ASSIGN_OR_RETURN(auto m, a.GetInt("m"));
  if (k && m) return absl::InvalidArgumentError("give --k or --m, not both");
  if ((k || m) && !o.mechanism) {
    return absl::InvalidArgumentError("--k/--m need --mechanism");
  }
  o.sampled = k ? k : m;
  ASSIGN_OR_RETURN(o.seed, a.GetUint("seed"));
  if (o.seed && !o.mechanism) {
    return absl::InvalidArgumentError("--seed needs --mechanism");
  }
  if (!o.mechanism) return absl::OkStatus();
  auto kind = ParseMechanismName(*o.mechanism);
  if (!kind.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mechanism: ", kind.status().message()));
  }
  absl::Status eps_ok = ValidateEpsilon(o.epsilon);
  if (!eps_ok.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", eps_ok.message()));
  }
  return absl::OkStatus();
}

// Which flags apply to which --method: INVALID_ARGUMENT for one that does
// not.
absl::Status CheckMethodFlags(const Options& o, const PprOverrides& ppr_given,
                              bool threads, bool block, bool steps) {
  const bool ppr = o.method == Method::kPush || o.method == Method::kPower;
  if (!ppr && (ppr_given.any() || block)) {
    return absl::InvalidArgumentError(
        "--alpha, --r, --rmax, --tolerance and --block-columns apply to "
        "--method push or power only");
  }
  if (o.method == Method::kGcn && threads) {
    return absl::InvalidArgumentError(
        "--threads applies to --method push, power or kprop");
  }
  if (ppr && (steps || o.self_loops)) {
    return absl::InvalidArgumentError(
        "--steps and --self-loops apply to --method gcn or kprop only");
  }
  if (o.method == Method::kPower && ppr_given.rmax) {
    return absl::InvalidArgumentError("--rmax applies to --method push only");
  }
  if (o.method == Method::kPush && ppr_given.tolerance) {
    return absl::InvalidArgumentError(
        "--tolerance applies to --method power only");
  }
  return absl::OkStatus();
}

// --method and its settings: PPR's (ReadPprFlags), --threads,
// --block-columns, --steps and --self-loops.
absl::Status ParseMethodFlags(const CliArgs& a, Options* options) {
  Options& o = *options;
  if (auto method = a.Get("method")) {
    ASSIGN_OR_RETURN(o.method, kMethodNames.Parse(*method, "--method"));
  }
  ASSIGN_OR_RETURN(const PprOverrides ppr_given, ReadPprFlags(a));
  ASSIGN_OR_RETURN(auto threads, a.GetInt("threads"));
  ASSIGN_OR_RETURN(auto block, a.GetInt("block-columns"));
  ASSIGN_OR_RETURN(auto steps, a.GetInt("steps"));
  if (threads) { ASSIGN_OR_RETURN(o.ppr.threads, FlagToInt(*threads, "threads", 0)); }
  if (block) {
    ASSIGN_OR_RETURN(o.ppr.block_columns, FlagToInt(*block, "block-columns", 0));
  }
  if (steps) { ASSIGN_OR_RETURN(o.steps, FlagToInt(*steps, "steps", 0)); }
  o.self_loops = a.Flag("self-loops");
  RETURN_IF_ERROR(CheckMethodFlags(o, ppr_given, threads.has_value(),
                                   block.has_value(), steps.has_value()));
  if (o.method != Method::kPush && o.method != Method::kPower) {
    return absl::OkStatus();
  }
  absl::StatusOr<PprOptions> ppr = ApplyPprOverrides(o.ppr, ppr_given);
  if (!ppr.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", ppr.status().message()));
  }
  o.ppr = *ppr;
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(args,
                     {"dataset", "out", "scale", "mechanism", "epsilon", "k",
                      "m", "seed", "method", "alpha", "r", "rmax", "tolerance",
                      "threads", "block-columns", "steps"},
                     {"self-loops", "json", "help"}));
  Options o;
  RETURN_IF_ERROR(ParseInputFlags(a, &o));
  RETURN_IF_ERROR(ParsePerturbationFlags(a, &o));
  RETURN_IF_ERROR(ParseMethodFlags(a, &o));
  o.json = a.Flag("json");
  return o;
}

absl::string_view MethodName(Method m) { return kMethodNames.Name(m); }

}  // namespace

std::string PropagateHelp() {
  return R"(ldpgraph propagate: propagate (optionally perturbed) node features over a graph

Usage: ldpgraph propagate --dataset DIR --out Z.npy [flags]

Input:
  --dataset DIR      a dataset folder (meta.json, edges.txt, nodes.svm), e.g.
                     from `ldpgraph generate` or ../shared/datasets/cora
  --scale S          feature scaling to a public range, per column min-max:
                     symmetric (= -1,1; default), unit (= 0,1), or none (keep
                     values; the range is meta.json's feature_range)
Perturbation (omit --mechanism for the raw features):
  --mechanism M      hds, square-wave, multibit, onebit, piecewise, laplace:
                     every node perturbs its own row as its agent would; the
                     curator's estimate of it is what gets propagated
  --epsilon E        budget per node (required with --mechanism)
  --k K / --m M      sampled dimensions (mechanism default when omitted)
  --seed S           reproducible, NOT private randomness (default: secure)
Propagation:
  --method M         push (default; PrivGE Algorithm 3, backward push),
                     power (the series by power iteration: the reference),
                     gcn (D~^-1/2 (A+I) D~^-1/2 X, --steps times),
                     kprop (LPGNN: --steps rounds of neighbour means)
  --alpha A          decay factor in (0, 1] (default 0.1)
  --r R              convolution coefficient in [0, 1] (default 0.5)
  --rmax T           push threshold (default 1e-4): every entry of Z is
                     within deg(v)^r * T of the exact series
  --tolerance T      power: stop once the series' tail is <= T (default 1e-6)
  --threads N        push/power/kprop worker threads; 0 (default) = every
                     core. Results do not depend on it
  --block-columns W  push: columns moved per push, 1-16 (default 16, fewer
                     for small d or very large graphs)
  --steps K          gcn/kprop rounds (default 2)
  --self-loops       kprop: include each node in its own mean
Output:
  --out Z.npy        float32, C order, shape (nodes, features); numpy.load
                     reads it
  --json             print one JSON object of figures (timings, pushes, peak
                     memory) instead of the human summary
  --help             this text

Propagation is post-processing of the reports: it spends no privacy budget.

Examples:
  ldpgraph propagate --dataset data/generated --out z.npy
  ldpgraph propagate --dataset ../shared/datasets/pubmed --mechanism hds \
      --epsilon 1 --k 10 --alpha 0.1 --r 0.5 --rmax 1e-4 --out z.npy --json
)";
}

namespace {

// The mechanism every node perturbs its row with: usage errors (an unknown
// name, a bad --k, parameters the mechanism refuses) are INVALID_ARGUMENT.
absl::StatusOr<std::unique_ptr<FeatureMechanism>> BuildMechanism(
    const Options& o, size_t columns, std::pair<double, double> range) {
  ASSIGN_OR_RETURN(MechanismKind kind, ParseMechanismName(*o.mechanism));
  MechanismSpec spec;
  spec.kind = kind;
  spec.epsilon = o.epsilon;
  spec.dimension = static_cast<int>(columns);
  if (o.sampled) {
    ASSIGN_OR_RETURN(spec.sampled, FlagToInt(*o.sampled, "k/--m", 1));
  }
  spec.alpha = range.first;
  spec.beta = range.second;
  return CreateFeatureMechanism(spec);
}

// The features propagated by o.method; stats filled for push and power.
absl::StatusOr<DenseMatrix> Propagate(const Options& o, const Graph& graph,
                                      const SparseRows& features,
                                      PropagationStats* stats) {
  switch (o.method) {
    case Method::kPush:
      return PprPush(graph, features, o.ppr, stats);
    case Method::kPower:
      return PprPower(graph, features.ToDense(), o.ppr, stats);
    case Method::kGcn: {
      absl::StatusOr<DenseMatrix> z = features.ToDense();
      for (int s = 0; s < o.steps && z.ok(); ++s) {
        z = GcnAggregate(graph, *z);
      }
      return z;
    }
    case Method::kKProp:
      return KProp(graph, features.ToDense(), o.steps, o.self_loops,
                   o.ppr.threads);
  }
  return absl::InternalError("unknown propagation method");
}

// Seconds each phase took.
struct PhaseSeconds {
  double load = 0, perturb = 0, propagate = 0, write = 0;
};

nlohmann::ordered_json FiguresJson(const Options& o, const Graph& g,
                                   const SparseRows& features,
                                   const PropagationStats& stats,
                                   const PhaseSeconds& t) {
  nlohmann::ordered_json j;
  j["dataset"] = o.dataset;
  j["nodes"] = g.num_nodes();
  j["edges"] = g.num_edges();
  j["features"] = features.cols;
  j["input_nonzeros"] = features.nnz();
  j["scale"] = std::string(FeatureScalingName(o.scaling));
  j["mechanism"] = o.mechanism ? *o.mechanism : "none";
  if (o.mechanism) j["epsilon"] = o.epsilon;
  j["method"] = std::string(MethodName(o.method));
  if (o.method == Method::kPush || o.method == Method::kPower) {
    j["alpha"] = o.ppr.alpha;
    j["r"] = o.ppr.r;
  }
  if (o.method == Method::kPush) {
    j["rmax"] = o.ppr.rmax;
    j["block_columns"] = stats.block_columns;
    j["pushes"] = stats.pushes;
    j["residue_updates"] = stats.residue_updates;
  }
  if (o.method == Method::kPower) {
    j["tolerance"] = o.ppr.tolerance;
    j["iterations"] = stats.iterations;
    j["tail_bound"] = stats.tail_bound;
  }
  if (o.method == Method::kGcn || o.method == Method::kKProp) {
    j["steps"] = o.steps;
  }
  if (o.method != Method::kGcn) j["threads"] = ResolveThreads(o.ppr.threads);
  j["load_seconds"] = t.load;
  j["perturb_seconds"] = t.perturb;
  j["propagate_seconds"] = t.propagate;
  j["write_seconds"] = t.write;
  j["peak_rss_bytes"] = PeakRssBytes();
  j["out"] = o.out;
  return j;
}

void PrintSummary(const Options& o, const Graph& g, const SparseRows& features,
                  const std::string& mechanism, const PropagationStats& stats,
                  const PhaseSeconds& t, const DenseMatrix& z,
                  std::ostream& out) {
  out << absl::StrFormat(
      "%s: %d nodes, %d edges, %d features (%d non-zeros, scale %s)\n"
      "mechanism: %s\n",
      o.dataset, g.num_nodes(), g.num_edges(), features.cols, features.nnz(),
      FeatureScalingName(o.scaling), mechanism);
  switch (o.method) {
    case Method::kPush:
      out << absl::StrFormat(
          "push: alpha %g, r %g, rmax %g, %d pushes, block %d, %.3f s\n",
          o.ppr.alpha, o.ppr.r, o.ppr.rmax, stats.pushes, stats.block_columns,
          t.propagate);
      break;
    case Method::kPower:
      out << absl::StrFormat(
          "power: alpha %g, r %g, %d terms, tail <= %.3g, %.3f s\n",
          o.ppr.alpha, o.ppr.r, stats.iterations, stats.tail_bound,
          t.propagate);
      break;
    default:
      out << absl::StrFormat("%s: %d steps, %.3f s\n", MethodName(o.method),
                             o.steps, t.propagate);
  }
  out << absl::StrFormat("wrote %s (%d x %d float32), peak memory %.1f MiB\n",
                         o.out, z.rows, z.cols,
                         PeakRssBytes() / (1024.0 * 1024.0));
}

}  // namespace

int RunPropagate(const std::vector<std::string>& args, std::ostream& out,
                 std::ostream& err) {
  auto parsed =
      ParseCommand("propagate", args, PropagateHelp, ParseOptions, out, err);
  if (!parsed.ok()) return parsed.exit_code();
  const Options& o = *parsed;
  auto fail = [&](const absl::Status& s, int code = kExitRuntimeError) {
    err << "ldpgraph propagate: " << s.message() << "\n";
    return code;
  };
  PhaseSeconds t;
  const auto t_load = Clock::now();
  auto dataset = LoadDataset(o.dataset);
  if (!dataset.ok()) return fail(dataset.status());
  auto range = ScaledRange(o.scaling, dataset->meta);
  if (!range) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--scale none needs a public feature range, and ",
                    o.dataset, "/meta.json declares no feature_range; use "
                    "--scale symmetric or unit")),
                kExitUsageError);
  }
  SparseRows features = ScaleDatasetFeatures(*dataset, o.scaling);
  dataset->features = SparseRows();
  t.load = SecondsSince(t_load);

  std::string mechanism_description = "none (raw features)";
  if (o.mechanism) {
    auto mech = BuildMechanism(o, features.cols, *range);
    if (!mech.ok()) return fail(mech.status(), kExitUsageError);
    auto rng = MakeRandomSource(o.seed, err);
    if (!rng.ok()) return fail(rng.status());
    const auto t_perturb = Clock::now();
    auto perturbed =
        pipeline::SimulateFeatureReports(features, **mech, **rng);
    if (!perturbed.ok()) return fail(perturbed.status());
    features = *std::move(perturbed);
    t.perturb = SecondsSince(t_perturb);
    mechanism_description = absl::StrFormat(
        "%s, epsilon %g, sampled %d, range [%g, %g], %s randomness",
        *o.mechanism, o.epsilon, (*mech)->sampled(), range->first,
        range->second, (*rng)->name());
  }

  const auto t_prop = Clock::now();
  PropagationStats stats;
  absl::StatusOr<DenseMatrix> z =
      Propagate(o, dataset->graph, features, &stats);
  if (!z.ok()) return fail(z.status());
  t.propagate = SecondsSince(t_prop);

  const auto t_write = Clock::now();
  absl::Status written = WriteNpy(o.out, *z);
  if (!written.ok()) return fail(written);
  t.write = SecondsSince(t_write);

  if (o.json) {
    out << FiguresJson(o, dataset->graph, features, stats, t).dump() << "\n";
  } else {
    PrintSummary(o, dataset->graph, features, mechanism_description, stats, t,
                 *z, out);
  }
  out.flush();
  return out.good() ? kExitOk : kExitRuntimeError;
}

}  // namespace ldpgraph::tool

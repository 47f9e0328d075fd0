#include "server/ldpgraph/sweep_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/ldpgraph/charts.h"
#include "server/ldpgraph/eval_baselines.h"
#include "server/ldpgraph/eval_command.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

using pipeline::PipelineConfig;

// A line of the sweep: a name on the command line, a label in the table
// and chart, and its configuration at a budget.
struct SweepMethod {
  const char* name;
  const char* label;
};

constexpr SweepMethod kSweepMethods[] = {
    {"lpgnn", "LPGNN (Multi-bit, KProp)"},
    {"privge", "PrivGE (HDS, PPR or KProp)"},
    {"upgnet-mbm", "UPGNET-MBM (Multi-bit, NFR, HOA)"},
    {"upgnet-pm", "UPGNET-PM (Piecewise, NFR, HOA)"},
    {"combined", "combined (UPGNET inputs auto, smoothed)"},
};

// The configuration of line `name` at feature budget eps on d.
absl::StatusOr<PipelineConfig> SweepConfig(absl::string_view name, double eps,
                                           const Dataset& d, int threads) {
  PipelineConfig c;
  if (name == "lpgnn") {
    c = pipeline::DefaultConfig(v1::PIPELINE_METHOD_LPGNN,
                                v1::PIPELINE_TASK_NODE);
  } else if (name == "privge") {
    c = pipeline::DefaultConfig(v1::PIPELINE_METHOD_PRIVGE,
                                v1::PIPELINE_TASK_NODE);
  } else {
    c = pipeline::DefaultConfig(v1::PIPELINE_METHOD_UPGNET,
                                v1::PIPELINE_TASK_NODE);
    if (name == "upgnet-pm") {
      c.mechanism = "piecewise";
      // UPGNET's k: max(1, min(d, floor(eps / 2.5))).
      c.sampled = std::clamp(static_cast<int>(std::floor(eps / 2.5)), 1,
                             static_cast<int>(std::max<size_t>(
                                 1, d.meta.features)));
      // tau per run on validation: 0.9 (UPGNET-MBM's) erases Piecewise's
      // reports, whose range grows as d C / k (cora, eps 4: 76.4 at 0.9).
      c.tune_nfr = {0, 0.5, 0.9};
    } else if (name == "combined") {
      c.inputs = pipeline::NodeInputs::kAuto;
      c.smooth = true;
    }
  }
  c.epsilon = eps;
  c.threads = threads;
  pipeline::ResolveDatasetSettings(d.meta, &c);
  RETURN_IF_ERROR(pipeline::ValidateConfig(c));
  return c;
}

struct SweepOptions {
  std::string dataset;
  std::vector<std::string> methods;
  std::vector<double> epsilons = {0.01, 0.1, 1, 4, 8};
  int runs = 5;
  uint64_t seed = 1;
  int threads = 0;
  bool baselines = true;
  bool json = false;
  std::string plot;
  std::string from_json;  // --from-json: a saved sweep, not measured again
};

absl::StatusOr<SweepOptions> ParseSweepOptions(
    const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(CliArgs a, CliArgs::Parse(args,
                                             {"dataset", "methods", "epsilons",
                                              "runs", "seed", "threads",
                                              "format", "plot", "from-json"},
                                             {"no-baselines", "help"}));
  SweepOptions o;
  if (auto f = a.Get("from-json")) {
    for (const char* flag : {"dataset", "methods", "epsilons", "runs", "seed",
                             "threads"}) {
      if (a.Get(flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--from-json prints and draws a saved sweep; --", flag,
            " applies to a sweep that runs"));
      }
    }
    o.from_json = *f;
  } else {
    auto dataset = a.Get("dataset");
    if (!dataset) return absl::InvalidArgumentError("--dataset is required");
    o.dataset = *dataset;
  }
  for (const SweepMethod& m : kSweepMethods) o.methods.push_back(m.name);
  if (auto list = a.Get("methods")) {
    o.methods.clear();
    for (absl::string_view name : absl::StrSplit(*list, ',')) {
      const bool known =
          std::any_of(std::begin(kSweepMethods), std::end(kSweepMethods),
                      [&](const SweepMethod& m) { return name == m.name; });
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--methods: unknown method '", name,
            "'; choose from lpgnn, privge, upgnet-mbm, upgnet-pm, combined"));
      }
      o.methods.emplace_back(name);
    }
  }
  if (auto list = a.Get("epsilons")) {
    o.epsilons.clear();
    for (absl::string_view item : absl::StrSplit(*list, ',')) {
      double e = 0;
      if (!absl::SimpleAtod(item, &e) || !(e > 0) || !std::isfinite(e)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--epsilons takes finite budgets > 0, comma separated; got '",
            item, "'"));
      }
      o.epsilons.push_back(e);
    }
  }
  ASSIGN_OR_RETURN(auto runs, a.GetInt("runs"));
  if (runs) { ASSIGN_OR_RETURN(o.runs, FlagToInt(*runs, "runs", 1)); }
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  if (seed) o.seed = *seed;
  ASSIGN_OR_RETURN(auto threads, a.GetInt("threads"));
  if (threads) { ASSIGN_OR_RETURN(o.threads, FlagToInt(*threads, "threads", 0)); }
  o.baselines = !a.Flag("no-baselines");
  if (auto f = a.Get("format")) {
    ASSIGN_OR_RETURN(int i, ParseChoice("format", *f, {"table", "json"}));
    o.json = i == 1;
  }
  if (auto f = a.Get("plot")) {
    RETURN_IF_ERROR(CheckPlotPath(*f));
    o.plot = *f;
  }
  return o;
}

const char* LabelOf(absl::string_view name) {
  for (const SweepMethod& m : kSweepMethods) {
    if (name == m.name) return m.label;
  }
  return "?";
}

// Every line's cells, then the baselines (beside UPGNET-MBM's
// configuration: the same GraphSAGE and HOA), progress on err.
absl::StatusOr<nlohmann::json> Sweep(const SweepOptions& o, const Dataset& d,
                                     std::ostream& err) {
  const auto start = std::chrono::steady_clock::now();
  nlohmann::json lines = nlohmann::json::array();
  const size_t total = o.methods.size() * o.epsilons.size();
  size_t done = 0;
  for (const std::string& name : o.methods) {
    nlohmann::json cells = nlohmann::json::array();
    for (double eps : o.epsilons) {
      ASSIGN_OR_RETURN(const PipelineConfig c,
                       SweepConfig(name, eps, d, o.threads));
      err << absl::StrFormat("[%zu/%zu] %s eps=%g\n", ++done, total, name,
                             eps);
      ASSIGN_OR_RETURN(const nlohmann::json r,
                       EvaluateRuns(d, c, o.runs, o.seed, nullptr));
      cells.push_back({{"epsilon", eps},
                       {"accuracy", {{"mean", r["mean"]}, {"std", r["std"]}}},
                       {"values", r["values"]},
                       {"seconds", r["seconds"]},
                       {"parameters", r["parameters"]}});
    }
    lines.push_back(
        {{"method", name}, {"label", LabelOf(name)}, {"cells", cells}});
  }
  nlohmann::json j = {{"command", "sweep"},
                      {"dataset", d.meta.name},
                      {"task", "node"},
                      {"metric", "accuracy"},
                      {"runs", o.runs},
                      {"seed", o.seed},
                      {"epsilons", o.epsilons},
                      {"lines", lines}};
  if (o.baselines) {
    err << "baselines (beside upgnet-mbm's model)\n";
    ASSIGN_OR_RETURN(const PipelineConfig c,
                     SweepConfig("upgnet-mbm", 1, d, o.threads));
    ASSIGN_OR_RETURN(j["baselines"],
                     EvaluateBaselineRuns(d, c, o.runs, o.seed, &err));
  }
  j["seconds"] = SecondsSince(start);
  return j;
}

void PrintSweep(const nlohmann::json& j, std::ostream& out) {
  out << absl::StrFormat(
      "Node classification on %s: test accuracy in %%, mean±std of %d runs "
      "(clean labels; same splits in every cell)\n",
      j["dataset"].get<std::string>(), j["runs"].get<int>());
  size_t label_width = 10;
  for (const auto& line : j["lines"]) {
    label_width =
        std::max(label_width, line["label"].get<std::string>().size() + 2);
  }
  if (j.contains("baselines")) {
    for (const auto& [key, b] : j["baselines"].items()) {
      label_width = std::max(label_width,
                             b["label"].get<std::string>().size() + 2);
    }
  }
  out << absl::StrFormat("%-*s", label_width, "method");
  for (const auto& e : j["epsilons"]) {
    out << absl::StrFormat("%-12s", absl::StrFormat("eps=%g", e.get<double>()));
  }
  out << "\n";
  for (const auto& line : j["lines"]) {
    out << absl::StrFormat("%-*s", label_width,
                           line["label"].get<std::string>());
    for (const auto& cell : line["cells"]) {
      out << absl::StrFormat(
          "%-12s", absl::StrFormat(
                       "%.1f±%.1f",
                       100 * cell["accuracy"]["mean"].get<double>(),
                       100 * cell["accuracy"]["std"].get<double>()));
    }
    out << "\n";
  }
  if (j.contains("baselines")) {
    out << "baselines (no budget; the same at every eps):\n";
    for (const auto& [key, b] : j["baselines"].items()) {
      out << absl::StrFormat("%-*s%.1f±%.1f\n", label_width,
                             b["label"].get<std::string>(),
                             100 * b["accuracy"]["mean"].get<double>(),
                             100 * b["accuracy"]["std"].get<double>());
    }
  }
}

}  // namespace

std::string SweepHelp() {
  return R"(ldpgraph sweep: accuracy against the feature budget, beside the baselines

Usage: ldpgraph sweep --dataset DIR [flags]

Node classification, clean labels. Every cell is `ldpgraph eval` of one
method at one budget (its defaults: see `ldpgraph eval --help`), runs on the
splits of (--seed, run), so every cell and baseline of a run shares its
split. The baselines use no private feature: they are what the curator
learns anyway, the lines a budget has to beat.

  --dataset DIR      dataset folder
  --methods LIST     comma separated, default all, in this order:
                       lpgnn       LPGNN: Multi-bit, KProp, GraphSAGE
                       privge      PrivGE: HDS, PPR or KProp (auto), MLP
                       upgnet-mbm  UPGNET: Multi-bit, NFR 0.9, HOA K 32
                       upgnet-pm   UPGNET with the Piecewise mechanism,
                                   k = max(1, floor(eps / 2.5)), tau per
                                   run from {0, 0.5, 0.9} on validation
                       combined    UPGNET-MBM with --inputs auto (each run
                                   keeps the reports, public positional
                                   columns, or both, by validation) and
                                   --smooth (the training labels spread
                                   over the model's posteriors)
  --epsilons LIST    feature budgets (default 0.01,0.1,1,4,8)
  --runs R           runs per cell (default 5; the papers use 10)
  --seed S           base seed (default 1); noise is seeded: NOT private
  --threads N        threads per run (default 0: every core)
  --no-baselines     leave out the baselines (feature-free: N(0, 1)
                     features, HOA and UPGNET-MBM's GraphSAGE; graph-labels:
                     label propagation; raw: UPGNET-MBM's model on the raw
                     features)
  --format F         table (default) or json: lines[] of {method, label,
                     cells[] of {epsilon, accuracy {mean, std}, values,
                     seconds, parameters}}, baselines {feature_free,
                     graph_labels, raw} of {label, accuracy, values}
  --plot FILE        also draw the sweep as an SVG chart: one line per
                     method, the baselines as dashed horizontal lines
  --from-json FILE   print (and with --plot draw) a saved sweep's JSON
                     instead of running one: a sweep saved piece by piece
                     (tests/bench/sweep.sh merges one run per method)
  --help             this text

Example:
  ldpgraph sweep --dataset ../shared/datasets/cora --runs 10 --plot cora.svg
)";
}

int RunSweep(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
  auto parsed =
      ParseCommand("sweep", args, SweepHelp, ParseSweepOptions, out, err);
  if (!parsed.ok()) return parsed.exit_code();
  const SweepOptions& o = *parsed;
  absl::StatusOr<nlohmann::json> j;
  if (!o.from_json.empty()) {
    auto text = ReadFileToString(o.from_json);
    if (!text.ok()) {
      err << "ldpgraph sweep: " << text.status().message() << "\n";
      return kExitRuntimeError;
    }
    j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j->is_discarded() || !j->contains("lines") ||
        !j->contains("epsilons") || !j->contains("dataset") ||
        !j->contains("runs")) {
      err << "ldpgraph sweep: " << o.from_json
          << " is not a sweep's JSON (ldpgraph sweep --format json)\n";
      return kExitRuntimeError;
    }
    j->emplace("seconds", 0.0);
  } else {
    auto dataset = LoadDataset(o.dataset);
    if (!dataset.ok()) {
      err << "ldpgraph sweep: " << dataset.status().message() << "\n";
      return kExitRuntimeError;
    }
    err << kSeededWarning << "\n";
    j = Sweep(o, *dataset, err);
  }
  if (!j.ok()) {
    err << "ldpgraph sweep: " << j.status().message() << "\n";
    return j.status().code() == absl::StatusCode::kInvalidArgument
               ? kExitUsageError
               : kExitRuntimeError;
  }
  if (o.json) {
    out << j->dump() << "\n";
  } else {
    PrintSweep(*j, out);
    out << absl::StrFormat("(%.0f s)\n", (*j)["seconds"].get<double>());
  }
  if (!o.plot.empty()) {
    out.flush();
    return WritePlot("sweep", o.plot, SweepCharts(*j), err);
  }
  return kExitOk;
}

}  // namespace ldpgraph::tool

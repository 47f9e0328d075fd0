#include "server/ldpgraph/config_flags.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

using pipeline::Method;
using pipeline::PipelineConfig;
using pipeline::Task;

// A batch-size flag: auto (-1), full (0) or a whole number >= 1.
absl::StatusOr<int> ParseBatchFlag(const std::string& value,
                                   absl::string_view flag) {
  if (value == "auto") return -1;
  if (value == "full") return 0;
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be auto, full or a whole number, got '",
                     value, "'"));
  }
  return FlagToInt(n, flag, 1);
}

// The optimiser's settings: --lr, --weight-decay, --epochs and --patience.
absl::Status ParseOptimiserFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Task task = c.task;
  training::TrainOptions& train =
      task == v1::PIPELINE_TASK_NODE ? c.node_model.train : c.link_model.train;
  ASSIGN_OR_RETURN(auto lr, a.GetDouble("lr"));
  ASSIGN_OR_RETURN(auto wd, a.GetDouble("weight-decay"));
  ASSIGN_OR_RETURN(auto epochs, a.GetInt("epochs"));
  ASSIGN_OR_RETURN(auto patience, a.GetInt("patience"));
  if (lr) {
    if (!(*lr > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--lr must be > 0, got ", *lr));
    }
    train.adam.learning_rate = *lr;
  }
  if (wd) {
    if (!(*wd >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--weight-decay must be >= 0, got ", *wd));
    }
    train.adam.weight_decay = *wd;
  }
  if (epochs) { ASSIGN_OR_RETURN(train.max_epochs, FlagToInt(*epochs, "epochs", 1)); }
  if (patience) {
    ASSIGN_OR_RETURN(train.patience, FlagToInt(*patience, "patience", 1));
  }
  return absl::OkStatus();
}

// The loss and the batched training: --loss, --link-batch, --node-batch,
// --batch-lr, --batch-epochs, --batch-decays and --batch-patience.
absl::Status ParseBatchFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Task task = c.task;
  if (auto loss = a.Get("loss")) {
    if (task != v1::PIPELINE_TASK_LINK) {
      return absl::InvalidArgumentError("--loss applies to --task link");
    }
    ASSIGN_OR_RETURN(int i,
                     ParseChoice("loss", *loss, {"pairwise", "logistic"}));
    c.link_model.loss = i == 0 ? training::LinkLossKind::kPairwise
                               : training::LinkLossKind::kLogistic;
  }
  if (auto batch = a.Get("link-batch")) {
    if (task != v1::PIPELINE_TASK_LINK) {
      return absl::InvalidArgumentError("--link-batch applies to --task link");
    }
    ASSIGN_OR_RETURN(c.link_model.batch_pairs,
                     ParseBatchFlag(*batch, "link-batch"));
  }
  if (auto batch = a.Get("node-batch")) {
    if (task != v1::PIPELINE_TASK_NODE) {
      return absl::InvalidArgumentError("--node-batch applies to --task node");
    }
    ASSIGN_OR_RETURN(c.node_model.batch_rows,
                     ParseBatchFlag(*batch, "node-batch"));
  }
  ASSIGN_OR_RETURN(auto batch_lr, a.GetDouble("batch-lr"));
  if (batch_lr) {
    if (!(*batch_lr > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batch-lr must be > 0, got ", *batch_lr));
    }
    (task == v1::PIPELINE_TASK_LINK ? c.link_model.batched_learning_rate
                                    : c.node_model.batched_learning_rate) =
        *batch_lr;
  }
  ASSIGN_OR_RETURN(auto batch_epochs, a.GetInt("batch-epochs"));
  if (batch_epochs) {
    ASSIGN_OR_RETURN(int v, FlagToInt(*batch_epochs, "batch-epochs", 1));
    (task == v1::PIPELINE_TASK_LINK ? c.link_model.batched_max_epochs
                                    : c.node_model.batched_max_epochs) = v;
  }
  ASSIGN_OR_RETURN(auto batch_decays, a.GetInt("batch-decays"));
  if (batch_decays) {
    if (task != v1::PIPELINE_TASK_LINK) {
      return absl::InvalidArgumentError(
          "--batch-decays applies to --task link");
    }
    ASSIGN_OR_RETURN(c.link_model.batched_max_decays,
                     FlagToInt(*batch_decays, "batch-decays", 0));
  }
  ASSIGN_OR_RETURN(auto batch_patience, a.GetInt("batch-patience"));
  if (batch_patience) {
    ASSIGN_OR_RETURN(int v, FlagToInt(*batch_patience, "batch-patience", 1));
    (task == v1::PIPELINE_TASK_LINK ? c.link_model.batched_patience
                                    : c.node_model.batched_patience) = v;
  }
  return absl::OkStatus();
}

// --epoch-rows, --validation-rows (node task) and --split.
absl::Status ParseRowsAndSplitFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Task task = c.task;
  for (auto [flag, field] :
       {std::pair{"epoch-rows", &c.node_model.batched_epoch_rows},
        std::pair{"validation-rows", &c.node_model.validation_rows}}) {
    ASSIGN_OR_RETURN(auto rows, a.GetInt(flag));
    if (!rows) continue;
    if (task != v1::PIPELINE_TASK_NODE) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " applies to --task node"));
    }
    ASSIGN_OR_RETURN(*field, FlagToInt(*rows, flag, 0));
  }
  if (auto split = a.Get("split")) {
    ASSIGN_OR_RETURN(int i, ParseChoice("split", *split,
                                        {"random", "planetoid", "fixed"}));
    c.planetoid_split = i == 1;
    c.fixed_split = i == 2;
  }
  return absl::OkStatus();
}

// --method and --task (privge and node by default), and their defaults.
absl::StatusOr<PipelineConfig> ParseMethodAndTask(const CliArgs& a) {
  Task task = v1::PIPELINE_TASK_NODE;
  if (auto t = a.Get("task")) {
    ASSIGN_OR_RETURN(task, pipeline::kTaskNames.Parse(*t, "--task"));
  }
  Method method = v1::PIPELINE_METHOD_PRIVGE;
  if (auto m = a.Get("method")) {
    ASSIGN_OR_RETURN(method, pipeline::kMethodNames.Parse(*m, "--method"));
  }
  return pipeline::DefaultConfig(method, task);
}

// After every group: UPGNET's own k, the whole configuration checked, the
// settings given explicitly and --lpgnn-settings.
absl::Status FinishConfig(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  if (c.method == v1::PIPELINE_METHOD_UPGNET && !c.sampled &&
      c.mechanism == "piecewise") {
    // UPGNET's own k for the Piecewise mechanism: max(1, min(d,
    // floor(eps / 2.5))) of the d dimensions (d is applied when the run
    // builds the mechanism: a k above d is refused there).
    c.sampled = std::max(1, static_cast<int>(std::floor(c.epsilon / 2.5)));
  }
  RETURN_IF_ERROR(pipeline::ValidateConfig(c));
  // A setting given explicitly stays; the table sets the others.
  c.fixed_settings = {a.Get("feature-steps").has_value(),
                      a.Get("label-steps").has_value(),
                      a.Get("lr").has_value(),
                      a.Get("weight-decay").has_value(),
                      a.Get("dropout").has_value()};
  if (auto path = a.Get("lpgnn-settings")) {
    if (c.method != v1::PIPELINE_METHOD_LPGNN) {
      return absl::InvalidArgumentError(
          "--lpgnn-settings applies to --method lpgnn");
    }
    ASSIGN_OR_RETURN(pipeline::LpgnnSettings table,
                     pipeline::LpgnnSettings::BuiltInWithFile(*path));
    c.lpgnn_settings =
        std::make_shared<const pipeline::LpgnnSettings>(std::move(table));
  }
  return absl::OkStatus();
}

}  // namespace

// The SE-PrivGEmb and DPNE settings (--dim ... --mu); INVALID_ARGUMENT for
// a flag of the other method or of a feature pipeline.
absl::Status ParseReleaseFlags(const CliArgs& a, Method method,
                               PipelineConfig* c) {
  const bool se = method == v1::PIPELINE_METHOD_SE_PRIVGEMB;
  const bool dpne = method == v1::PIPELINE_METHOD_DPNE;
  for (const char* f : {"dim", "delta"}) {
    if (a.Get(f) && !se && !dpne) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", f, " applies to --method se-privgemb or dpne"));
    }
  }
  for (const char* f : {"negatives", "batch", "release-lr", "release-epochs",
                        "release-steps", "release-optimizer", "clip",
                        "noise-multiplier", "proximity", "noised-rows"}) {
    if (a.Get(f) && !se) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", f, " applies to --method se-privgemb"));
    }
  }
  for (const char* f : {"sweeps", "sensitivity", "lambda", "mu"}) {
    if (a.Get(f) && !dpne) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", f, " applies to --method dpne"));
    }
  }
  auto& s = c->release.se_privgemb;
  auto& d = c->release.dpne;
  ASSIGN_OR_RETURN(auto dim, a.GetInt("dim"));
  if (dim) {
    ASSIGN_OR_RETURN(int v, FlagToInt(*dim, "dim", 1));
    (se ? s.dim : d.dim) = v;
  }
  struct IntFlag {
    const char* name;
    int* target;
  };
  for (IntFlag f : {IntFlag{"negatives", &s.negatives},
                    IntFlag{"batch", &s.batch_size},
                    IntFlag{"release-epochs", &s.max_epochs},
                    IntFlag{"sweeps", &d.sweeps}}) {
    ASSIGN_OR_RETURN(auto v, a.GetInt(f.name));
    if (v) { ASSIGN_OR_RETURN(*f.target, FlagToInt(*v, f.name, 1)); }
  }
  ASSIGN_OR_RETURN(auto steps, a.GetInt("release-steps"));
  if (steps) {
    if (*steps < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--release-steps must be an integer >= 1, got ", *steps));
    }
    s.max_steps = *steps;
  }
  if (auto o = a.Get("release-optimizer")) {
    ASSIGN_OR_RETURN(s.optimizer, embedding::kOptimizerNames.Parse(
                                      *o, "--release-optimizer"));
  }
  struct DoubleFlag {
    const char* name;
    double* target;
  };
  for (DoubleFlag f : {DoubleFlag{"release-lr", &s.learning_rate},
                       DoubleFlag{"clip", &s.clip},
                       DoubleFlag{"noise-multiplier", &s.noise_multiplier},
                       DoubleFlag{"delta", &c->release_delta},
                       DoubleFlag{"sensitivity", &d.sensitivity},
                       DoubleFlag{"lambda", &d.lambda},
                       DoubleFlag{"mu", &d.mu}}) {
    ASSIGN_OR_RETURN(auto v, a.GetDouble(f.name));
    if (v) *f.target = *v;
  }
  if (auto p = a.Get("proximity")) {
    ASSIGN_OR_RETURN(s.proximity,
                     embedding::kProximityNames.Parse(*p, "--proximity"));
  }
  if (auto rows = a.Get("noised-rows")) {
    ASSIGN_OR_RETURN(int i, ParseChoice("noised-rows", *rows, {"touched", "all"}));
    s.noised_rows =
        i == 0 ? embedding::NoisedRows::kTouched : embedding::NoisedRows::kAll;
  }
  return absl::OkStatus();
}

// --mechanism and --epsilon.
absl::Status ParseMechanismFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  if (auto m = a.Get("mechanism")) c.mechanism = *m;
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  if (eps) {
    if (c.mechanism == "none") {
      return absl::InvalidArgumentError("--epsilon needs a --mechanism");
    }
    c.epsilon = *eps;
  }
  return absl::OkStatus();
}

// --k / --m, --label-epsilon and --label-steps.
absl::Status ParseSampledAndLabelFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  ASSIGN_OR_RETURN(auto k, a.GetInt("k"));
  ASSIGN_OR_RETURN(auto m, a.GetInt("m"));
  if (k && m) return absl::InvalidArgumentError("give --k or --m, not both");
  if (k || m) {
    ASSIGN_OR_RETURN(c.sampled, FlagToInt(k ? *k : *m, k ? "k" : "m", 1));
  }
  ASSIGN_OR_RETURN(c.label_epsilon, a.GetDouble("label-epsilon"));
  ASSIGN_OR_RETURN(auto label_steps, a.GetInt("label-steps"));
  if (label_steps) {
    ASSIGN_OR_RETURN(c.label_steps, FlagToInt(*label_steps, "label-steps", 0));
  }
  return absl::OkStatus();
}

// --malicious, --attack-class and --attack-dims: the simulated poisoning
// attack (PipelineConfig::attack_*). --malicious alone attacks class 0;
// --attack-class alone (or --malicious 0) only measures the target rate.
absl::Status ParseAttackFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  ASSIGN_OR_RETURN(auto fraction, a.GetDouble("malicious"));
  ASSIGN_OR_RETURN(auto t, a.GetInt("attack-class"));
  ASSIGN_OR_RETURN(auto dims, a.GetInt("attack-dims"));
  if (auto kind = a.Get("attack")) {
    if (!fraction) {
      return absl::InvalidArgumentError(
          "--attack applies to an attack (--malicious F)");
    }
    ASSIGN_OR_RETURN(c.attack_kind,
                     poisoning::kAttackNames.Parse(*kind, "--attack"));
  }
  if (fraction) {
    if (!(*fraction >= 0 && *fraction < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--malicious must be in [0, 1), got ", *fraction));
    }
    c.attack_fraction = *fraction;
  }
  if (t) {
    ASSIGN_OR_RETURN(int cls, FlagToInt(*t, "attack-class", 0));
    c.attack_class = cls;
  } else if (fraction) {
    c.attack_class = 0;
  }
  if (dims) {
    if (!c.attack_class) {
      return absl::InvalidArgumentError(
          "--attack-dims applies to an attack (--malicious F)");
    }
    ASSIGN_OR_RETURN(c.attack_dims, FlagToInt(*dims, "attack-dims", 1));
  }
  return absl::OkStatus();
}

// --aggregator and --nfr (LPGNN and UPGNET). With --mechanism none the
// method's NFR is off (there are no reports to regularise); --nfr then
// is an error.
absl::Status ParseAggregationFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const bool gnn = pipeline::IsGnnMethod(c.method);
  if (auto agg = a.Get("aggregator")) {
    if (!gnn) {
      return absl::InvalidArgumentError(
          "--aggregator applies to --method lpgnn or upgnet");
    }
    ASSIGN_OR_RETURN(c.aggregator, pipeline::kFeatureAggregatorNames.Parse(
                                       *agg, "--aggregator"));
  }
  if (auto inputs = a.Get("inputs")) {
    if (!gnn) {
      return absl::InvalidArgumentError(
          "--inputs applies to --method lpgnn or upgnet");
    }
    ASSIGN_OR_RETURN(c.inputs,
                     pipeline::kNodeInputsNames.Parse(*inputs, "--inputs"));
  }
  ASSIGN_OR_RETURN(auto positional, a.GetInt("positional-features"));
  if (positional) {
    if (c.inputs == pipeline::NodeInputs::kReports) {
      return absl::InvalidArgumentError(
          "--positional-features applies to --inputs positional, both or "
          "auto");
    }
    ASSIGN_OR_RETURN(c.positional_features,
                     FlagToInt(*positional, "positional-features", 1));
  }
  ASSIGN_OR_RETURN(auto tau, a.GetDouble("nfr"));
  if (tau) {
    if (!gnn) {
      return absl::InvalidArgumentError(
          "--nfr applies to --method lpgnn or upgnet");
    }
    if (!(*tau >= 0 && *tau < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--nfr must be in [0, 1) (0: off), got ", *tau));
    }
    if (*tau > 0 && c.mechanism == "none") {
      return absl::InvalidArgumentError(
          "--nfr regularises a mechanism's reports: it needs a --mechanism");
    }
    c.nfr_tau = *tau;
  } else if (c.mechanism == "none") {
    c.nfr_tau = 0;
  }
  return absl::OkStatus();
}

// The task's model: --model, --hidden, --layers, --dropout,
// --input-dropout and --activation.
absl::Status ParseModelFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Task task = c.task;
  if (auto model = a.Get("model")) {
    if (task == v1::PIPELINE_TASK_LINK) {
      ASSIGN_OR_RETURN(int i, ParseChoice("model for --task link", *model,
                                          {"lr", "mlp"}));
      c.link_model.layers = i == 0 ? 1 : std::max(c.link_model.layers, 2);
    } else {
      constexpr training::NodeModelKind kKinds[] = {
          training::NodeModelKind::kMlp, training::NodeModelKind::kGcn,
          training::NodeModelKind::kSage};
      ASSIGN_OR_RETURN(int i,
                       ParseChoice("model", *model, {"mlp", "gcn", "sage"}));
      c.node_model.kind = kKinds[i];
    }
  }
  ASSIGN_OR_RETURN(auto hidden, a.GetInt("hidden"));
  ASSIGN_OR_RETURN(auto layers, a.GetInt("layers"));
  ASSIGN_OR_RETURN(auto dropout, a.GetDouble("dropout"));
  int& hidden_ref = task == v1::PIPELINE_TASK_NODE ? c.node_model.hidden_dim
                                                   : c.link_model.hidden_dim;
  int& layers_ref = task == v1::PIPELINE_TASK_NODE ? c.node_model.layers
                                                   : c.link_model.layers;
  double& dropout_ref = task == v1::PIPELINE_TASK_NODE ? c.node_model.dropout
                                                       : c.link_model.dropout;
  if (hidden) { ASSIGN_OR_RETURN(hidden_ref, FlagToInt(*hidden, "hidden", 1)); }
  if (layers) { ASSIGN_OR_RETURN(layers_ref, FlagToInt(*layers, "layers", 1)); }
  if (dropout) {
    if (!(*dropout >= 0 && *dropout < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dropout must be in [0, 1), got ", *dropout));
    }
    dropout_ref = *dropout;
  }
  ASSIGN_OR_RETURN(auto input_dropout, a.GetDouble("input-dropout"));
  if (input_dropout) {
    if (!(*input_dropout >= 0 && *input_dropout < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input-dropout must be in [0, 1), got ", *input_dropout));
    }
    (task == v1::PIPELINE_TASK_NODE ? c.node_model.input_dropout
                                    : c.link_model.input_dropout) =
        *input_dropout;
  }
  if (auto act = a.Get("activation")) {
    ASSIGN_OR_RETURN(int i, ParseChoice("activation", *act, {"relu", "selu"}));
    const training::Activation v =
        i == 0 ? training::Activation::kRelu : training::Activation::kSelu;
    (task == v1::PIPELINE_TASK_NODE ? c.node_model.activation
                                    : c.link_model.activation) = v;
  }
  if (auto init = a.Get("init")) {
    if (task != v1::PIPELINE_TASK_NODE ||
        c.node_model.kind == training::NodeModelKind::kMlp) {
      return absl::InvalidArgumentError(
          "--init applies to the graph models (--model gcn or sage)");
    }
    ASSIGN_OR_RETURN(int i, ParseChoice("init", *init, {"glorot", "torch"}));
    c.node_model.init =
        i == 0 ? training::WeightInit::kGlorot : training::WeightInit::kTorch;
  }
  return absl::OkStatus();
}

// The task's training: --lr, --weight-decay, --epochs, --patience, --loss,
// the batch flags and --split.
absl::Status ParseTrainingFlags(const CliArgs& a, PipelineConfig* config) {
  RETURN_IF_ERROR(ParseOptimiserFlags(a, config));
  RETURN_IF_ERROR(ParseBatchFlags(a, config));
  return ParseRowsAndSplitFlags(a, config);
}

absl::Status ParseExecutionFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  ASSIGN_OR_RETURN(auto threads, a.GetInt("threads"));
  if (threads) { ASSIGN_OR_RETURN(c.threads, FlagToInt(*threads, "threads", 0)); }
  c.secure_noise = a.Flag("secure");
  return absl::OkStatus();
}

absl::StatusOr<PipelineConfig> ParsePipelineFlags(const CliArgs& a) {
  ASSIGN_OR_RETURN(PipelineConfig c, ParseMethodAndTask(a));
  RETURN_IF_ERROR(ParseMechanismFlags(a, &c));
  RETURN_IF_ERROR(ParseReleaseFlags(a, c.method, &c));
  RETURN_IF_ERROR(ParseSampledAndLabelFlags(a, &c));
  RETURN_IF_ERROR(ParseAggregationFlags(a, &c));
  RETURN_IF_ERROR(ParsePropagationFlags(a, &c));
  RETURN_IF_ERROR(ParseModelFlags(a, &c));
  RETURN_IF_ERROR(ParseTrainingFlags(a, &c));
  RETURN_IF_ERROR(ParseExecutionFlags(a, &c));
  RETURN_IF_ERROR(ParseAttackFlags(a, &c));
  RETURN_IF_ERROR(
      pipeline::ParseDefenceFlags(a, &c.defences, &c.screen_alpha));
  c.smooth = a.Flag("smooth");
  if (c.smooth && c.task != v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError(
        "--smooth applies to the node task (--task node)");
  }
  RETURN_IF_ERROR(FinishConfig(a, &c));
  return c;
}

}  // namespace ldpgraph::tool

// The pipeline's settings as JSON (config.h: ConfigToJson and
// LearningSettingsToJson), one function per option group: the feature
// reports' privacy, the task's split and model, the release, the
// propagation (PPR's own by PprOptionsToJson), the attack and the defences.
#include <nlohmann/json.hpp>

#include "server/pipeline/config.h"

namespace ldpgraph::pipeline {
namespace {

using nlohmann::json;

const char* ModelKindName(training::NodeModelKind k) {
  switch (k) {
    case training::NodeModelKind::kMlp: return "mlp";
    case training::NodeModelKind::kGcn: return "gcn";
    case training::NodeModelKind::kSage: return "sage";
  }
  return "?";
}

const char* ScalingName(FeatureScaling s) {
  switch (s) {
    case FeatureScaling::kNone: return "none";
    case FeatureScaling::kUnit: return "unit";
    case FeatureScaling::kSymmetric: return "symmetric";
  }
  return "?";
}

json BatchSize(int n) { return n < 0 ? json("auto") : json(n); }

template <typename Model>
json BatchedToJson(const Model& model) {
  return json{{"learning_rate", model.batched_learning_rate},
              {"max_epochs", model.batched_max_epochs},
              {"patience", model.batched_patience}};
}

json TrainToJson(const training::TrainOptions& t) {
  return json{{"learning_rate", t.adam.learning_rate},
              {"weight_decay", t.adam.weight_decay},
              {"max_epochs", t.max_epochs},
              {"patience", t.patience}};
}

// The node task's labels, split and model.
void NodeTaskToJson(const PipelineConfig& c, json* out) {
  json& j = *out;
  j["label_steps"] = c.label_steps;
  j["label_self_loops"] = c.label_self_loops;
  if (c.label_epsilon) {
    j["label_denoising"] = LabelDenoisingName(c.label_denoising);
  }
  j["split"] = c.planetoid_split
                   ? json("planetoid")
                   : json{{"train", c.train_fraction},
                          {"validation", c.validation_fraction}};
  if (c.fixed_split) j["split"]["fixed"] = true;
  const training::NodeModelConfig& m = c.node_model;
  j["model"] = {
      {"kind", ModelKindName(m.kind)},
      {"hidden", m.hidden_dim},
      {"layers", m.layers},
      {"dropout", m.dropout},
      {"input_dropout", m.input_dropout},
      {"activation",
       m.activation == training::Activation::kRelu ? "relu" : "selu"},
      {"init", m.init == training::WeightInit::kTorch ? "torch" : "glorot"},
      {"training", TrainToJson(m.train)},
      {"batch_rows", BatchSize(m.batch_rows)},
      {"batched_training", BatchedToJson(m)},
      {"epoch_rows", m.batched_epoch_rows},
      {"validation_rows", m.validation_rows}};
}

// The link task's split and model.
void LinkTaskToJson(const PipelineConfig& c, json* out) {
  json& j = *out;
  j["split"] = {{"validation", c.link_validation_fraction},
                {"test", c.link_test_fraction}};
  if (c.fixed_split) j["split"]["fixed"] = true;
  const training::LinkModelConfig& m = c.link_model;
  j["model"] = {
      {"kind", m.layers == 1 ? "logistic-regression" : "mlp"},
      {"hidden", m.hidden_dim},
      {"layers", m.layers},
      {"dropout", m.dropout},
      {"input_dropout", m.input_dropout},
      {"standardize_features", m.standardize_features},
      {"loss",
       m.loss == training::LinkLossKind::kPairwise ? "pairwise" : "logistic"},
      {"training", TrainToJson(m.train)},
      {"batch_pairs", BatchSize(m.batch_pairs)},
      {"batched_training", BatchedToJson(m)}};
  json& batched = j["model"]["batched_training"];
  batched["decay_patience"] = m.batched_decay_patience;
  batched["decay_factor"] = m.batched_decay_factor;
  batched["max_decays"] = m.batched_max_decays;
}

// SE-PrivGEmb's or DPNE's release.
json ReleaseToJson(const PipelineConfig& c) {
  const embedding::ReleaseConfig r = ReleaseConfigOf(c);
  const bool dpne = c.method == v1::PIPELINE_METHOD_DPNE;
  json j = {{"private", r.private_release},
            {"delta", r.private_release && !dpne ? json(r.delta)
                                                 : json(nullptr)},
            {"standardize", c.standardize}};
  if (dpne) {
    j["dim"] = r.dpne.dim;
    j["lambda"] = r.dpne.lambda;
    j["mu"] = r.dpne.mu;
    j["sweeps"] = r.dpne.sweeps;
    j["sensitivity"] = r.dpne.sensitivity;
    return j;
  }
  const auto& s = r.se_privgemb;
  j["dim"] = s.dim;
  j["negatives"] = s.negatives;
  j["batch_size"] = s.batch_size;
  j["optimizer"] = embedding::OptimizerName(s.optimizer);
  j["learning_rate"] = s.learning_rate;
  j["max_epochs"] = s.max_epochs;
  j["max_steps"] = s.max_steps ? json(*s.max_steps) : json(nullptr);
  j["proximity"] = embedding::ProximityName(s.proximity);
  j["clip"] = s.clip;
  j["noise_multiplier"] = s.noise_multiplier;
  j["noised_rows"] =
      s.noised_rows == embedding::NoisedRows::kTouched ? "touched" : "all";
  return j;
}

// How the features are propagated and prepared: PPR (PprOptionsToJson),
// KProp, or PrivGE's choice between them; LPGNN's aggregation; the
// standardisation.
json PropagationToJson(const PipelineConfig& c) {
  // PrivGE's link task propagates by PPR whatever c.propagation; LPGNN by
  // KProp.
  const NodePropagation p =
      IsGnnMethod(c.method) ? NodePropagation::kKProp
      : c.task == v1::PIPELINE_TASK_NODE ? c.propagation
                                         : NodePropagation::kPpr;
  json prop;
  prop["method"] =
      p == NodePropagation::kPpr ? "ppr-push" : NodePropagationName(p);
  if (p != NodePropagation::kKProp) prop.update(PprOptionsToJson(c.ppr));
  if (p == NodePropagation::kAuto) {
    prop["auto_ppr_max_nodes"] = c.auto_ppr_max_nodes;
  }
  if (p != NodePropagation::kPpr) {
    prop["steps"] = c.feature_steps;
    prop["self_loops"] = c.feature_self_loops;
    prop["normalisation"] = KPropNormName(c.kprop_norm);
  }
  if (IsGnnMethod(c.method)) {
    prop["aggregator"] = kFeatureAggregatorNames.Name(c.aggregator);
    prop["nfr_tau"] = c.nfr_tau;
    prop["standardize"] = c.standardize;
    prop["inputs"] = kNodeInputsNames.Name(c.inputs);
    if (c.inputs != NodeInputs::kReports) {
      prop["positional_features"] = c.positional_features;
    }
  }
  if (c.method == v1::PIPELINE_METHOD_PRIVGE) {
    prop["standardize"] = c.standardize;
    if (c.task == v1::PIPELINE_TASK_NODE) {
      prop["standardize_clip"] = c.standardize_clip;
      prop["z_storage"] = kZStorageNames.Name(c.z_storage);
    }
  }
  return prop;
}

}  // namespace

nlohmann::json FeaturePrivacyToJson(const PipelineConfig& c) {
  json j;
  j["mechanism"] = c.mechanism;
  j["epsilon"] = c.mechanism == "none" ? json(nullptr) : json(c.epsilon);
  if (!IsReleaseMethod(c.method)) {
    j["sampled"] = c.sampled ? json(*c.sampled) : json("default");
    j["scale"] = ScalingName(c.scaling);
  }
  return j;
}

nlohmann::json LearningSettingsToJson(const PipelineConfig& c) {
  json j;
  j["task"] = TaskName(c.task);
  j["method"] = MethodName(c.method);
  j["label_epsilon"] = c.label_epsilon ? json(*c.label_epsilon) : json(nullptr);
  if (c.task == v1::PIPELINE_TASK_NODE) {
    NodeTaskToJson(c, &j);
  } else {
    LinkTaskToJson(c, &j);
  }
  if (IsReleaseMethod(c.method)) {
    j["release"] = ReleaseToJson(c);
  } else {
    j["propagation"] = PropagationToJson(c);
  }
  if (c.task == v1::PIPELINE_TASK_NODE) j["smooth"] = c.smooth;
  j["noise"] = c.secure_noise ? "secure" : "seeded-not-private";
  if (c.attack_class) {
    j["attack"] = {{"kind", poisoning::kAttackNames.Name(c.attack_kind)},
                   {"fraction", c.attack_fraction},
                   {"class", *c.attack_class},
                   {"dims", c.attack_dims}};
  }
  if (c.defences.any()) {
    j["defence"] = {{"kind", DefencesName(c.defences)}};
    if (c.defences.screen) j["defence"]["alpha"] = c.screen_alpha;
  }
  return j;
}

nlohmann::json ConfigToJson(const PipelineConfig& c) {
  json j = LearningSettingsToJson(c);
  j.update(FeaturePrivacyToJson(c));
  return j;
}

}  // namespace ldpgraph::pipeline

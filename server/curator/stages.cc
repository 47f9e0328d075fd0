// The stages' common part (stages.h): a result recorded with its files,
// found and read back; and the propagate and evaluate stages. The estimate
// stage is in stages_estimate.cc, the graph a stage runs on in
// stages_graph.cc, the release stage and its ledger in stages_release.cc.
#include "server/curator/stages.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <iterator>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/linalg/npy.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "common/wire/codec.h"
#include "server/curator/detail_lists.h"
#include "server/curator/internal/stage_requests.h"
#include "server/pipeline/baselines.h"
#include "server/pipeline/pipeline.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::curator {
namespace stages_internal {

absl::StatusOr<pipeline::Method> RequestMethod(
    v1::PipelineMethod m, std::initializer_list<pipeline::Method> among) {
  const auto& names = pipeline::kMethodNames;
  if (m == v1::PIPELINE_METHOD_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline_method is unspecified; it must be one of ",
                     names.Choices(among)));
  }
  for (pipeline::Method allowed : among) {
    if (m == allowed) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline_method must be one of ", names.Choices(among),
                   ", got '", names.Name(m), "'"));
}

}  // namespace stages_internal

using stages_internal::RequestMethod;

namespace {

SparseRows ToSparse(const DenseMatrix& m) {
  SparseRows s;
  s.cols = m.cols;
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (size_t i = 0; i < m.rows; ++i) {
    idx.clear();
    val.clear();
    auto row = m.row(i);
    for (size_t j = 0; j < m.cols; ++j) {
      if (row[j] != 0.0f) {
        idx.push_back(static_cast<uint32_t>(j));
        val.push_back(row[j]);
      }
    }
    s.AppendRow(idx, val);
  }
  return s;
}

// Makes a written file durable: fsync of the file and its directory.
absl::Status SyncFile(const std::string& path, const std::string& dir) {
  for (const std::string& p : {path, dir}) {
    const int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0 || ::fsync(fd) != 0) {
      if (fd >= 0) ::close(fd);
      return absl::InternalError(absl::StrCat("cannot sync ", p));
    }
    ::close(fd);
  }
  return absl::OkStatus();
}

// A request's pipeline_task: INVALID_ARGUMENT "pipeline_task is
// unspecified; ..." when unset or not a task of the proto.
absl::StatusOr<pipeline::Task> RequestTask(v1::PipelineTask t) {
  const auto& names = pipeline::kTaskNames;
  if (!names.Contains(t)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline_task is unspecified; it must be one of ", names.Choices()));
  }
  return t;
}

// An evaluate request's defences (EvaluateRequest.defence): robust and
// edge-consistency are applied, screen asserts that the input was screened.
absl::StatusOr<pipeline::Defences> RequestEvaluateDefences(
    const v1::EvaluateRequest& q) {
  pipeline::Defences defences;
  if (!q.defence().empty()) {
    ASSIGN_OR_RETURN(defences, pipeline::ParseDefences(q.defence(), "defence"));
  }
  return defences;
}

// The level of an estimate's screen (its details' "alpha" beside "screen":
// "applied" or "not applicable"), or nullopt when it was not screened.
std::optional<double> ScreenAlphaOf(const v1::StageResult& estimate) {
  const auto details = nlohmann::json::parse(estimate.details_json(), nullptr,
                                             /*allow_exceptions=*/false);
  if (!details.is_object() || !details.contains("screen") ||
      !details.contains("alpha") || !details["alpha"].is_number()) {
    return std::nullopt;
  }
  return details["alpha"].get<double>();
}

// The record of the stored result `id`; DATA_LOSS when it does not parse.
absl::StatusOr<v1::StageResult> ParsedResult(const store::ResultRow& row,
                                             absl::string_view id) {
  v1::StageResult r;
  if (!r.ParseFromString(row.record)) {
    return absl::DataLossError(absl::StrCat("result ", id, " does not parse"));
  }
  return r;
}

// A result's details; DATA_LOSS when they do not parse.
absl::StatusOr<nlohmann::json> DetailsOf(const v1::StageResult& r) {
  auto details = nlohmann::json::parse(r.details_json(), nullptr,
                                       /*allow_exceptions=*/false);
  if (details.is_discarded()) {
    return absl::DataLossError(
        absl::StrCat("result ", r.id(), " has unreadable details"));
  }
  return details;
}

// The nodes an estimate's screen flagged (its details' "flagged", whole:
// from its id-list file when the details hold the first ones only), empty
// when it was not screened.
absl::StatusOr<std::vector<uint32_t>> FlaggedNodes(
    const v1::StageResult& estimate, const std::string& id_list_file) {
  ASSIGN_OR_RETURN(const nlohmann::json details, DetailsOf(estimate));
  if (!details.is_object() || !details.contains("flagged")) {
    return std::vector<uint32_t>();
  }
  ASSIGN_OR_RETURN(std::vector<uint32_t> out,
                   WholeIdList(details, "flagged", id_list_file));
  std::sort(out.begin(), out.end());
  return out;
}

// What an evaluate request asks for, checked before anything is read.
struct EvaluateAsk {
  pipeline::Method method;
  pipeline::Task task;
  pipeline::Defences defences;
  std::vector<pipeline::Baseline> baselines;
};

// INVALID_ARGUMENT for an unspecified or unknown method or task, a bad
// defence, or baselines on the link task.
absl::StatusOr<EvaluateAsk> CheckEvaluateRequest(
    const v1::EvaluateRequest& q) {
  EvaluateAsk ask;
  ASSIGN_OR_RETURN(
      ask.method,
      RequestMethod(q.pipeline_method(),
                    {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN,
                     v1::PIPELINE_METHOD_UPGNET}));
  ASSIGN_OR_RETURN(ask.task, RequestTask(q.pipeline_task()));
  ASSIGN_OR_RETURN(ask.defences, RequestEvaluateDefences(q));
  ASSIGN_OR_RETURN(ask.baselines,
                   pipeline::ParseDeployedBaselines(
                       absl::StrJoin(q.baselines(), ","), "baselines"));
  if (!ask.baselines.empty() && ask.task != v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError("baselines apply to the node task");
  }
  return ask;
}

// The curator's public data with an assembled graph in place of its own
// (the labels and the features' width kept).
Dataset WithGraph(const Dataset& data, Graph graph) {
  Dataset d;
  d.meta = data.meta;
  d.meta.edges = graph.num_edges();
  d.labels = data.labels;
  d.features.cols = data.features.cols;
  d.graph = std::move(graph);
  return d;
}

// A label campaign's reports into collected->label_reports (-1 for a node
// that did not report), its budget into c->label_epsilon. None when
// campaign_id is empty; FAILED_PRECONDITION for a campaign that does not
// collect labels.
absl::Status CollectLabelReports(OperatorSide& curator,
                                 const std::string& campaign_id,
                                 pipeline::PipelineConfig* c,
                                 pipeline::Collected* collected) {
  if (campaign_id.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(v1::Campaign lc, curator.campaigns().Get(campaign_id));
  if (lc.attribute() != v1::ATTRIBUTE_LABEL) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign ", campaign_id, " does not collect labels"));
  }
  ASSIGN_OR_RETURN(auto reports, curator.campaigns().Reports(campaign_id));
  std::vector<int32_t> labels(curator.num_nodes(), -1);
  for (const auto& [v, report] : reports) {
    labels[v] = static_cast<int32_t>(report.label().label());
  }
  collected->label_reports = std::move(labels);
  c->label_epsilon = lc.spec().epsilon();
  return absl::OkStatus();
}

// The union of two ascending node lists, into *into.
void AddUntrusted(const std::vector<uint32_t>& more,
                  std::vector<uint32_t>* into) {
  if (more.empty()) return;
  std::vector<uint32_t> both;
  std::set_union(into->begin(), into->end(), more.begin(), more.end(),
                 std::back_inserter(both));
  *into = std::move(both);
}

// The defences on the estimate's side and what its campaign was: robust is
// the pipeline's to apply; screen was the estimate's, recorded with its
// level (FAILED_PRECONDITION when it was not screened). LPGNN's settings
// follow the budget the reports were collected at, and the mechanism they
// came from (LPGNN unbiases HDS's), both from the features campaign's
// compiled spec; the nodes the estimate's screen flagged are not trusted.
// Returns the input's mechanism, when known.
absl::StatusOr<std::string> ApplyEstimate(
    OperatorSide& curator, const Stages& stages, const store::ResultRow& input,
    const std::string& input_id, const pipeline::Defences& defences,
    pipeline::PipelineConfig* config, pipeline::Collected* collected) {
  pipeline::PipelineConfig& c = *config;
  v1::StageResult estimate;
  const bool parsed = estimate.ParseFromString(input.record);
  c.defences.robust = defences.robust;
  if (defences.screen) {
    const std::optional<double> alpha =
        parsed ? ScreenAlphaOf(estimate) : std::nullopt;
    if (!alpha) {
      return absl::FailedPreconditionError(absl::StrCat(
          "defence screen: estimate ", input_id, " was not screened (estimate "
          "with defence \"screen\" first)"));
    }
    c.defences.screen = true;
    c.screen_alpha = *alpha;
  }
  if (!parsed) return std::string();
  std::string input_mechanism;
  auto fc = curator.campaigns().Spec(estimate.input());
  const v1::MechanismSpec* fw = fc.ok() ? &(*fc)->wire() : nullptr;
  if (fw != nullptr && fw->epsilon() > 0) c.epsilon = fw->epsilon();
  // Its sampled dimensions as the campaign gave them (0: the default).
  if (fw != nullptr && (*fc)->feature() != nullptr) {
    c.mechanism = std::string(MechanismName((*fc)->feature()->kind()));
    c.sampled = fw->sampled() != 0
                    ? std::optional<int>(static_cast<int>(fw->sampled()))
                    : std::nullopt;
    input_mechanism = c.mechanism;
  }
  ASSIGN_OR_RETURN(collected->untrusted,
                   FlaggedNodes(estimate, stages.IdListFile(estimate)));
  return input_mechanism;
}

// The baselines beside the evaluation, each on the same split and graph,
// into details["baselines"].
absl::Status EvaluateBaselines(const Dataset& public_data,
                               const pipeline::PipelineConfig& c,
                               const std::vector<pipeline::Baseline>& baselines,
                               const pipeline::Collected& collected,
                               uint64_t seed, nlohmann::json* out) {
  nlohmann::json& details = *out;
  for (const pipeline::Baseline b : baselines) {
    const auto tb = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const pipeline::RunResult br,
                     pipeline::RunCollectedBaseline(public_data, c, b,
                                                    collected, seed));
    details["baselines"][std::string(pipeline::BaselineKey(b))] = {
        {"label", b == pipeline::Baseline::kFeatureFree
                      ? "graph alone (no reports)"
                  : b == pipeline::Baseline::kNoGraph
                      ? "reports alone (no graph)"
                      : "graph and labels alone"},
        {"value", br.metric},
        {"seconds", SecondsSince(tb)}};
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ParseResultId(absl::string_view id) {
  int64_t n = 0;
  if (id.size() < 2 || id[0] != 'r' || !absl::SimpleAtoi(id.substr(1), &n) ||
      n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("result id must look like r1, r2, ...; got '", id, "'"));
  }
  return n;
}
absl::StatusOr<store::ResultRow> Stages::Find(absl::string_view id) const {
  ASSIGN_OR_RETURN(int64_t n, ParseResultId(id));
  return curator_->store().GetResult(n);
}

absl::StatusOr<store::ResultRow> Stages::FindEstimate(
    absl::string_view id, absl::string_view stage) const {
  ASSIGN_OR_RETURN(store::ResultRow row, Find(id));
  ASSIGN_OR_RETURN(const v1::StageResult r, ParsedResult(row, id));
  if (r.stage() != "estimate") {
    return absl::FailedPreconditionError(absl::StrCat(
        stage, " needs an estimate result; ", id, " is a ", r.stage(),
        " result"));
  }
  return row;
}

absl::StatusOr<DenseMatrix> Stages::Matrix(absl::string_view id) const {
  ASSIGN_OR_RETURN(store::ResultRow row, Find(id));
  if (row.matrix_path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("result ", id, " holds no matrix"));
  }
  return ReadNpy(row.matrix_path);
}

absl::StatusOr<std::vector<uint32_t>> Stages::IdList(
    absl::string_view id, absl::string_view list) const {
  ASSIGN_OR_RETURN(store::ResultRow row, Find(id));
  ASSIGN_OR_RETURN(const v1::StageResult r, ParsedResult(row, id));
  ASSIGN_OR_RETURN(const nlohmann::json details, DetailsOf(r));
  absl::StatusOr<std::vector<uint32_t>> ids =
      WholeIdList(details, list, IdListFile(r));
  if (!ids.ok()) {
    return absl::Status(ids.status().code(),
                        absl::StrCat("result ", id, ": ", ids.status().message()));
  }
  return ids;
}

std::string Stages::FileStem(const v1::StageResult& r) const {
  return absl::StrCat(dir_, "/", r.stage(), "-", r.created_unix_ms(), "-",
                      r.input());
}

absl::StatusOr<v1::StageResult> Stages::Record(v1::StageResult r,
                                               nlohmann::json details,
                                               const DenseMatrix* m) {
  r.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  // Named after the time and stage until the store assigns the id; the
  // files are complete and synced before the result that names them
  // exists.
  const IdLists whole = TruncateIdLists(&details);
  r.set_details_json(details.dump());
  if (r.details_json().size() > kMaxDetailsBytes) {
    return absl::InternalError(absl::StrCat(
        "the ", r.stage(), " stage's details are ", r.details_json().size(),
        " bytes, over the bound of ", kMaxDetailsBytes,
        " (a list in them is not cut); nothing was stored"));
  }
  if (!whole.empty()) {
    const std::string lists = IdListFile(r);
    RETURN_IF_ERROR(WriteIdLists(lists, whole));
    RETURN_IF_ERROR(SyncFile(lists, dir_));
  }
  std::string path;
  if (m != nullptr) {
    path = FileStem(r) + ".npy";
    RETURN_IF_ERROR(WriteNpy(path, *m));
    RETURN_IF_ERROR(SyncFile(path, dir_));
    r.set_rows(static_cast<uint32_t>(m->rows));
    r.set_cols(static_cast<uint32_t>(m->cols));
  }
  ASSIGN_OR_RETURN(int64_t id, curator_->store().AddResult(
                                   [&](int64_t id) {
                                     r.set_id(absl::StrCat("r", id));
                                     return r.SerializeAsString();
                                   },
                                   path));
  (void)id;
  results_.fetch_add(1);
  RETURN_IF_ERROR(curator_->store().Audit(
      "admin", absl::StrCat("pipeline.", r.stage()),
      absl::StrCat(R"({"result":")", r.id(), R"(","input":")", r.input(),
                   "\"}")));
  return r;
}
absl::StatusOr<v1::StageResult> Stages::Propagate(
    const v1::PropagateRequest& q) {
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(store::ResultRow input, FindEstimate(q.input(), "propagate"));
  ASSIGN_OR_RETURN(DenseMatrix x, ReadNpy(input.matrix_path));
  nlohmann::json details = {{"input", q.input()}};
  ASSIGN_OR_RETURN(StageGraph sg, GraphFor(q.graph_campaign_id(),
                                           q.blink_variant(), &details));
  const Graph& graph = sg.get();
  DenseMatrix z;
  const std::string method = q.method().empty() ? "ppr" : q.method();
  if (method == "ppr") {
    // The request's settings (0: the default) over PrivGE's defaults.
    PprOverrides given;
    if (q.alpha() > 0) given.alpha = q.alpha();
    if (q.r() > 0) given.r = q.r();
    if (q.rmax() > 0) given.rmax = q.rmax();
    PprOptions defaults = pipeline::DefaultConfig(v1::PIPELINE_METHOD_PRIVGE,
                                                  v1::PIPELINE_TASK_NODE)
                              .ppr;
    defaults.threads = pipeline_threads_;
    ASSIGN_OR_RETURN(const PprOptions o, ApplyPprOverrides(defaults, given));
    ASSIGN_OR_RETURN(z, PprPush(graph, ToSparse(x), o));
    details["method"] = "ppr";
    details.update(PprOptionsToJson(o));
  } else if (method == "kprop") {
    const int steps = q.steps() > 0 ? static_cast<int>(q.steps()) : 16;
    ASSIGN_OR_RETURN(z, KProp(graph, x, steps, false, pipeline_threads_));
    details["method"] = "kprop";
    details["steps"] = steps;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("method must be ppr or kprop, got '", method, "'"));
  }
  v1::StageResult r;
  r.set_stage("propagate");
  r.set_input(q.input());
  r.set_seconds(SecondsSince(t));
  return Record(std::move(r), std::move(details), &z);
}

absl::StatusOr<v1::StageResult> Stages::Evaluate(const v1::EvaluateRequest& q) {
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const EvaluateAsk ask, CheckEvaluateRequest(q));
  ASSIGN_OR_RETURN(store::ResultRow input, FindEstimate(q.input(), "evaluate"));
  if (ask.task == v1::PIPELINE_TASK_NODE && data_->meta.classes < 2) {
    return absl::FailedPreconditionError(
        "node classification needs the curator's labels (a dataset with "
        "classes)");
  }
  nlohmann::json graph_details = nlohmann::json::object();
  ASSIGN_OR_RETURN(StageGraph sg,
                   GraphFor(q.graph_campaign_id(), q.blink_variant(),
                            &graph_details, ask.defences.edge_consistency));
  // A copy of the public data only when the graph is an assembled one.
  std::optional<Dataset> with_graph;
  if (sg.assembled) with_graph = WithGraph(*data_, std::move(*sg.assembled));
  const Dataset& public_data = with_graph ? *with_graph : *data_;
  pipeline::PipelineConfig c = pipeline::DefaultConfig(ask.method, ask.task);
  c.threads = pipeline_threads_;
  pipeline::Collected collected;
  {
    ASSIGN_OR_RETURN(const DenseMatrix x, ReadNpy(input.matrix_path));
    collected.features = ToSparse(x);
  }
  RETURN_IF_ERROR(
      CollectLabelReports(*curator_, q.label_campaign_id(), &c, &collected));
  ASSIGN_OR_RETURN(const std::string input_mechanism,
                   ApplyEstimate(*curator_, *this, input, q.input(),
                                 ask.defences, &c, &collected));
  // Nor, with their labels, the nodes the edge screen caught (as ldpgraph
  // eval's RunOverrides::untrusted).
  AddUntrusted(sg.flagged, &collected.untrusted);
  pipeline::ResolveDatasetSettings(public_data.meta, &c);
  ASSIGN_OR_RETURN(pipeline::RunResult run,
                   pipeline::RunPipelineOnCollected(public_data, c, collected,
                                                    q.seed()));
  // The reports came from the agents, with the campaigns' settings: the
  // stage records the learning's own (not the feature privacy's).
  nlohmann::json details = pipeline::LearningSettingsToJson(c);
  details["input"] = q.input();
  details["noise"] = "agents";
  if (!input_mechanism.empty()) details["input_mechanism"] = input_mechanism;
  details["label_campaign"] = q.label_campaign_id();
  details.update(graph_details);
  details["seed"] = q.seed();
  if (!collected.untrusted.empty()) {
    details["untrusted_nodes"] = collected.untrusted.size();
  }
  details["metric"] =
      ask.task == v1::PIPELINE_TASK_NODE ? "accuracy" : "roc_auc";
  details["value"] = run.metric;
  details.update(pipeline::RunResultToJson(run));
  RETURN_IF_ERROR(EvaluateBaselines(public_data, c, ask.baselines, collected,
                                    q.seed(), &details));
  v1::StageResult r;
  r.set_stage("evaluate");
  r.set_input(q.input());
  r.set_metric(run.metric);
  r.set_seconds(SecondsSince(t));
  return Record(std::move(r), std::move(details), nullptr);
}

}  // namespace ldpgraph::curator

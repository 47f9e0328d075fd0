// The curator's stages and what they record (internal/commands.h):
// `pipeline` (run, estimate, propagate, evaluate), `release` (create,
// ledger), `results` and `export`; the requests built from the flags alone,
// so that usage errors come first, and --blink-variant (commands.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/cli_args.h"
#include "common/edges/blink.h"
#include "common/linalg/matrix.h"
#include "common/linalg/npy.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/commands.h"
#include "server/ldpctl/connection.h"
#include "server/ldpctl/internal/commands.h"
#include "server/pipeline/config.h"

namespace ldpgraph::ldpctl {

absl::StatusOr<std::string> BlinkVariantFromFlags(const CliArgs& a) {
  if (!a.Has("blink-variant")) return std::string();
  if (!a.Has("graph-campaign")) {
    return absl::InvalidArgumentError(
        "--blink-variant needs --graph-campaign (an edge-blink campaign)");
  }
  ASSIGN_OR_RETURN(edges::BlinkVariant v,
                   edges::kBlinkVariantNames.Parse(*a.Get("blink-variant"),
                                                   "--blink-variant"));
  return std::string(edges::kBlinkVariantNames.Name(v));
}

namespace internal {
namespace {

void ResultRow(std::ostream& out, const v1::StageResult& r) {
  out << absl::StrFormat("%-5s %-9s %-6s %7u x %-6u %9.4f %8.2fs  %s\n", r.id(),
                         r.stage(), r.input(), r.rows(), r.cols(), r.metric(),
                         r.seconds(), r.details_json());
}

void PrintResult(const Output& o, const v1::StageResult& r) {
  if (o.json) return o.Json(r);
  ResultRow(o.out, r);
}

// --defence and --screen-alpha of `pipeline run`, `estimate` or
// `evaluate` (sub): the screen goes to the estimate stage, robust to the
// evaluate stage, edge-consistency to the evaluate stage's graph.
// INVALID_ARGUMENT naming the flag for a bad list, robust or
// edge-consistency for `estimate` alone, edge-consistency without
// --graph-campaign, --screen-alpha for `evaluate` (the estimate's screen
// has its level).
absl::StatusOr<pipeline::Defences> PipelineDefences(const CliArgs& a,
                                                    const std::string& sub,
                                                    double* alpha) {
  pipeline::Defences d;
  *alpha = pipeline::kDefaultScreenAlpha;
  RETURN_IF_ERROR(pipeline::ParseDefenceFlags(a, &d, alpha));
  if (d.edge_consistency && sub == "estimate") {
    return absl::InvalidArgumentError(
        "--defence edge-consistency applies to pipeline evaluate and run (the "
        "evaluate stage screens its graph campaign's edge reports)");
  }
  if (d.edge_consistency && !a.Has("graph-campaign")) {
    return absl::InvalidArgumentError(
        "--defence edge-consistency screens edge reports: it needs "
        "--graph-campaign (an edge-rr or edge-blink campaign)");
  }
  if (sub == "estimate" && d.robust) {
    return absl::InvalidArgumentError(
        "--defence robust applies to pipeline evaluate and run (the evaluate "
        "stage); an estimate applies the screen only");
  }
  if (sub == "evaluate" && a.Has("screen-alpha")) {
    return absl::InvalidArgumentError(
        "--screen-alpha applies to pipeline estimate and run: evaluate reads "
        "the screen of its input estimate");
  }
  return d;
}

// The request of `pipeline estimate` (and run) on campaign, from the flags
// alone (PipelineDefences' errors).
absl::StatusOr<v1::EstimateRequest> EstimateRequestFromFlags(
    const CliArgs& a, const std::string& sub, const std::string& campaign) {
  double alpha = 0;
  ASSIGN_OR_RETURN(const pipeline::Defences d, PipelineDefences(a, sub, &alpha));
  v1::EstimateRequest req;
  req.set_campaign_id(campaign);
  if (d.screen) {
    req.set_defence("screen");
    req.set_screen_alpha(alpha);
  }
  return req;
}

absl::StatusOr<v1::StageResult> Estimate(const CliArgs& a, const std::string& sub,
                                         const Connection& c,
                                         const std::string& campaign) {
  ASSIGN_OR_RETURN(const v1::EstimateRequest req,
                   EstimateRequestFromFlags(a, sub, campaign));
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::StageResult out;
  RETURN_IF_ERROR(FromGrpc(c.stub->Estimate(&ctx, req, &out), c.address));
  return out;
}

// The request of `pipeline evaluate` (and run: sub) on input, from the
// flags alone: INVALID_ARGUMENT for a --task or --method it does not take,
// and PipelineDefences' errors.
absl::StatusOr<v1::EvaluateRequest> EvaluateRequestFromFlags(
    const CliArgs& a, const std::string& sub, const std::string& input) {
  double alpha = 0;
  ASSIGN_OR_RETURN(const pipeline::Defences d, PipelineDefences(a, sub, &alpha));
  v1::EvaluateRequest req;
  if (d.any()) req.set_defence(pipeline::DefencesName(d));
  req.set_input(input);
  ASSIGN_OR_RETURN(
      const pipeline::Task task,
      pipeline::kTaskNames.Parse(a.Get("task").value_or("node"), "--task"));
  ASSIGN_OR_RETURN(
      const pipeline::Method method,
      pipeline::kMethodNames.Parse(
          a.Get("method").value_or("privge"), "--method",
          {v1::PIPELINE_METHOD_PRIVGE, v1::PIPELINE_METHOD_LPGNN,
           v1::PIPELINE_METHOD_UPGNET}));
  req.set_pipeline_task(task);
  if (auto list = a.Get("baselines")) {
    ASSIGN_OR_RETURN(const std::vector<pipeline::Baseline> baselines,
                     pipeline::ParseDeployedBaselines(*list, "--baselines"));
    for (const pipeline::Baseline b : baselines) {
      req.add_baselines(std::string(pipeline::kBaselineNames.Name(b)));
    }
  }
  req.set_pipeline_method(method);
  req.set_label_campaign_id(a.Get("labels").value_or(""));
  req.set_graph_campaign_id(a.Get("graph-campaign").value_or(""));
  ASSIGN_OR_RETURN(*req.mutable_blink_variant(), BlinkVariantFromFlags(a));
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  req.set_seed(seed.value_or(1));
  return req;
}

absl::StatusOr<v1::StageResult> Evaluate(const CliArgs& a, const std::string& sub,
                                         const Connection& c,
                                         const std::string& input) {
  ASSIGN_OR_RETURN(const v1::EvaluateRequest req,
                   EvaluateRequestFromFlags(a, sub, input));
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::StageResult out;
  RETURN_IF_ERROR(FromGrpc(c.stub->Evaluate(&ctx, req, &out), c.address));
  return out;
}

// The request of `release create`, from the flags alone (checked before
// any connection, so a usage error says what is wrong with the command).
absl::StatusOr<v1::ReleaseRequest> ReleaseRequestFromFlags(const CliArgs& a) {
  if (!a.Has("method")) {
    return absl::InvalidArgumentError(
        "release create needs --method se-privgemb or dpne");
  }
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  if (!eps) return absl::InvalidArgumentError("release create needs --epsilon");
  v1::ReleaseRequest req;
  ASSIGN_OR_RETURN(
      const pipeline::Method method,
      pipeline::kMethodNames.Parse(
          *a.Get("method"), "--method",
          {v1::PIPELINE_METHOD_SE_PRIVGEMB, v1::PIPELINE_METHOD_DPNE}));
  req.set_pipeline_method(method);
  req.set_epsilon(*eps);
  req.set_graph_campaign_id(a.Get("graph-campaign").value_or(""));
  ASSIGN_OR_RETURN(*req.mutable_blink_variant(), BlinkVariantFromFlags(a));
  ASSIGN_OR_RETURN(auto seed, a.GetUint("seed"));
  req.set_seed(seed.value_or(1));
  ASSIGN_OR_RETURN(auto dim, a.GetUint("dim"));
  if (dim) req.set_dim(static_cast<uint32_t>(*dim));
  ASSIGN_OR_RETURN(auto sigma, a.GetDouble("noise-multiplier"));
  if (sigma) req.set_noise_multiplier(*sigma);
  ASSIGN_OR_RETURN(auto epochs, a.GetUint("max-epochs"));
  if (epochs) req.set_max_epochs(static_cast<uint32_t>(*epochs));
  ASSIGN_OR_RETURN(auto batch, a.GetUint("batch"));
  if (batch) req.set_batch_size(static_cast<uint32_t>(*batch));
  req.set_proximity(a.Get("proximity").value_or(""));
  return req;
}

}  // namespace

absl::Status CheckPipelineUsage(const std::string& command,
                                const std::string& sub, const std::string& id,
                                const CliArgs& a) {
  if (command == "release") {
    // Usage errors before any connection setting is looked at.
    if (sub != "create" && sub != "ledger") {
      return absl::InvalidArgumentError(absl::StrCat(
          "release: unknown subcommand '", sub, "' (create, ledger)"));
    }
    if (sub == "create") RETURN_IF_ERROR(ReleaseRequestFromFlags(a).status());
  }
  if (command == "pipeline" && (sub == "run" || sub == "evaluate")) {
    RETURN_IF_ERROR(EvaluateRequestFromFlags(a, sub, id).status());
  }
  if (command == "pipeline" && sub == "estimate") {
    RETURN_IF_ERROR(EstimateRequestFromFlags(a, sub, id).status());
  }
  if (command == "pipeline" && sub == "propagate") {
    RETURN_IF_ERROR(BlinkVariantFromFlags(a).status());
  }
  return absl::OkStatus();
}

absl::Status Pipeline(const std::string& sub, const std::string& id,
                      const CliArgs& a, const Connection& c, const Output& o) {
  if (id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline ", sub, " needs ",
        sub == "run" || sub == "estimate" ? "a campaign id" : "a result id"));
  }
  o.err << "ldpctl: pipeline " << sub << " " << id << " ..." << std::endl;
  if (sub == "run") {
    ASSIGN_OR_RETURN(v1::StageResult est, Estimate(a, sub, c, id));
    if (!o.json) ResultRow(o.out, est);
    ASSIGN_OR_RETURN(v1::StageResult ev, Evaluate(a, sub, c, est.id()));
    if (o.json) {
      v1::ListResultsResponse both;
      *both.add_results() = est;
      *both.add_results() = ev;
      o.Json(both);
    } else {
      ResultRow(o.out, ev);
    }
    return absl::OkStatus();
  }
  if (sub == "estimate") {
    ASSIGN_OR_RETURN(v1::StageResult r, Estimate(a, sub, c, id));
    PrintResult(o, r);
    return absl::OkStatus();
  }
  if (sub == "evaluate") {
    ASSIGN_OR_RETURN(v1::StageResult r, Evaluate(a, sub, c, id));
    PrintResult(o, r);
    return absl::OkStatus();
  }
  if (sub == "propagate") {
    v1::PropagateRequest req;
    req.set_input(id);
    req.set_method(a.Get("method").value_or("ppr"));
    ASSIGN_OR_RETURN(auto alpha, a.GetDouble("alpha"));
    if (alpha) req.set_alpha(*alpha);
    ASSIGN_OR_RETURN(auto steps, a.GetUint("steps"));
    if (steps) req.set_steps(static_cast<uint32_t>(*steps));
    req.set_graph_campaign_id(a.Get("graph-campaign").value_or(""));
    ASSIGN_OR_RETURN(*req.mutable_blink_variant(), BlinkVariantFromFlags(a));
    grpc::ClientContext ctx;
    c.Prepare(&ctx);
    v1::StageResult out;
    RETURN_IF_ERROR(FromGrpc(c.stub->Propagate(&ctx, req, &out), c.address));
    PrintResult(o, out);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "pipeline: unknown subcommand '", sub,
      "' (run, estimate, propagate, evaluate)"));
}

absl::Status Release(const std::string& sub, const CliArgs& a,
                     const Connection& c, const Output& o) {
  if (sub == "ledger") {
    // Every page of graphs into one ledger.
    v1::ReleaseLedger out;
    RETURN_IF_ERROR(c.ForEachPage(
        &v1::AdminService::Stub::GetReleaseLedger, v1::GetReleaseLedgerRequest(),
        [&](const v1::ReleaseLedger& page) {
          out.set_epsilon_cap(page.epsilon_cap());
          out.set_delta(page.delta());
          for (const auto& g : page.graphs()) *out.add_graphs() = g;
          return absl::OkStatus();
        }));
    if (o.json) {
      o.Json(out);
      return absl::OkStatus();
    }
    o.out << absl::StrFormat("cap epsilon %g per graph, at delta %g\n",
                             out.epsilon_cap(), out.delta());
    o.out << absl::StrFormat("%-18s %-9s %-10s %-12s %s\n", "graph",
                             "releases", "epsilon", "sum of eps", "results");
    for (const auto& g : out.graphs()) {
      // The latest result ids (all of them up to 1,000).
      std::string ids = absl::StrJoin(g.result_ids(), ",");
      if (g.releases() > static_cast<uint32_t>(g.result_ids_size())) {
        ids = absl::StrCat("(latest ", g.result_ids_size(), ") ", ids);
      }
      o.out << absl::StrFormat("%-18s %-9d %-10.4g %-12.4g %s\n", g.graph(),
                               g.releases(), g.epsilon(), g.epsilon_sum(), ids);
    }
    if (out.graphs_size() == 0) o.out << "(no releases yet)\n";
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(v1::ReleaseRequest req, ReleaseRequestFromFlags(a));
  o.err << "ldpctl: release " << pipeline::MethodName(req.pipeline_method())
        << " at epsilon " << req.epsilon() << " ..." << std::endl;
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::StageResult out;
  RETURN_IF_ERROR(FromGrpc(c.stub->Release(&ctx, req, &out), c.address));
  PrintResult(o, out);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> ResultIdList(const Connection& c,
                                                   const std::string& result_id,
                                                   const std::string& list) {
  v1::ListResultIdsRequest req;
  req.set_result_id(result_id);
  req.set_list(list);
  req.set_page_size(100000);
  std::vector<uint32_t> ids;
  RETURN_IF_ERROR(c.ForEachPage(&v1::AdminService::Stub::ListResultIds, req,
                                [&](const v1::ListResultIdsResponse& page) {
                                  ids.insert(ids.end(), page.ids().begin(),
                                             page.ids().end());
                                  return absl::OkStatus();
                                }));
  return ids;
}

absl::Status Results(const std::string& id, const CliArgs& a,
                     const Connection& c, const Output& o) {
  if (!id.empty() || a.Has("list")) {
    if (id.empty() || !a.Has("list")) {
      return absl::InvalidArgumentError(
          "results ID --list PATH prints a result's id list (e.g. results r2 "
          "--list flagged); plain results lists the results");
    }
    ASSIGN_OR_RETURN(const std::vector<uint32_t> ids,
                     ResultIdList(c, id, *a.Get("list")));
    if (o.json) {
      o.out << nlohmann::json({{"ids", ids}}).dump() << "\n";
    } else {
      for (uint32_t v : ids) o.out << v << "\n";
    }
    return absl::OkStatus();
  }
  // Every page; the table row by row, the JSON as one message.
  v1::ListResultsResponse all;
  RETURN_IF_ERROR(c.ForEachPage(
      &v1::AdminService::Stub::ListResults, v1::ListResultsRequest(),
      [&](const v1::ListResultsResponse& page) {
        for (const auto& r : page.results()) {
          if (o.json) {
            *all.add_results() = r;
          } else {
            ResultRow(o.out, r);
          }
        }
        return absl::OkStatus();
      }));
  if (o.json) o.Json(all);
  return absl::OkStatus();
}

absl::Status Export(const std::string& id, const CliArgs& a, const Connection& c,
                    const Output& o) {
  if (id.empty()) return absl::InvalidArgumentError("export needs a result id");
  if (!a.Has("out")) return absl::InvalidArgumentError("export needs --out FILE.npy");
  const std::string path = *a.Get("out");
  std::string ids_path = a.Get("ids").value_or("");
  if (ids_path.empty()) {
    absl::string_view stem(path);
    absl::ConsumeSuffix(&stem, ".npy");
    ids_path = absl::StrCat(stem, ".ids.npy");
  }
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::ExportEmbeddingsRequest req;
  req.set_result_id(id);
  auto reader = c.stub->ExportEmbeddings(&ctx, req);
  v1::EmbeddingChunk chunk;
  DenseMatrix m;
  bool first = true;
  while (reader->Read(&chunk)) {
    if (first) {
      m = DenseMatrix(chunk.rows(), chunk.cols());
      first = false;
    }
    const size_t offset = size_t{chunk.first_row()} * chunk.cols();
    if (chunk.rows() != m.rows || chunk.cols() != m.cols ||
        offset + chunk.values_size() > m.data.size()) {
      ctx.TryCancel();
      return absl::DataLossError("export: a chunk disagrees with the matrix shape");
    }
    std::copy(chunk.values().begin(), chunk.values().end(),
              m.data.begin() + offset);
  }
  RETURN_IF_ERROR(FromGrpc(reader->Finish(), c.address));
  // Row i of a result is node i of the curator's graph.
  std::vector<int64_t> ids(m.rows);
  for (size_t i = 0; i < m.rows; ++i) ids[i] = static_cast<int64_t>(i);
  RETURN_IF_ERROR(WriteNpy(path, m));
  RETURN_IF_ERROR(WriteNpyInt64(ids_path, ids));
  o.err << "ldpctl: wrote " << m.rows << " x " << m.cols << " to " << path
        << " and the node ids to " << ids_path << "\n";
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace ldpgraph::ldpctl

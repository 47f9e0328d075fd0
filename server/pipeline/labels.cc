// The labels of a node-task run: perturbed (or collected) reports and the
// curator's targets denoised from them (internal/stages.h).
#include "server/pipeline/internal/stages.h"

#include <vector>

#include "common/mechanisms/label_rr.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::pipeline::internal {

absl::StatusOr<LabelReports> PerturbLabels(const Dataset& d,
                                           const NodeSplit& split,
                                           const PipelineConfig& c,
                                           int classes,
                                           const Collected* collected,
                                           const Poisoning* poisoning,
                                           NoiseStreams& noise) {
  ASSIGN_OR_RETURN(auto rr,
                   LabelRandomizedResponse::Create(*c.label_epsilon, classes));
  LabelReports out;
  out.reported.assign(d.graph.num_nodes(), -1);
  for (const auto* list : {&split.train, &split.validation}) {
    for (NodeId v : *list) {
      int y = 0;
      if (collected != nullptr) {
        // The split holds only nodes that reported (RunNode filters it).
        y = (*collected->label_reports)[v];
        RETURN_IF_ERROR(rr->ValidateReport(y));
      } else if (poisoning != nullptr && poisoning->malicious[v]) {
        ASSIGN_OR_RETURN(y, poisoning->adversary->CraftLabel(*rr, noise.at(v)));
      } else {
        ASSIGN_OR_RETURN(y, rr->Perturb(d.labels[v], noise.at(v)));
      }
      out.reported[v] = y;
    }
  }
  out.transition = Mat<float>::Constant(
      classes, classes, static_cast<float>(rr->other_probability()));
  out.transition.diagonal().setConstant(
      static_cast<float>(rr->keep_probability()));
  return out;
}

absl::StatusOr<NoisyLabels> DenoiseLabels(const Dataset& d, const Graph& graph,
                                          const NodeSplit& split,
                                          const PipelineConfig& c, int classes,
                                          const LabelReports& reports,
                                          int label_steps,
                                          bool propagate_validation) {
  const std::vector<int32_t>& reported = reports.reported;
  DenseMatrix onehot(d.graph.num_nodes(), classes);
  for (NodeId v : split.train) onehot.at(v, reported[v]) = 1.0f;
  if (propagate_validation) {
    for (NodeId v : split.validation) onehot.at(v, reported[v]) = 1.0f;
  }
  const bool published = c.label_denoising == LabelDenoising::kPublished;
  ASSIGN_OR_RETURN(
      DenseMatrix smoothed,
      KProp(graph, onehot, label_steps, published ? false : c.label_self_loops,
            c.threads, published ? KPropNorm::kSymmetric : c.kprop_norm));
  NoisyLabels out;
  size_t agree = 0, agree_raw = 0;
  auto target = [&](NodeId v) {
    auto row = smoothed.row(v);
    int best = 0;
    for (int k = 1; k < classes; ++k) {
      if (row[k] > row[best]) best = k;
    }
    const int32_t y = row[best] > 0.0f ? best : reported[v];
    agree += (y == d.labels[v]);
    agree_raw += (reported[v] == d.labels[v]);
    return y;
  };
  for (NodeId v : split.train) {
    out.train.push_back(target(v));
    out.train_reports.push_back(reported[v]);
  }
  for (NodeId v : split.validation) {
    const int32_t y = target(v);
    out.validation.push_back(published ? reported[v] : y);
  }
  const size_t total = split.train.size() + split.validation.size();
  out.agreement = double(agree) / total;
  out.agreement_raw = double(agree_raw) / total;
  return out;
}

}  // namespace ldpgraph::pipeline::internal

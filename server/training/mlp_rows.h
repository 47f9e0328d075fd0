// The node MLP's input rows (TrainNodeClassifier, tasks.h): dense features,
// compressed rows read through a column standardisation that the first
// layer folds in (PrivGE's propagated Z when it is mostly zeros), or a
// file of rows standardised as they are read (PrivGE's Z on wide feature
// sets, row_file.h); the rows
// a step, a validation pass or a prediction reads, gathered as the MLP
// takes them; and the rule that decides when Z goes to the MLP compressed.
//
// Why compressed at all: PrivGE's Z = PPR(X) over estimates with a few
// non-zeros per row is non-zero only where push moved mass (backward push
// is local). On the citation graphs and on a generated 34,493-node graph
// with 8,415 features, PPR at alpha 0.05 reaches most of each component,
// and Z is 25% (citeseer) to 100% (pubmed) non-zero, 75% on the generated
// graph: dense is the smaller layout there. On larger graphs, or with a
// larger alpha or rmax, push stays local and Z is mostly zeros; an n x d
// float matrix would then hold mostly zeros (at a million nodes and 8,415
// features, 34 GB).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/linalg/matrix.h"
#include "common/random/random.h"
#include "server/training/row_file.h"
#include "server/training/models.h"
#include "server/training/options.h"

namespace ldpgraph::training {

// The most non-zeros PrivGE's propagated Z (rows x cols) may hold for the
// MLP to take it as compressed rows (NodeTaskData::feature_rows): a share
// c.sparse_input_density of its entries (by default 1/8, the graph models'
// rule: past it a sparse product costs more than the dense one, and the
// rows' 8 bytes per non-zero pass a quarter of the dense 4 bytes per
// entry); 0, i.e. dense, when the MLP cannot read it so (input dropout,
// predictions propagated over every node) or sparse_input_density is 0.
uint64_t MlpSparseBound(const NodeModelConfig& c, size_t rows, size_t cols,
                        bool propagate_predictions);

// The rows of an MLP's features. Not thread-safe; the features must
// outlive it.
class MlpRows {
 public:
  // Exactly one of dense and sparse set; mean and scale (not null) one
  // entry per column each, or both empty for no standardisation (sparse
  // only; dense features come standardised). clip > 0 (with mean and
  // scale): each stored value v of column j is read as
  // clamp(v, mean_j - clip / scale_j, mean_j + clip / scale_j), so that its
  // standardised entry stays within +-clip; absent entries are read as 0.
  MlpRows(const Mat<float>* dense, const SparseRows* sparse,
          const std::vector<double>* mean, const std::vector<double>* scale,
          double clip = 0);
  // Rows read from `file` (not null), each entry v of column j given as
  // clamp(float((v - mean_j) * scale_j), -clip, clip) when mean and scale
  // hold one entry per column (clip 0: no clamp), as v when both are
  // empty: Standardize's arithmetic, so the same bits as the matrix it
  // would have standardised in memory. Gathered batches are dense.
  MlpRows(const RowFile* file, const std::vector<double>* mean,
          const std::vector<double>* scale, double clip = 0);

  // Some rows gathered: a dense matrix, or a SparseInput with the
  // standardisation as its propagation.
  struct Batch {
    Mat<float> dense;
    std::optional<SparseInput<float>> sparse;
  };

  // rows[0 .. count) of the features, in that order, into *out.
  void Gather(const uint32_t* rows, size_t count, Batch* out) const;

  // The MLP on a gathered batch (training mode keeps what Backward needs:
  // b must stay alive until then).
  const Mat<float>& Forward(Mlp<float>& mlp, const Batch& b, bool training,
                            PublicRandom* rng) const;

  // Inference outputs of `rows`, gathered ChunkRows() at a time (at once
  // when they fit one chunk).
  Mat<float> Predict(Mlp<float>& mlp, const std::vector<uint32_t>& rows) const;

  // Rows per chunk: kNodeFullBatchEntries / cols, at least 1. A gathered
  // chunk holds at most that many entries (its non-zeros when sparse).
  size_t ChunkRows() const;

 private:
  const Mat<float>* dense_;
  const SparseRows* sparse_;
  const RowFile* file_ = nullptr;
  float file_clip_ = 0;  // the file's clamp, +infinity for none
  const std::vector<double>* mean_;
  const std::vector<double>* scale_;
  // clip > 0: the stored values' bounds per column (as above); else empty.
  std::vector<float> low_, high_;
};

}  // namespace ldpgraph::training

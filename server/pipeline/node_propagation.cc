// The node task's propagation (PropagateNode): the classifier's input from
// the release, or from the estimates by KProp, high-order aggregation,
// KProp deferred into the first layer, or PrivGE's PPR (in memory, as
// compressed rows, or by slices into a file of rows).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/pipeline/internal/deferred_kprop.h"
#include "server/pipeline/internal/node_task.h"
#include "server/propagation/propagation.h"
#include "server/training/mlp_rows.h"
#include "server/training/row_file.h"

namespace ldpgraph::pipeline::internal {
namespace {

// Whether the training on in's estimates takes predictions propagated
// with label reports (they read every node each epoch, dense).
bool PropagatesPredictions(const NodeRunInputs& in, const PipelineConfig& c) {
  return in.labels != nullptr &&
         c.label_denoising == LabelDenoising::kPublished;
}

// Whether PrivGE's Z goes to a file of rows (ZStorage).
bool ZToFile(const NodeRunInputs& in, const PipelineConfig& c) {
  if (c.method != v1::PIPELINE_METHOD_PRIVGE || in.x == nullptr ||
      c.node_model.kind != training::NodeModelKind::kMlp ||
      PropagatesPredictions(in, c)) {
    return false;
  }
  switch (c.z_storage) {
    case ZStorage::kMemory:
      return false;
    case ZStorage::kFile:
      return true;
    case ZStorage::kAuto:
      break;
  }
  return in.x->cols >= kZFileMinColumns &&
         uint64_t{in.x->rows} * in.x->cols * sizeof(float) > kZFileMinBytes;
}

// Columns [j0, j0 + w) of x, numbered from 0.
SparseRows ColumnSlice(const SparseRows& x, size_t j0, size_t w) {
  SparseRows out;
  out.cols = w;
  out.offsets.reserve(x.rows + 1);
  for (size_t v = 0; v < x.rows; ++v) {
    const auto idx = x.row_indices(v);
    const auto val = x.row_values(v);
    const auto first = std::lower_bound(idx.begin(), idx.end(), j0);
    const auto last = std::lower_bound(first, idx.end(), j0 + w);
    for (auto it = first; it != last; ++it) {
      out.indices.push_back(static_cast<uint32_t>(*it - j0));
      out.values.push_back(val[it - idx.begin()]);
    }
    out.offsets.push_back(out.indices.size());
  }
  out.rows = x.rows;
  return out;
}

// out holds Z as compressed rows, with its standardisation's column
// moments when c.standardize (for the MLP to fold in).
void HoldZRows(const PipelineConfig& c, SparseRows z, NodeFeatures* out) {
  if (c.standardize) {
    for (const ColumnMoments& m : StandardizeMoments(z)) {
      out->mean.push_back(m.mean);
      out->scale.push_back(m.scale);
    }
  }
  out->rows = std::make_shared<const SparseRows>(std::move(z));
}

// The columns of PropagateToFile's slices: as many as a slice's two
// n x width float buffers fit in c.z_slice_bytes, rounded down to a whole
// number of `block`s (at least one block), at most d.
size_t ZSliceWidth(const PipelineConfig& c, size_t n, size_t d,
                   size_t block) {
  const uint64_t per_column = uint64_t{std::max<size_t>(n, 1)} * 2 *
                              sizeof(float);
  size_t width = static_cast<size_t>(c.z_slice_bytes / per_column);
  width = std::max(block, width / block * block);
  width = std::min(width, d);
  return width;
}

// Columns [j0, j0 + w) of PrivGE's Z: that slice of in's estimates pushed
// with o (PPR), or propagated by feature_steps KProp steps.
absl::StatusOr<DenseMatrix> PropagateZSlice(const NodeRunInputs& in,
                                            const PipelineConfig& c,
                                            const PprOptions& o,
                                            int feature_steps, size_t j0,
                                            size_t w) {
  const size_t n = in.x->rows;
  const SparseRows part = ColumnSlice(*in.x, j0, w);
  DenseMatrix z;
  if (c.propagation == NodePropagation::kPpr) {
    RETURN_IF_ERROR(PprPushByDensity(*in.graph, part, o, 0, [&] {
                      z = DenseMatrix(n, w);
                      return absl::MakeSpan(z.data);
                    }).status());
  } else {
    ASSIGN_OR_RETURN(z, KProp(*in.graph, DenseWithFill(part, in.x_fill),
                              feature_steps, c.feature_self_loops, c.threads,
                              c.kprop_norm));
  }
  return z;
}

// The n x d rows of `file` (`nonzeros` of them non-zero) read back into
// compressed rows, as PropagatePpr lays them out.
absl::StatusOr<SparseRows> ReadZRows(const training::RowFile& file, size_t n,
                                     size_t d, uint64_t nonzeros) {
  SparseRows z;
  z.cols = d;
  z.indices.reserve(nonzeros);
  z.values.reserve(nonzeros);
  z.offsets.reserve(n + 1);
  constexpr size_t kRows = 1024;
  std::vector<float> buffer(kRows * d);
  std::vector<uint32_t> ids(kRows);
  for (size_t first = 0; first < n; first += kRows) {
    const size_t count = std::min(kRows, n - first);
    for (size_t i = 0; i < count; ++i) {
      ids[i] = static_cast<uint32_t>(first + i);
    }
    file.ReadRows(ids.data(), count, buffer.data());
    RETURN_IF_ERROR(file.status());
    for (size_t i = 0; i < count; ++i) {
      const float* row = buffer.data() + i * d;
      for (size_t j = 0; j < d; ++j) {
        if (row[j] != 0.0f) {
          z.indices.push_back(static_cast<uint32_t>(j));
          z.values.push_back(row[j]);
        }
      }
      z.offsets.push_back(z.indices.size());
    }
  }
  z.rows = n;
  return z;
}

// PrivGE's Z (PPR, or feature_steps KProp steps) by slices of columns into
// a file of rows (ZStorage::kFile): each slice is propagated on its own
// (push with AbsoluteRmax over all columns, and slices that are whole
// numbers of PprPushBlockColumns, so that every block pushes as it would
// have in one call), its column moments taken (Standardize's), and
// written. PPR's Z with at most MlpSparseBound non-zeros is then read back
// into compressed rows, as PropagatePpr would have laid it out; otherwise
// the file, with the moments when c.standardize. Memory: a slice's two
// n x width buffers (c.z_slice_bytes), push's scratch, and x's slice.
absl::Status PropagateToFile(const NodeRunInputs& in, const PipelineConfig& c,
                             int feature_steps, NodeFeatures* out) {
  const SparseRows& x = *in.x;
  const size_t n = x.rows, d = x.cols;
  const bool ppr = c.propagation == NodePropagation::kPpr;
  const PprOptions o = AbsoluteRmax(PprOptionsOf(c), x);
  // KProp's slices need no alignment; 16 keeps them as push's would be.
  const size_t block =
      ppr ? static_cast<size_t>(PprPushBlockColumns(n, d, o)) : 16;
  const size_t width = ZSliceWidth(c, n, d, block);
  ASSIGN_OR_RETURN(std::unique_ptr<training::RowFile> file,
                   training::RowFile::Create(c.scratch_dir, n, d));
  std::vector<double> mean(d), scale(d);
  uint64_t nonzeros = 0;
  for (size_t j0 = 0; j0 < d; j0 += width) {
    const size_t w = std::min(width, d - j0);
    ASSIGN_OR_RETURN(DenseMatrix z,
                     PropagateZSlice(in, c, o, feature_steps, j0, w));
    for (size_t k = 0; k < w; ++k) {
      const ColumnMoments m = StandardizeMoments(z.data.data() + k, n, w);
      mean[j0 + k] = m.mean;
      scale[j0 + k] = m.scale;
    }
    nonzeros += static_cast<uint64_t>(
        std::count_if(z.data.begin(), z.data.end(),
                      [](float v) { return v != 0.0f; }));
    RETURN_IF_ERROR(file->WriteColumns(j0, w, z.data.data()));
  }
  const uint64_t bound =
      ppr ? training::MlpSparseBound(c.node_model, n, d,
                                     PropagatesPredictions(in, c))
          : 0;
  if (bound > 0 && nonzeros <= bound) {
    // Mostly zeros: compressed rows, as PropagatePpr lays them out.
    ASSIGN_OR_RETURN(SparseRows z, ReadZRows(*file, n, d, nonzeros));
    HoldZRows(c, std::move(z), out);
    return absl::OkStatus();
  }
  if (c.standardize) {
    out->mean = std::move(mean);
    out->scale = std::move(scale);
  }
  out->file = std::move(file);
  return absl::OkStatus();
}

// PrivGE's PPR (PprPushByDensity), laid out by what Z holds. Compressed
// rows when Z has at most training::MlpSparseBound non-zeros (1/8 of its
// entries by default; dense when the MLP cannot fold the standardisation:
// input dropout, or predictions propagated with label reports), with the
// standardisation's column moments; push then holds Z's blocks and the
// rows, at most 18 bytes per non-zero, never n x d. Otherwise Z is
// written straight into out->features (one n x d copy, plus the blocks held
// before push found Z too dense: at most 10 bytes per non-zero of the
// bound) and standardised in place, as before: the same bits. On the
// citation graphs and the 34,493 x 8,415 generated graph at the defaults,
// Z is 25-100% non-zero: dense.
absl::Status PropagatePpr(const NodeRunInputs& in, const PipelineConfig& c,
                          NodeFeatures* out) {
  const SparseRows& x = *in.x;
  const uint64_t bound = training::MlpSparseBound(
      c.node_model, x.rows, x.cols, PropagatesPredictions(in, c));
  ASSIGN_OR_RETURN(std::optional<SparseRows> z,
                   PprPushByDensity(*in.graph, x, PprOptionsOf(c), bound, [&] {
                     out->features.resize(x.rows, x.cols);
                     return absl::MakeSpan(out->features.data(),
                                           out->features.size());
                   }));
  if (!z) {
    if (c.standardize) Standardize(&out->features, c.standardize_clip);
    return absl::OkStatus();
  }
  HoldZRows(c, *std::move(z), out);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NodeFeatures> PropagateNode(const NodeRunInputs& in,
                                           const PipelineConfig& c,
                                           int feature_steps) {
  NodeFeatures out;
  DenseMatrix z;
  if (in.release == nullptr) {
    const auto t_prop = std::chrono::steady_clock::now();
    if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
        c.propagation == NodePropagation::kAuto) {
      return absl::InternalError("PropagateNode: propagation auto unresolved");
    }
    if (ZToFile(in, c)) {
      RETURN_IF_ERROR(PropagateToFile(in, c, feature_steps, &out));
      out.propagate_seconds = SecondsSince(t_prop);
      return out;
    }
    if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
        c.propagation == NodePropagation::kPpr) {
      RETURN_IF_ERROR(PropagatePpr(in, c, &out));
      out.propagate_seconds = SecondsSince(t_prop);
      return out;
    } else if (c.aggregator == FeatureAggregator::kHoa) {
      ASSIGN_OR_RETURN(z, HighOrderAggregate(*in.graph,
                                             DenseWithFill(*in.x, in.x_fill),
                                             feature_steps,
                                             c.feature_self_loops, c.threads,
                                             c.kprop_norm));
    } else if (DefersKProp(c, in.x->rows, in.x->cols)) {
      ASSIGN_OR_RETURN(training::SparseInput<float> deferred,
                       DeferKProp(*in.graph, *in.x, in.x_fill, c,
                                  feature_steps));
      out.deferred = std::make_shared<const training::SparseInput<float>>(
          std::move(deferred));
      out.propagate_seconds = SecondsSince(t_prop);
      return out;
    } else {
      ASSIGN_OR_RETURN(z, KProp(*in.graph, DenseWithFill(*in.x, in.x_fill),
                                feature_steps, c.feature_self_loops,
                                c.threads, c.kprop_norm));
    }
    out.propagate_seconds = SecondsSince(t_prop);
  }
  out.features = ToEigen(in.release != nullptr ? *in.release : z);
  if (c.standardize) Standardize(&out.features, c.standardize_clip);
  return out;
}

}  // namespace ldpgraph::pipeline::internal

// Internal to link prediction (server/training/link_task.cc and
// link_pair_features.cc): the training, validation or test pairs as one
// list, and the scorer's input formed from them on the fly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/graph/graph.h"
#include "server/training/nn.h"

namespace ldpgraph::training::internal {

// Positives then negatives, addressed as one list.
struct PairList {
  const std::vector<Edge>* positive;
  const std::vector<Edge>* negative;
  size_t size() const { return positive->size() + negative->size(); }
  const Edge& operator[](size_t i) const {
    return i < positive->size() ? (*positive)[i]
                                : (*negative)[i - positive->size()];
  }
};

// The scorer's input, formed on the fly: row i is the Hadamard product
// z_u * z_v of pair i, standardised with the training pairs' column means
// and standard deviations once Fit has run. Never holds more than the rows
// asked for.
class PairFeatures {
 public:
  PairFeatures(const Mat<float>& z, int threads) : z_(z), threads_(threads) {}

  // Column means and 1/sd over every pair of `list` (a column with zero
  // variance gets scale 0). In one streaming pass over a fixed split of the
  // list, so the figures do not depend on the thread count.
  void Fit(const PairList& list);

  // The map row = (z_u * z_v - mean) * scale: mean 0 and scale 1 before Fit.
  std::vector<float> mean() const {
    return mean_.empty() ? std::vector<float>(z_.cols(), 0.0f) : mean_;
  }
  std::vector<float> scale() const {
    return scale_.empty() ? std::vector<float>(z_.cols(), 1.0f) : scale_;
  }

  // out := count rows, row r the pair list[index[r]] (list[first + r] when
  // index is null).
  void Fill(const PairList& list, const uint32_t* index, size_t first,
            size_t count, Mat<float>* out) const;

 private:
  const Mat<float>& z_;
  int threads_;
  std::vector<float> mean_, scale_;
};

}  // namespace ldpgraph::training::internal

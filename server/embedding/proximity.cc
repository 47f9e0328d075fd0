#include "server/embedding/proximity.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ldpgraph::embedding {

std::vector<double> ProximityMass(const Graph& g, Proximity p) {
  const size_t n = g.num_nodes();
  std::vector<double> mass(n, 1.0);
  if (p == Proximity::kUniform) return mass;
  if (p == Proximity::kDegree) {
    for (size_t v = 0; v < n; ++v) mass[v] = g.degree(static_cast<NodeId>(v));
    return mass;
  }
  // colsum(P)_j = sum_{i in N(j)} 1/d_i; colsum(P^2)_j = sum_k colsum(P)_k
  // P(k, j) = sum_{k in N(j)} colsum(P)_k / d_k.
  std::vector<double> first(n, 0.0);
  for (size_t j = 0; j < n; ++j) {
    double s = 0;
    for (NodeId i : g.neighbors(static_cast<NodeId>(j))) s += 1.0 / g.degree(i);
    first[j] = s;
  }
  for (size_t j = 0; j < n; ++j) {
    double s = 0;
    for (NodeId k : g.neighbors(static_cast<NodeId>(j))) {
      s += first[k] / g.degree(k);
    }
    mass[j] = 0.5 * (first[j] + s);
  }
  return mass;
}

SparseRows WalkProximityMatrix(const Graph& g) {
  const size_t n = g.num_nodes();
  SparseRows m;
  m.cols = n;
  m.offsets.reserve(n + 1);
  {
    // First pass: the exact number of non-zeros (the nodes within two steps
    // of each node), so the arrays are allocated once at their final size.
    std::vector<uint32_t> stamp(n, 0);
    uint64_t nnz = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t mark = static_cast<uint32_t>(i) + 1;
      for (NodeId k : g.neighbors(static_cast<NodeId>(i))) {
        if (stamp[k] != mark) {
          stamp[k] = mark;
          ++nnz;
        }
        for (NodeId j : g.neighbors(k)) {
          if (stamp[j] != mark) {
            stamp[j] = mark;
            ++nnz;
          }
        }
      }
    }
    m.indices.reserve(nnz);
    m.values.reserve(nnz);
  }
  // One dense accumulator row reused across rows (n doubles), plus the list
  // of touched columns: O(n) extra memory, never n x n.
  std::vector<double> acc(n, 0.0);
  std::vector<uint32_t> touched;
  std::vector<float> values;
  for (size_t i = 0; i < n; ++i) {
    const NodeId vi = static_cast<NodeId>(i);
    touched.clear();
    const uint32_t di = g.degree(vi);
    if (di > 0) {
      const double pi = 1.0 / di;
      for (NodeId k : g.neighbors(vi)) {
        if (acc[k] == 0.0) touched.push_back(k);
        acc[k] += 0.5 * pi;
        const double pk = 1.0 / g.degree(k);
        for (NodeId j : g.neighbors(k)) {
          if (acc[j] == 0.0) touched.push_back(j);
          acc[j] += 0.5 * pi * pk;
        }
      }
    }
    std::sort(touched.begin(), touched.end());
    values.resize(touched.size());
    for (size_t t = 0; t < touched.size(); ++t) {
      values[t] = static_cast<float>(acc[touched[t]]);
      acc[touched[t]] = 0.0;
    }
    m.AppendRow(touched, values);
  }
  return m;
}

}  // namespace ldpgraph::embedding

// Test helper: compares an analytic gradient with central finite differences,
// in double precision.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/training/nn.h"

namespace ldpgraph::training {

// Perturbs each entry of *x by +-h, evaluates f, and compares
// (f(x+h) - f(x-h)) / 2h with analytic(i). Returns "" when every entry agrees
// to within tol * max(1, |analytic|), else a description of the worst entry.
inline std::string CheckGradient(Mat<double>* x, const Mat<double>& analytic,
                                 const std::function<double()>& f,
                                 double h = 1e-6, double tol = 1e-6) {
  if (analytic.rows() != x->rows() || analytic.cols() != x->cols()) {
    return absl::StrCat("gradient shape ", analytic.rows(), "x",
                        analytic.cols(), " != ", x->rows(), "x", x->cols());
  }
  double worst = 0;
  std::string report;
  for (Eigen::Index i = 0; i < x->size(); ++i) {
    const double saved = x->data()[i];
    x->data()[i] = saved + h;
    const double up = f();
    x->data()[i] = saved - h;
    const double down = f();
    x->data()[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double a = analytic.data()[i];
    const double err = std::abs(numeric - a) / std::max(1.0, std::abs(a));
    if (err > tol && err > worst) {
      worst = err;
      report = absl::StrCat("entry ", i, ": analytic ", a, ", numeric ",
                            numeric, " (relative error ", err, ")");
    }
  }
  return report;
}

}  // namespace ldpgraph::training

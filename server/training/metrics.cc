#include "server/training/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ldpgraph::training {
namespace {

absl::Status CheckPaired(size_t predicted, size_t truth) {
  if (predicted != truth) {
    return absl::InvalidArgumentError(
        absl::StrCat("predicted has ", predicted, " entries but truth has ",
                     truth));
  }
  if (predicted == 0) {
    return absl::InvalidArgumentError("predicted and truth are empty");
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(absl::Span<const int32_t> labels,
                         const char* name, int classes) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "[", i, "] = ", labels[i], " is not in [0, ",
                       classes, ")"));
    }
  }
  return absl::OkStatus();
}

// Per-class counts for the F1 scores, after every check.
struct ClassCounts {
  std::vector<uint64_t> tp, fp, fn;
};

absl::StatusOr<ClassCounts> CountClasses(absl::Span<const int32_t> predicted,
                                         absl::Span<const int32_t> truth,
                                         int classes) {
  if (classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("classes = ", classes, " must be at least 1"));
  }
  if (absl::Status s = CheckPaired(predicted.size(), truth.size()); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLabels(predicted, "predicted", classes); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLabels(truth, "truth", classes); !s.ok()) {
    return s;
  }
  ClassCounts c;
  c.tp.assign(classes, 0);
  c.fp.assign(classes, 0);
  c.fn.assign(classes, 0);
  for (size_t i = 0; i < predicted.size(); ++i) {
    if (predicted[i] == truth[i]) {
      ++c.tp[truth[i]];
    } else {
      ++c.fp[predicted[i]];
      ++c.fn[truth[i]];
    }
  }
  return c;
}

absl::Status CheckScores(absl::Span<const float> scores, const char* name) {
  if (scores.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is empty"));
  }
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "[", i, "] is NaN"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> Accuracy(absl::Span<const int32_t> predicted,
                                absl::Span<const int32_t> truth) {
  if (absl::Status s = CheckPaired(predicted.size(), truth.size()); !s.ok()) {
    return s;
  }
  uint64_t correct = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    correct += predicted[i] == truth[i];
  }
  return static_cast<double>(correct) / static_cast<double>(predicted.size());
}

absl::StatusOr<double> MicroF1(absl::Span<const int32_t> predicted,
                               absl::Span<const int32_t> truth, int classes) {
  absl::StatusOr<ClassCounts> c = CountClasses(predicted, truth, classes);
  if (!c.ok()) return c.status();
  uint64_t tp = 0, fp = 0, fn = 0;
  for (int k = 0; k < classes; ++k) {
    tp += c->tp[k];
    fp += c->fp[k];
    fn += c->fn[k];
  }
  // Non-empty input makes 2TP + FP + FN = 2n > 0.
  return static_cast<double>(2 * tp) / static_cast<double>(2 * tp + fp + fn);
}

absl::StatusOr<double> MacroF1(absl::Span<const int32_t> predicted,
                               absl::Span<const int32_t> truth, int classes) {
  absl::StatusOr<ClassCounts> c = CountClasses(predicted, truth, classes);
  if (!c.ok()) return c.status();
  double sum = 0;
  int present = 0;
  for (int k = 0; k < classes; ++k) {
    const uint64_t denominator = 2 * c->tp[k] + c->fp[k] + c->fn[k];
    if (denominator == 0) continue;  // in neither list
    sum += static_cast<double>(2 * c->tp[k]) /
           static_cast<double>(denominator);
    ++present;
  }
  // Non-empty input puts at least one class in truth.
  return sum / present;
}

absl::StatusOr<double> RocAuc(absl::Span<const float> positive_scores,
                              absl::Span<const float> negative_scores) {
  if (absl::Status s = CheckScores(positive_scores, "positive_scores");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckScores(negative_scores, "negative_scores");
      !s.ok()) {
    return s;
  }
  std::vector<float> pos(positive_scores.begin(), positive_scores.end());
  std::vector<float> neg(negative_scores.begin(), negative_scores.end());
  std::sort(pos.begin(), pos.end());
  std::sort(neg.begin(), neg.end());
  // 2U = sum over groups of equal positive scores of
  //      group size * (2 * negatives below + negatives equal),
  // the same as the rank-sum form with average ranks, but exact.
  uint64_t two_u = 0;
  size_t below = 0;  // negatives strictly below the current positive score
  for (size_t i = 0; i < pos.size();) {
    const float v = pos[i];
    size_t group_end = i + 1;
    while (group_end < pos.size() && pos[group_end] == v) ++group_end;
    while (below < neg.size() && neg[below] < v) ++below;
    size_t equal_end = below;
    while (equal_end < neg.size() && neg[equal_end] == v) ++equal_end;
    two_u += static_cast<uint64_t>(group_end - i) *
             (2 * static_cast<uint64_t>(below) + (equal_end - below));
    i = group_end;
  }
  const double pairs = static_cast<double>(pos.size()) *
                       static_cast<double>(neg.size());
  return static_cast<double>(two_u) / (2 * pairs);
}

std::vector<int32_t> ArgmaxRows(absl::Span<const float> data, size_t rows,
                                size_t cols) {
  if ((cols != 0 && rows > data.size() / cols) || data.size() != rows * cols ||
      (rows > 0 && cols == 0) ||
      cols > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    std::fprintf(stderr,
                 "ArgmaxRows: %zu entries do not form a %zu x %zu matrix "
                 "with at least one column\n",
                 data.size(), rows, cols);
    std::abort();
  }
  std::vector<int32_t> out(rows, 0);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = data.data() + r * cols;
    size_t best = cols;  // none yet
    for (size_t j = 0; j < cols; ++j) {
      if (std::isnan(row[j])) continue;
      if (best == cols || row[j] > row[best]) best = j;
    }
    out[r] = best == cols ? 0 : static_cast<int32_t>(best);
  }
  return out;
}

Summary Summarize(absl::Span<const double> values) {
  Summary s;
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  if (values.size() < 2) return s;
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(squares / static_cast<double>(values.size() - 1));
  return s;
}

}  // namespace ldpgraph::training

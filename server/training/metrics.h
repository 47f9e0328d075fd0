// Evaluation metrics for node classification (accuracy, micro- and
// macro-averaged F1) and link prediction (ROC AUC), plus the helpers that
// turn class scores into predictions and summarise repeated runs.
//
// Labels are class indices, int32_t like Dataset::labels. Metrics that take
// two lists pair predicted[i] with truth[i]; they return INVALID_ARGUMENT
// (naming both sizes) when the sizes differ or the lists are empty, so a
// metric is never silently computed over nothing. All results are exact
// ratios of integer counts evaluated once in double precision, and do not
// depend on the order of the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ldpgraph::training {

// Fraction of positions i with predicted[i] == truth[i]. Labels are
// compared as they are (any value, negatives included). INVALID_ARGUMENT if
// the sizes differ or the lists are empty.
absl::StatusOr<double> Accuracy(absl::Span<const int32_t> predicted,
                                absl::Span<const int32_t> truth);

// Micro-averaged F1 of single-label multi-class predictions over `classes`
// classes: TP, FP and FN pooled over all classes, F1 = 2TP / (2TP + FP + FN).
// With one label per item every error is one FP (for the predicted class)
// and one FN (for the true one), so 2TP + FP + FN = 2n and micro-F1 equals
// Accuracy exactly; it is provided under its own name because the papers
// report it as such.
//
// INVALID_ARGUMENT if classes < 1, if the sizes differ or the lists are
// empty, or if any label lies outside [0, classes) (the message names the
// list, the position and the value).
absl::StatusOr<double> MicroF1(absl::Span<const int32_t> predicted,
                               absl::Span<const int32_t> truth, int classes);

// Macro-averaged F1: the unweighted mean of the per-class F1 scores
// 2TP_c / (2TP_c + FP_c + FN_c), taken over the classes that appear in
// truth or in predicted. A class that appears in neither has no defined F1
// and is left out (so `classes` larger than needed does not change the
// result); a class that is only ever predicted, or never predicted, counts
// with F1 = 0. Same contract (and errors) as MicroF1.
absl::StatusOr<double> MacroF1(absl::Span<const int32_t> predicted,
                               absl::Span<const int32_t> truth, int classes);

// Area under the ROC curve of positive_scores against negative_scores (the
// higher the score, the more positive): the probability that a uniformly
// random positive scores strictly above a uniformly random negative, a tie
// counting one half. This is the Mann-Whitney U statistic with average
// ranks, divided by P * N; 1 means every positive beats every negative, 0
// the reverse, 0.5 all ties. Computed by sorting each list and merging, in
// O((P + N) log(P + N)) time; U is counted exactly in integers (P * N must
// stay below 2^63). Infinite scores are ordinary values; -0 ties with +0.
// INVALID_ARGUMENT if either list is empty or any score is NaN (the message
// names the list and the position).
absl::StatusOr<double> RocAuc(absl::Span<const float> positive_scores,
                              absl::Span<const float> negative_scores);

// For each row of the row-major rows x cols matrix `data`, the column index
// of its largest entry; ties go to the lowest index. NaN entries are never
// picked (a row of NaNs only gives 0). Used to turn class scores (logits or
// probabilities) into predicted labels. Preconditions, which are programming
// errors and abort when violated: data.size() == rows * cols, cols >= 1
// unless rows == 0, and cols <= INT32_MAX.
std::vector<int32_t> ArgmaxRows(absl::Span<const float> data, size_t rows,
                                size_t cols);

// Mean and sample standard deviation of the results of repeated runs.
struct Summary {
  double mean = 0;
  // sqrt(sum (x - mean)^2 / (n - 1)); 0 for a single value.
  double std = 0;
};

// Summary of `values` (mean computed first, then the deviations from it).
// An empty list gives {0, 0}. A NaN value makes the mean NaN (and the std,
// given two or more values).
Summary Summarize(absl::Span<const double> values);

}  // namespace ldpgraph::training

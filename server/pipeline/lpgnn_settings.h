// LPGNN's hyper-parameters per dataset and privacy budget, as a table a user
// can extend without touching code: K_x and K_y (KProp steps over the
// features and the labels), Adam's learning rate, weight decay and dropout.
// The built-in rows are server/pipeline/lpgnn_settings.csv (the authors'
// published settings for cora, pubmed, facebook and lastfm), compiled into
// the binary; a file of the same layout adds rows or replaces them
// (`ldpgraph eval --lpgnn-settings FILE`). The file's header comment is the
// format's reference.
#ifndef LDPGRAPH_SERVER_PIPELINE_LPGNN_SETTINGS_H_
#define LDPGRAPH_SERVER_PIPELINE_LPGNN_SETTINGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::pipeline {

struct LpgnnSettingsRow {
  std::string dataset;
  double eps_x = 0;  // +inf: no feature privacy
  double eps_y = 0;  // +inf: no label privacy
  int feature_steps = 0;
  int label_steps = 0;
  double learning_rate = 0;
  double weight_decay = 0;
  double dropout = 0;
};

class LpgnnSettings {
 public:
  // The dataset whose rows serve a dataset that has none.
  static constexpr absl::string_view kFallbackDataset = "cora";

  // The compiled-in table.
  static const LpgnnSettings& BuiltIn();

  // Parses the CSV layout: a header line naming the eight columns in
  // order, then one row per line; # comments and blank lines skipped.
  // INVALID_ARGUMENT "<source>:<line>: <what>" for a wrong column count, a
  // value out of range (budgets > 0 or inf, steps >= 0, learning rate > 0,
  // weight decay >= 0, dropout in [0, 1)), a repeated (dataset, eps_x,
  // eps_y) or a missing header.
  static absl::StatusOr<LpgnnSettings> Parse(absl::string_view text,
                                             absl::string_view source);

  // The built-in table with the rows of the file at `path` merged in
  // (Merge). NOT_FOUND for a missing file; Parse's errors name the path.
  static absl::StatusOr<LpgnnSettings> BuiltInWithFile(const std::string& path);

  // Rows of `other` replace the rows with the same (dataset, eps_x, eps_y)
  // and add the others.
  void Merge(const LpgnnSettings& other);

  // The row for `dataset` (kFallbackDataset's when it has none) at the
  // budgets nearest (eps_x, eps_y): first the eps_x nearest on a log scale
  // among the dataset's rows, then among those the nearest eps_y. inf is
  // nearest to inf, and to a finite budget only when the dataset has no
  // finite one; ties go to the row listed first. Null when neither the
  // dataset nor the fallback has rows.
  const LpgnnSettingsRow* Find(absl::string_view dataset, double eps_x,
                               double eps_y) const;

  const std::vector<LpgnnSettingsRow>& rows() const { return rows_; }

 private:
  std::vector<LpgnnSettingsRow> rows_;
};

}  // namespace ldpgraph::pipeline

#endif  // LDPGRAPH_SERVER_PIPELINE_LPGNN_SETTINGS_H_

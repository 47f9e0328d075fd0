#include "server/pipeline/lpgnn_settings.h"

#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace ldpgraph::pipeline {

extern const char kBuiltInLpgnnSettings[];  // lpgnn_settings_data.cc

namespace {

constexpr const char* kColumns[] = {
    "dataset",       "eps_x",         "eps_y",        "feature_steps",
    "label_steps",   "learning_rate", "weight_decay", "dropout"};
constexpr double kInf = std::numeric_limits<double>::infinity();

bool ParseBudget(absl::string_view s, double* out) {
  if (s == "inf") {
    *out = kInf;
    return true;
  }
  return absl::SimpleAtod(s, out) && *out > 0 && std::isfinite(*out);
}

// |log(a / b)|, with inf standing for a budget beyond every finite one
// (inf to inf: 0; inf to a finite b: larger the smaller b is).
double LogDistance(double a, double b) {
  constexpr double kBeyond = 1e300;
  return std::abs(std::log((std::isinf(a) ? kBeyond : a) /
                           (std::isinf(b) ? kBeyond : b)));
}

}  // namespace

const LpgnnSettings& LpgnnSettings::BuiltIn() {
  static const LpgnnSettings* table = [] {
    absl::StatusOr<LpgnnSettings> t =
        Parse(kBuiltInLpgnnSettings, "lpgnn_settings.csv (built in)");
    // The built-in table is checked by lpgnn_settings_test.
    return new LpgnnSettings(t.ok() ? *std::move(t) : LpgnnSettings());
  }();
  return *table;
}

absl::StatusOr<LpgnnSettings> LpgnnSettings::Parse(absl::string_view text,
                                                   absl::string_view source) {
  LpgnnSettings out;
  std::set<std::tuple<std::string, double, double>> seen;
  bool header = false;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    auto fail = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": ", what));
    };
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(line, ',')) {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
    }
    if (!header) {
      if (cells != std::vector<std::string>(std::begin(kColumns),
                                            std::end(kColumns))) {
        return fail(absl::StrCat("expected the header line '",
                                 absl::StrJoin(kColumns, ","), "'"));
      }
      header = true;
      continue;
    }
    if (cells.size() != std::size(kColumns)) {
      return fail(absl::StrCat("expected ", std::size(kColumns),
                               " comma-separated values, got ",
                               cells.size()));
    }
    LpgnnSettingsRow r;
    r.dataset = cells[0];
    if (r.dataset.empty()) return fail("empty dataset name");
    if (!ParseBudget(cells[1], &r.eps_x)) {
      return fail(absl::StrCat("eps_x must be a number > 0 or inf, got '",
                               cells[1], "'"));
    }
    if (!ParseBudget(cells[2], &r.eps_y)) {
      return fail(absl::StrCat("eps_y must be a number > 0 or inf, got '",
                               cells[2], "'"));
    }
    if (!absl::SimpleAtoi(cells[3], &r.feature_steps) || r.feature_steps < 0) {
      return fail(absl::StrCat("feature_steps must be an integer >= 0, got '",
                               cells[3], "'"));
    }
    if (!absl::SimpleAtoi(cells[4], &r.label_steps) || r.label_steps < 0) {
      return fail(absl::StrCat("label_steps must be an integer >= 0, got '",
                               cells[4], "'"));
    }
    if (!absl::SimpleAtod(cells[5], &r.learning_rate) ||
        !(r.learning_rate > 0) || !std::isfinite(r.learning_rate)) {
      return fail(absl::StrCat("learning_rate must be > 0, got '", cells[5],
                               "'"));
    }
    if (!absl::SimpleAtod(cells[6], &r.weight_decay) ||
        !(r.weight_decay >= 0) || !std::isfinite(r.weight_decay)) {
      return fail(absl::StrCat("weight_decay must be >= 0, got '", cells[6],
                               "'"));
    }
    if (!absl::SimpleAtod(cells[7], &r.dropout) || !(r.dropout >= 0) ||
        !(r.dropout < 1)) {
      return fail(absl::StrCat("dropout must be in [0, 1), got '", cells[7],
                               "'"));
    }
    if (!seen.emplace(r.dataset, r.eps_x, r.eps_y).second) {
      return fail(absl::StrCat("a second row for ", r.dataset, " at eps_x ",
                               cells[1], ", eps_y ", cells[2]));
    }
    out.rows_.push_back(std::move(r));
  }
  if (!header) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": no header line '", absl::StrJoin(kColumns, ","), "'"));
  }
  return out;
}

absl::StatusOr<LpgnnSettings> LpgnnSettings::BuiltInWithFile(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<LpgnnSettings> extra = Parse(*text, path);
  if (!extra.ok()) return extra.status();
  LpgnnSettings out = BuiltIn();
  out.Merge(*extra);
  return out;
}

void LpgnnSettings::Merge(const LpgnnSettings& other) {
  for (const LpgnnSettingsRow& r : other.rows_) {
    bool replaced = false;
    for (LpgnnSettingsRow& mine : rows_) {
      if (mine.dataset == r.dataset && mine.eps_x == r.eps_x &&
          mine.eps_y == r.eps_y) {
        mine = r;
        replaced = true;
        break;
      }
    }
    if (!replaced) rows_.push_back(r);
  }
}

const LpgnnSettingsRow* LpgnnSettings::Find(absl::string_view dataset,
                                            double eps_x, double eps_y) const {
  for (absl::string_view name : {dataset, kFallbackDataset}) {
    const LpgnnSettingsRow* best_x = nullptr;
    for (const LpgnnSettingsRow& r : rows_) {
      if (r.dataset != name) continue;
      if (best_x == nullptr ||
          LogDistance(r.eps_x, eps_x) < LogDistance(best_x->eps_x, eps_x)) {
        best_x = &r;
      }
    }
    if (best_x == nullptr) continue;
    const LpgnnSettingsRow* best = nullptr;
    for (const LpgnnSettingsRow& r : rows_) {
      if (r.dataset != name || r.eps_x != best_x->eps_x) continue;
      if (best == nullptr ||
          LogDistance(r.eps_y, eps_y) < LogDistance(best->eps_y, eps_y)) {
        best = &r;
      }
    }
    return best;
  }
  return nullptr;
}

}  // namespace ldpgraph::pipeline

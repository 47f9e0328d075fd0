#include "server/ldpgraph/charts.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

using nlohmann::json;
using plot::LineChart;
using plot::ReferenceLine;
using plot::Series;

struct MeanStd {
  double mean = 0, std = 0;
};

// j[key] of the cell `where`: a string.
absl::StatusOr<std::string> GetString(const json& j, const char* key,
                                      const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", key, "' must be a string"));
  }
  return j[key].get<std::string>();
}

// j[key]: a number, or null for an infinite budget.
absl::StatusOr<json> GetBudget(const json& j, const char* key,
                               const std::string& where) {
  if (!j.contains(key) || !(j[key].is_null() || j[key].is_number())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", key, "' must be a number or null"));
  }
  return j[key];
}

// j[key] as {mean, std}: absent or null gives nullopt (an attack not run).
absl::StatusOr<std::optional<MeanStd>> GetSummary(const json& j,
                                                  const char* key,
                                                  const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const json& s = j[key];
  if (!s.is_object() || !s.contains("mean") || !s["mean"].is_number() ||
      !s.contains("std") || !s["std"].is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": '", key, "' must be {\"mean\": number, \"std\": number}"));
  }
  return MeanStd{s["mean"].get<double>(), s["std"].get<double>()};
}

absl::StatusOr<const json*> GetArray(const json& j, const char* key,
                                     const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": '", key, "' must be an array"));
  }
  return &j[key];
}

// Taller charts for long legends: the plot area keeps at least 240 pixels.
void FitLegend(LineChart* c) {
  const size_t entries = c->series.size() + c->references.size();
  const size_t rows = entries > 4 ? (entries + 1) / 2 : entries;
  c->height = std::max(c->height, static_cast<int>(340 + 20 * rows));
}

// The series named `name` in c, appended when new.
Series& SeriesNamed(LineChart* c, const std::string& name) {
  for (Series& s : c->series) {
    if (s.name == name) return s;
  }
  c->series.push_back({name, {}, {}, {}});
  return c->series.back();
}

// report's "baselines" (each {label, accuracy: {mean, std}}), when it has
// them, as dashed reference lines on c.
absl::Status AddBaselines(const json& report, const std::string& where,
                          LineChart* c) {
  if (!report.contains("baselines") || !report["baselines"].is_object()) {
    return absl::OkStatus();
  }
  for (const auto& [key, b] : report["baselines"].items()) {
    const std::string at = absl::StrCat(where, " baseline ", key);
    ASSIGN_OR_RETURN(const std::string label, GetString(b, "label", at));
    ASSIGN_OR_RETURN(const std::optional<MeanStd> v,
                     GetSummary(b, "accuracy", at));
    if (!v) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": 'accuracy' is missing"));
    }
    c->references.push_back({label, v->mean, v->std});
  }
  return absl::OkStatus();
}

// ---- ldpgraph repro ----

struct ReproCell {
  std::string mechanism;
  json epsilon, label_epsilon;  // null: inf
  MeanStd value;
};

absl::StatusOr<std::vector<ReproCell>> ReadReproCells(const json& report) {
  ASSIGN_OR_RETURN(const json* cells, GetArray(report, "cells", "repro JSON"));
  std::vector<ReproCell> out;
  for (size_t i = 0; i < cells->size(); ++i) {
    const json& c = (*cells)[i];
    const std::string where = absl::StrCat("repro JSON cell ", i);
    ReproCell cell;
    ASSIGN_OR_RETURN(cell.mechanism, GetString(c, "mechanism", where));
    ASSIGN_OR_RETURN(cell.epsilon, GetBudget(c, "epsilon", where));
    ASSIGN_OR_RETURN(cell.label_epsilon, GetBudget(c, "label_epsilon", where));
    for (const char* key : {"mean", "std"}) {
      if (!c.contains(key) || !c[key].is_number()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", key, "' must be a number"));
      }
    }
    cell.value = {c["mean"].get<double>(), c["std"].get<double>()};
    out.push_back(std::move(cell));
  }
  return out;
}

}  // namespace

std::string BudgetText(const json& e) {
  return e.is_null() ? std::string("inf")
                     : absl::StrFormat("%g", e.get<double>());
}

absl::StatusOr<Charts> ReproCharts(const json& report) {
  if (!report.is_object()) {
    return absl::InvalidArgumentError("repro JSON must be an object");
  }
  std::string paper, dataset, task, metric;
  for (auto [key, field] : {std::pair{"paper", &paper},
                            std::pair{"dataset", &dataset},
                            std::pair{"task", &task},
                            std::pair{"metric", &metric}}) {
    ASSIGN_OR_RETURN(*field, GetString(report, key, "repro JSON"));
  }
  if (!report.contains("runs") || !report["runs"].is_number_integer()) {
    return absl::InvalidArgumentError("repro JSON: 'runs' must be an integer");
  }
  ASSIGN_OR_RETURN(std::vector<ReproCell> cells, ReadReproCells(report));
  const bool lpgnn = paper == "lpgnn";
  LineChart c;
  const std::string metric_name = metric == "roc_auc" ? "ROC-AUC" : metric;
  c.title = absl::StrFormat(
      "%s, %s on %s: test %s (mean ± std of %d runs)",
      paper == "privge" ? "PrivGE" : paper == "dpne" ? "DPNE" : "LPGNN",
      task == "node" ? "node classification" : "link prediction", dataset,
      metric_name, report["runs"].get<int>());
  c.x_label = paper == "dpne" ? "privacy budget epsilon (log scale)"
              : lpgnn ? "feature budget epsilon_x, Multi-bit (log scale)"
                      : "feature budget epsilon (log scale)";
  c.y_label = absl::StrCat("test ", metric_name);
  c.log_x = true;
  for (const ReproCell& cell : cells) {
    const std::string row =
        lpgnn ? absl::StrCat("eps_y=", BudgetText(cell.label_epsilon))
              : cell.mechanism;
    if (cell.epsilon.is_null()) {
      c.references.push_back(
          {lpgnn ? absl::StrCat("raw features, ", row)
                 : paper == "dpne" ? "non-private" : "raw features (non-private)",
           cell.value.mean, cell.value.std});
      continue;
    }
    Series& s = SeriesNamed(&c, row);
    s.points.emplace_back(cell.epsilon.get<double>(), cell.value.mean);
    s.error.push_back(cell.value.std);
  }
  if (c.series.empty()) {
    return absl::InvalidArgumentError(
        "repro JSON: no cell has a finite epsilon to draw against");
  }
  // repro --baselines: each a dashed line, as sweep draws them.
  RETURN_IF_ERROR(AddBaselines(report, "repro JSON", &c));
  FitLegend(&c);
  return Charts{{"", std::move(c)}};
}

absl::StatusOr<Charts> SweepCharts(const json& sweep) {
  std::string dataset;
  ASSIGN_OR_RETURN(dataset, GetString(sweep, "dataset", "sweep JSON"));
  if (!sweep.contains("runs") || !sweep["runs"].is_number_integer()) {
    return absl::InvalidArgumentError("sweep JSON: 'runs' must be an integer");
  }
  ASSIGN_OR_RETURN(const json* lines, GetArray(sweep, "lines", "sweep JSON"));
  LineChart c;
  c.title = absl::StrFormat(
      "Node classification on %s: test accuracy (mean ± std of %d runs)",
      dataset, sweep["runs"].get<int>());
  c.x_label = "feature budget epsilon (log scale)";
  c.y_label = "test accuracy";
  c.log_x = true;
  for (size_t i = 0; i < lines->size(); ++i) {
    const json& line = (*lines)[i];
    const std::string where = absl::StrCat("sweep JSON line ", i);
    ASSIGN_OR_RETURN(const std::string label,
                     GetString(line, "label", where));
    ASSIGN_OR_RETURN(const json* cells, GetArray(line, "cells", where));
    if (cells->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": 'cells' is empty"));
    }
    Series& s = SeriesNamed(&c, label);
    for (const json& cell : *cells) {
      ASSIGN_OR_RETURN(const json eps, GetBudget(cell, "epsilon", where));
      ASSIGN_OR_RETURN(const std::optional<MeanStd> v,
                       GetSummary(cell, "accuracy", where));
      if (eps.is_null() || !v) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": every cell needs a finite 'epsilon' and 'accuracy'"));
      }
      s.points.emplace_back(eps.get<double>(), v->mean);
      s.error.push_back(v->std);
    }
  }
  RETURN_IF_ERROR(AddBaselines(sweep, "sweep JSON", &c));
  if (c.series.empty()) {
    return absl::InvalidArgumentError("sweep JSON: no line to draw");
  }
  FitLegend(&c);
  return Charts{{"", std::move(c)}};
}

namespace {

// ---- ldpgraph edges ----

struct EdgeCell {
  std::string model, graph;
  json eps_e, eps_x, eps_y;  // null: none (true, mlp) or inf
  bool skipped = false;
  std::optional<MeanStd> accuracy, similarity, linkteller;
};

absl::StatusOr<std::vector<EdgeCell>> ReadEdgeCells(const json& grid) {
  ASSIGN_OR_RETURN(const json* cells, GetArray(grid, "cells", "edges JSON"));
  std::vector<EdgeCell> out;
  for (size_t i = 0; i < cells->size(); ++i) {
    const json& c = (*cells)[i];
    const std::string where = absl::StrCat("edges JSON cell ", i);
    EdgeCell cell;
    ASSIGN_OR_RETURN(cell.model, GetString(c, "model", where));
    ASSIGN_OR_RETURN(cell.graph, GetString(c, "graph", where));
    ASSIGN_OR_RETURN(cell.eps_e, GetBudget(c, "edge_epsilon", where));
    ASSIGN_OR_RETURN(cell.eps_x, GetBudget(c, "feature_epsilon", where));
    ASSIGN_OR_RETURN(cell.eps_y, GetBudget(c, "label_epsilon", where));
    cell.skipped = c.contains("skipped") && !c["skipped"].is_null();
    if (!cell.skipped) {
      ASSIGN_OR_RETURN(cell.accuracy, GetSummary(c, "accuracy", where));
      if (!cell.accuracy) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": a cell not skipped needs 'accuracy'"));
      }
      ASSIGN_OR_RETURN(cell.similarity, GetSummary(c, "attack_auc", where));
      ASSIGN_OR_RETURN(cell.linkteller, GetSummary(c, "linkteller_auc", where));
    }
    out.push_back(std::move(cell));
  }
  return out;
}

struct Attack {
  const char* suffix;  // attack-<suffix>, tradeoff-<suffix>
  const char* name;    // as titles and axes say it
  std::optional<MeanStd> EdgeCell::*value;
};
constexpr Attack kAttacks[] = {
    {"similarity", "similarity", &EdgeCell::similarity},
    {"linkteller", "LinkTeller", &EdgeCell::linkteller}};

bool IsReference(const std::string& graph) {
  return graph == "true" || graph == "mlp";
}
std::string GraphTitle(const std::string& graph) {
  return graph == "true" ? "true graph" : graph == "mlp" ? "mlp (no graph)" : graph;
}
// One colour per graph in every chart; black is the 0.5 line's.
int GraphColour(const std::string& graph) {
  constexpr const char* kOrder[] = {"ns1", "ns2", "rr", "true", "blink", "mlp"};
  for (int i = 0; i < 6; ++i) {
    if (graph == kOrder[i]) return i;
  }
  return 7;
}
constexpr int kBlack = 6;

// The charts of one (model, eps_x, eps_y): its cells, drawn (not skipped),
// in the grid's order.
Charts CombinationCharts(const std::vector<const EdgeCell*>& cells,
                         const std::string& key, const std::string& heading) {
  auto suffix = [&](const std::string& part) {
    return key.empty() ? part : part.empty() ? key : absl::StrCat(key, "-", part);
  };
  const std::string budget_axis = "edge budget epsilon_e (log scale)";
  // y against eps_e: one line per private graph, true and mlp as references.
  auto by_budget = [&](const std::string& title, const std::string& y_label,
                       std::optional<MeanStd> EdgeCell::*value) {
    LineChart c{absl::StrCat(heading, ": ", title), budget_axis, y_label,
                {}, {}, true};
    for (const EdgeCell* cell : cells) {
      const std::optional<MeanStd>& v = cell->*value;
      if (!v) continue;
      const std::string name = GraphTitle(cell->graph);
      if (IsReference(cell->graph)) {
        c.references.push_back({name, v->mean, v->std, GraphColour(cell->graph)});
        continue;
      }
      Series& s = SeriesNamed(&c, name);
      s.colour = GraphColour(cell->graph);
      s.points.emplace_back(cell->eps_e.get<double>(), v->mean);
      s.error.push_back(v->std);
    }
    return c;
  };
  Charts charts;
  charts.emplace_back(suffix(""), by_budget("test accuracy", "test accuracy",
                                            &EdgeCell::accuracy));
  for (const Attack& a : kAttacks) {
    LineChart att = by_budget(absl::StrCat(a.name, " attack"),
                              absl::StrCat(a.name, " attack ROC-AUC"), a.value);
    if (att.series.empty()) continue;  // the attack was not run
    att.references.push_back({"0.5: nothing revealed", 0.5, 0, kBlack});
    charts.emplace_back(suffix(absl::StrCat("attack-", a.suffix)), std::move(att));
  }
  for (const Attack& a : kAttacks) {
    LineChart trade{absl::StrCat(heading, ": accuracy vs ", a.name, " AUC"),
                    absl::StrCat(a.name, " attack ROC-AUC (points: epsilon_e)"),
                    "test accuracy", {}, {}, false};
    for (const EdgeCell* cell : cells) {
      const std::optional<MeanStd>& auc = cell->*(a.value);
      if (!auc) continue;
      Series& t = SeriesNamed(&trade, GraphTitle(cell->graph));
      t.colour = GraphColour(cell->graph);
      t.points.emplace_back(auc->mean, cell->accuracy->mean);
      t.error.push_back(cell->accuracy->std);
      t.labels.push_back(IsReference(cell->graph)
                             ? ""
                             : absl::StrCat("ε=", BudgetText(cell->eps_e)));
    }
    if (trade.series.empty()) continue;
    charts.emplace_back(suffix(absl::StrCat("tradeoff-", a.suffix)),
                        std::move(trade));
  }
  for (auto& [name, chart] : charts) FitLegend(&chart);
  return charts;
}

}  // namespace

absl::StatusOr<Charts> EdgesCharts(const json& grid) {
  if (!grid.is_object() || !grid.contains("parameters") ||
      !grid["parameters"].is_object()) {
    return absl::InvalidArgumentError(
        "edges JSON: 'parameters' must be an object");
  }
  const json& p = grid["parameters"];
  ASSIGN_OR_RETURN(const json* models,
                   GetArray(p, "models", "edges JSON parameters"));
  ASSIGN_OR_RETURN(const json* xs,
                   GetArray(p, "feature_epsilons", "edges JSON parameters"));
  ASSIGN_OR_RETURN(const json* ys,
                   GetArray(p, "label_epsilons", "edges JSON parameters"));
  ASSIGN_OR_RETURN(std::vector<EdgeCell> cells, ReadEdgeCells(grid));
  const std::string dataset =
      grid.contains("dataset") && grid["dataset"].is_string()
          ? grid["dataset"].get<std::string>()
          : "?";
  const int runs = grid.contains("runs") && grid["runs"].is_number_integer()
                       ? grid["runs"].get<int>()
                       : 0;
  const bool one = models->size() * xs->size() * ys->size() == 1;
  Charts out;
  for (const json& model_json : *models) {
    if (!model_json.is_string()) {
      return absl::InvalidArgumentError(
          "edges JSON parameters: 'models' must hold strings");
    }
    const std::string model = model_json.get<std::string>();
    for (const json& x : *xs) {
      for (const json& y : *ys) {
        std::vector<const EdgeCell*> drawn;
        bool private_graph = false;
        for (const EdgeCell& c : cells) {
          if (c.model != model || c.eps_x != x || c.eps_y != y || c.skipped) {
            continue;
          }
          if (!IsReference(c.graph) && !c.eps_e.is_number()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "edges JSON: a ", c.graph, " cell has no edge_epsilon"));
          }
          private_graph |= !IsReference(c.graph);
          drawn.push_back(&c);
        }
        const std::string combo =
            absl::StrCat(model, "-x", BudgetText(x), "-y", BudgetText(y));
        if (!private_graph) {
          return absl::InvalidArgumentError(absl::StrCat(
              "edges JSON: ", combo,
              " has no private graph's cell (ns1, ns2, rr, blink) to draw"));
        }
        const std::string heading = absl::StrFormat(
            "%s, %s, eps_x=%s, eps_y=%s, %d runs", dataset,
            model == "gcn" ? "GCN" : model == "sage" ? "GraphSAGE" : model,
            BudgetText(x), BudgetText(y), runs);
        for (auto& chart : CombinationCharts(drawn, one ? "" : combo, heading)) {
          out.push_back(std::move(chart));
        }
      }
    }
  }
  return out;
}

int WritePlot(absl::string_view command, const std::string& file,
              const absl::StatusOr<Charts>& charts, std::ostream& err) {
  absl::StatusOr<std::vector<std::string>> written =
      charts.ok() ? plot::WriteCharts(file, *charts)
                  : absl::StatusOr<std::vector<std::string>>(charts.status());
  if (!written.ok()) {
    err << "ldpgraph " << command << ": --plot " << file << ": "
        << written.status().message() << "\n";
    return kExitRuntimeError;
  }
  for (const std::string& f : *written) {
    err << "ldpgraph " << command << ": wrote " << f << "\n";
  }
  return kExitOk;
}

absl::Status CheckPlotPath(const std::string& file) {
  if (file.empty()) return absl::InvalidArgumentError("--plot needs a file name");
  const std::filesystem::path dir =
      std::filesystem::path(file).parent_path().empty()
          ? std::filesystem::path(".")
          : std::filesystem::path(file).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--plot ", file, ": no directory '", dir.string(), "' to write it in"));
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::tool

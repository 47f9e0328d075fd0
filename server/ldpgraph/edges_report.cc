#include "server/ldpgraph/edges_report.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/ldpgraph/charts.h"
#include "server/training/linkteller.h"
#include "server/training/metrics.h"

namespace ldpgraph::tool {
namespace {

using nlohmann::json;
using training::NodeModelKind;

json BudgetJson(double e) { return std::isinf(e) ? json(nullptr) : json(e); }

// Number of UTF-8 code points (for aligning "±").
size_t DisplayWidth(absl::string_view s) {
  size_t w = 0;
  for (unsigned char ch : s) w += (ch & 0xC0) != 0x80;
  return w;
}
std::string Pad(absl::string_view s, size_t width) {
  std::string out(s);
  for (size_t w = DisplayWidth(s); w < width; ++w) out += ' ';
  return out;
}

json SummaryJson(const std::vector<double>& values) {
  const training::Summary s = training::Summarize(values);
  return json{{"mean", s.mean}, {"std", s.std}, {"values", values}};
}

// The attacks run, by name.
json AttacksJson(const EdgesOptions& o) {
  json out = json::array();
  if (o.similarity_attack) out.push_back("similarity");
  if (o.linkteller_attack) out.push_back("linkteller");
  return out;
}

// Every setting of the grid, the pipeline's included.
json ParamsJson(const Dataset& d, const EdgesOptions& o,
                const GridResults& r) {
  json params = {
      {"edge_epsilons", o.edge_epsilons},
      {"feature_epsilons", json::array()},
      {"label_epsilons", json::array()},
      {"models", json::array()},
      {"graphs", json::array()},
      {"similarity", edges::SimilarityName(o.similarity)},
      {"top_k", o.top_k},
      {"max_dummies", o.max_dummies},
      {"dummy_mean", o.dummy_mean},
      {"dummy_std", o.dummy_std},
      {"max_rr_edges", o.max_rr_edges},
      {"blink_delta", o.blink_delta},
      {"blink_variant", edges::kBlinkVariantNames.Name(o.blink_variant)},
      {"blink_iterations", o.blink_iterations},
      {"threads", o.threads},
      {"attacks", AttacksJson(o)},
      {"linkteller",
       {{"delta", training::kLinkTellerDelta},
        {"query",
         "x_u -> (1 + delta) x_u in the curator's estimated features, the "
         "model answering over its own graph after its KProp steps"},
        {"score",
         "I(u -> v) = ||change of v's posteriors|| / delta"},
        {"sources", o.linkteller_sources},
        {"sources_drawn", r.linkteller_sources_drawn},
        {"items",
         "each direction (source s, other end t) of an evaluated pair with s "
         "among the sources: I(s -> t)"}}},
      {"rr_symmetrisation", edges::SymmetrisationName(edges::Symmetrisation::kLowerId)},
      {"substitution_symmetrisation",
       edges::SymmetrisationName(edges::Symmetrisation::kUnion)},
      {"pipeline", pipeline::ConfigToJson(CellConfig(
                       o, d.meta, 1.0, 1.0, NodeModelKind::kGcn))}};
  for (double e : o.feature_epsilons) params["feature_epsilons"].push_back(BudgetJson(e));
  for (double e : o.label_epsilons) params["label_epsilons"].push_back(BudgetJson(e));
  for (NodeModelKind m : o.models) params["models"].push_back(EdgesModelName(m));
  for (EdgeGraph g : o.graphs) params["graphs"].push_back(EdgeGraphName(g));
  return params;
}

// Cell (mi, ri, xi, yi) of r: its coordinates, and unless skipped, its
// figures over the runs.
json CellJson(const EdgesOptions& o, const GridResults& r, size_t nodes,
              size_t mi, size_t ri, size_t xi, size_t yi) {
  const GridRow& row = r.rows[ri];
  const GridCell& cl = r.cell(o, mi, ri, xi, yi);
  json j = {{"model", EdgesModelName(o.models[mi])},
            {"graph", EdgeGraphName(row.graph)},
            {"edge_epsilon", row.eps_e ? json(*row.eps_e) : json(nullptr)},
            {"feature_epsilon", BudgetJson(o.feature_epsilons[xi])},
            {"label_epsilon", BudgetJson(o.label_epsilons[yi])},
            {"skipped", row.skipped ? json(*row.skipped) : json(nullptr)}};
  if (row.skipped) {
    j["expected_edges"] = pipeline::ExpectedRrEdges(nodes, *row.eps_e);
    return j;
  }
  j["accuracy"] = SummaryJson(cl.accuracy);
  j["attack_auc"] =
      o.similarity_attack ? SummaryJson(cl.attack_auc) : json(nullptr);
  j["linkteller_auc"] =
      o.linkteller_attack ? SummaryJson(cl.linkteller_auc) : json(nullptr);
  j["linkteller_seconds"] = o.linkteller_attack
                                ? SummaryJson(cl.linkteller_seconds)
                                : json(nullptr);
  j["graph_edges"] = SummaryJson(cl.graph_edges);
  j["graph_homophily"] = SummaryJson(cl.graph_homophily);
  j["true_edges_kept"] = SummaryJson(cl.true_edges_kept);
  j["graph_seconds"] = SummaryJson(cl.graph_seconds);
  j["seconds"] = SummaryJson(cl.seconds);
  j["substitution"] = json(nullptr);
  if (!cl.substitution_runs.empty()) {
    json s;
    for (const char* key :
         {"dropped", "substituted", "unresolved", "dropped_per_node",
          "substituted_per_node", "unresolved_per_node", "messages",
          "message_bytes", "vectors_sent", "seconds"}) {
      double sum = 0;
      for (const json& run : cl.substitution_runs) {
        sum += run[key].get<double>();
      }
      s[key] = sum / cl.substitution_runs.size();
    }
    s["per_run"] = cl.substitution_runs;
    j["substitution"] = s;
  }
  j["blink"] = json(nullptr);
  if (!cl.blink_runs.empty()) {
    json b;
    for (const char* key :
         {"iterations", "max_degree_residual", "clipped_low", "clipped_high",
          "reported_pairs", "both_reported_pairs", "expected_edges",
          "target_edges", "graph_reported_edges"}) {
      double sum = 0;
      for (const json& run : cl.blink_runs) sum += run[key].get<double>();
      b[key] = sum / cl.blink_runs.size();
    }
    b["per_run"] = cl.blink_runs;
    j["blink"] = b;
  }
  return j;
}

}  // namespace

json BlinkJson(const edges::BlinkEstimate& b) {
  return json{{"iterations", b.prior.iterations},
              {"converged", b.prior.converged},
              {"exact_sums", b.prior.exact_sums},
              {"max_degree_residual", b.prior.max_degree_residual},
              {"clipped_low", b.clipped_low},
              {"clipped_high", b.clipped_high},
              {"reported_pairs", b.reported_pairs},
              {"both_reported_pairs", b.both_reported_pairs},
              {"expected_edges", b.expected_edges},
              {"target_edges", b.target_edges},
              {"threshold", b.threshold},
              {"graph_reported_edges", b.graph_reported_edges}};
}

json SubstitutionStatsJson(const edges::RunStats& s, size_t nodes,
                           double seconds) {
  const double n = static_cast<double>(nodes);
  return json{{"degree", s.degree},
              {"dropped", s.dropped},
              {"substituted", s.substituted},
              {"unresolved", s.unresolved},
              {"dropped_per_node", s.dropped / n},
              {"substituted_per_node", s.substituted / n},
              {"unresolved_per_node", s.unresolved / n},
              {"messages", s.messages},
              {"message_bytes", s.message_bytes},
              {"vectors_sent", s.vectors_sent},
              {"seconds", seconds}};
}

json GridJson(const Dataset& d, const EdgesOptions& o, const GridResults& r,
              double seconds) {
  const size_t n = d.graph.num_nodes();
  const size_t nm = o.models.size(), nx = o.feature_epsilons.size(),
               ny = o.label_epsilons.size();
  json out_cells = json::array();
  for (size_t mi = 0; mi < nm; ++mi) {
    for (size_t ri = 0; ri < r.rows.size(); ++ri) {
      for (size_t xi = 0; xi < nx; ++xi) {
        for (size_t yi = 0; yi < ny; ++yi) {
          out_cells.push_back(CellJson(o, r, n, mi, ri, xi, yi));
        }
      }
    }
  }
  return json{{"dataset", d.meta.name},
              {"nodes", n},
              {"edges", d.graph.num_edges()},
              {"seed", o.seed},
              {"runs", o.runs},
              {"noise_source", r.noise_source},
              {"attack",
               {{"score", "cosine similarity of the two nodes' class posteriors"},
                {"positives", d.graph.num_edges() - d.graph.num_self_loops()},
                {"negatives", r.negatives}}},
              {"attacks", AttacksJson(o)},
              {"parameters", ParamsJson(d, o, r)},
              {"cells", out_cells},
              {"seconds", seconds}};
}

namespace {

// A table cell: `accuracy±std` and the mean AUC of each attack run, in
// percent.
std::string CellText(const json& c) {
  std::string out = absl::StrFormat(
      "%.1f±%.1f", 100 * c["accuracy"]["mean"].get<double>(),
      100 * c["accuracy"]["std"].get<double>());
  for (const char* key : {"attack_auc", "linkteller_auc"}) {
    if (c.contains(key) && !c[key].is_null()) {
      absl::StrAppendFormat(&out, " / %.1f",
                            100 * c[key]["mean"].get<double>());
    }
  }
  return out;
}

// The attacks a grid ran (a grid saved before --attacks ran the similarity
// attack alone).
struct EdgesTableAttacks {
  bool similarity = false;
  bool linkteller = false;
};
EdgesTableAttacks AttacksRun(const json& grid) {
  EdgesTableAttacks out;
  out.similarity = !grid.contains("attacks");
  for (const json& a : grid.value("attacks", json::array())) {
    out.similarity |= a == "similarity";
    out.linkteller |= a == "linkteller";
  }
  return out;
}

// One model's rows, (graph, eps_e) in order of appearance: each row's
// cells, and the (sum, count) of its cells' graph, run and LinkTeller
// seconds.
struct EdgesTableRows {
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<std::vector<std::string>> cells;
  std::vector<std::pair<double, int>> graph_s, run_s, lt_s;
};

// The rows of model `name`'s table from the grid's cells; a skipped cell's
// note goes to *footnotes once.
EdgesTableRows ModelRows(const json& grid, const std::string& name,
                         bool linkteller, std::vector<std::string>* footnotes) {
  const auto budget = BudgetText;
  EdgesTableRows rows;
  for (const json& c : grid["cells"]) {
    if (c["model"] != name) continue;
    std::pair<std::string, std::string> key{
        c["graph"].get<std::string>(),
        c["edge_epsilon"].is_null() ? "-" : budget(c["edge_epsilon"])};
    if (rows.keys.empty() || rows.keys.back() != key) {
      rows.keys.push_back(key);
      rows.cells.emplace_back();
      rows.graph_s.emplace_back(0.0, 0);
      rows.run_s.emplace_back(0.0, 0);
      rows.lt_s.emplace_back(0.0, 0);
    }
    if (!c["skipped"].is_null()) {
      rows.cells.back().push_back("skipped");
      const std::string note = absl::StrCat(
          key.first, " eps_e=", key.second, ": skipped: ",
          c["skipped"].get<std::string>());
      if (std::find(footnotes->begin(), footnotes->end(), note) ==
          footnotes->end()) {
        footnotes->push_back(note);
      }
      continue;
    }
    rows.cells.back().push_back(CellText(c));
    rows.graph_s.back().first += c["graph_seconds"]["mean"].get<double>();
    ++rows.graph_s.back().second;
    rows.run_s.back().first += c["seconds"]["mean"].get<double>();
    ++rows.run_s.back().second;
    if (linkteller) {
      rows.lt_s.back().first += c["linkteller_seconds"]["mean"].get<double>();
      ++rows.lt_s.back().second;
    }
  }
  return rows;
}

// The table's lines, the header first: graph, eps_e, a column per
// (eps_x, eps_y), then the mean seconds.
std::vector<std::vector<std::string>> TableLines(
    const EdgesTableRows& rows, const std::vector<std::string>& columns,
    bool linkteller) {
  std::vector<std::string> header = {"graph", "eps_e"};
  header.insert(header.end(), columns.begin(), columns.end());
  header.push_back("graph s");
  header.push_back("run s");
  if (linkteller) header.push_back("LT s");
  std::vector<std::vector<std::string>> table;
  table.push_back(header);
  for (size_t r = 0; r < rows.keys.size(); ++r) {
    std::vector<std::string> line = {rows.keys[r].first, rows.keys[r].second};
    line.insert(line.end(), rows.cells[r].begin(), rows.cells[r].end());
    auto mean = [](const std::pair<double, int>& s) {
      return s.second == 0 ? std::string("-")
                           : absl::StrFormat("%.2f", s.first / s.second);
    };
    const bool built =
        rows.keys[r].first != "true" && rows.keys[r].first != "mlp";
    line.push_back(built ? mean(rows.graph_s[r]) : "-");
    line.push_back(mean(rows.run_s[r]));
    if (linkteller) line.push_back(mean(rows.lt_s[r]));
    table.push_back(line);
  }
  return table;
}

// The lines as a Markdown table, each column as wide as its widest cell
// (width: at least one entry per column, all 0).
std::string TableText(const std::vector<std::vector<std::string>>& table,
                      std::vector<size_t> width) {
  for (const auto& line : table) {
    for (size_t i = 0; i < line.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], DisplayWidth(line[i]));
    }
  }
  std::string out;
  for (size_t li = 0; li < table.size(); ++li) {
    std::string text = "|";
    for (size_t i = 0; i < table[li].size(); ++i) {
      absl::StrAppend(&text, " ", Pad(table[li][i], width[i]), " |");
    }
    absl::StrAppend(&out, text, "\n");
    if (li == 0) {
      std::string rule = "|";
      for (size_t i = 0; i < table[li].size(); ++i) {
        absl::StrAppend(&rule, std::string(width[i] + 2, '-'), "|");
      }
      absl::StrAppend(&out, rule, "\n");
    }
  }
  return out;
}

}  // namespace

std::string EdgesTables(const json& grid) {
  std::string out;
  const json& p = grid["parameters"];
  const auto budget = BudgetText;
  std::vector<std::string> footnotes;
  const EdgesTableAttacks attacks = AttacksRun(grid);
  const bool linkteller = attacks.linkteller;
  std::string attacks_title;
  if (attacks.similarity) attacks_title += " / similarity attack AUC %";
  if (linkteller) attacks_title += " / LinkTeller attack AUC %";
  for (const json& model : p["models"]) {
    const std::string name = model.get<std::string>();
    // Rows in order of appearance; columns (eps_x, eps_y).
    std::vector<std::string> columns;
    for (const json& x : p["feature_epsilons"]) {
      for (const json& y : p["label_epsilons"]) {
        columns.push_back(absl::StrCat("x=", budget(x), " y=", budget(y)));
      }
    }
    const EdgesTableRows rows = ModelRows(grid, name, linkteller, &footnotes);
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%s on %s: test accuracy %% (mean±std of %d runs)%s (means)\n",
            name == "gcn" ? "GCN" : "GraphSAGE",
            grid["dataset"].get<std::string>(), grid["runs"].get<int>(),
            attacks_title));
    absl::StrAppend(&out,
                    TableText(TableLines(rows, columns, linkteller),
                              std::vector<size_t>(columns.size() + 5, 0)),
                    "\n");
  }
  for (const std::string& f : footnotes) absl::StrAppend(&out, f, "\n");
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "x = eps_x (Multi-bit features), y = eps_y (label RR), inf = off; "
          "graph s: seconds to build the private graph; run s: seconds per "
          "pipeline run and similarity attack%s. mlp: no graph (an MLP, the "
          "same in every model's table). Noise: %s. Total %.0f s.\n",
          linkteller ? "; LT s: seconds per LinkTeller attack" : "",
          grid["noise_source"].get<std::string>(),
          grid["seconds"].get<double>()));
  return out;
}

}  // namespace ldpgraph::tool

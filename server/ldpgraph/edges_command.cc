#include "server/ldpgraph/edges_command.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/dataset/dataset.h"
#include "common/random/random.h"
#include "server/ldpgraph/charts.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {

int RunEdges(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
  auto parsed =
      ParseCommand("edges", args, EdgesHelp, ParseEdgesOptions, out, err);
  if (!parsed.ok()) return parsed.exit_code();
  const EdgesOptions& o = *parsed;
  auto dataset = LoadDataset(o.dataset);
  if (!dataset.ok()) {
    err << "ldpgraph edges: " << dataset.status().message() << "\n";
    return kExitRuntimeError;
  }
  if (!o.secure) err << kSeededWarning << "\n";
  auto grid = RunEdgesGrid(*dataset, o, &err);
  if (!grid.ok()) {
    err << "ldpgraph edges: " << grid.status().message() << "\n";
    return grid.status().code() == absl::StatusCode::kInvalidArgument ||
                   grid.status().code() ==
                       absl::StatusCode::kFailedPrecondition
               ? kExitUsageError
               : kExitRuntimeError;
  }
  if (!o.save_json.empty()) {
    std::ofstream f(o.save_json);
    f << grid->dump() << "\n";
    f.close();
    if (!f) {
      err << "ldpgraph edges: cannot write " << o.save_json << "\n";
      return kExitRuntimeError;
    }
  }
  if (o.json) {
    out << grid->dump() << "\n";
  } else {
    out << EdgesTables(*grid);
  }
  if (!o.plot.empty()) {
    out.flush();
    return WritePlot("edges", o.plot, EdgesCharts(*grid), err);
  }
  return kExitOk;
}

}  // namespace ldpgraph::tool

// What `ldpgraph edges` reports (edges_command.h): the JSON object of a
// grid's run (`--format json`, documented in EdgesHelp()) and the tables
// `--format table` prints from it.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "common/dataset/dataset.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "server/ldpgraph/edges_grid.h"
#include "server/ldpgraph/edges_options.h"

namespace ldpgraph::tool {

// The grid of o on d as r collected it, `seconds` its wall time: dataset,
// nodes, edges, seed, runs, noise_source, attack, attacks, parameters,
// cells (one per (model, row, eps_x, eps_y)) and seconds.
nlohmann::json GridJson(const Dataset& d, const EdgesOptions& o,
                        const GridResults& r, double seconds);

// The tables `--format table` prints, from RunEdgesGrid's JSON.
std::string EdgesTables(const nlohmann::json& grid);

// A substitution run's totals (and per node, over `nodes` nodes) and its
// seconds: a cell's substitution.per_run entry, without "run".
nlohmann::json SubstitutionStatsJson(const edges::RunStats& s, size_t nodes,
                                     double seconds);

// What the Blink curator found in one run: a cell's blink.per_run entry,
// without "run".
nlohmann::json BlinkJson(const edges::BlinkEstimate& b);

}  // namespace ldpgraph::tool

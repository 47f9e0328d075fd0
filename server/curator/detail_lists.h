// The id lists of a stage result's details (an estimate's screen's
// "flagged" nodes and "overreported" dimensions, an evaluate's robust
// "dropped_nodes", ...), kept bounded in the details and whole beside the
// result.
//
// A result's details_json goes out whole in every StageResult reply
// (Estimate, Evaluate, ListResults), so an id list in it must not grow with
// the graph: TruncateIdLists cuts every list longer than kDetailIds to its
// first kDetailIds ids and sets "<key>_truncated": true beside it. The
// whole lists go to the result's id-list file (the simplest durable place:
// a file beside the result's matrix, written and synced before the result
// is stored, as the matrix is; Stages::Record), a JSON object from each
// list's path to its ids. A list's path is its key, dotted below the top
// level: "flagged", "overreported", "robust.dropped_nodes".
//
// WholeIdList reads a list back: from the details when they hold it whole
// (no "_truncated": short lists, and every result stored before lists were
// cut), else from the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::curator {

// The most ids of one list the details hold.
inline constexpr size_t kDetailIds = 100;

// The keys whose values are id lists, at any depth of the details: arrays
// of unsigned integers.
inline constexpr const char* kIdListKeys[] = {"flagged", "overreported",
                                              "dropped_nodes"};

// Whole id lists by path.
using IdLists = std::map<std::string, std::vector<uint32_t>>;

// Cuts every id list of *details longer than kDetailIds, as the file
// comment says; returns the whole of each list it cut, by path (empty when
// none was).
IdLists TruncateIdLists(nlohmann::json* details);

// The paths of the id lists details hold (cut or not), sorted.
std::vector<std::string> IdListPaths(const nlohmann::json& details);

// Writes lists to path as one JSON object (the caller syncs it).
// INTERNAL naming the path when it cannot be written.
absl::Status WriteIdLists(const std::string& path, const IdLists& lists);

// The whole list `path` of a result whose details are `details` and whose
// id-list file is `file`. INVALID_ARGUMENT naming the lists the details
// hold when they hold no list `path`; DATA_LOSS naming the file when the
// list was cut and the file cannot be read or lacks it.
absl::StatusOr<std::vector<uint32_t>> WholeIdList(const nlohmann::json& details,
                                                  absl::string_view path,
                                                  const std::string& file);

}  // namespace ldpgraph::curator

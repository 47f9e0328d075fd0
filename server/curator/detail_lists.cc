#include "server/curator/detail_lists.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ldpgraph::curator {
namespace {

using json = nlohmann::json;

bool IsIdListKey(absl::string_view key) {
  return std::any_of(std::begin(kIdListKeys), std::end(kIdListKeys),
                     [&](const char* k) { return key == k; });
}

// An array of integers in [0, 2^32): an id list's value.
bool IsIdArray(const json& v) {
  if (!v.is_array()) return false;
  return std::all_of(v.begin(), v.end(), [](const json& e) {
    if (!e.is_number_integer()) return false;
    const int64_t x = e.get<int64_t>();
    return x >= 0 && x <= std::numeric_limits<uint32_t>::max();
  });
}

// Calls fn(object, key, path) for every id list below `object` (objects
// only: lists inside arrays are not looked for).
template <typename Json, typename Fn>
void ForEachIdList(Json& object, const std::string& prefix, Fn fn) {
  if (!object.is_object()) return;
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) {
    keys.push_back(it.key());
  }
  for (const std::string& key : keys) {
    const std::string path = prefix.empty() ? key : absl::StrCat(prefix, ".", key);
    auto& value = object[key];
    if (IsIdListKey(key) && IsIdArray(value)) {
      fn(object, key, path);
    } else if (value.is_object()) {
      ForEachIdList(value, path, fn);
    }
  }
}

// The value at a dotted path, or null.
const json* At(const json& details, absl::string_view path) {
  const json* at = &details;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key(path.substr(start, dot == absl::string_view::npos
                                                 ? absl::string_view::npos
                                                 : dot - start));
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    if (dot == absl::string_view::npos) return at;
    start = dot + 1;
  }
}

std::string TruncatedKey(absl::string_view key) {
  return absl::StrCat(key, "_truncated");
}

}  // namespace

IdLists TruncateIdLists(json* details) {
  IdLists whole;
  ForEachIdList(*details, "", [&](json& object, const std::string& key,
                                  const std::string& path) {
    json& list = object[key];
    if (list.size() <= kDetailIds) return;
    std::vector<uint32_t>& ids = whole[path];
    ids.reserve(list.size());
    for (const json& e : list) ids.push_back(e.get<uint32_t>());
    list = std::vector<uint32_t>(ids.begin(), ids.begin() + kDetailIds);
    object[TruncatedKey(key)] = true;
  });
  return whole;
}

std::vector<std::string> IdListPaths(const json& details) {
  std::vector<std::string> paths;
  json copy = details;  // ForEachIdList walks a mutable object
  ForEachIdList(copy, "", [&](json&, const std::string&,
                              const std::string& path) {
    paths.push_back(path);
  });
  std::sort(paths.begin(), paths.end());
  return paths;
}

absl::Status WriteIdLists(const std::string& path, const IdLists& lists) {
  json j = json::object();
  for (const auto& [name, ids] : lists) j[name] = ids;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << j.dump();
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> WholeIdList(const json& details,
                                                  absl::string_view path,
                                                  const std::string& file) {
  const json* list = At(details, path);
  const size_t dot = path.rfind('.');
  const absl::string_view key =
      dot == absl::string_view::npos ? path : path.substr(dot + 1);
  if (list == nullptr || !IsIdListKey(key) || !IsIdArray(*list)) {
    const std::vector<std::string> paths = IdListPaths(details);
    return absl::InvalidArgumentError(absl::StrCat(
        "no id list '", path, "' in the result's details (its lists: ",
        paths.empty() ? "none" : absl::StrJoin(paths, ", "), ")"));
  }
  const std::string parent(dot == absl::string_view::npos
                               ? absl::string_view()
                               : path.substr(0, dot));
  const json* holder = parent.empty() ? &details : At(details, parent);
  const std::string flag = TruncatedKey(key);
  if (!holder->contains(flag) || !(*holder)[flag].is_boolean() ||
      !(*holder)[flag].get<bool>()) {
    return list->get<std::vector<uint32_t>>();
  }
  std::ifstream f(file, std::ios::binary);
  std::stringstream text;
  text << f.rdbuf();
  const json whole = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!f || whole.is_discarded() || !whole.is_object() ||
      !whole.contains(std::string(path)) ||
      !IsIdArray(whole[std::string(path)])) {
    return absl::DataLossError(absl::StrCat(
        "the id list '", path, "' was cut in the details and ", file,
        " does not hold it whole"));
  }
  return whole[std::string(path)].get<std::vector<uint32_t>>();
}

}  // namespace ldpgraph::curator

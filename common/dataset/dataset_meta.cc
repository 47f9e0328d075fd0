// meta.json: parsing it (LoadDatasetMeta) and the text WriteDataset writes.
#include "common/dataset/dataset_meta.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/dataset_internal.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace dataset_internal {
namespace {

// ordered_json keeps the key order of what it reads (the generator object)
// and of what it writes (meta.json's documented key order).
using Json = nlohmann::ordered_json;

absl::Status KeyError(const std::string& path, absl::string_view key,
                      absl::string_view expected, const Json* found) {
  if (found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": missing required key \"", key, "\" (expected ",
                     expected, ")"));
  }
  std::string shown = found->dump(-1, ' ', false,
                                  Json::error_handler_t::replace);
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": key \"", key, "\": expected ", expected,
                   ", found ", found->type_name(), " ", shown));
}

const Json* Find(const Json& object, absl::string_view key) {
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

absl::Status ReadUnsigned(const std::string& path, const Json& object,
                          absl::string_view key, uint64_t max,
                          uint64_t* value) {
  const Json* j = Find(object, key);
  if (j == nullptr || !j->is_number_unsigned()) {
    return KeyError(path, key, "a non-negative integer", j);
  }
  *value = j->get<uint64_t>();
  if (*value > max) {
    return KeyError(path, key, absl::StrCat("a non-negative integer <= ", max),
                    j);
  }
  return absl::OkStatus();
}

absl::Status ReadOptionalString(const std::string& path, const Json& object,
                                absl::string_view key, std::string* value) {
  const Json* j = Find(object, key);
  if (j == nullptr) return absl::OkStatus();
  if (!j->is_string()) return KeyError(path, key, "a string", j);
  *value = j->get<std::string>();
  return absl::OkStatus();
}

// The text as a JSON object: INVALID_ARGUMENT naming nlohmann's byte
// position, or the type found instead of an object.
absl::StatusOr<Json> ParseJsonObject(const std::string& path,
                                     const std::string& text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": malformed JSON at byte ", e.byte, ": ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected a JSON object, found ", root.type_name()));
  }
  return root;
}

// name, nodes, edges, features, classes (required), then source, license
// and notes (optional).
absl::Status ReadDescription(const std::string& path, const Json& root,
                             DatasetMeta& meta) {
  const Json* name = Find(root, "name");
  if (name == nullptr || !name->is_string()) {
    return KeyError(path, "name", "a string", name);
  }
  meta.name = name->get<std::string>();
  uint64_t value;
  RETURN_IF_ERROR(ReadUnsigned(path, root, "nodes", kMaxNodes, &value));
  meta.nodes = value;
  RETURN_IF_ERROR(ReadUnsigned(
      path, root, "edges", std::numeric_limits<int64_t>::max(), &value));
  meta.edges = value;
  RETURN_IF_ERROR(ReadUnsigned(path, root, "features",
                               std::numeric_limits<uint32_t>::max(), &value));
  meta.features = value;
  RETURN_IF_ERROR(ReadUnsigned(path, root, "classes",
                               std::numeric_limits<int32_t>::max(), &value));
  meta.classes = static_cast<int>(value);
  RETURN_IF_ERROR(ReadOptionalString(path, root, "source", &meta.source));
  RETURN_IF_ERROR(ReadOptionalString(path, root, "license", &meta.license));
  return ReadOptionalString(path, root, "notes", &meta.notes);
}

// The optional "feature_range": [lo, hi], finite with lo < hi.
absl::Status ReadFeatureRange(const std::string& path, const Json& root,
                              DatasetMeta& meta) {
  const Json* range = Find(root, "feature_range");
  if (range == nullptr) return absl::OkStatus();
  constexpr absl::string_view kExpected =
      "[lo, hi] with finite numbers lo < hi";
  if (!range->is_array() || range->size() != 2 ||
      !(*range)[0].is_number() || !(*range)[1].is_number()) {
    return KeyError(path, "feature_range", kExpected, range);
  }
  const double lo = (*range)[0].get<double>();
  const double hi = (*range)[1].get<double>();
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) {
    return KeyError(path, "feature_range", kExpected, range);
  }
  meta.feature_range = std::make_pair(lo, hi);
  return absl::OkStatus();
}

// The optional "feature_ranges": one finite [lo, hi], lo <= hi, per feature;
// not beside "feature_range".
absl::Status ReadFeatureRanges(const std::string& path, const Json& root,
                               DatasetMeta& meta) {
  const Json* ranges = Find(root, "feature_ranges");
  if (ranges == nullptr) return absl::OkStatus();
  const std::string expected = absl::StrCat(
      "an array of ", meta.features,
      " (features) pairs [lo, hi] of finite numbers with lo <= hi");
  if (meta.feature_range.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": both \"feature_range\" and \"feature_ranges\": give one "
        "range for all features or one per feature, not both"));
  }
  if (!ranges->is_array() || ranges->size() != meta.features) {
    return KeyError(path, "feature_ranges", expected, ranges);
  }
  meta.feature_ranges.reserve(meta.features);
  for (size_t j = 0; j < ranges->size(); ++j) {
    const Json& r = (*ranges)[j];
    const bool ok = r.is_array() && r.size() == 2 && r[0].is_number() &&
                    r[1].is_number() && std::isfinite(r[0].get<double>()) &&
                    std::isfinite(r[1].get<double>()) &&
                    r[0].get<double>() <= r[1].get<double>();
    if (!ok) {
      return KeyError(path, absl::StrCat("feature_ranges[", j, "]"),
                      "[lo, hi] with finite numbers lo <= hi", &r);
    }
    meta.feature_ranges.emplace_back(r[0].get<double>(), r[1].get<double>());
  }
  return absl::OkStatus();
}

// The optional "generator" object, kept as its text.
absl::Status ReadGenerator(const std::string& path, const Json& root,
                           DatasetMeta& meta) {
  const Json* gen = Find(root, "generator");
  if (gen == nullptr) return absl::OkStatus();
  if (!gen->is_object()) {
    return KeyError(path, "generator", "a JSON object", gen);
  }
  meta.generator_json =
      gen->dump(-1, ' ', false, Json::error_handler_t::replace);
  return absl::OkStatus();
}

absl::StatusOr<DatasetMeta> ParseMeta(const std::string& path,
                                      const std::string& text) {
  ASSIGN_OR_RETURN(const Json root, ParseJsonObject(path, text));
  DatasetMeta meta;
  RETURN_IF_ERROR(ReadDescription(path, root, meta));
  RETURN_IF_ERROR(ReadFeatureRange(path, root, meta));
  RETURN_IF_ERROR(ReadFeatureRanges(path, root, meta));
  RETURN_IF_ERROR(
      ReadOptionalString(path, root, "feature_schema", &meta.feature_schema));
  RETURN_IF_ERROR(ReadGenerator(path, root, meta));
  return meta;
}

}  // namespace

std::string MetaText(const DatasetMeta& meta, uint64_t nodes, uint64_t edges,
                     uint64_t features) {
  Json j;
  j["name"] = meta.name;
  j["nodes"] = nodes;
  j["edges"] = edges;
  j["features"] = features;
  j["classes"] = meta.classes;
  if (meta.feature_range.has_value()) {
    j["feature_range"] =
        Json::array({meta.feature_range->first, meta.feature_range->second});
  }
  if (!meta.feature_ranges.empty()) {
    Json ranges = Json::array();
    for (const auto& [lo, hi] : meta.feature_ranges) {
      ranges.push_back(Json::array({lo, hi}));
    }
    j["feature_ranges"] = std::move(ranges);
  }
  if (!meta.feature_schema.empty()) j["feature_schema"] = meta.feature_schema;
  j["source"] = meta.source;
  j["license"] = meta.license;
  j["notes"] = meta.notes;
  if (!meta.generator_json.empty()) {
    j["generator"] = Json::parse(meta.generator_json, nullptr,
                                 /*allow_exceptions=*/false);
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace) +
         "\n";
}

}  // namespace dataset_internal

absl::StatusOr<DatasetMeta> LoadDatasetMeta(const std::string& dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (!std::filesystem::exists(status)) {
    return absl::NotFoundError(
        absl::StrCat("dataset folder ", dir, " not found"));
  }
  if (!std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset path ", dir, " is not a folder"));
  }
  const std::string meta_path =
      dataset_internal::JoinPath(dir, dataset_internal::kMetaFile);
  ASSIGN_OR_RETURN(std::string meta_text, ReadFileToString(meta_path));
  return dataset_internal::ParseMeta(meta_path, meta_text);
}

}  // namespace ldpgraph

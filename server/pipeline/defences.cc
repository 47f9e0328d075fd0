#include "server/pipeline/defences.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace ldpgraph::pipeline {

absl::Status ValidateScreenAlpha(double alpha) {
  if (!(alpha > 0 && alpha < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("screen-alpha must be in (0, 1), got ", alpha));
  }
  return absl::OkStatus();
}

absl::StatusOr<Defences> ParseDefences(absl::string_view list,
                                       absl::string_view flag) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": defence must be a comma list of ", kDefenceList, ", got '",
        list, "'", why.empty() ? "" : ": ", why));
  };
  Defences d;
  bool none = false;
  int count = 0;
  for (absl::string_view name : absl::StrSplit(list, ',')) {
    name = absl::StripAsciiWhitespace(name);
    ++count;
    bool* flag_of = nullptr;
    if (name == "none") {
      if (none) return bad("none twice");
      none = true;
      continue;
    }
    if (name == "screen") flag_of = &d.screen;
    if (name == "robust") flag_of = &d.robust;
    if (name == "edge-consistency") flag_of = &d.edge_consistency;
    if (flag_of == nullptr) {
      return bad(name.empty() ? "an empty name"
                              : absl::StrCat("unknown '", name, "'"));
    }
    if (*flag_of) return bad(absl::StrCat("'", name, "' twice"));
    *flag_of = true;
  }
  if (none && count > 1) return bad("none with another defence");
  return d;
}

std::string DefencesName(const Defences& d) {
  std::vector<absl::string_view> names;
  if (d.screen) names.push_back("screen");
  if (d.robust) names.push_back("robust");
  if (d.edge_consistency) names.push_back("edge-consistency");
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

absl::Status ParseDefenceFlags(const CliArgs& a, Defences* defences,
                               double* alpha) {
  if (auto d = a.Get("defence")) {
    ASSIGN_OR_RETURN(*defences, ParseDefences(*d, "--defence"));
  }
  ASSIGN_OR_RETURN(auto level, a.GetDouble("screen-alpha"));
  if (level) {
    if (!defences->screen) {
      return absl::InvalidArgumentError(
          "--screen-alpha needs --defence screen");
    }
    absl::Status valid = ValidateScreenAlpha(*level);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", valid.message()));
    }
    *alpha = *level;
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::pipeline

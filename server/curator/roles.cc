#include "server/curator/roles.h"

#include "absl/strings/str_cat.h"

namespace ldpgraph::curator {

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  if (name == "all") return Role::kAll;
  if (name == "frontend") return Role::kFrontend;
  if (name == "operator") return Role::kOperator;
  return absl::InvalidArgumentError(absl::StrCat(
      "--role must be all, frontend or operator, got '", name, "'"));
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAll:
      return "all";
    case Role::kFrontend:
      return "frontend";
    case Role::kOperator:
      return "operator";
  }
  return "?";
}

}  // namespace ldpgraph::curator

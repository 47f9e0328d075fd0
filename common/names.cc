#include "common/names.h"

#include "absl/strings/str_cat.h"

namespace ldpgraph::names_internal {

absl::Status ChoiceError(absl::string_view subject, absl::string_view choices,
                         absl::string_view name) {
  return absl::InvalidArgumentError(absl::StrCat(
      subject, " must be one of ", choices, ", got '", name, "'"));
}

}  // namespace ldpgraph::names_internal

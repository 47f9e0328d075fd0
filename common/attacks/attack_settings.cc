#include "common/attacks/attack_settings.h"

#include "absl/strings/str_cat.h"

namespace ldpgraph::poisoning {

absl::Status AttackSettings::Validate() const {
  if (!kAttackNames.Contains(kind)) {
    return absl::InvalidArgumentError("unknown attack kind");
  }
  if (!(fraction >= 0 && fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the malicious fraction must be in [0, 1), got ", fraction));
  }
  if (target_class < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack class must be >= 0, got ", target_class));
  }
  if (target_dims < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack's target dimensions must be >= 1, got ", target_dims));
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::poisoning

#include "common/accounting.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

constexpr double kSlack = 1e-9;

bool Exceeds(double spent, double add, double cap) {
  return spent + add > cap * (1 + kSlack);
}

absl::Status CheckPositive(const std::string& what, double value) {
  if (!std::isfinite(value) || !(value > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be finite and > 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

std::string QueryKey::Canonical() const {
  return absl::StrFormat("%s|%s|%s|%.17g", attribute, mechanism, parameters,
                         epsilon);
}

absl::StatusOr<std::unique_ptr<PrivacyBudget>> PrivacyBudget::Create(
    BudgetCaps caps) {
  RETURN_IF_ERROR(CheckPositive("total budget cap", caps.total));
  for (const auto& [attribute, cap] : caps.per_attribute) {
    RETURN_IF_ERROR(
        CheckPositive(absl::StrCat("budget cap of '", attribute, "'"), cap));
  }
  return std::unique_ptr<PrivacyBudget>(new PrivacyBudget(std::move(caps)));
}

absl::Status PrivacyBudget::CanSpendLocked(const std::string& attribute,
                                           double epsilon) const {
  RETURN_IF_ERROR(CheckPositive("epsilon", epsilon));
  if (Exceeds(total_spent_, epsilon, caps_.total)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "budget exhausted: spending %g on '%s' would take the node's total to "
        "%g, over its cap %g (spent %g)",
        epsilon, attribute, total_spent_ + epsilon, caps_.total, total_spent_));
  }
  return CanSpendOnAttributeLocked(attribute, epsilon);
}

absl::Status PrivacyBudget::CanSpendOnAttributeLocked(
    const std::string& attribute, double epsilon) const {
  auto cap = caps_.per_attribute.find(attribute);
  if (cap == caps_.per_attribute.end()) return absl::OkStatus();
  auto it = spent_.find(attribute);
  const double spent = it == spent_.end() ? 0.0 : it->second;
  if (Exceeds(spent, epsilon, cap->second)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "budget exhausted: spending %g on '%s' would take it to %g, over "
        "its cap %g (spent %g)",
        epsilon, attribute, spent + epsilon, cap->second, spent));
  }
  return absl::OkStatus();
}

absl::Status PrivacyBudget::CanSpend(const std::string& attribute,
                                     double epsilon) const {
  absl::MutexLock lock(&mu_);
  return CanSpendLocked(attribute, epsilon);
}

absl::Status PrivacyBudget::CanAnswerAll(
    const std::vector<QueryKey>& keys) const {
  std::map<std::string, double> asked;  // canonical key -> epsilon
  std::map<std::string, double> by_attribute;
  double total = 0;
  absl::MutexLock lock(&mu_);
  for (const QueryKey& key : keys) {
    RETURN_IF_ERROR(CheckPositive("epsilon", key.epsilon));
    std::string canonical = key.Canonical();
    if (memo_.contains(canonical) || asked.contains(canonical)) continue;
    asked.emplace(std::move(canonical), key.epsilon);
    by_attribute[key.attribute] += key.epsilon;
    total += key.epsilon;
  }
  if (asked.empty()) return absl::OkStatus();
  if (Exceeds(total_spent_, total, caps_.total)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "budget exhausted: the task asks %d new questions costing %g in "
        "total, which would take the node's total to %g, over its cap %g "
        "(spent %g)",
        asked.size(), total, total_spent_ + total, caps_.total, total_spent_));
  }
  for (const auto& [attribute, epsilon] : by_attribute) {
    RETURN_IF_ERROR(CanSpendOnAttributeLocked(attribute, epsilon));
  }
  return absl::OkStatus();
}

absl::StatusOr<Answered> PrivacyBudget::Answer(
    const QueryKey& key,
    absl::FunctionRef<absl::StatusOr<std::string>()> perturb) {
  const std::string canonical = key.Canonical();
  absl::MutexLock lock(&mu_);
  if (auto it = memo_.find(canonical); it != memo_.end()) {
    return Answered{it->second.answer, /*from_memo=*/true, /*charged=*/0.0};
  }
  RETURN_IF_ERROR(CanSpendLocked(key.attribute, key.epsilon));
  ASSIGN_OR_RETURN(std::string answer, perturb());
  memo_[canonical] = MemoEntry{answer, key.epsilon};
  total_spent_ += key.epsilon;
  spent_[key.attribute] += key.epsilon;
  return Answered{std::move(answer), /*from_memo=*/false, key.epsilon};
}

absl::Status PrivacyBudget::Restore(const QueryKey& key, MemoEntry entry) {
  RETURN_IF_ERROR(CheckPositive("epsilon", key.epsilon));
  if (entry.epsilon != key.epsilon) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "restored entry costs %.17g but its question %s costs %.17g",
        entry.epsilon, key.Canonical(), key.epsilon));
  }
  std::string canonical = key.Canonical();
  absl::MutexLock lock(&mu_);
  if (auto it = memo_.find(canonical); it != memo_.end()) {
    if (it->second.answer == entry.answer &&
        it->second.epsilon == entry.epsilon) {
      return absl::OkStatus();
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "a different answer to ", canonical, " is already in the memo"));
  }
  memo_.emplace(std::move(canonical), std::move(entry));
  total_spent_ += key.epsilon;
  spent_[key.attribute] += key.epsilon;
  return absl::OkStatus();
}

double PrivacyBudget::spent() const {
  absl::MutexLock lock(&mu_);
  return total_spent_;
}

double PrivacyBudget::spent(const std::string& attribute) const {
  absl::MutexLock lock(&mu_);
  auto it = spent_.find(attribute);
  return it == spent_.end() ? 0.0 : it->second;
}

std::optional<MemoEntry> PrivacyBudget::Lookup(const QueryKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = memo_.find(key.Canonical());
  if (it == memo_.end()) return std::nullopt;
  return it->second;
}

}  // namespace ldpgraph

#include "common/dp/accounting.h"

#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ldpgraph {

struct PrivacyBudget::Question {
  std::string canonical;  // QueryKey::Canonical()
  std::string attribute;
  double epsilon = 0;
};

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

// The process's one copy of each distinct question answered by any budget.
const PrivacyBudget::Question* Intern(const QueryKey& key,
                                      std::string canonical) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* const table =
      new absl::flat_hash_map<absl::string_view,
                              std::unique_ptr<PrivacyBudget::Question>>();
  absl::MutexLock lock(&mu);
  auto it = table->find(canonical);
  if (it != table->end()) return it->second.get();
  auto q = std::make_unique<PrivacyBudget::Question>(
      PrivacyBudget::Question{std::move(canonical), key.attribute, key.epsilon});
  const PrivacyBudget::Question* out = q.get();
  table->emplace(out->canonical, std::move(q));
  return out;
}

}  // namespace

std::string QueryKey::Canonical() const {
  return absl::StrFormat("%s|%s|%s|%.17g", attribute, mechanism, parameters,
                         epsilon);
}

absl::StatusOr<std::unique_ptr<PrivacyBudget>> PrivacyBudget::Create(
    BudgetCaps caps) {
  return Create(std::make_shared<const BudgetCaps>(std::move(caps)));
}

absl::StatusOr<std::unique_ptr<PrivacyBudget>> PrivacyBudget::Create(
    std::shared_ptr<const BudgetCaps> caps) {
  if (caps == nullptr) return absl::InvalidArgumentError("no budget caps");
  RETURN_IF_ERROR(CheckPositive("total budget cap", caps->total));
  for (const auto& [attribute, cap] : caps->per_attribute) {
    RETURN_IF_ERROR(
        CheckPositive(absl::StrCat("budget cap of '", attribute, "'"), cap));
  }
  return std::unique_ptr<PrivacyBudget>(new PrivacyBudget(std::move(caps)));
}

const PrivacyBudget::Stored* PrivacyBudget::FindLocked(
    absl::string_view canonical) const {
  for (const Stored& s : memo_) {
    if (s.question->canonical == canonical) return &s;
  }
  return nullptr;
}

double PrivacyBudget::SpentLocked(absl::string_view attribute) const {
  double spent = 0;
  for (const Stored& s : memo_) {
    if (s.question->attribute == attribute) spent += s.question->epsilon;
  }
  return spent;
}

void PrivacyBudget::StoreLocked(const QueryKey& key, std::string canonical,
                                std::string answer) {
  memo_.push_back(Stored{Intern(key, std::move(canonical)), std::move(answer)});
  total_spent_ += key.epsilon;
}

absl::Status PrivacyBudget::CanSpendLocked(const std::string& attribute,
                                           double epsilon) const {
  RETURN_IF_ERROR(CheckPositive("epsilon", epsilon));
  if (Exceeds(total_spent_, epsilon, caps_->total)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "budget exhausted: spending %g on '%s' would take the node's total to "
        "%g, over its cap %g (spent %g)",
        epsilon, attribute, total_spent_ + epsilon, caps_->total, total_spent_));
  }
  return CanSpendOnAttributeLocked(attribute, epsilon);
}

absl::Status PrivacyBudget::CanSpendOnAttributeLocked(
    const std::string& attribute, double epsilon) const {
  auto cap = caps_->per_attribute.find(attribute);
  if (cap == caps_->per_attribute.end()) return absl::OkStatus();
  const double spent = SpentLocked(attribute);
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
    if (FindLocked(canonical) != nullptr || asked.contains(canonical)) continue;
    asked.emplace(std::move(canonical), key.epsilon);
    by_attribute[key.attribute] += key.epsilon;
    total += key.epsilon;
  }
  if (asked.empty()) return absl::OkStatus();
  if (Exceeds(total_spent_, total, caps_->total)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "budget exhausted: the task asks %d new questions costing %g in "
        "total, which would take the node's total to %g, over its cap %g "
        "(spent %g)",
        asked.size(), total, total_spent_ + total, caps_->total, total_spent_));
  }
  for (const auto& [attribute, epsilon] : by_attribute) {
    RETURN_IF_ERROR(CanSpendOnAttributeLocked(attribute, epsilon));
  }
  return absl::OkStatus();
}

absl::StatusOr<Answered> PrivacyBudget::Answer(
    const QueryKey& key,
    absl::FunctionRef<absl::StatusOr<std::string>()> perturb) {
  std::string canonical = key.Canonical();
  absl::MutexLock lock(&mu_);
  if (const Stored* s = FindLocked(canonical)) {
    return Answered{s->answer, /*from_memo=*/true, /*charged=*/0.0};
  }
  RETURN_IF_ERROR(CanSpendLocked(key.attribute, key.epsilon));
  ASSIGN_OR_RETURN(std::string answer, perturb());
  StoreLocked(key, std::move(canonical), answer);
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
  if (const Stored* s = FindLocked(canonical)) {
    // The same canonical key costs the same epsilon (it is part of it).
    if (s->answer == entry.answer) return absl::OkStatus();
    return absl::AlreadyExistsError(absl::StrCat(
        "a different answer to ", canonical, " is already in the memo"));
  }
  StoreLocked(key, std::move(canonical), std::move(entry.answer));
  return absl::OkStatus();
}

double PrivacyBudget::spent() const {
  absl::MutexLock lock(&mu_);
  return total_spent_;
}

double PrivacyBudget::spent(const std::string& attribute) const {
  absl::MutexLock lock(&mu_);
  return SpentLocked(attribute);
}

std::optional<MemoEntry> PrivacyBudget::Lookup(const QueryKey& key) const {
  const std::string canonical = key.Canonical();
  absl::MutexLock lock(&mu_);
  const Stored* s = FindLocked(canonical);
  if (s == nullptr) return std::nullopt;
  return MemoEntry{s->answer, s->question->epsilon};
}

}  // namespace ldpgraph

#include "server/curator/ledger.h"

#include <limits>

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ldpgraph::curator {
namespace {

// Relative slack of budget comparisons, as in PrivacyBudget.
constexpr double kSlack = 1e-9;

bool Exceeds(double spent, double cap) { return spent > cap * (1 + kSlack); }
// At a cap: less than this slack of it left.
bool AtCap(double spent, double cap) { return cap - spent < cap * kSlack; }

}  // namespace

Ledger::Ledger(uint32_t num_nodes) : num_nodes_(num_nodes) {
  absl::MutexLock lock(&mu_);
  nodes_.resize(num_nodes);
}

std::vector<Ledger::Question> Ledger::Intern(
    const std::vector<QueryKey>& keys) {
  std::vector<Question> out;
  out.reserve(keys.size());
  absl::MutexLock lock(&mu_);
  for (const QueryKey& q : keys) {
    const int id =
        questions_.emplace(q.Canonical(), static_cast<int>(questions_.size()))
            .first->second;
    out.push_back(Question{id, q.attribute, q.epsilon});
  }
  return out;
}

void Ledger::SetCaps(uint32_t node, const v1::BudgetCaps& caps) {
  absl::MutexLock lock(&mu_);
  NodeLedger& l = nodes_[node];
  l.caps = caps;
  l.caps_known = true;
}

bool Ledger::HasCaps(uint32_t node, const v1::BudgetCaps& caps) const {
  absl::MutexLock lock(&mu_);
  const NodeLedger& l = nodes_[node];
  return l.caps_known &&
         google::protobuf::util::MessageDifferencer::Equals(l.caps, caps);
}

void Ledger::Charge(uint32_t node, absl::Span<const Question> questions) {
  absl::MutexLock lock(&mu_);
  ChargeLocked(node, questions);
}

void Ledger::Charge(absl::Span<const Debit> debits) {
  if (debits.empty()) return;
  absl::MutexLock lock(&mu_);
  for (const Debit& d : debits) ChargeLocked(d.node, d.questions);
}

void Ledger::ChargeLocked(uint32_t node, absl::Span<const Question> questions) {
  NodeLedger& l = nodes_[node];
  for (const Question& q : questions) {
    if (!l.Charged(q.id)) {
      l.charged.push_back(q.id);
      l.spent[q.attribute] += q.epsilon;
      l.total += q.epsilon;
    }
  }
}

Ledger::Shortfall Ledger::CannotAfford(
    absl::Span<const uint32_t> targets, absl::Span<const Question> questions,
    absl::FunctionRef<void(uint32_t v,
                           absl::FunctionRef<void(const Question&)> ask)>
        pending) const {
  absl::MutexLock lock(&mu_);
  Shortfall out;
  std::vector<int> asked;
  std::map<std::string, double> on_attribute;
  for (uint32_t v : targets) {
    const NodeLedger& l = nodes_[v];
    if (!l.caps_known) continue;
    // What v has spent plus what these questions and the open campaigns
    // still ask of it: each distinct question not yet charged, once.
    double total = l.total;
    on_attribute = l.spent;
    asked.clear();
    auto ask = [&](const Question& q) {
      if (l.Charged(q.id) ||
          std::find(asked.begin(), asked.end(), q.id) != asked.end()) {
        return;
      }
      asked.push_back(q.id);
      total += q.epsilon;
      on_attribute[q.attribute] += q.epsilon;
    };
    for (const Question& q : questions) ask(q);
    if (asked.empty()) continue;  // everything asked is answered already
    pending(v, ask);
    std::string why;
    if (Exceeds(total, l.caps.total())) {
      why = absl::StrFormat("node %u: total %g > cap %g", v, total,
                            l.caps.total());
    } else {
      // The caps on the attributes these questions are about.
      for (const Question& q : questions) {
        const double spent = on_attribute[q.attribute];
        auto it = l.caps.per_attribute().find(q.attribute);
        if (it != l.caps.per_attribute().end() && Exceeds(spent, it->second)) {
          why = absl::StrFormat("node %u: %s %g > cap %g", v, q.attribute,
                                spent, it->second);
          break;
        }
      }
    }
    if (!why.empty() && out.nodes++ == 0) out.first = std::move(why);
  }
  return out;
}

v1::NodeBudget Ledger::BudgetLocked(uint32_t v) const {
  const NodeLedger& l = nodes_[v];
  v1::NodeBudget b;
  b.set_node_id(v);
  b.set_caps_known(l.caps_known);
  if (l.caps_known) *b.mutable_caps() = l.caps;
  for (const auto& [attribute, eps] : l.spent) {
    (*b.mutable_spent())[attribute] = eps;
  }
  b.set_total_spent(l.total);
  return b;
}

std::vector<v1::NodeBudget> Ledger::Budgets(
    const std::vector<uint32_t>& nodes) const {
  if (nodes.empty()) {
    return KnownBudgets(0, std::numeric_limits<size_t>::max());
  }
  absl::MutexLock lock(&mu_);
  std::vector<v1::NodeBudget> out;
  for (uint32_t v : nodes) {
    if (v < nodes_.size()) out.push_back(BudgetLocked(v));
  }
  return out;
}

std::vector<v1::NodeBudget> Ledger::KnownBudgets(uint32_t first_node,
                                                 size_t limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::NodeBudget> out;
  for (size_t v = first_node; v < nodes_.size() && out.size() < limit; ++v) {
    if (nodes_[v].caps_known || nodes_[v].total > 0) {
      out.push_back(BudgetLocked(static_cast<uint32_t>(v)));
    }
  }
  return out;
}

LedgerSummary Ledger::Summary() const {
  LedgerSummary out;
  absl::MutexLock lock(&mu_);
  for (const NodeLedger& l : nodes_) {
    for (const auto& [attribute, eps] : l.spent) {
      out.spent[attribute].push_back(eps);
    }
    if (!l.caps_known) continue;
    bool capped = AtCap(l.total, l.caps.total());
    for (auto it = l.caps.per_attribute().begin();
         !capped && it != l.caps.per_attribute().end(); ++it) {
      const auto spent = l.spent.find(it->first);
      capped = spent != l.spent.end() && AtCap(spent->second, it->second);
    }
    if (capped) ++out.nodes_at_cap;
  }
  return out;
}

}  // namespace ldpgraph::curator

// A node's privacy budget: pure-epsilon sequential composition with caps,
// and the memo that answers a repeated identical question for free.
//
// The agent is the authority on its own budget (docs/design.md, "Budget
// accounting").
// Every question is identified by a QueryKey: the attribute asked
// about, the mechanism, its parameters and epsilon. The first time a key is
// asked, the budget checks the caps, the agent perturbs, and the answer is
// stored with its cost. Asking the same key again returns the stored answer
// and spends nothing: an untrusted curator cannot average fresh answers
// away. Any difference in the key (another epsilon, another k) is a new
// question and is charged in full.
//
// Composition: spent(attribute) is the sum of the epsilons of the distinct
// questions answered about it; spent() is the sum over all attributes. A
// question is refused (RESOURCE_EXHAUSTED) if it would take spent() over the
// total cap or spent(attribute) over that attribute's cap. Sums are compared
// with a relative slack of 1e-9, so ten questions of 0.1 fit a cap of 1.
//
// Durability is the caller's: an agent host persists each fresh answer
// before it releases it and hands the stored answers back through Restore
// when it restarts (client/agent_state.h).
//
// Memory (an agent host holds one budget per node, millions of them): the
// caps can be shared by every budget (Create with a shared_ptr), and a
// question's key is kept once per process, however many nodes answered it
// (interned, never freed: the distinct questions asked, each charged). A
// budget costs about 72 bytes and each answered question about 40 bytes
// plus its answer. Finding a question scans the node's answered questions:
// O(questions answered) per call.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ldpgraph {

// What a question is about. Two keys are the same question iff every field
// is equal (epsilon compared exactly).
struct QueryKey {
  std::string attribute;   // "features", "label", "edges"
  std::string mechanism;   // "hds", "multibit", ...
  std::string parameters;  // canonical parameter string, epsilon excluded
  double epsilon = 0;

  // A single canonical string: attribute|mechanism|parameters|epsilon (%.17g).
  std::string Canonical() const;
};

// One answered question.
struct MemoEntry {
  std::string answer;  // the serialised report, opaque to the budget
  double epsilon = 0;  // what answering it cost
};

struct BudgetCaps {
  // Cap on the total spend of the node over all attributes; finite and > 0.
  double total = 0;
  // Optional caps per attribute, each finite and > 0.
  std::map<std::string, double> per_attribute;
};

// The result of Answer.
struct Answered {
  std::string answer;
  bool from_memo = false;  // true: the stored answer, nothing spent
  double charged = 0;      // epsilon charged by this call
};

// Thread-safe.
class PrivacyBudget {
 public:
  // INVALID_ARGUMENT if a cap is not finite and > 0.
  static absl::StatusOr<std::unique_ptr<PrivacyBudget>> Create(BudgetCaps caps);
  // The same with caps shared by many budgets (not null).
  static absl::StatusOr<std::unique_ptr<PrivacyBudget>> Create(
      std::shared_ptr<const BudgetCaps> caps);

  // Answers key: from the memo if asked before; otherwise, if the caps allow
  // key.epsilon more, calls perturb() once, stores its answer and charges.
  // RESOURCE_EXHAUSTED (naming attribute, cap, spent and requested) if the
  // caps do not allow it, INVALID_ARGUMENT for an epsilon that is not finite
  // and > 0, or perturb's own error; in every error case nothing is charged
  // or stored. perturb runs under the budget's lock: keep it local.
  absl::StatusOr<Answered> Answer(
      const QueryKey& key,
      absl::FunctionRef<absl::StatusOr<std::string>()> perturb);

  // Records a question answered before this budget existed (read back from
  // an agent's durable memo at startup): stores entry under key and charges
  // entry.epsilon, WITHOUT perturbing and WITHOUT checking the caps. What was
  // revealed was revealed: a restore may leave spent() above a cap (the caps
  // were lowered since, say), after which every new question is refused
  // while the memo still answers the restored ones.
  // INVALID_ARGUMENT if key.epsilon is not finite and > 0 or differs from
  // entry.epsilon. Idempotent: restoring a key already in the memo (restored
  // or answered) with an identical entry (same answer, same epsilon) is OK
  // and charges nothing; a different entry for it is ALREADY_EXISTS and
  // changes nothing.
  absl::Status Restore(const QueryKey& key, MemoEntry entry);

  // OK if a new question of this cost about attribute would be allowed now.
  absl::Status CanSpend(const std::string& attribute, double epsilon) const;
  // OK if answering every one of keys now would be allowed together: the
  // keys not yet in the memo (each distinct key counted once) summed per
  // attribute and in total, against the caps. For a task that asks several
  // questions at once (neighbour substitution: the node's features and its
  // edges), so that it is refused whole before any answer is drawn.
  // RESOURCE_EXHAUSTED naming the attribute, cap, spend and request;
  // INVALID_ARGUMENT for an epsilon that is not finite and > 0.
  absl::Status CanAnswerAll(const std::vector<QueryKey>& keys) const;

  double spent() const;
  double spent(const std::string& attribute) const;
  // The stored answer for key, if any.
  std::optional<MemoEntry> Lookup(const QueryKey& key) const;
  const BudgetCaps& caps() const { return *caps_; }

  // The process's record of a distinct question (accounting.cc).
  struct Question;

 private:
  // One answered question.
  struct Stored {
    const Question* question;  // interned: never freed
    std::string answer;
  };

  explicit PrivacyBudget(std::shared_ptr<const BudgetCaps> caps)
      : caps_(std::move(caps)) {}
  absl::Status CanSpendLocked(const std::string& attribute, double epsilon) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attribute's own cap only (RESOURCE_EXHAUSTED over it).
  absl::Status CanSpendOnAttributeLocked(const std::string& attribute,
                                         double epsilon) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stored answer to the question whose canonical key is canonical, or
  // null.
  const Stored* FindLocked(absl::string_view canonical) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double SpentLocked(absl::string_view attribute) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores answer to key (canonical: key.Canonical()) and charges it.
  void StoreLocked(const QueryKey& key, std::string canonical,
                   std::string answer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const BudgetCaps> caps_;
  mutable absl::Mutex mu_;
  double total_spent_ ABSL_GUARDED_BY(mu_) = 0;
  // In the order answered or restored: spent(attribute) sums its epsilons in
  // that order, as a running total would.
  std::vector<Stored> memo_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ldpgraph

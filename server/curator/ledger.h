// The curator's privacy-budget ledger: what each node declared it may spend
// (its caps) and what it has spent, per attribute. One job: keep that
// mirror and answer questions about it; nothing here touches the store.
// The curator feeds it (curator.h): the caps from enrolments and from the
// store at start-up, the charges from stored reports (at ingest, and from
// the stored answers at start-up, so the ledger is as durable as they are).
//
// A node's spend on an attribute is the sum of the epsilons of the distinct
// questions it has answered with a report: a question repeated identically
// is answered from the agent's memo and costs nothing, so Charge is
// idempotent per (node, question). Questions are interned: a campaign keeps
// the small ids of the questions its reports answer (Ledger::Question).
//
// Thread-safe: one internal lock, held for the duration of each call and
// never while calling out, except around CannotAfford's `pending` callback
// (which must not call the ledger).
#pragma once

#include <algorithm>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/dp/accounting.h"
#include "ldpgraph/v1/admin.pb.h"
#include "ldpgraph/v1/agent.pb.h"

namespace ldpgraph::curator {

// What the ledger holds now, for the metrics (Summary).
struct LedgerSummary {
  // Per attribute, the epsilon spent on it by each node that has spent on
  // it (one entry per such node, in node order; attributes no node has
  // spent on are absent).
  std::map<std::string, std::vector<double>> spent;
  // Nodes with known caps that are at a cap: their total cap, or the cap
  // of an attribute, leaves less than a billionth of itself unspent.
  uint32_t nodes_at_cap = 0;
};

class Ledger {
 public:
  // One question a report answers, as the ledger charges it.
  struct Question {
    int id = 0;  // Intern(canonical key)
    std::string attribute;
    double epsilon = 0;
  };
  // One node charged for some questions (see Charge).
  struct Debit {
    uint32_t node = 0;
    absl::Span<const Question> questions;
  };
  // Why the nodes that CannotAfford found could not.
  struct Shortfall {
    size_t nodes = 0;   // how many cannot afford it; 0: all can
    std::string first;  // the first of them: "node 3: total 2.5 > cap 2"
  };

  // Node ids are [0, num_nodes).
  explicit Ledger(uint32_t num_nodes);

  uint32_t num_nodes() const { return num_nodes_; }

  // The questions of `keys`, interned: equal keys get equal ids.
  std::vector<Question> Intern(const std::vector<QueryKey>& keys);

  // Records the caps a node declared, replacing earlier ones. The caller
  // validated them (finite, > 0) and node < num_nodes().
  void SetCaps(uint32_t node, const v1::BudgetCaps& caps);
  // Whether node's recorded caps are exactly `caps` (a device checking in
  // again with its policy unchanged needs no store write).
  bool HasCaps(uint32_t node, const v1::BudgetCaps& caps) const;

  // Charges `node` each of `questions` it has not been charged yet (a
  // question charged before costs nothing). node < num_nodes().
  void Charge(uint32_t node, absl::Span<const Question> questions);
  // Several debits under one acquisition of the lock.
  void Charge(absl::Span<const Debit> debits);

  // Which of `targets` could not afford to answer `questions` on top of
  // what they spent and what `pending(v, ask)` says is still asked of them
  // (it calls ask once per question of each open campaign still waiting
  // for v). Each distinct question not charged yet counts once. Nodes
  // whose caps are unknown always can; so can a node already charged for
  // every one of `questions` (pending is not called for it). A node cannot
  // afford it when the sum passes its total cap, or its spend on one of the
  // attributes of `questions` passes the cap on that attribute.
  Shortfall CannotAfford(
      absl::Span<const uint32_t> targets, absl::Span<const Question> questions,
      absl::FunctionRef<void(uint32_t v,
                             absl::FunctionRef<void(const Question&)> ask)>
          pending) const;

  // The budgets of `nodes` (ids outside the graph left out), in order; for
  // no nodes, of every node whose caps are known or that spent anything.
  std::vector<v1::NodeBudget> Budgets(const std::vector<uint32_t>& nodes) const;
  // A page of the latter: the nodes >= first_node whose caps are known or
  // that spent anything, ascending, at most limit.
  std::vector<v1::NodeBudget> KnownBudgets(uint32_t first_node,
                                           size_t limit) const;

  // One pass over the nodes under the lock, allocating per attribute,
  // never per node (cheap at a million nodes: a metrics scrape).
  LedgerSummary Summary() const;

 private:
  struct NodeLedger {
    bool caps_known = false;
    v1::BudgetCaps caps;
    // Question ids; a node answers few questions, so a short vector searched
    // linearly beats a hash set (no allocation for the first four).
    absl::InlinedVector<int, 4> charged;
    bool Charged(int id) const {
      return std::find(charged.begin(), charged.end(), id) != charged.end();
    }
    std::map<std::string, double> spent;
    double total = 0;
  };
  void ChargeLocked(uint32_t node, absl::Span<const Question> questions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::NodeBudget BudgetLocked(uint32_t node) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const uint32_t num_nodes_;
  mutable absl::Mutex mu_;
  std::vector<NodeLedger> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> questions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ldpgraph::curator

// The agent: everything one logical agent (one graph node) does with its
// private record, and a shard of them as one agent host runs them. No
// network code: the gRPC agent host adapts tasks and reports to these calls.
//
// A NodeAgent holds its node's record (features, label, neighbours), its
// PrivacyBudget (caps from its AgentPolicy) and its own RandomSource. For
// each task it checks the task against its record and policy, then answers
// through the budget: a new question is checked against the caps, perturbed
// with fresh randomness and charged; a repeated identical question (same
// attribute, mechanism, parameters and epsilon, in any campaign) gets the
// stored answer, with no fresh randomness and no spend (docs/design.md,
// "Budget accounting": an untrusted curator cannot average fresh answers
// away). A task it cannot or will not answer gets a report carrying a
// Refusal with the reason; a refusal spends nothing.
//
// Memo format: the answer a budget stores (MemoRow::answer, the agent.db
// column) is a serialised v1::Report holding only its body (features, label
// or edges; spec unset, "the campaign's applies"): no campaign_id, no
// node_id. A reply sets those two fields on a copy, so a memo hit under a
// new campaign carries the identical body.
//
// An AgentShard runs many NodeAgents over one AgentStateStore (agent.db)
// and is what an agent host serves: it restores every node's memo at
// startup and makes each new answer durable before any report of the task
// leaves it. It also holds each node's X25519 key pair for sealed
// agent-to-agent messages (made on the node's first start, kept in
// agent.db; only the public half is ever sent).
//
// Neighbour substitution (MECHANISM_KIND_EDGE_SUBSTITUTION) is not a
// one-shot answer: the node exchanges messages with its neighbours first
// (client/edge_exchange.h). It asks two questions, answered through the
// budget like any other: the node's privatized features under the task's
// feature spec (attribute "features"; the same question, and so the same
// memo entry, as a features campaign with that spec: one report shared with
// the neighbours and the curator, epsilon spent once), and the final
// perturbed neighbour list (attribute "edges", eps_e). BeginSubstitution
// checks the task, policy, data and caps (both questions together) and
// answers the first; FinishSubstitution answers the second once the
// exchange is over.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/agent_state.h"
#include "client/node_features.h"
#include "common/dp/accounting.h"
#include "common/attacks/edge_poisoning.h"
#include "common/attacks/poisoning.h"
#include "common/cli_args.h"
#include "common/crypto/sealed.h"
#include "common/dataset/dataset.h"
#include "common/dataset/device_index.h"
#include "common/random/random.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/agent.pb.h"

namespace ldpgraph::agent {

// One node's private record: the only place raw data exists.
struct NodeRecord {
  uint32_t node = 0;
  // The node's stored non-zeros and the shard's scaling to the public range
  // the campaigns name (mechanisms clip to it anyway); the dense scaled
  // row is computed when a feature question is answered
  // (client/node_features.h). Empty: the node holds no features (feature
  // tasks are refused with NO_DATA).
  NodeFeatures features;
  // The class label, if the node has one (>= 0).
  std::optional<int> label;
  // Neighbours, strictly ascending, never the node itself.
  std::vector<uint32_t> neighbours;
};

// A node's own privacy policy.
struct AgentPolicy {
  // The most epsilon the node ever spends, in total and per attribute.
  BudgetCaps caps;
  // The attributes the node answers about; a task about another gets a
  // POLICY refusal. Names as in wire::AttributeName.
  std::set<std::string> attributes = {"features", "label", "edges"};

  // INVALID_ARGUMENT if a cap is not finite and > 0, or a cap or an
  // allowed attribute names something other than features, label, edges
  // (a misspelt cap would silently not apply). An empty attributes set is
  // valid: the node refuses every task.
  absl::Status Validate() const;
};

// NodeNoiseSeed (common/random/random.h) gives each node's seeded noise stream.
using ::ldpgraph::NodeNoiseSeed;

// The randomness of one logical agent: ThreadSecureRandom without a seed (the
// only differentially private choice; OpenSSL's generator, buffered per thread,
// not per node); with a seed, SeededRandomForTesting
// (NodeNoiseSeed(seed, node)), reproducible and NOT private (callers print
// kSeededWarning). INTERNAL if OpenSSL cannot produce random bytes.
absl::StatusOr<std::unique_ptr<RandomSource>> NodeRandomSource(
    std::optional<uint64_t> seed, uint32_t node);

// The stream of a seeded node's edge answers: SeededRandomForTesting(
// NodeNoiseSeed(EdgeStreamSeed(seed), node)) (common/random/random.h), so that an
// edges campaign leaves the features' and label's noise as it was, and a
// seeded deployment draws the bits `ldpgraph eval --edges` draws. Null
// without a seed: secure words are independent whatever came before, so
// the node's one secure source serves every attribute.
std::unique_ptr<RandomSource> NodeEdgeRandomSource(
    std::optional<uint64_t> seed, uint32_t node);

// SIMULATION ONLY (ldpgraph-agent --malicious): the attacker of a simulated
// data poisoning (common/attacks/poisoning.h) and the nodes of a shard it
// controls. Those nodes answer feature and label questions as the
// adversary's kind says (Adversary::CraftFeatureReport and CraftLabel:
// crafted, or a fake record or their own perturbed honestly) in place of
// the mechanism's perturbation of their record, through the same checks,
// budget and memo as honest answers (so a restart re-sends the same
// answer). Edge questions they answer honestly, with their true neighbours,
// except under fake-edges: its nodes answer edge randomized response and
// Blink questions with edge_adversary's crafted reports
// (common/attacks/edge_poisoning.h: victims claimed, Blink's largest noisy
// degree), drawn from the node's own stream; neighbour substitution they
// answer honestly. An honest deployment never builds one.
struct SimulatedAttack {
  std::shared_ptr<const poisoning::Adversary> adversary;
  // fake-edges only: the attacker's edge reports, over the dataset's n
  // nodes (an edge question over another n is the agent's INTERNAL error).
  std::shared_ptr<const poisoning::EdgeAdversary> edge_adversary;
  std::set<uint32_t> nodes;
};

// A node's random source with a count of the words drawn from it: the
// node's position in its stream, stored with each fresh answer
// (MemoRow::draws) so that a restarted seeded agent continues its stream
// where it stopped instead of drawing its first words again (which would
// make, in a simulation, a label answer reuse the draws of the features
// answer before it). Not thread-safe, like every RandomSource.
class CountedRandom final : public RandomSource {
 public:
  explicit CountedRandom(std::unique_ptr<RandomSource> inner)
      : inner_(std::move(inner)) {}
  uint64_t Next64() override {
    ++draws_;
    return inner_->Next64();
  }
  bool is_secure() const override { return inner_->is_secure(); }
  absl::string_view name() const override { return inner_->name(); }
  uint64_t draws() const { return draws_; }
  // Moves the count to position if it is behind: a seeded source draws and
  // discards the words in between (replaying its stream); a secure one only
  // moves the count (its words are independent whatever came before).
  void AdvanceTo(uint64_t position) {
    if (inner_->is_secure()) {
      draws_ = std::max(draws_, position);
      return;
    }
    while (draws_ < position) Next64();
  }

 private:
  std::unique_ptr<RandomSource> inner_;
  uint64_t draws_ = 0;
};

// One logical agent. Thread-safe: the record is immutable, the budget is
// thread-safe and the randomness is only drawn inside the budget's lock.
class NodeAgent {
 public:
  struct Response {
    // campaign_id and node_id of the task and this node, and a body or a
    // refusal.
    v1::Report report;
    // True iff fresh randomness was used (a new question, charged).
    bool fresh = false;
    // The row to persist before releasing report; set iff fresh.
    std::optional<MemoRow> to_persist;
  };

  // INVALID_ARGUMENT if the policy is invalid or the record is (a non-finite
  // feature, a negative label, neighbours not strictly ascending or
  // containing the node). rng must not be null.
  // adversary (simulation only, see SimulatedAttack): set for a node the
  // attacker controls, whose feature and label answers it crafts;
  // edge_adversary (fake-edges): set for such a node too, whose edge
  // randomized response and Blink answers it crafts. edge_rng, if set, is
  // the stream of the edge answers (NodeEdgeRandomSource); else they draw
  // from rng too.
  static absl::StatusOr<std::unique_ptr<NodeAgent>> Create(
      NodeRecord record, const AgentPolicy& policy,
      std::unique_ptr<RandomSource> rng,
      std::shared_ptr<const poisoning::Adversary> adversary = nullptr,
      std::shared_ptr<const poisoning::EdgeAdversary> edge_adversary =
          nullptr,
      std::unique_ptr<RandomSource> edge_rng = nullptr);
  // The same with a policy shared by many agents (not null): its caps are
  // shared, not copied (AgentShard::Create gives one to all its nodes).
  static absl::StatusOr<std::unique_ptr<NodeAgent>> Create(
      NodeRecord record, std::shared_ptr<const AgentPolicy> policy,
      std::unique_ptr<RandomSource> rng,
      std::shared_ptr<const poisoning::Adversary> adversary = nullptr,
      std::shared_ptr<const poisoning::EdgeAdversary> edge_adversary =
          nullptr,
      std::unique_ptr<RandomSource> edge_rng = nullptr);

  // Answers task for this node (the caller routes: task.node_ids is not
  // consulted). Not for neighbour substitution (FAILED_PRECONDITION: see
  // BeginSubstitution). Checks, in this order, each failure giving a report with a
  // Refusal:
  //   1. INVALID_TASK  unknown attribute; spec rejected by ValidateWireSpec;
  //                    a mechanism that does not answer about the attribute
  //                    (wire::AttributeOf).
  //   2. POLICY        the attribute is not in the policy's attributes.
  //   3. NO_DATA       features: the record holds none; label: no label.
  //      INVALID_TASK  features: spec.dimension differs from the record's
  //                    feature count; label: label >= spec.dimension (the
  //                    class count); edges: spec.dimension (n) not above
  //                    the node and every neighbour.
  //   4. BUDGET_EXHAUSTED  a new question over a cap (the budget's message).
  // Otherwise the answer, from the memo (fresh = false, nothing spent, even
  // when the caps are used up) or fresh. Refusal messages are at most 1024
  // bytes. Errors (not refusals) only for failures of the agent itself:
  // INTERNAL for a stored answer that does not parse or a mechanism's error.
  absl::StatusOr<Response> Respond(const v1::Task& task);
  // The same, with task.spec() already compiled (or its Compile error, which
  // gives the INVALID_TASK refusal): a shard compiles a task's spec once for
  // all its nodes. spec must be CompiledSpec::Compile(task.spec()).
  absl::StatusOr<Response> Respond(
      const v1::Task& task, const absl::StatusOr<wire::CompiledSpec>& spec);

  // What a node does in a substitution exchange (BeginSubstitution).
  struct SubstitutionStart {
    enum class Role {
      // The node takes part with its features and reports at the end
      // (FinishSubstitution).
      kTakePart,
      // The node answered this question before: `report` is its memoized
      // answer, to send now; it still takes part (its neighbours need it)
      // with `dropped` (its true neighbours missing from that answer) as
      // its dropped set, when it has own_feature (else it abstains).
      kMemo,
      // The node refuses (`report` carries the Refusal, to send now) and
      // takes part as an abstaining node, so that its neighbours stop
      // waiting for it.
      kRefuse,
    };
    Role role = Role::kRefuse;
    // kMemo: the stored answer; kRefuse: the refusal. campaign_id and
    // node_id set.
    v1::Report report;
    // kTakePart, kMemo: the node's privatized features (the features
    // question's answer, spec unset): what it sends its neighbours.
    std::optional<v1::FeatureReport> own_feature;
    // kMemo: the dropped set, ascending.
    std::optional<std::vector<uint32_t>> dropped;
    // Fresh answers drawn here (the features question): persist before
    // own_feature leaves the agent.
    std::optional<MemoRow> to_persist;
    bool fresh = false;
  };

  // Starts this node's part in a substitution task. Checks, in Respond's
  // order, each failure giving Role::kRefuse: 1. INVALID_TASK (spec, or
  // the mechanism does not answer about the task's attribute); 2. POLICY
  // (the policy must allow both "edges" and "features": the node shares
  // privatized features with its neighbours); 3. NO_DATA (no features),
  // INVALID_TASK (feature count differs from the feature spec's dimension,
  // or n not above the node and every neighbour); then a memo hit for the
  // edges question gives kMemo (even with the caps used up); else 4.
  // BUDGET_EXHAUSTED if the two questions together (the features question
  // free if answered before) do not fit the caps. Otherwise kTakePart, the
  // features question answered (memo or fresh). FAILED_PRECONDITION for a
  // task that is not neighbour substitution; INTERNAL for the agent's own
  // failures (a stored answer that does not parse).
  absl::StatusOr<SubstitutionStart> BeginSubstitution(const v1::Task& task);

  // The node's final answer to a substitution task: its perturbed neighbour
  // list (strictly ascending, < n, not the node; INTERNAL otherwise)
  // answered through the budget as the edges question. A memo hit (an
  // identical question answered meanwhile) returns the stored answer; caps
  // used up meanwhile give a BUDGET_EXHAUSTED refusal.
  absl::StatusOr<Response> FinishSubstitution(
      const v1::Task& task, const std::vector<uint32_t>& neighbours);

  // Puts a persisted answer back into the budget (see
  // PrivacyBudget::Restore: no caps checked, idempotent). DATA_LOSS if
  // answer is not a serialised v1::Report body of key's attribute;
  // ALREADY_EXISTS for a different answer to a question already in the memo.
  // draws is the row's MemoRow::draws: a seeded node's source (of key's
  // attribute: the edge stream for edges) is advanced to it (see
  // CountedRandom), so that its next fresh answer draws what it
  // would have drawn had this process answered the restored questions
  // itself. For startup only: not concurrent with answering.
  absl::Status Restore(const QueryKey& key, const std::string& answer,
                       uint64_t draws = 0);

  uint32_t node() const { return record_.node; }
  const NodeRecord& record() const { return record_; }
  const PrivacyBudget& budget() const { return *budget_; }
  const RandomSource& random_source() const { return rng_; }

 private:
  // Simulation only: the attacker's, for a malicious node.
  struct Attackers {
    std::shared_ptr<const poisoning::Adversary> adversary;
    std::shared_ptr<const poisoning::EdgeAdversary> edge_adversary;
  };

  NodeAgent(NodeRecord record, uint8_t allowed,
            std::unique_ptr<PrivacyBudget> budget,
            std::unique_ptr<RandomSource> rng,
            std::unique_ptr<RandomSource> edge_rng,
            std::unique_ptr<const Attackers> attackers)
      : record_(std::move(record)),
        allowed_(allowed),
        budget_(std::move(budget)),
        rng_(std::move(rng)),
        edge_rng_(edge_rng == nullptr
                      ? nullptr
                      : std::make_unique<CountedRandom>(std::move(edge_rng))),
        attackers_(std::move(attackers)) {}

  // The stream an answer about attribute draws from.
  CountedRandom& StreamOf(absl::string_view attribute) {
    return edge_rng_ != nullptr && attribute == "edges" ? *edge_rng_ : rng_;
  }

  const poisoning::Adversary* adversary() const {
    return attackers_ == nullptr ? nullptr : attackers_->adversary.get();
  }
  const poisoning::EdgeAdversary* edge_adversary() const {
    return attackers_ == nullptr ? nullptr : attackers_->edge_adversary.get();
  }

  // The body of a fresh answer from spec's mechanism (runs under the
  // budget's lock). spec is a checked feature, label RR or edge RR spec.
  absl::StatusOr<v1::Report> Perturb(const wire::CompiledSpec& spec);
  // The question key through the budget: the memo's answer (parsed), or a
  // fresh one from perturb (checked against the caps, charged, stored
  // serialised and kept as built); a cap refusal becomes a report with a
  // BUDGET_EXHAUSTED Refusal.
  absl::StatusOr<Response> AnswerThroughBudget(
      const v1::Task& task, const QueryKey& key,
      absl::FunctionRef<absl::StatusOr<v1::Report>()> perturb);
  // body serialised for the memo, body itself moved into built.
  absl::StatusOr<std::string> Serialise(absl::StatusOr<v1::Report> body,
                                        std::optional<v1::Report>& built) const;
  // A report carrying a refusal for task.
  v1::Report Refusal(const v1::Task& task, v1::RefusalReason reason,
                     absl::string_view message) const;
  // The checks Respond and BeginSubstitution share (task, policy, data):
  // a refusal report, or nothing when the node can answer. spec is
  // CompiledSpec::Compile(task.spec()).
  std::optional<v1::Report> CheckTask(
      const v1::Task& task,
      const absl::StatusOr<wire::CompiledSpec>& spec) const;
  // BeginSubstitution's kMemo start, for an edges question answered
  // before (`stored`, its memoized body): the stored answer, the dropped
  // set it implies, and the features (AnswerFeatures) unless they do not
  // fit the caps (the node then abstains). INTERNAL for a stored answer
  // that does not parse, and AnswerFeatures' errors.
  absl::StatusOr<SubstitutionStart> StartFromMemo(
      const v1::Task& task, const QueryKey& edges_key,
      const std::string& stored, const QueryKey& features_key,
      const wire::CompiledSpec& feature_spec);
  // A substitution's features question (features_key, of feature_spec)
  // through the budget, as AnswerThroughBudget answers it.
  absl::StatusOr<Response> AnswerFeatures(
      const v1::Task& task, const QueryKey& features_key,
      const wire::CompiledSpec& feature_spec);

  const NodeRecord record_;
  // The policy's attributes: bit 1 << a for each v1::Attribute a allowed.
  const uint8_t allowed_;
  const std::unique_ptr<PrivacyBudget> budget_;
  CountedRandom rng_;  // used under budget_'s lock
  // The edge answers' stream; null: rng_ (both used under budget_'s lock).
  const std::unique_ptr<CountedRandom> edge_rng_;
  // Simulation only: set for a malicious node; else null.
  const std::unique_ptr<const Attackers> attackers_;
};

// What RespondAll returns.
struct ShardResponse {
  // One report per distinct node of task.node_ids held by the shard, in the
  // task's order (a repeated id is answered once). Empty when the reports
  // went to RespondAll's send, part by part.
  std::vector<v1::Report> reports;
  // Ids in task.node_ids that the shard does not hold: skipped. A host
  // normally only gets tasks for its own nodes; the count is for its logs.
  uint32_t not_in_shard = 0;
  // Of reports: fresh answers, memo hits, refusals.
  uint32_t fresh = 0;
  uint32_t memo_hits = 0;
  uint32_t refusals = 0;
};

// What BeginSubstitution returns: the shard's part in a substitution task.
struct ShardSubstitution {
  // One entry per distinct node of task.node_ids held by the shard, in the
  // task's order.
  std::vector<std::pair<uint32_t, NodeAgent::SubstitutionStart>> nodes;
  uint32_t not_in_shard = 0;
};

// Running totals for metrics, over every successful RespondAll (and the
// substitution calls).
struct ShardCounters {
  uint64_t fresh = 0;
  uint64_t memo_hits = 0;
  std::map<v1::RefusalReason, uint64_t> refusals;
  uint64_t not_in_shard = 0;
  // Memo rows restored at Create; rows of agent.db for nodes the shard does
  // not hold (kept, not restored: another shard's history).
  uint64_t restored = 0;
  uint64_t foreign_rows = 0;
  // Key pairs made at Create (nodes starting for the first time).
  uint64_t keys_generated = 0;
};

// The logical agents of one agent host and their durable memo.
// Thread-safe: answering is serialised by a mutex (RespondAll holds it for
// a part at a time); the accessors may be called concurrently with it.
//
// Memory: per node, its NodeAgent (record with its stored non-zeros,
// budget, random source) and its key pair, in vectors ordered by node (a
// node is found by binary search), with nothing kept per node beyond them
// between tasks.
class AgentShard {
 public:
  // Builds one NodeAgent per record (NodeRandomSource(seed, node) and
  // NodeEdgeRandomSource(seed, node) each),
  // opens <state_dir>/agent.db (AgentStateStore::Open, creating the
  // directory if missing) and restores every stored answer of the shard's
  // nodes into their budgets before anything else. Loads each node's key
  // pair, making (crypto::KeyPair::Generate, OpenSSL's generator even with a
  // seed) and storing the missing ones before it returns; with
  // sealing_keys false it neither loads nor makes any (key_pair is then
  // nullptr for every node, which enrols without one and cannot take part
  // in neighbour substitution): an X25519 key costs about 22 us to make, a
  // node's largest cost at start. INVALID_ARGUMENT for no
  // records, a repeated node, an invalid record or policy; the store's
  // errors; NodeAgent::Restore's errors for a damaged memo. attack
  // (simulation only): the shard's nodes in attack->nodes answer as the
  // attacker's (NodeAgent::Create's adversary); nodes it names that the
  // shard does not hold are ignored.
  static absl::StatusOr<std::unique_ptr<AgentShard>> Create(
      std::vector<NodeRecord> records, AgentPolicy policy,
      std::optional<uint64_t> seed, const std::string& state_dir,
      AgentStateStore::Options store_options = {},
      const SimulatedAttack* attack = nullptr, bool sealing_keys = true);

  // Answers task for every node of task.node_ids the shard holds, then
  // commits every new memo row in ONE transaction BEFORE returning. If the
  // commit fails, the error is returned and no report is released. The
  // in-memory budgets then stay charged and the memo keeps the new answers
  // (conservative: those answers never left the agent, and a retry of the
  // task answers from the memo); the unstored rows are kept and committed
  // first by the next RespondAll, so no answer is ever released before its
  // row is durable. An error of a NodeAgent (INTERNAL) also releases
  // nothing.
  absl::StatusOr<ShardResponse> RespondAll(const v1::Task& task);

  // The same in parts, so that a host never holds a report (nor a memo row
  // to commit) per node of a large shard at once: the nodes of task.node_ids
  // the shard holds are answered `part` (>= 1) at a time, in the task's
  // order; each part's new memo rows are committed in ONE transaction, then
  // its reports are handed to send, outside the shard's lock, before the
  // next part is answered. The first error (a commit's, a NodeAgent's, or
  // send's) stops it and is returned: the parts before it were released
  // (durable first), and the failed part's reports were not (its rows, when
  // answered, are committed first by the next call, as for RespondAll). The
  // counts of every part answered are returned, with no reports.
  absl::StatusOr<ShardResponse> RespondAll(
      const v1::Task& task, size_t part,
      absl::FunctionRef<absl::Status(std::vector<v1::Report>)> send);

  // A substitution task (see NodeAgent::BeginSubstitution) for every node
  // of task.node_ids the shard holds. Every fresh answer (the features
  // question) is durable before this returns, as in RespondAll: the
  // returned features may leave the agent. Refusals and memo hits are
  // counted here, fresh answers by FinishSubstitution.
  absl::StatusOr<ShardSubstitution> BeginSubstitution(const v1::Task& task);
  // A node's final answer (NodeAgent::FinishSubstitution), durable before
  // it returns. NOT_FOUND for a node the shard does not hold.
  absl::StatusOr<v1::Report> FinishSubstitution(
      const v1::Task& task, uint32_t node,
      const std::vector<uint32_t>& neighbours);

  // The node's key pair for sealed messages, or nullptr for a node the
  // shard does not hold (or every node, made without sealing keys).
  const crypto::KeyPair* key_pair(uint32_t node) const;

  // The shard's nodes, ascending.
  std::vector<uint32_t> nodes() const;
  // A node's spend on attribute, or in total. NOT_FOUND for a node the
  // shard does not hold.
  absl::StatusOr<double> spent(uint32_t node, const std::string& attribute) const;
  absl::StatusOr<double> spent(uint32_t node) const;
  // The node's agent, or nullptr.
  const NodeAgent* agent(uint32_t node) const;
  ShardCounters counters() const;
  // Memo rows answered but not yet durable (after a failed commit).
  size_t pending_rows() const;
  const AgentStateStore& store() const { return *store_; }

 private:
  AgentShard(std::unique_ptr<AgentStateStore> store,
             std::vector<uint32_t> nodes,
             std::vector<std::unique_ptr<NodeAgent>> agents,
             std::vector<crypto::KeyPair> keys)
      : store_(std::move(store)),
        nodes_(std::move(nodes)),
        agents_(std::move(agents)),
        keys_(std::move(keys)) {}
  // The index of node in nodes_, or nullopt.
  std::optional<size_t> Find(uint32_t node) const;
  // Commits pending_ (and rows) before anything leaves; see RespondAll.
  absl::Status CommitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<AgentStateStore> store_;
  // Immutable after Create: the nodes ascending, and each one's agent and
  // key pair at its index.
  const std::vector<uint32_t> nodes_;
  const std::vector<std::unique_ptr<NodeAgent>> agents_;
  const std::vector<crypto::KeyPair> keys_;
  mutable absl::Mutex mu_;
  std::vector<MemoRow> pending_ ABSL_GUARDED_BY(mu_);
  ShardCounters counters_ ABSL_GUARDED_BY(mu_);
};

// The records of nodes [begin, end) of a dataset folder, as their devices
// hold them: reads only those nodes' lines of nodes.svm and their neighbour
// lists, through the folder's device index (common/dataset/device_index.h),
// and scales each node's features with the folder's public feature schema
// alone (common/dataset/feature_schema.h; kNone keeps them as stored and
// needs no schema). Features, labels (-1 becomes nullopt), ascending
// neighbour lists. Each record keeps its node's stored non-zeros and one
// scale shared by the shard (NodeFeatures): the dense row is made when a
// feature question is answered. Memory and time grow with the shard, not
// the dataset. FAILED_PRECONDITION naming `ldpgraph prepare` for a folder
// without a schema (unless kNone) or a device index; INVALID_ARGUMENT for
// a schema range that is not finite; ReadDeviceRecords' other errors
// (an index made from other files among them: it checks the files' sizes,
// and their SHA-256 up to `checksum_bytes`, as ReadDeviceRecords says).
absl::StatusOr<std::vector<NodeRecord>> LoadShard(
    const std::string& dataset_dir, FeatureScaling scaling, uint32_t begin,
    uint32_t end, uint64_t checksum_bytes = kDeviceIndexChecksumBytes);

// SIMULATION ONLY (ldpgraph-agent --malicious): the attacker of a dataset
// folder, built exactly as `ldpgraph eval` builds it
// (pipeline::PreparePoisoning), so that a seeded deployment equals the
// library. Its nodes: poisoning::MaliciousNodes over the whole dataset
// (SimulatedMalicious(seed, v, s.fraction), less the nodes offline(v)
// leaves out), every one of them, not only a shard's: one attacker pools
// the records of all the nodes it controls, which this simulation reads
// from the whole dataset folder (unlike LoadShard). Its target dimensions:
// the first s.target_dims (capped at d) of poisoning::RankDims over those
// records scaled by `scaling` (as ScaleDatasetFeatures does), ascending, so
// that every agent host derives the same ones. Its kind: s.kind; the
// adaptive attacker's plan is {the dataset's node count, its node count,
// screen_alpha (the screen level it assumes the curator uses), the whole
// ranking}. fake-edges also gets its edge_adversary over the dataset's n
// nodes and those nodes, attack_edges victims each.
// LoadDataset's errors; INVALID_ARGUMENT for invalid settings, an attack
// class that is not one of the dataset's classes, (adaptive) a
// screen_alpha outside (0, 1), or (fake-edges) fewer than 3 nodes or no
// honest one.
absl::StatusOr<SimulatedAttack> LoadSimulatedAttack(
    const std::string& dataset_dir, FeatureScaling scaling,
    const poisoning::AttackSettings& s, uint64_t seed,
    absl::FunctionRef<bool(uint32_t)> offline,
    double screen_alpha = poisoning::AdaptivePlan().alpha,
    int attack_edges = poisoning::kDefaultAttackEdges);

// SIMULATION ONLY: ldpgraph-agent's attack flags (ParseSimulatedAttackFlags).
struct SimulatedAttackFlags {
  // fraction 0 (the default): no attack.
  poisoning::AttackSettings settings;
  // --malicious-seed: the seed of the malicious draw.
  uint64_t seed = 1;
  // --attack-alpha: the screen level the adaptive attacker assumes it
  // faces (LoadSimulatedAttack's screen_alpha).
  double screen_alpha = poisoning::AdaptivePlan().alpha;
  // --attack-edges: the victims each fake-edges node claims
  // (LoadSimulatedAttack's attack_edges).
  int attack_edges = poisoning::kDefaultAttackEdges;
};

// The value flags ParseSimulatedAttackFlags reads: malicious,
// malicious-seed, attack, attack-class, attack-dims, attack-alpha,
// attack-edges.
const std::vector<std::string>& SimulatedAttackFlagNames();

// Reads --malicious F (in [0, 1)), --malicious-seed S, --attack K
// (poisoning::kAttackNames; default maximal-gain), --attack-class C (>= 0),
// --attack-dims R (>= 1), --attack-alpha A (in (0, 1); default 1e-3) and
// --attack-edges V (>= 1; default 50) from a. INVALID_ARGUMENT naming the
// flag: a bad value; any of the others without --malicious F > 0;
// --attack-alpha with a kind other than adaptive (the only attacker that
// knows the screen); --attack-edges with a kind other than fake-edges.
absl::StatusOr<SimulatedAttackFlags> ParseSimulatedAttackFlags(
    const CliArgs& a);

}  // namespace ldpgraph::agent

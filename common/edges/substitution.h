// Degree-preserving neighbour substitution under edge LDP (the edge LDP
// thesis in ../shared/papers/003, Algorithms 2 and 3; mechanisms.md,
// "Neighbour substitution"). No network code: one SubstitutionNode is one
// node's part in the exchange, fed with the messages its neighbours sent and
// producing the messages it sends. The agent host carries those messages
// sealed through the curator's relay; RunSubstitution carries them in memory
// for tests, benchmarks and `ldpgraph edges`. Both run the same code.
//
// The protocol, for node v with true neighbours N(v) (rounds; in every round
// v sends exactly one message to each present neighbour, and moves on once
// it holds one message of the round from each present neighbour):
//
//  Approach 1 (candidate relay, thesis Algorithm 2)
//   1 feature     v sends its privatized features x~_v (the feature
//                 mechanism's report, Multi-bit in the thesis) to each u.
//   2 relay       v sends each u the shuffled list of the features it got in
//                 round 1 plus f dummies, f = min(floor(deg(v)/2) + U{0,1},
//                 f_max) drawn per recipient. A dummy is a raw vector drawn
//                 per dimension from N(mean, std^2) (public), clipped to the
//                 range and encoded by the feature mechanism, so it has the
//                 form of a real report.
//   3 identity    v draws the dropped set R: each u in N(v) independently
//     queries     with probability q = 1/(1 + e^eps_e). Candidates are the
//                 distinct vectors of the round-2 lists minus x~_v and the
//                 x~_u of N(v). For each dropped u_i (in random order) the
//                 top_k candidates most similar to x~_{u_i} are queried; v
//                 sends the union of all queries, shuffled, to every u.
//   4 identities  each u answers each query with the neighbour of u whose
//                 round-1 features are exactly that vector, or "none".
//                 v then replaces each u_i by its best-ranked candidate whose
//                 identity resolved (asking neighbours in ascending order),
//                 is not v, not in N(v) and not already chosen.
//
//  Approach 2 (similarity queries, thesis Algorithm 3)
//   1 feature     as above.
//   2 queries     v draws R as above, T = N(v) \ R, and one fair coin: the
//                 features of R and of T go to every u as (first, second)
//                 in the coin's order.
//   3 answers     u answers each set it has enough other neighbours for
//                 (|N(u) \ {v}| >= set size) with, for each vector, the most
//                 similar x~_w over w in N(u) \ {v}.
//   4 identity    v takes the answers to R's set, removes duplicates, x~_v
//     queries     and the x~_u of N(v), ranks them for each u_i and queries
//                 the top_k as in approach 1, round 3.
//   5 identities  as approach 1, round 4.
//
// Decisions the thesis leaves open (documented in common/edges/README.md):
// a dropped neighbour no candidate resolves for is dropped, not kept
// (keeping it would release the very edge randomized response dropped), so
// the degree is preserved exactly when every dropped neighbour resolves;
// identity queries go to all neighbours in one round instead of one
// neighbour after another (bounded rounds; each neighbour sees all of v's
// queries); a neighbour that abstains or times out is treated as absent
// from then on: v sends it nothing more and, having no features of it,
// cannot substitute it if it is dropped.
//
// Exact matching: a vector's identity is its canonical wire form (the
// deterministic serialisation of the FeatureReport). Vectors are relayed as
// received, so equal reports match; two nodes with identical reports are
// resolved to the smaller node id.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/graph/graph.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/random/random.h"
#include "ldpgraph/v1/edge_exchange.pb.h"
#include "ldpgraph/v1/mechanism.pb.h"

namespace ldpgraph::edges {

enum class Approach { kCandidateRelay = 1, kSimilarityQuery = 2 };
enum class Similarity { kCosine, kL2 };

// "cosine" / "l2" and back; INVALID_ARGUMENT naming the choices.
absl::StatusOr<Similarity> ParseSimilarity(absl::string_view name);
absl::string_view SimilarityName(Similarity s);

struct SubstitutionParams {
  Approach approach = Approach::kCandidateRelay;
  Similarity similarity = Similarity::kCosine;
  // eps_e: each true neighbour is dropped with probability 1/(1 + e^eps_e).
  // Finite and > 0.
  double epsilon = 1.0;
  int top_k = 10;       // >= 1
  int max_dummies = 5;  // f_max >= 0 (approach 1)
  double dummy_mean = 0.5;
  double dummy_std = 0.5;  // >= 0, finite

  // INVALID_ARGUMENT naming the bad parameter.
  absl::Status Validate() const;
  // Number of rounds: 4 (approach 1) or 5 (approach 2).
  int rounds() const;
  // The drop probability q = 1/(1 + e^eps_e).
  double drop_probability() const;
};

// A substitution campaign's round timeout when none is given: a neighbour
// silent this long in a round counts as absent.
inline constexpr uint32_t kDefaultRoundTimeoutMs = 30000;

// The one statement of a substitution campaign's defaults, for the tools
// that build one when no flag says otherwise (`ldpctl campaign create
// --mechanism edge-substitution`, `ldpctl simulate`): SubstitutionParams'
// defaults (approach 1, cosine, top_k 10, max_dummies 5, dummies
// N(0.5, 0.5^2)) and kDefaultRoundTimeoutMs; features unset (the caller's).
v1::SubstitutionSpec DefaultSubstitutionSpec();

// The parameters in a wire spec (MECHANISM_KIND_EDGE_SUBSTITUTION) and back.
// FromWire validates; INVALID_ARGUMENT naming the field.
absl::StatusOr<SubstitutionParams> FromWire(const v1::MechanismSpec& spec);
void ToWire(const SubstitutionParams& p, v1::MechanismSpec* spec);

// A decoded vector in compact form: dense[i] = offset + values[j] where
// indices[j] == i, offset elsewhere (a Multi-bit estimate is its rectifier's
// constant off the m sampled dimensions; a bag of words is zero off its
// words). Exact, and small enough to keep a 2-hop neighbourhood per node.
struct CompactVector {
  uint32_t dimension = 0;
  float offset = 0;
  std::vector<uint32_t> indices;  // ascending
  std::vector<float> values;
  double sum = 0;     // of dense
  double norm2 = 0;   // of dense, squared

  // The dense dot product, in O(nnz).
  double Dot(const CompactVector& o) const;
  // From a dense vector (the offset is its median).
  static CompactVector FromDense(const std::vector<double>& dense);
};

// Cosine similarity (0 when either vector is zero) or the negated squared
// L2 distance: larger is more similar either way.
double SimilarityScore(Similarity s, const CompactVector& a,
                       const CompactVector& b);

// The privatized feature vectors the nodes exchange: how they are checked,
// compared and faked. Immutable and thread-safe.
class ExchangeFeatures {
 public:
  // Reports of `mechanism` (validated on receipt, compared as its dense
  // estimate, e.g. the Multi-bit rectifier). mechanism must not be null.
  static std::shared_ptr<const ExchangeFeatures> Private(
      std::shared_ptr<const FeatureMechanism> mechanism);
  // Raw vectors of `dimension` values in [alpha, beta] (FeatureReport with
  // the nonzero entries as indices and values, no spec): the non-private
  // eps_x = inf baseline of `ldpgraph edges`. Never used by an agent host:
  // raw features would leave the agent.
  static std::shared_ptr<const ExchangeFeatures> RawForResearch(
      int dimension, double alpha, double beta);

  int dimension() const { return dimension_; }
  // The dense vector a report stands for (the mechanism's estimate, or the
  // raw values), after validating it; INVALID_ARGUMENT saying what is wrong.
  absl::StatusOr<CompactVector> Decode(const v1::FeatureReport& r) const;
  // A dummy: raw values from N(mean, std^2) clipped to the range, encoded
  // like a real vector.
  absl::StatusOr<v1::FeatureReport> Dummy(double mean, double std,
                                          RandomSource& rng) const;
  // The wire form of a node's own vector x (length d): Perturb + encode, or
  // the raw values for research.
  absl::StatusOr<v1::FeatureReport> Encode(absl::Span<const double> x,
                                           RandomSource& rng) const;

 private:
  ExchangeFeatures() = default;
  std::shared_ptr<const FeatureMechanism> mechanism_;  // null: raw
  int dimension_ = 0;
  double alpha_ = 0, beta_ = 1;
};

// Counts of one node's substitution.
struct SubstitutionStats {
  uint32_t degree = 0;       // |N(v)|
  uint32_t dropped = 0;      // |R|
  uint32_t substituted = 0;  // dropped neighbours replaced
  uint32_t unresolved = 0;   // dropped neighbours left out (no candidate)
  uint32_t candidates = 0;   // distinct candidate vectors considered
  uint32_t absent = 0;       // neighbours that abstained or timed out
};

struct SubstitutionResult {
  // The perturbed neighbour list: retained and substituted neighbours,
  // strictly ascending.
  std::vector<uint32_t> neighbours;
  SubstitutionStats stats;
};

// One message to one neighbour.
struct Outgoing {
  uint32_t to = 0;
  v1::EdgeExchange message;
};

// One node's state in one exchange. Not thread-safe: one caller drives it.
//
// Driving it: call Advance(); it returns the messages of the next round (or
// nothing, when it waits). Deliver() every message addressed to the node,
// in any order and at any time (messages of rounds ahead are kept; exact
// repeats are ignored; a different message for a (round, sender) already
// held is INVALID_ARGUMENT and changes nothing). Call Advance() again after
// deliveries; after the last round done() is true and result() holds the
// perturbed list. MarkAbsent(u) when u has not spoken in time.
class SubstitutionNode {
 public:
  // neighbours strictly ascending, without node. own_feature: the node's
  // privatized features (what it sends in round 1). dropped: when set, the
  // dropped set R to use instead of drawing it (a node repeating an answer
  // it already gave); every entry must be a neighbour. rng: the node's noise
  // source (drops, dummies, shuffles); must outlive the node.
  static absl::StatusOr<std::unique_ptr<SubstitutionNode>> Create(
      const SubstitutionParams& params,
      std::shared_ptr<const ExchangeFeatures> features, uint32_t node,
      std::vector<uint32_t> neighbours, v1::FeatureReport own_feature,
      RandomSource* rng,
      std::optional<std::vector<uint32_t>> dropped = std::nullopt);

  // A node that refuses the campaign: Advance() sends one `abstain` message
  // to every neighbour and is then done with an empty result.
  static std::unique_ptr<SubstitutionNode> Abstaining(
      const SubstitutionParams& params, uint32_t node,
      std::vector<uint32_t> neighbours);

  // Accepts one message from `from`. INVALID_ARGUMENT if from is not a
  // neighbour, the round is out of range, the body does not belong to the
  // round, a vector does not decode, or it conflicts with a message held.
  absl::Status Deliver(uint32_t from, const v1::EdgeExchange& message);

  // The next round's messages if the node can move on (it holds the
  // previous round's message of every present neighbour); empty otherwise.
  // After the last round it computes the result. Errors only for internal
  // failures (a feature that does not decode was refused by Deliver).
  absl::StatusOr<std::vector<Outgoing>> Advance();

  // Stops waiting for u (timeout): it is absent from the current round on.
  void MarkAbsent(uint32_t u);
  // Present neighbours whose message of the round the node waits for.
  std::vector<uint32_t> Waiting() const;

  uint32_t node() const { return node_; }
  // The last round whose messages the node has sent (0: none yet).
  int round() const { return round_; }
  bool done() const { return done_; }
  bool abstaining() const { return abstaining_; }
  // FAILED_PRECONDITION before done().
  absl::StatusOr<SubstitutionResult> result() const;

 private:
  struct Held;
  SubstitutionNode(const SubstitutionParams& params, uint32_t node,
                   std::vector<uint32_t> neighbours);
  // The messages of `round` to every present neighbour, by the round's
  // body; each step below makes one body (approach 1 or 2's round).
  absl::StatusOr<std::vector<Outgoing>> Send(int round);
  std::vector<uint32_t> Present() const;  // neighbours not absent
  // Approach 1, round 2: what v heard in round 1 plus dummies, shuffled.
  absl::Status SendRelay(const std::vector<uint32_t>& present, int round,
                         std::vector<Outgoing>* out);
  // Approach 2, round 2: draws R; the features of R and of N(v) \ R.
  void SendQueries(const std::vector<uint32_t>& present, int round,
                   std::vector<Outgoing>* out);
  // Approach 2, round 3: the most similar neighbour vector to each query.
  void SendAnswers(const std::vector<uint32_t>& present, int round,
                   std::vector<Outgoing>* out) const;
  // The identity queries (approach 1 draws R here); BuildQueries ranks the
  // candidate pool for every dropped neighbour and fills ranked_, queries_.
  void SendIdentityQueries(const std::vector<uint32_t>& present, int round,
                           std::vector<Outgoing>* out);
  void BuildQueries(const std::vector<std::string>& pool_in);
  // The last round: which neighbour owns each queried vector.
  void SendIdentities(const std::vector<uint32_t>& present, int round,
                      std::vector<Outgoing>* out) const;
  absl::Status Finish();
  void DrawDropped();
  std::vector<std::string> Rank(const CompactVector& target,
                                const std::vector<std::string>& pool,
                                size_t k) const;

  const SubstitutionParams params_;
  const uint32_t node_;
  const std::vector<uint32_t> neighbours_;
  std::shared_ptr<const ExchangeFeatures> features_;
  RandomSource* rng_ = nullptr;
  bool abstaining_ = false;
  v1::FeatureReport own_;
  std::string own_key_;
  std::optional<std::vector<uint32_t>> preset_dropped_;

  int round_ = 0;
  bool done_ = false;
  absl::flat_hash_set<uint32_t> absent_;
  // Messages held until the round that consumes them is sent: (round,
  // sender) -> message; and the digest of every message ever delivered,
  // to tell an exact repeat from a conflicting one.
  absl::flat_hash_map<uint64_t, v1::EdgeExchange> inbox_;
  absl::flat_hash_map<uint64_t, size_t> digests_;
  // Decoded vectors by canonical key.
  absl::flat_hash_map<std::string, CompactVector> vectors_;
  absl::flat_hash_map<std::string, v1::FeatureReport> reports_;
  // Round-1 features of each neighbour (canonical key).
  absl::flat_hash_map<uint32_t, std::string> neighbour_key_;
  std::vector<uint32_t> dropped_;  // R, ascending
  bool removed_first_ = false;     // approach 2: R sent as `first`
  // Per dropped neighbour (in processing order), its ranked candidates.
  std::vector<std::pair<uint32_t, std::vector<std::string>>> ranked_;
  std::vector<std::string> queries_;  // identity queries sent, in order
  SubstitutionResult result_;
};

// The canonical key of a vector: its deterministic serialisation.
std::string CanonicalKey(const v1::FeatureReport& r);

// Options of an in-memory run over a whole graph.
struct RunOptions {
  // Nodes that refuse (abstain); empty: none.
  absl::flat_hash_set<uint32_t> abstaining;
  // Threads for the per-round work (1: sequential). Results do not depend
  // on it.
  int threads = 1;
};

// Totals over all nodes of one run.
struct RunStats {
  uint64_t degree = 0, dropped = 0, substituted = 0, unresolved = 0;
  uint64_t messages = 0;        // messages sent, all rounds
  uint64_t message_bytes = 0;   // their serialised plaintext size
  uint64_t vectors_sent = 0;    // feature vectors inside them
};

struct RunOutput {
  // result[v]: node v's perturbed list (empty for an abstaining node).
  std::vector<SubstitutionResult> results;
  RunStats stats;
};

// Runs the protocol for every node of g in memory, each node v with its own
// vector own[v] (the node's round-1 report) and randomness rng_of(v) (called
// once per node; the sources must outlive the call). Every message goes
// through SerializeAsString/ParseFromString, as it would through the relay.
absl::StatusOr<RunOutput> RunSubstitution(
    const Graph& g, const SubstitutionParams& params,
    std::shared_ptr<const ExchangeFeatures> features,
    const std::vector<v1::FeatureReport>& own,
    const std::function<RandomSource*(uint32_t)>& rng_of,
    const RunOptions& options = {});

// How the curator turns per-node neighbour reports into one undirected
// graph:
//  kUnion     {u, v} is an edge if u lists v or v lists u (substitution:
//             each node reports about its own row only, and an edge one
//             side dropped and the other kept stays, as in the thesis's
//             undirected graph);
//  kLowerId   {u, v}, u < v, is an edge iff u's report lists v (randomized
//             response: both endpoints report the same bit; keeping one
//             report per pair keeps the edge density at the mechanism's).
enum class Symmetrisation { kUnion, kLowerId };
absl::string_view SymmetrisationName(Symmetrisation s);

// The undirected graph of n nodes from reports[v] (v's reported list,
// strictly ascending, < n, never v; an empty list for a node that did not
// report). INVALID_ARGUMENT naming the node and entry otherwise.
absl::StatusOr<Graph> AssembleGraph(
    uint32_t n, const std::vector<std::vector<uint32_t>>& reports,
    Symmetrisation rule);

}  // namespace ldpgraph::edges

// The public settings of a simulated poisoning attack (common/attacks/
// poisoning.h): which attacker, how many nodes it controls, its target class
// and target dimensions, with their names and --help text. Settings only,
// no attack: the pipeline's configuration (server/pipeline/config.h) and the
// command lines hold them without linking the attackers.
#pragma once

#include "absl/status/status.h"
#include "common/names.h"

namespace ldpgraph::poisoning {

// The attackers (see common/attacks/poisoning.h).
enum class AttackKind { kMaximalGain, kInput, kAdaptive, kLabelsOnly, kFakeEdges };
// "maximal-gain", "input", "adaptive", "labels-only", "fake-edges" (--attack).
inline constexpr auto kAttackNames = MakeNameTable<AttackKind>(
    "attack", {{AttackKind::kMaximalGain, "maximal-gain"},
               {AttackKind::kInput, "input"},
               {AttackKind::kAdaptive, "adaptive"},
               {AttackKind::kLabelsOnly, "labels-only"},
               {AttackKind::kFakeEdges, "fake-edges"}});

// The --help text of --attack, shared by ldpgraph eval, ldpctl simulate and
// ldpgraph-agent.
inline constexpr char kAttackHelp[] =
    R"(  --attack A             what the malicious nodes send (default
                         maximal-gain): maximal-gain (the mechanism's top
                         output on sampled target dimensions; label C),
                         input (a fake record, top of the range on the
                         target dimensions, perturbed honestly; label C
                         through randomized response), adaptive (maximal
                         gain kept under the report screen's threshold by
                         widening the targets), labels-only (honest
                         features, label C), fake-edges (input's features
                         and label, and edge reports claiming edges to
                         victims with the largest noisy degree; needs
                         --edges rr or blink)
)";

// The attack's public settings (a simulation's configuration).
struct AttackSettings {
  // The fraction of nodes the attacker controls, in [0, 1); 0 is no attack.
  double fraction = 0;
  // The target class t, >= 0 (and below the dataset's class count).
  int target_class = 0;
  // R, the number of target feature dimensions, >= 1 (capped at d).
  int target_dims = 10;
  AttackKind kind = AttackKind::kMaximalGain;

  // INVALID_ARGUMENT naming the setting and its rule.
  absl::Status Validate() const;
};

}  // namespace ldpgraph::poisoning

// The curator's defences against poisoning as a configuration: which ones
// run (--defence), the report screen's level (--screen-alpha), their names
// and --help text. The defences themselves: report_screen.h (the screen),
// robust.h (trimmed-label retraining), edge_screen.h (edge consistency).
// Part of the pipeline's configuration library (config.h).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cli_args.h"

namespace ldpgraph::pipeline {

// The curator's defences against poisoning, any combination (--defence, a
// comma list): none, or any of
//  screen            this file's screen of the feature reports' sampled
//                    dimensions (the estimate stage);
//  robust            trimmed-label retraining (server/pipeline/robust.h): the
//                    label reports of a class reported more often than a
//                    first model's predictions support, on nodes that model
//                    does not predict it for, are left out, and the model
//                    trained again;
//  edge-consistency  the edge reports checked against themselves
//                    (server/pipeline/edge_screen.h): a node whose noisy
//                    degree disagrees with its reported bits, or that claims
//                    improbably many edges its other ends deny, is not
//                    trusted.
struct Defences {
  bool screen = false;
  bool robust = false;
  bool edge_consistency = false;

  bool any() const { return screen || robust || edge_consistency; }
  bool operator==(const Defences&) const = default;
};

// The names of the defences, in their canonical order.
inline constexpr char kDefenceList[] = "none, screen, robust, edge-consistency";

// A comma list of defence names ("none" alone, or one or more of screen,
// robust, edge-consistency, each at most once; spaces around names allowed).
// INVALID_ARGUMENT "<flag>: defence must be a comma list of none, screen,
// robust, edge-consistency, got '<list>'" naming what is wrong.
absl::StatusOr<Defences> ParseDefences(absl::string_view list,
                                       absl::string_view flag = "--defence");

// "none", or the set's names in canonical order joined by ",".
std::string DefencesName(const Defences& d);

// The default level alpha of the screen (--screen-alpha).
inline constexpr double kDefaultScreenAlpha = 1e-3;

// The --help text of --defence and --screen-alpha, shared by every command
// that takes them (ldpgraph eval, ldpctl simulate and run).
inline constexpr char kDefenceHelp[] =
    R"(  --defence D[,D...]     the curator's defences against poisoning, a comma
                         list (default none):
                         screen: flag feature reports whose sampled
                         dimensions sit on dimensions reported more often
                         than uniform sampling allows (a Binomial test per
                         dimension at alpha/d); a flagged node's feature row
                         is left empty and the node is left out of training
                         and validation. Needs a mechanism that samples
                         dimensions (hds, multibit; piecewise or laplace
                         with k < d); a no-op ("not applicable") otherwise.
                         Does not see label-only or spread-out attacks
                         robust: with --label-epsilon, train, find the
                         classes reported more often than the model's
                         predictions over every node support (a Binomial
                         test at alpha/classes), leave out the training and
                         validation nodes reporting such a class the model
                         does not predict for them, and train again; a no-op
                         ("not applicable") on the curator's own labels
                         edge-consistency: with --edges rr or blink, distrust
                         a node whose noisy degree disagrees with its
                         reported bits, or that claims improbably many edges
                         the other ends deny: its edge reports are dropped
                         (it is isolated in the graph) and it is left out of
                         training and validation
  --screen-alpha A       the screen's level alpha in (0, 1) (default 1e-3):
                         with honest reports only, nothing is flagged with
                         probability >= 1 - alpha
)";

// Reads --defence (ParseDefences) and --screen-alpha (ValidateScreenAlpha)
// from a; leaves *defences and *alpha as they are for a flag not given.
// INVALID_ARGUMENT naming the flag; --screen-alpha without screen among the
// defences is one.
absl::Status ParseDefenceFlags(const CliArgs& a, Defences* defences,
                               double* alpha);

// OK when alpha is in (0, 1); INVALID_ARGUMENT "screen alpha must be in
// (0, 1), got <alpha>" otherwise.
absl::Status ValidateScreenAlpha(double alpha);

}  // namespace ldpgraph::pipeline

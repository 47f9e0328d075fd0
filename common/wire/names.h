// The names of the wire's enums (proto/ldpgraph/v1) as the command line,
// the ledger's budget keys, configuration and JSON records spell them: one
// NameTable (common/names.h) per proto enum, keyed by the proto's values,
// so that the agent, the curator, ldpctl and the offline tools parse and
// print the same names. Header-only, constants; protobuf's generated enums
// only (no messages, no gRPC).
//
// Every name is its proto value's by one rule: the enum's prefix stripped,
// lower case, underscores as dashes (MECHANISM_KIND_SQUARE_WAVE is
// "square-wave", PIPELINE_METHOD_SE_PRIVGEMB "se-privgemb"). The tests
// (names_test.cc) check the rule against the proto's descriptors, and the
// Python package (python/ldpgraph/names.py) derives its names by the same
// rule. UNSPECIFIED has no name: Name gives "unknown", Parse never returns it.
#pragma once

#include "common/mechanisms/feature_mechanism.h"
#include "common/names.h"
#include "ldpgraph/v1/agent.pb.h"
#include "ldpgraph/v1/mechanism.pb.h"
#include "ldpgraph/v1/pipeline.pb.h"

namespace ldpgraph::wire {

// Every mechanism kind, in the proto's order: the feature mechanisms (their
// names from kFeatureMechanismNames, the one table of the feature kinds),
// "label-rr", "edge-rr", "edge-substitution", "edge-blink". Parse fails with
// INVALID_ARGUMENT "mechanism must be one of square-wave, hds, ..., got
// '<name>'".
inline constexpr auto kMechanismKindNames = MakeNameTable<v1::MechanismKind>(
    "mechanism",
    {{v1::MECHANISM_KIND_SQUARE_WAVE,
      kFeatureMechanismNames.Name(MechanismKind::kSquareWave)},
     {v1::MECHANISM_KIND_HDS, kFeatureMechanismNames.Name(MechanismKind::kHds)},
     {v1::MECHANISM_KIND_MULTIBIT,
      kFeatureMechanismNames.Name(MechanismKind::kMultiBit)},
     {v1::MECHANISM_KIND_ONEBIT,
      kFeatureMechanismNames.Name(MechanismKind::kOneBit)},
     {v1::MECHANISM_KIND_PIECEWISE,
      kFeatureMechanismNames.Name(MechanismKind::kPiecewise)},
     {v1::MECHANISM_KIND_LAPLACE,
      kFeatureMechanismNames.Name(MechanismKind::kLaplace)},
     {v1::MECHANISM_KIND_LABEL_RR, "label-rr"},
     {v1::MECHANISM_KIND_EDGE_RR, "edge-rr"},
     {v1::MECHANISM_KIND_EDGE_SUBSTITUTION, "edge-substitution"},
     {v1::MECHANISM_KIND_EDGE_BLINK, "edge-blink"}});

// The attributes a campaign asks about: "features", "label", "edges" (the
// ledger's and the agents' budget keys). Parse fails with INVALID_ARGUMENT
// "attribute must be one of features, label, edges, got '<name>'".
inline constexpr auto kAttributeNames = MakeNameTable<v1::Attribute>(
    "attribute", {{v1::ATTRIBUTE_FEATURES, "features"},
                  {v1::ATTRIBUTE_LABEL, "label"},
                  {v1::ATTRIBUTE_EDGES, "edges"}});

// The pipeline's methods: "privge", "lpgnn", and the central-DP releases
// "se-privgemb", "dpne" (server/embedding/release.h takes their names from
// here). Parse fails with INVALID_ARGUMENT "method must be one of privge,
// lpgnn, se-privgemb, dpne, got '<name>'".
inline constexpr auto kPipelineMethodNames =
    MakeNameTable<v1::PipelineMethod>(
        "method", {{v1::PIPELINE_METHOD_PRIVGE, "privge"},
                   {v1::PIPELINE_METHOD_LPGNN, "lpgnn"},
                   {v1::PIPELINE_METHOD_SE_PRIVGEMB, "se-privgemb"},
                   {v1::PIPELINE_METHOD_DPNE, "dpne"},
                   {v1::PIPELINE_METHOD_UPGNET, "upgnet"}});

// The pipeline's tasks: "node", "link". Parse fails with INVALID_ARGUMENT
// "task must be one of node, link, got '<name>'".
inline constexpr auto kPipelineTaskNames = MakeNameTable<v1::PipelineTask>(
    "task",
    {{v1::PIPELINE_TASK_NODE, "node"}, {v1::PIPELINE_TASK_LINK, "link"}});

}  // namespace ldpgraph::wire

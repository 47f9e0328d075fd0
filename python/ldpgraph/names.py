"""The names of ldpgraph's wire enums, derived from the generated proto modules.

Every name follows one rule from its value in proto/ldpgraph/v1: the enum's
prefix stripped, lower case, underscores as dashes (MECHANISM_KIND_SQUARE_WAVE
is "square-wave", PIPELINE_METHOD_SE_PRIVGEMB "se-privgemb"). That is the
command line's spelling (ldpctl, ldpgraph) and the C++ tables'
(common/wire/names.h), whose tests check the same rule against the same
enums; this package's tests check these names against the binaries. The
Python functions also take underscores for dashes ("square_wave",
"label_rr"): :func:`python_name` gives that spelling.

UNSPECIFIED (0) has no name. Each table maps a name to its proto value, in
the proto's order.
"""
from __future__ import annotations

from typing import Dict, Tuple

from ._proto.ldpgraph.v1 import agent_pb2, mechanism_pb2, pipeline_pb2


def cli_name(proto_name: str, prefix: str) -> str:
    """The command-line name of a proto value name: ``prefix`` stripped,
    lower case, underscores as dashes. ValueError if the prefix is missing."""
    if not proto_name.startswith(prefix):
        raise ValueError(f"{proto_name} does not start with {prefix}")
    return proto_name[len(prefix):].lower().replace("_", "-")


def python_name(name: str) -> str:
    """A command-line name as the Python functions spell it: dashes as
    underscores ("square-wave" is "square_wave")."""
    return name.replace("-", "_")


def _table(enum, prefix: str) -> Dict[str, int]:
    return {cli_name(v.name, prefix): v.number
            for v in enum.DESCRIPTOR.values if v.number != 0}


# "square-wave", "hds", ..., "label-rr", "edge-rr", "edge-substitution",
# "edge-blink".
MECHANISM_KINDS: Dict[str, int] = _table(mechanism_pb2.MechanismKind, "MECHANISM_KIND_")
# "features", "label", "edges".
ATTRIBUTES: Dict[str, int] = _table(agent_pb2.Attribute, "ATTRIBUTE_")
# "privge", "lpgnn", "se-privgemb", "dpne".
PIPELINE_METHODS: Dict[str, int] = _table(pipeline_pb2.PipelineMethod, "PIPELINE_METHOD_")
# "node", "link".
PIPELINE_TASKS: Dict[str, int] = _table(pipeline_pb2.PipelineTask, "PIPELINE_TASK_")


def name_of(table: Dict[str, int], value: int) -> str:
    """The name of ``value`` in one of the tables below; ValueError if it has
    none (UNSPECIFIED, or a number the proto lacks)."""
    for name, v in table.items():
        if v == value:
            return name
    raise ValueError(f"{value} has no name")


def attribute_of(kind: int) -> int:
    """The attribute a mechanism kind answers about, as the C++
    wire::AttributeOf: the label kinds (MECHANISM_KIND_LABEL_*) the label,
    the edge kinds (MECHANISM_KIND_EDGE_*) the edges, every other kind the
    features; ATTRIBUTE_UNSPECIFIED for UNSPECIFIED."""
    if kind == mechanism_pb2.MECHANISM_KIND_UNSPECIFIED:
        return agent_pb2.ATTRIBUTE_UNSPECIFIED
    name = mechanism_pb2.MechanismKind.Name(kind)
    if name.startswith("MECHANISM_KIND_LABEL_"):
        return agent_pb2.ATTRIBUTE_LABEL
    if name.startswith("MECHANISM_KIND_EDGE_"):
        return agent_pb2.ATTRIBUTE_EDGES
    return agent_pb2.ATTRIBUTE_FEATURES


# The feature mechanisms, command-line spelling, in the proto's order.
FEATURE_MECHANISMS: Tuple[str, ...] = tuple(
    n for n, k in MECHANISM_KINDS.items() if attribute_of(k) == agent_pb2.ATTRIBUTE_FEATURES)

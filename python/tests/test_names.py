"""The names derived from the proto (ldpgraph.names) follow their rule and
agree with the C++ tables, as the binaries print them (ldpgraph sample,
ldpgraph eval and ldpctl list their choices when given a bad name)."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from ldpgraph import MECHANISMS, names
from ldpgraph._proto.ldpgraph.v1 import agent_pb2, mechanism_pb2, pipeline_pb2


@pytest.mark.parametrize("table,enum,prefix", [
    (names.MECHANISM_KINDS, mechanism_pb2.MechanismKind, "MECHANISM_KIND_"),
    (names.ATTRIBUTES, agent_pb2.Attribute, "ATTRIBUTE_"),
    (names.PIPELINE_METHODS, pipeline_pb2.PipelineMethod, "PIPELINE_METHOD_"),
    (names.PIPELINE_TASKS, pipeline_pb2.PipelineTask, "PIPELINE_TASK_"),
])
def test_every_value_but_unspecified_is_named_by_the_rule(table, enum, prefix):
    values = [v for v in enum.DESCRIPTOR.values if v.number != 0]
    assert list(table.values()) == [v.number for v in values]  # the proto's order
    for name, number in table.items():
        assert enum.Value(prefix + name.upper().replace("-", "_")) == number
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), name
        assert names.name_of(table, number) == name
    with pytest.raises(ValueError):
        names.name_of(table, 0)


def test_the_known_spellings():
    assert names.MECHANISM_KINDS["square-wave"] == mechanism_pb2.MECHANISM_KIND_SQUARE_WAVE
    assert names.MECHANISM_KINDS["edge-blink"] == mechanism_pb2.MECHANISM_KIND_EDGE_BLINK
    assert list(names.ATTRIBUTES) == ["features", "label", "edges"]
    assert list(names.PIPELINE_METHODS) == ["privge", "lpgnn", "se-privgemb", "dpne",
                                           "upgnet"]
    assert list(names.PIPELINE_TASKS) == ["node", "link"]
    assert names.FEATURE_MECHANISMS == ("square-wave", "hds", "multibit", "onebit",
                                        "piecewise", "laplace")
    assert MECHANISMS == tuple(n.replace("-", "_") for n in names.FEATURE_MECHANISMS)
    assert names.attribute_of(mechanism_pb2.MECHANISM_KIND_LABEL_RR) == agent_pb2.ATTRIBUTE_LABEL
    assert names.attribute_of(mechanism_pb2.MECHANISM_KIND_EDGE_RR) == agent_pb2.ATTRIBUTE_EDGES
    assert names.attribute_of(mechanism_pb2.MECHANISM_KIND_HDS) == agent_pb2.ATTRIBUTE_FEATURES
    assert (names.attribute_of(mechanism_pb2.MECHANISM_KIND_UNSPECIFIED)
            == agent_pb2.ATTRIBUTE_UNSPECIFIED)


# --- against the C++ tables, through the binaries ---------------------------

def _binary(name: str) -> Path:
    d = Path(os.environ.get("LDPGRAPH_BIN_DIR",
                            Path(__file__).resolve().parents[2] / "build"))
    if not (d / name).is_file():
        pytest.skip(f"{d / name} is not built (set LDPGRAPH_BIN_DIR)")
    return d / name


def _choices(binary: Path, args, pattern: str):
    """The names a binary lists when it refuses a name: the text matched by
    pattern's group, split at ", " and " or "."""
    run = subprocess.run([str(binary), *args], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode != 0
    m = re.search(pattern, run.stderr)
    assert m, run.stderr
    return re.split(r", | or ", m.group(1))


def test_sample_lists_the_feature_mechanisms_and_randomized_response():
    got = _choices(_binary("ldpgraph"),
                   ["sample", "--mechanism", "nosuch", "--epsilon", "1", "--input", "0"],
                   r"choose one of: (.*)")
    assert got == [*names.FEATURE_MECHANISMS, "label-rr", "edge-rr"]
    assert set(got) <= set(names.MECHANISM_KINDS)


@pytest.mark.parametrize("flag,table", [("--method", names.PIPELINE_METHODS),
                                        ("--task", names.PIPELINE_TASKS)])
def test_eval_lists_the_pipeline_methods_and_tasks(flag, table):
    got = _choices(_binary("ldpgraph"), ["eval", "--dataset", "generated", flag, "nosuch"],
                   flag + r" must be one of (.*), got 'nosuch'")
    assert got == list(table)


@pytest.mark.parametrize("args,table", [
    (["--attribute", "nosuch"], names.ATTRIBUTES),
    (["--attribute", "features", "--mechanism", "nosuch", "--epsilon", "1",
      "--dimension", "2"], names.MECHANISM_KINDS),
])
def test_ldpctl_lists_the_attributes_and_mechanism_kinds(tmp_path, args, table):
    token = tmp_path / "token"
    token.write_text("00112233445566778899aabbccddeeff\n")
    got = _choices(_binary("ldpctl"),
                   ["campaign", "create", "--curator", "127.0.0.1:1", "--insecure",
                    "--admin-token", str(token), *args],
                   r"--(?:attribute|mechanism) must be (?:one of )?(.*), got 'nosuch'")
    assert sorted(got) == sorted(table)

"""The gRPC stubs generated at build time import under ldpgraph._proto."""
import importlib


def test_stubs_import_with_their_services():
    admin_pb2 = importlib.import_module("ldpgraph._proto.ldpgraph.v1.admin_pb2")
    admin_grpc = importlib.import_module("ldpgraph._proto.ldpgraph.v1.admin_pb2_grpc")
    agent_grpc = importlib.import_module("ldpgraph._proto.ldpgraph.v1.agent_pb2_grpc")
    service = admin_pb2.DESCRIPTOR.services_by_name["AdminService"]
    methods = {m.name for m in service.methods}
    assert {"GetStatus", "ListCampaigns", "CreateCampaign", "ExportEmbeddings"} <= methods
    assert hasattr(admin_grpc, "AdminServiceStub")
    assert hasattr(agent_grpc, "AgentServiceStub")
    # The messages of imported files resolve (the rewritten imports).
    spec = admin_pb2.CreateCampaignRequest().spec
    assert spec.DESCRIPTOR.full_name == "ldpgraph.v1.MechanismSpec"


def test_installed_package_carries_the_module_and_stubs():
    import pathlib

    import ldpgraph
    from ldpgraph import _native

    package = pathlib.Path(ldpgraph.__file__).parent
    assert pathlib.Path(_native.__file__).parent == package
    assert pathlib.Path(_native.__file__).name.startswith("_native")
    assert (package / "_proto/ldpgraph/v1/admin_pb2_grpc.py").is_file()


def test_parse_chunk_reads_what_protobuf_writes():
    import numpy as np
    import pytest

    from ldpgraph._proto.ldpgraph.v1 import admin_pb2
    from ldpgraph.admin import parse_chunk

    values = np.random.default_rng(1).standard_normal(3 * 70).astype(np.float32)
    chunk = admin_pb2.EmbeddingChunk(rows=9, cols=70, first_row=6, values=values.tolist())
    rows, cols, first, got = parse_chunk(chunk.SerializeToString())
    assert (rows, cols, first) == (9, 70, 6)
    np.testing.assert_array_equal(got, values)
    # Unpacked floats (field 4, wire type 5) and an unknown field parse too.
    unpacked = bytes([0x08, 9, 0x10, 2]) + b"".join(
        bytes([0x25]) + np.float32(v).tobytes() for v in (1.5, -2.0)) + bytes([0x38, 1])
    assert parse_chunk(unpacked)[:3] == (9, 2, 0)
    np.testing.assert_array_equal(parse_chunk(unpacked)[3], [1.5, -2.0])
    with pytest.raises(ValueError):
        parse_chunk(chunk.SerializeToString()[:-3])

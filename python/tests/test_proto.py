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

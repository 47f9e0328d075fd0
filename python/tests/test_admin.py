"""The admin client against a real deployment: `ldpctl simulate --nodes 400
--hosts 2 --keep-running` (a curator over TLS and two agent host processes),
then status, campaigns, budgets, results, export to NumPy (checked against
`ldpctl export`), a campaign created and answered, the errors, and the
listings read page by page."""
import json
import signal
import subprocess
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

import ldpgraph

NODES = 400


@pytest.fixture(scope="module")
def deployment(bin_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("simulate")
    work, log = tmp / "work", tmp / "simulate.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(bin_dir / "ldpctl"), "simulate", "--nodes", str(NODES), "--hosts", "2",
             "--seed", "5", "--keep-running", "--work-dir", str(work)],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while "deployment keeps running" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ldpctl simulate did not come up:\n" + log.read_text()[-3000:])
            time.sleep(0.2)
        yield bin_dir, work
    finally:
        proc.send_signal(signal.SIGINT)  # simulate stops its children on Ctrl-C
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def admin(deployment):
    _, work = deployment
    with ldpgraph.Admin.from_config(str(work / "ldpctl.conf")) as a:
        yield a


def test_status_campaigns_budgets(admin):
    s = admin.status()
    assert s.graph_nodes == NODES and s.enrolled_nodes == NODES
    assert not s.insecure and s.closed_campaigns >= 1
    campaigns = admin.campaigns()
    c1 = admin.campaign("c1")
    assert c1.id in [c.id for c in campaigns]
    assert c1.progress.reported == NODES
    budgets = admin.budgets(range(10))
    assert [b.node_id for b in budgets] == list(range(10))
    assert all(b.total_spent == pytest.approx(c1.spec.epsilon) for b in budgets)


def test_export_matches_ldpctl_export(admin, deployment, tmp_path):
    bin_dir, work = deployment
    results = admin.results()
    estimate = next(r for r in results if r.stage == "estimate")
    ids, X = admin.export(estimate.id)
    assert X.dtype == np.float32 and X.shape == (estimate.rows, estimate.cols)
    np.testing.assert_array_equal(ids, np.arange(NODES))
    out = tmp_path / "z.npy"
    subprocess.run([str(bin_dir / "ldpctl"), "export", estimate.id, "--config",
                    str(work / "ldpctl.conf"), "--out", str(out)], check=True)
    np.testing.assert_array_equal(X, np.load(out))
    np.testing.assert_array_equal(ids, np.load(tmp_path / "z.ids.npy"))
    assert np.count_nonzero(X) > 0


def test_create_wait_estimate_export_close(admin):
    d = admin.campaign("c1").spec.dimension
    c = admin.create_campaign("from python", mechanism="piecewise", epsilon=0.5,
                              dimension=d, sampled=2, nodes=(0, 100))
    assert c.state == ldpgraph.admin.admin_pb2.CAMPAIGN_STATE_OPEN
    assert c.progress.targeted == 100
    deadline = time.monotonic() + 120
    while admin.campaign(c.id).progress.reported < 100:
        assert time.monotonic() < deadline, admin.campaign(c.id)
        time.sleep(0.2)
    closed = admin.close_campaign(c.id)
    assert closed.state == ldpgraph.admin.admin_pb2.CAMPAIGN_STATE_CLOSED
    spent = {b.node_id: b.total_spent for b in admin.budgets([0, 99, 100])}
    first = admin.campaign("c1").spec.epsilon
    assert spent == pytest.approx({0: first + 0.5, 99: first + 0.5, 100: first})
    result = admin.estimate(c.id)
    ids, X = admin.export(result.id)
    assert X.shape == (NODES, d)
    # Piecewise k = 2: a reporting node's row has at most 2 non-zeros; the
    # nodes outside the campaign have none.
    assert np.all(np.count_nonzero(X[:100], axis=1) <= 2)
    assert np.count_nonzero(X[:100]) > 0 and np.count_nonzero(X[100:]) == 0


def test_propagate_and_evaluate_repeat_the_deployment(admin):
    results = admin.results()
    first = next(r for r in results if r.stage == "evaluate")
    # The simulation's own evaluation, asked again from Python with its seed,
    # gives exactly its metric.
    again = admin.evaluate(first.input, "privge", "node", seed=5)
    assert again.stage == "evaluate" and again.input == first.input
    assert again.metric == first.metric and 0 < again.metric <= 1
    assert json.loads(again.details_json)["graph"] == "curator"
    z = admin.propagate(first.input, "ppr")
    ids, Z = admin.export(z.id)
    assert Z.shape == (NODES, z.cols) and np.array_equal(ids, np.arange(NODES))
    assert np.isfinite(Z).all() and np.count_nonzero(Z) > 0
    assert admin.refusals("c1") == []
    with pytest.raises(ValueError, match="method must be one of"):
        admin.evaluate(first.input, "gcn")
    with pytest.raises(ldpgraph.AdminError) as e:
        admin.propagate("r999")
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_errors_carry_the_grpc_code(admin, deployment):
    with pytest.raises(ldpgraph.AdminError) as e:
        admin.campaign("c999")
    assert e.value.code == grpc.StatusCode.NOT_FOUND and "c999" in str(e.value)
    with pytest.raises(ldpgraph.AdminError) as e:
        admin.export("r999")
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(ldpgraph.AdminError) as e:
        admin.create_campaign("bad", mechanism="hds", epsilon=-1.0, dimension=4)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    _, work = deployment
    config = ldpgraph.read_config(work / "ldpctl.conf")
    wrong = ldpgraph.Admin(config["curator"], token="00" * 32, ca=config["ca"],
                           server_name=config["server-name"])
    with pytest.raises(ldpgraph.AdminError) as e:
        wrong.status()
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(ValueError, match="no CA"):
        ldpgraph.Admin(config["curator"], token="00")


def test_listings_read_every_page(admin):
    """The curator pages its listings; the client reads them to the end: a
    page of one campaign or two audit entries at a time gives what one large
    page gives, in order, and a bad page token is INVALID_ARGUMENT."""
    pb = ldpgraph.admin.admin_pb2
    assert ([c.id for c in admin._pages("ListCampaigns", pb.ListCampaignsRequest(page_size=1),
                                        "campaigns")] == [c.id for c in admin.campaigns()])
    whole = admin._call("ListAudit", pb.ListAuditRequest(limit=10000))
    assert len(whole.entries) > 2 and not whole.next_page_token
    paged = list(admin._pages("ListAudit", pb.ListAuditRequest(limit=2), "entries"))
    assert [e.sequence for e in paged] == [e.sequence for e in whole.entries]
    assert [b.node_id for b in admin.budgets()] == list(range(NODES))
    with pytest.raises(ldpgraph.AdminError) as e:
        admin._call("ListResults", pb.ListResultsRequest(page_token="nope"))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "'nope'" in e.value.details

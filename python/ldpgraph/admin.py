"""A client of the curator's admin API (proto/ldpgraph/v1/admin.proto).

The curator serves the admin API on its gRPC port (ldpgraph-curator
--listen), the agents' port, over TLS; every call carries the admin token
("authorization: Bearer <hex>"). As ldpctl, the client needs the address,
the CA that signed the curator's certificate, the admin token and, when the
certificate names another host, the server name. ``Admin.from_config``
reads ldpctl's config file, which ``ldpctl simulate`` writes for the
deployment it runs (WORK/ldpctl.conf).

Calls return the protobuf messages of admin.proto (fields as attributes:
``admin.status().graph_nodes``); a failed call raises :class:`AdminError`
with the gRPC status code and the curator's message. The curator answers
its listings a page at a time (admin.proto); the methods that return a
list read every page.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from . import names
from ._proto.ldpgraph.v1 import admin_pb2, admin_pb2_grpc, agent_pb2, mechanism_pb2

# Curator replies are bounded (listings come in pages of a few MiB, exports
# in chunks); the limit leaves room to spare.
_MAX_MESSAGE = 256 << 20


class AdminError(Exception):
    """A failed admin call: ``code`` (grpc.StatusCode), ``details`` (the
    curator's message) and ``method`` (the RPC)."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str):
        self.method, self.code, self.details = method, code, details
        super().__init__(f"{method}: {code.name}: {details}")


def _read(path: Union[str, os.PathLike], what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"{what} {path}: {e.strerror}") from None


def _token(token: str) -> str:
    """The hex admin token: the value itself, or a file holding it."""
    text = token
    if os.path.isfile(token):
        text = _read(token, "admin token file").decode("ascii", "replace")
    text = text.strip()
    try:
        bytes.fromhex(text)
    except ValueError:
        raise ValueError("the admin token must be hex (or a file holding it), "
                         f"got {len(text)} characters that are not") from None
    if not text:
        raise ValueError("the admin token is empty")
    return text.lower()


def read_config(path: Union[str, os.PathLike]) -> dict:
    """ldpctl's config file as a dict: curator, admin-token, ca, server-name,
    insecure (paths made absolute against the file's folder). ValueError
    naming path:line for a malformed line or an unknown key."""
    path = Path(path)
    known = {"curator", "admin-token", "ca", "server-name", "insecure"}
    out = {}
    for n, line in enumerate(_read(path, "config file").decode().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, eq, value = (s.strip() for s in line.partition("="))
        if not eq or key not in known or key in out:
            raise ValueError(f"{path}:{n}: expected 'key = value' with a key of "
                             f"{sorted(known)} given once, got {line!r}")
        if key in ("admin-token", "ca") and value and not os.path.isabs(value):
            value = str(path.parent / value)
        out[key] = value
    return out


def _nodes(nodes) -> admin_pb2.NodeSelection:
    """None or "all", a (begin, end) range, or a sequence of node ids."""
    sel = admin_pb2.NodeSelection()
    if nodes is None or (isinstance(nodes, str) and nodes == "all"):
        sel.all = True
    elif isinstance(nodes, range) and nodes.step == 1:
        sel.range_begin, sel.range_end = nodes.start, nodes.stop
    elif isinstance(nodes, tuple) and len(nodes) == 2:
        sel.range_begin, sel.range_end = int(nodes[0]), int(nodes[1])
    else:
        sel.node_ids.extend(int(v) for v in nodes)
    return sel


def _kind(mechanism: str) -> int:
    """A mechanism kind by name (names.MECHANISM_KINDS), underscores or
    dashes, any case."""
    kind = names.MECHANISM_KINDS.get(mechanism.lower().replace("_", "-"))
    if kind is None:
        choices = [names.python_name(n) for n in names.FEATURE_MECHANISMS]
        label = names.python_name(names.name_of(names.MECHANISM_KINDS,
                                                mechanism_pb2.MECHANISM_KIND_LABEL_RR))
        raise ValueError(f"unknown mechanism {mechanism!r}: {', '.join(choices)} or {label}")
    return kind


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def parse_chunk(data: bytes) -> Tuple[int, int, int, np.ndarray]:
    """An EmbeddingChunk's wire bytes as (rows, cols, first_row, values).

    Reads the values (field 4, packed floats as every proto3 encoder writes
    them; unpacked ones too) straight into a float32 array: converting the
    protobuf message's repeated field costs a Python object per value, 40
    times slower. Unknown fields are skipped; ValueError if malformed.
    """
    head = [0, 0, 0]
    parts: List[np.ndarray] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            if 1 <= field <= 3:
                head[field - 1] = value
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated length-delimited field")
            if field == 4:
                if size % 4:
                    raise ValueError("packed floats whose length is not a multiple of 4")
                parts.append(np.frombuffer(data, dtype="<f4", count=size // 4, offset=pos))
            pos += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                raise ValueError("truncated fixed-width field")
            if field == 4 and wire == 5:
                parts.append(np.frombuffer(data, dtype="<f4", count=1, offset=pos))
            pos += width
        else:
            raise ValueError(f"wire type {wire} of field {field} is not supported")
    values = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return head[0], head[1], head[2], values.astype(np.float32, copy=False)


class Admin:
    """The curator's admin API over one gRPC channel.

    ``address``: host:port of the curator's gRPC listener. ``token``: the
    admin token, hex or a file holding it (ldpgraph-curator --admin-token).
    ``ca``: PEM file of the CA that signed the curator's certificate;
    ``server_name``: the name to check the certificate against when it is
    not the address's host. ``cert``/``key``: a client certificate and key
    (PEM files) for a TLS front that requires one; the curator itself
    authenticates the admin by the token. ``insecure=True``: plaintext, for
    a curator started with --insecure (development only). ``timeout``: the
    deadline of each unary call in seconds.
    """

    def __init__(self, address: str, *, token: str, ca: Optional[str] = None,
                 server_name: Optional[str] = None, cert: Optional[str] = None,
                 key: Optional[str] = None, insecure: bool = False,
                 timeout: float = 60.0):
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE),
                   ("grpc.max_reconnect_backoff_ms", 2000)]
        if insecure:
            if ca or cert or key:
                raise ValueError("insecure=True excludes ca, cert and key")
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            if not ca:
                raise ValueError("no CA: give ca= (the CA that signed the curator's "
                                 "certificate), or insecure=True for a plaintext curator")
            if (cert is None) != (key is None):
                raise ValueError("cert and key go together")
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(ca, "CA file"),
                private_key=_read(key, "client key file") if key else None,
                certificate_chain=_read(cert, "client certificate file") if cert else None)
            if server_name:
                options.append(("grpc.ssl_target_name_override", server_name))
            self._channel = grpc.secure_channel(address, creds, options=options)
        self.address = address
        self._metadata = (("authorization", "Bearer " + _token(token)),)
        self._timeout = timeout
        self._stub = admin_pb2_grpc.AdminServiceStub(self._channel)
        # Export's chunks as raw bytes, parsed by parse_chunk.
        self._export = self._channel.unary_stream(
            "/ldpgraph.v1.AdminService/ExportEmbeddings",
            request_serializer=admin_pb2.ExportEmbeddingsRequest.SerializeToString,
            response_deserializer=None)

    @classmethod
    def from_config(cls, path: Optional[str] = None, **kwargs) -> "Admin":
        """An Admin from ldpctl's config file: ``path``, else $LDPCTL_CONFIG,
        else ~/.config/ldpctl/config. kwargs override (timeout=...)."""
        path = path or os.environ.get("LDPCTL_CONFIG") or os.path.join(
            os.environ.get("XDG_CONFIG_HOME", os.path.expanduser("~/.config")),
            "ldpctl", "config")
        c = read_config(path)
        if "admin-token" not in c:
            raise ValueError(f"{path}: no admin-token")
        settings = dict(
            token=c["admin-token"], ca=c.get("ca"), server_name=c.get("server-name"),
            insecure=c.get("insecure", "false").lower() in ("true", "1", "yes"))
        settings.update(kwargs)
        return cls(c.get("curator", "127.0.0.1:7443"), **settings)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request):
        try:
            return getattr(self._stub, method)(request, metadata=self._metadata,
                                               timeout=self._timeout)
        except grpc.RpcError as e:
            raise AdminError(method, e.code(), e.details()) from None

    def _pages(self, method: str, request, field: str):
        """Every item of a paged listing: request's first page, then each
        next one (page_token = the previous next_page_token), in order."""
        while True:
            page = self._call(method, request)
            yield from getattr(page, field)
            if not page.next_page_token:
                return
            if page.next_page_token == request.page_token:
                raise AdminError(method, grpc.StatusCode.INTERNAL,
                                 "the curator answered a page token with itself")
            request.page_token = page.next_page_token

    def result_ids(self, result_id: str, list_name: str) -> List[int]:
        """The whole id list ``list_name`` of a result ("flagged",
        "overreported", "robust.dropped_nodes"), whose details hold only its
        first 100 ids."""
        return list(self._pages("ListResultIds", admin_pb2.ListResultIdsRequest(
            result_id=result_id, list=list_name, page_size=100000), "ids"))

    # --- the curator and its campaigns --------------------------------------
    def status(self) -> admin_pb2.CuratorStatus:
        """The curator at a glance (graph, hosts, campaigns, traffic)."""
        return self._call("GetStatus", admin_pb2.GetStatusRequest())

    def campaigns(self) -> List[admin_pb2.Campaign]:
        """Every campaign, newest first."""
        return list(self._pages("ListCampaigns", admin_pb2.ListCampaignsRequest(), "campaigns"))

    def campaign(self, campaign_id: str) -> admin_pb2.Campaign:
        """One campaign with its progress; AdminError NOT_FOUND if unknown."""
        return self._call("GetCampaign", admin_pb2.GetCampaignRequest(campaign_id=campaign_id))

    def create_campaign(self, name: str, *, mechanism: str, epsilon: float,
                        dimension: int, sampled: Optional[int] = None,
                        low: float = -1.0, high: float = 1.0, nodes=None,
                        quorum: float = 1.0,
                        deadline_unix_ms: int = 0) -> admin_pb2.Campaign:
        """Opens a features campaign (a feature mechanism, ``dimension`` the
        feature dimension) or a label campaign (mechanism "label_rr",
        ``dimension`` the number of classes). ``nodes``: None/"all", a
        (begin, end) range or a list of ids. The curator validates the spec
        (INVALID_ARGUMENT) and the ledger (FAILED_PRECONDITION)."""
        kind = _kind(mechanism)
        attribute = (agent_pb2.ATTRIBUTE_LABEL if kind == mechanism_pb2.MECHANISM_KIND_LABEL_RR
                     else agent_pb2.ATTRIBUTE_FEATURES)
        spec = mechanism_pb2.MechanismSpec(
            kind=kind, epsilon=epsilon, dimension=dimension, sampled=sampled or 0,
            range_low=low, range_high=high)
        return self._call("CreateCampaign", admin_pb2.CreateCampaignRequest(
            name=name, attribute=attribute, spec=spec, nodes=_nodes(nodes),
            quorum=quorum, deadline_unix_ms=deadline_unix_ms))

    def close_campaign(self, campaign_id: str) -> admin_pb2.Campaign:
        """Closes an open campaign (a closed one is returned unchanged)."""
        return self._call("CloseCampaign", admin_pb2.CloseCampaignRequest(campaign_id=campaign_id))

    def budgets(self, node_ids: Optional[Iterable[int]] = None) -> List[admin_pb2.NodeBudget]:
        """The ledger's caps and spend of some nodes (None: every node it
        knows; at most 1,000,000 ids, or a ``range``)."""
        if isinstance(node_ids, range) and node_ids.step == 1 and len(node_ids) > 0:
            req = admin_pb2.GetBudgetsRequest(range_begin=node_ids.start,
                                              range_end=node_ids.stop)
        else:
            req = admin_pb2.GetBudgetsRequest(node_ids=list(node_ids or []))
        req.page_size = 100000
        return list(self._pages("GetBudgets", req, "budgets"))

    # --- the pipeline ------------------------------------------------------
    def results(self) -> List[admin_pb2.StageResult]:
        """Every recorded stage result, newest first."""
        return list(self._pages("ListResults", admin_pb2.ListResultsRequest(), "results"))

    def estimate(self, campaign_id: str, defence: str = "") -> admin_pb2.StageResult:
        """Estimates a features campaign's reports into a matrix (a result to
        export); ``defence`` "" or "screen"."""
        return self._call("Estimate", admin_pb2.EstimateRequest(
            campaign_id=campaign_id, defence=defence))

    def propagate(self, estimate_id: str, method: str = "ppr", *, alpha: float = 0.0,
                  r: float = 0.0, rmax: float = 0.0, steps: int = 0,
                  graph_campaign: str = "", blink_variant: str = "") -> admin_pb2.StageResult:
        """Propagates an estimate result over the graph: ``method`` "ppr"
        (PrivGE's personalised PageRank; alpha, r, rmax, 0 for its defaults)
        or "kprop" (LPGNN; ``steps``, 0 for 16). ``graph_campaign``: an edges
        campaign whose reports make the graph (needed when the curator keeps
        no edges); ``blink_variant`` "hard", "topk" or "hybrid" for a Blink
        campaign ("" is hard). Returns the result, a matrix to export."""
        return self._call("Propagate", admin_pb2.PropagateRequest(
            input=estimate_id, method=method, alpha=alpha, r=r, rmax=rmax, steps=steps,
            graph_campaign_id=graph_campaign, blink_variant=blink_variant))

    def evaluate(self, estimate_id: str, method: str = "privge", task: str = "node", *,
                 label_campaign: str = "", seed: int = 1, graph_campaign: str = "",
                 blink_variant: str = "") -> admin_pb2.StageResult:
        """Trains and tests the pipeline on an estimate result: ``method``
        "privge" or "lpgnn", ``task`` "node" (the metric is test accuracy) or
        "link" (test ROC-AUC). ``label_campaign``: a label campaign whose
        reports are the training labels (lpgnn); ``seed`` the split and the
        model's initialisation. The headline figure is ``.metric``, every
        other one in ``json.loads(.details_json)``."""
        # The feature pipelines' methods (the release methods go through
        # the curator's Release); every task.
        methods = {m: names.PIPELINE_METHODS[m] for m in ("privge", "lpgnn")}
        tasks = dict(names.PIPELINE_TASKS)
        if method not in methods:
            raise ValueError(f"method must be one of {sorted(methods)}, got {method!r}")
        if task not in tasks:
            raise ValueError(f"task must be one of {sorted(tasks)}, got {task!r}")
        return self._call("Evaluate", admin_pb2.EvaluateRequest(
            input=estimate_id, pipeline_method=methods[method], pipeline_task=tasks[task],
            label_campaign_id=label_campaign, seed=seed, graph_campaign_id=graph_campaign,
            blink_variant=blink_variant))

    def refusals(self, campaign_id: str) -> List[admin_pb2.RefusalRecord]:
        """The nodes that refused a campaign, with their reasons."""
        return list(self._pages("ListRefusals", admin_pb2.ListRefusalsRequest(
            campaign_id=campaign_id), "refusals"))

    def export(self, result_id: str) -> Tuple[np.ndarray, np.ndarray]:
        """An estimate, propagate or release result as NumPy arrays:
        ``(ids, X)``, ids int64 (n,) and X float32 (n x d), row i the node
        ids[i] of the curator's graph. AdminError NOT_FOUND for an unknown
        result, DATA_LOSS if the stream's chunks disagree."""
        method = "ExportEmbeddings"
        X = None
        try:
            stream = self._export(admin_pb2.ExportEmbeddingsRequest(result_id=result_id),
                                  metadata=self._metadata)
            for data in stream:
                try:
                    rows, cols, begin, values = parse_chunk(data)
                except ValueError as e:
                    stream.cancel()
                    raise AdminError(method, grpc.StatusCode.DATA_LOSS,
                                     f"malformed chunk: {e}") from None
                if X is None:
                    X = np.zeros((rows, cols), dtype=np.float32)
                n = values.size // cols if cols else 0
                if ((rows, cols) != X.shape or (cols and values.size % cols)
                        or begin + n > rows):
                    stream.cancel()
                    raise AdminError(method, grpc.StatusCode.DATA_LOSS,
                                     f"chunk at row {begin} disagrees with the "
                                     f"{X.shape[0]} x {X.shape[1]} matrix")
                X[begin:begin + n] = values.reshape(n, cols)
        except grpc.RpcError as e:
            raise AdminError(method, e.code(), e.details()) from None
        if X is None:
            X = np.zeros((0, 0), dtype=np.float32)
        # Row i of a result is node i of the curator's graph.
        return np.arange(X.shape[0], dtype=np.int64), X

"""Boot phase reports on both store backends: a node reports with its own token over gRPC
(no API token needed) and over the daemon's HTTP port (as bootstrap/node.sh does with curl);
a retry is recorded once; a wrong, expired, spent or another node's token, an unknown phase
or a time in the future is refused with the right code, and nothing is recorded."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select

from controlplane import http_endpoint
from controlplane.api import ControlPlaneService
from controlplane.api.node_phases import PhaseReport
from controlplane.grpc.client import ControlPlaneClient
from controlplane.grpc.server import serve
from controlplane.node_tokens import NodeTokens, digest
from controlplane.store.db import Store
from controlplane.store.models import Node, NodePhaseReport
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.component.test_store import _node, _seed_parents
from tests.unit.test_bootstrap import run_node

NOW = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)
TOKENS = NodeTokens(b"test-node-token-key")


@pytest.fixture
def tokens(store: Store) -> dict[str, str]:
    """Two provisioning nodes with live tokens, one whose token expired."""
    out: dict[str, str] = {}
    with store.session() as s:
        _seed_parents(s)
        for name, expires in (("n-1", 3600), ("n-2", 3600), ("old", -1)):
            secret = TOKENS.for_node(name)
            row = _node(name, f"tok-{name}")
            row.state = "provisioning"
            row.token_sha256 = digest(secret)
            row.token_expires_at = NOW + timedelta(seconds=expires)
            s.add(row)
            out[name] = secret
    return out


@pytest.fixture
def svc(store: Store) -> ControlPlaneService:
    return ControlPlaneService(store, clock=lambda: NOW)


@pytest.fixture
def client(svc: ControlPlaneService) -> Iterator[ControlPlaneClient]:
    srv = serve(svc, "127.0.0.1:0", token="api-token")
    try:
        with ControlPlaneClient(f"127.0.0.1:{srv.port}") as c:  # no API token
            yield c
    finally:
        srv.stop(grace=0)


def phases(store: Store) -> list[tuple[str, str]]:
    with store.session() as s:
        rows = s.execute(select(NodePhaseReport.node_id, NodePhaseReport.phase))
        return sorted((n, p) for n, p in rows)


def grpc_report(c: ControlPlaneClient, node: str, token: str, phase: str, **kw: Any) -> Any:
    req = pb.ReportNodePhaseRequest(
        node_id=node, token=token, phase=phase, at=kw.pop("at", NOW.timestamp()), **kw
    )
    return c.stub.ReportNodePhase(req, timeout=5)


def code_of(fn: Any, *args: Any, **kw: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        fn(*args, **kw)
    return err.value.code()


def test_a_node_reports_with_its_own_token_once_per_phase(
    client: ControlPlaneClient, tokens: dict[str, str], store: Store
) -> None:
    assert grpc_report(client, "n-1", tokens["n-1"], "booted").recorded
    assert not grpc_report(client, "n-1", tokens["n-1"], "booted").recorded  # a retry
    assert grpc_report(client, "n-1", tokens["n-1"], "image_pulled", detail="12 s").recorded
    assert phases(store) == [("n-1", "booted"), ("n-1", "image_pulled")]


def test_bad_reports_get_their_code_and_record_nothing(
    client: ControlPlaneClient, tokens: dict[str, str], store: Store
) -> None:
    unauth, denied, invalid = (
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert code_of(grpc_report, client, "n-1", "", "booted") == unauth
    assert code_of(grpc_report, client, "n-1", "forged", "booted") == unauth
    assert code_of(grpc_report, client, "ghost", tokens["n-1"], "booted") == unauth
    assert code_of(grpc_report, client, "n-1", tokens["n-2"], "booted") == denied
    assert code_of(grpc_report, client, "old", tokens["old"], "booted") == unauth
    assert code_of(grpc_report, client, "n-1", tokens["n-1"], "rm -rf /") == invalid
    future = (NOW + timedelta(hours=1)).timestamp()
    assert code_of(grpc_report, client, "n-1", tokens["n-1"], "booted", at=future) == invalid
    assert phases(store) == []


def test_the_token_is_spent_when_the_boot_ends(
    client: ControlPlaneClient, tokens: dict[str, str], store: Store
) -> None:
    assert grpc_report(client, "n-1", tokens["n-1"], "ready").recorded
    assert not grpc_report(client, "n-1", tokens["n-1"], "ready").recorded  # a lost answer
    replay = code_of(grpc_report, client, "n-1", tokens["n-1"], "engine_started")
    assert replay == grpc.StatusCode.UNAUTHENTICATED
    assert phases(store) == [("n-1", "ready")]
    with store.session() as s:
        node = s.get_one(Node, "n-1")
        assert node.token_expires_at is not None and node.token_expires_at <= NOW


def test_a_resumed_nodes_second_boot_reports_every_phase_again(
    store: Store, tokens: dict[str, str]
) -> None:
    # First boot, at NOW: ready, token spent. An hour later the warm pool resumes the node
    # (resuming_at set, the token live again): its per-boot bootstrap reports anew.
    later = NOW + timedelta(hours=1)
    first = ControlPlaneService(store, clock=lambda: NOW).report_node_phase
    then = ControlPlaneService(store, clock=lambda: later).report_node_phase
    ok = PhaseReport("n-1", "ready", NOW.timestamp(), tokens["n-1"], "first boot")
    assert first(ok)
    with store.session() as s:
        node = s.get_one(Node, "n-1")
        node.resuming_at = later - timedelta(seconds=30)
        node.token_expires_at = later + timedelta(minutes=30)
    again = PhaseReport("n-1", "ready", later.timestamp(), tokens["n-1"], "second boot")
    assert then(again)
    assert not then(again)  # its retry changes nothing
    with store.session() as s:
        [row] = s.scalars(select(NodePhaseReport).where(NodePhaseReport.node_id == "n-1"))
        assert row.detail == "second boot"
        assert row.at.replace(tzinfo=UTC) == later
    # Without a resume, the same phase again is a retry: nothing changes.
    twice = PhaseReport("n-2", "booted", NOW.timestamp(), tokens["n-2"], "a")
    assert first(twice)
    assert not first(replace(twice, detail="b"))


@contextlib.contextmanager
def phases_endpoint(svc: ControlPlaneService) -> Iterator[str]:
    """The daemon's HTTP port taking phase reports for ``svc``; yields the report URL."""
    server, _ = http_endpoint.serve(
        "127.0.0.1", 0, http_endpoint.app(CollectorRegistry(), svc.report_node_phase)
    )
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{http_endpoint.PHASES_PATH}"
    finally:
        server.shutdown()


def booting_node(store: Store, node_id: str) -> str:
    """A provisioning node row (and its parents) with a token live for an hour on the real
    clock (the script's); returns the token."""
    with store.session() as s:
        _seed_parents(s)
        secret = TOKENS.for_node(node_id)
        row = _node(node_id, f"tok-{node_id}")
        row.state = "provisioning"
        row.token_sha256 = digest(secret)
        row.token_expires_at = datetime.now(UTC) + timedelta(hours=1)
        s.add(row)
    return secret


@pytest.fixture
def http_url(svc: ControlPlaneService) -> Iterator[str]:
    with phases_endpoint(svc) as url:
        yield url


def post(url: str, body: Any, token: str) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_http_port_takes_the_same_reports(
    http_url: str, tokens: dict[str, str], store: Store
) -> None:
    body = {"node_id": "n-1", "phase": "booted", "at": NOW.timestamp()}
    assert post(http_url, body, tokens["n-1"]) == (200, {"recorded": True})
    assert post(http_url, body, tokens["n-1"]) == (200, {"recorded": False})
    assert post(http_url, body, "forged")[0] == 401
    assert post(http_url, body, tokens["n-2"])[0] == 403
    status, answer = post(http_url, {**body, "phase": "nope"}, tokens["n-1"])
    assert status == 400 and answer["field"] == "phase"
    assert post(http_url, b"{not json", tokens["n-1"])[0] == 400
    assert post(http_url, b"x" * 5000, tokens["n-1"])[0] == 400
    assert phases(store) == [("n-1", "booted")]
    metrics = http_url.replace(http_endpoint.PHASES_PATH, "/metrics")
    with urllib.request.urlopen(metrics, timeout=5) as resp:
        assert resp.status == 200  # the port still serves Prometheus


def test_the_bootstrap_script_reports_to_the_daemon(tmp_path: Path, store: Store) -> None:
    """node.sh's curl against the daemon's HTTP port, on the real clock (the script's)."""
    secret = booting_node(store, "n-3")
    with phases_endpoint(ControlPlaneService(store)) as url:
        code, err = run_node(tmp_path, 8, url, secret, node_id="n-3")
    assert code == 0, err
    assert "failed" not in err
    assert [p for n, p in phases(store) if n == "n-3"] == sorted(
        ["booted", "driver_ok", "image_pulled", "weights_fetched", "engine_started", "ready"]
    )

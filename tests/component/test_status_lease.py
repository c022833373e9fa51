"""``GetStatus`` (and ``gpucap status``) says each daemon's part in leadership: the leader
holds its shards' leases, a standby names the daemon it follows, a process with no leases
says nothing of them. Two services on one store over real gRPC, on SQLite and PostgreSQL
(``db_url`` fixture); their leases are stepped by hand."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from controlplane.api import ControlPlaneService
from controlplane.cli.main import app
from controlplane.grpc.client import ControlPlaneClient
from controlplane.grpc.server import GrpcServer, serve
from controlplane.leadership import Leadership
from controlplane.store.db import Store
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

TTL = 0.6


@pytest.fixture
def daemons(db_url: str, store: Store) -> Iterator[list[tuple[Leadership, GrpcServer]]]:
    out = []
    for holder in ("A", "B"):
        lead = Leadership.from_url(db_url, holder=holder, shards=2, ttl_s=TTL)
        svc = ControlPlaneService(store, lease=lead.view)
        out.append((lead, serve(svc, "127.0.0.1:0")))
    yield out
    for lead, srv in out:
        srv.stop(grace=0)
        lead.close()


def _status(srv: GrpcServer) -> pb.Status:
    with ControlPlaneClient(f"127.0.0.1:{srv.port}", timeout=10) as c:
        st: pb.Status = c.stub.GetStatus(pb.GetStatusRequest(), timeout=10)
    return st


def test_the_leader_and_the_standby_say_so(daemons: list[tuple[Leadership, GrpcServer]]) -> None:
    (a, srv_a), (b, srv_b) = daemons
    a.step()
    b.step()
    lead, follow = _status(srv_a).lease, _status(srv_b).lease
    assert (lead.role, lead.holder, list(lead.held_shards), lead.shards) == (
        "leader",
        "A",
        [0, 1],
        2,
    )
    assert not lead.following and lead.ttl_s == TTL and lead.answered_s_ago >= 0
    assert (follow.role, list(follow.held_shards), dict(follow.following)) == (
        "standby",
        [],
        {0: "A", 1: "A"},
    )
    out = CliRunner().invoke(app, ["status", "--addr", f"127.0.0.1:{srv_b.port}"])
    assert out.exit_code == 0, out.output
    assert "lease: standby (B), shards held none of 2, following A" in out.output

    time.sleep(TTL + 0.1)  # A stops renewing (as if it hung): B takes over
    b.step()
    assert _status(srv_a).lease.role != "leader"  # on its own clock, without the database
    took = _status(srv_b).lease
    assert (took.role, list(took.held_shards)) == ("leader", [0, 1])


def test_a_process_without_leases_reports_none(store: Store) -> None:
    srv = serve(ControlPlaneService(store), "127.0.0.1:0")
    try:
        assert not _status(srv).HasField("lease")
    finally:
        srv.stop(grace=0)

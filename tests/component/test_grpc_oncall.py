"""On-call RPCs over a real channel (in-process server on a free loopback port, real SQLite
store): CordonPools, DrainNode, ListDecisions, ReplayDecision, and the status codes their
mistakes map to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from controlplane.api import ControlPlaneService
from controlplane.grpc.client import ControlPlaneClient, error_details
from controlplane.grpc.server import GrpcServer, serve
from controlplane.store.db import Store
from controlplane.store.models import Node, NodePhaseReport
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from tests.component.oncall_kit import add_replica, record_demo_decisions
from tests.policy_texts import example_policy

EAST = "acme/acme-aws/us-east-1/p5.48xlarge"


@pytest.fixture
def svc(sqlite_store: Store) -> ControlPlaneService:
    return ControlPlaneService(sqlite_store)


@pytest.fixture
def client(svc: ControlPlaneService) -> Iterator[ControlPlaneClient]:
    srv: GrpcServer = serve(svc, "127.0.0.1:0")
    with ControlPlaneClient(f"127.0.0.1:{srv.port}", timeout=10) as c:
        yield c
    srv.stop(grace=0)


def _fails(call: Any, request: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call(request)
    return err.value


# --------------------------------------------------------------------------- CordonPools


def test_cordon_pools_returns_the_pools_changed(
    client: ControlPlaneClient, svc: ControlPlaneService
) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    stub = client.stub
    aws_east = pb.PoolSelector(cloud="aws", region="us-east-1")
    resp = stub.CordonPools(pb.CordonPoolsRequest(selector=aws_east, cordoned=True, reason="ICE"))
    ids = {p.id for p in resp.changed}
    assert EAST in ids and all(p.cordoned for p in resp.changed)
    assert {(p.cloud, p.region) for p in resp.changed} == {("aws", "us-east-1")}
    assert resp.matched == len(ids)
    listed = stub.ListPools(pb.ListPoolsRequest(cloud="aws")).pools
    assert {p.id for p in listed if p.cordoned} == ids

    again = stub.CordonPools(pb.CordonPoolsRequest(selector=aws_east, cordoned=True))
    assert (list(again.changed), again.matched) == ([], len(ids))
    back = stub.CordonPools(
        pb.CordonPoolsRequest(selector=pb.PoolSelector(customer="acme"), cordoned=False)
    )
    assert {p.id for p in back.changed} == ids and not any(p.cordoned for p in back.changed)


def test_cordon_pools_mistakes(client: ControlPlaneClient, svc: ControlPlaneService) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    stub = client.stub
    empty = _fails(stub.CordonPools, pb.CordonPoolsRequest(cordoned=True))
    assert empty.code() == grpc.StatusCode.INVALID_ARGUMENT
    [(field, reason)] = error_details(empty).field_violations
    assert field == "selector" and "customer, cloud, region or account" in reason

    azure = _fails(
        stub.CordonPools,
        pb.CordonPoolsRequest(selector=pb.PoolSelector(cloud="azure"), cordoned=True),
    )
    assert azure.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(azure).field_violations[0][0] == "selector.cloud"

    typo = _fails(
        stub.CordonPools,
        pb.CordonPoolsRequest(
            selector=pb.PoolSelector(cloud="aws", region="us-easst-1"), cordoned=True
        ),
    )
    assert typo.code() == grpc.StatusCode.NOT_FOUND and "us-easst-1" in (typo.details() or "")
    assert not any(p.cordoned for p in stub.ListPools(pb.ListPoolsRequest()).pools)


# --------------------------------------------------------------------------- ListNodes


def test_list_nodes_shows_boot_phases_probe_failures_and_retiring(
    client: ControlPlaneClient, svc: ControlPlaneService, sqlite_store: Store
) -> None:
    """What on-call needs to see of a node's life: how far its boot got (the phases it
    reported, in order), its engine's failed probes in a row, its address, and whether its
    replica is leaving surge-first."""
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    rid = add_replica(sqlite_store, "llama-70b", EAST, "ready", ["ready"], private_ip="10.0.0.7")
    node = f"{rid}-n0"
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with sqlite_store.session() as s:
        # Reported out of order (a retry arrived late): listed in the node's order.
        for phase, minute in (("image_pulled", 3), ("booted", 1), ("driver_ok", 2)):
            at = t0 + timedelta(minutes=minute)
            s.add(NodePhaseReport(node_id=node, phase=phase, at=at, reported_at=at))
        row = s.get(Node, node)
        assert row is not None
        row.probe_failures = 2

    [listed] = client.stub.ListNodes(pb.ListNodesRequest(model="llama-70b")).nodes
    assert [p.phase for p in listed.phases] == ["booted", "driver_ok", "image_pulled"]
    assert listed.phases[0].at.ToDatetime(tzinfo=UTC) == t0 + timedelta(minutes=1)
    assert (listed.private_ip, listed.probe_failures) == ("10.0.0.7", 2)
    assert not listed.HasField("retiring_at")

    svc.drain_node(node, "move it")  # surge-first: it retires
    [retiring] = client.stub.ListNodes(pb.ListNodesRequest(model="llama-70b")).nodes
    assert retiring.HasField("retiring_at") and retiring.state == "ready"


# --------------------------------------------------------------------------- DrainNode


def test_drain_node(
    client: ControlPlaneClient, svc: ControlPlaneService, sqlite_store: Store
) -> None:
    svc.apply_policy(example_policy(), "a.yaml", "alice")
    rid = add_replica(sqlite_store, "deepseek-r1", EAST, "ready", ["ready", "ready"])
    stub = client.stub

    surge = stub.DrainNode(pb.DrainNodeRequest(node_id=f"{rid}-n0", reason="flaky NVLink"))
    assert (surge.changed, list(surge.drained), surge.node.state) == (True, [], "ready")
    assert "retiring" in surge.message
    resp = stub.DrainNode(
        pb.DrainNodeRequest(node_id=f"{rid}-n0", reason="flaky NVLink", immediate=True)
    )
    assert resp.changed and list(resp.drained) == [f"{rid}-n0", f"{rid}-n1"]
    assert (resp.node.id, resp.node.state, resp.node.model) == (
        f"{rid}-n0",
        "draining",
        "deepseek-r1",
    )
    assert resp.node.HasField("draining_at")
    listed = stub.ListNodes(pb.ListNodesRequest(model="deepseek-r1")).nodes
    assert {n.state for n in listed} == {"draining"}
    model = stub.GetModel(pb.GetModelRequest(customer="acme", name="deepseek-r1"))
    assert (model.ready_replicas, model.draining_replicas) == (0, 1)

    again = stub.DrainNode(pb.DrainNodeRequest(node_id=f"{rid}-n1"))
    assert not again.changed and list(again.drained) == []
    assert "already draining" in again.message

    missing = _fails(stub.DrainNode, pb.DrainNodeRequest(node_id="n-ghost"))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    empty = _fails(stub.DrainNode, pb.DrainNodeRequest())
    assert empty.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(empty).field_violations == [("node_id", "required")]


# --------------------------------------------------------------------------- decisions


@pytest.fixture
def decided(svc: ControlPlaneService, sqlite_store: Store) -> None:
    record_demo_decisions(sqlite_store, svc)


@pytest.mark.usefixtures("decided")
def test_list_decisions(client: ControlPlaneClient) -> None:
    stub = client.stub
    every = stub.ListDecisions(pb.ListDecisionsRequest(limit=1000)).decisions
    assert [d.id for d in every] == sorted(d.id for d in every)
    assert {d.kind for d in every} == {"autoscale", "placement"}
    assert all(d.inputs_json == "" for d in every)  # only on request

    autoscale = stub.ListDecisions(
        pb.ListDecisionsRequest(model="llama-70b", kind="autoscale", include_inputs=True)
    ).decisions
    assert autoscale and {(d.model, d.kind) for d in autoscale} == {("llama-70b", "autoscale")}
    first = autoscale[0]
    assert first.replayable and first.HasField("desired") and first.reason and first.detail
    inputs = json.loads(first.inputs_json)
    assert {"now", "metrics", "replicas", "spec", "cold_start_s", "state"} <= set(inputs)

    pinned = [d for d in every if d.reason == "pinned"]
    assert pinned and not any(d.replayable for d in pinned)
    assert not any(d.replayable for d in every if d.kind == "placement")

    last = every[-1]
    since = stub.ListDecisions(pb.ListDecisionsRequest(since=last.at, limit=1000)).decisions
    assert since and last.id in {d.id for d in since}
    assert all((d.at.seconds, d.at.nanos) >= (last.at.seconds, last.at.nanos) for d in since)
    later = Timestamp(seconds=last.at.seconds + 1)
    assert list(stub.ListDecisions(pb.ListDecisionsRequest(since=later)).decisions) == []
    page = stub.ListDecisions(pb.ListDecisionsRequest(since_id=every[0].id, limit=2)).decisions
    assert [d.id for d in page] == [d.id for d in every[1:3]]

    bad = _fails(stub.ListDecisions, pb.ListDecisionsRequest(kind="autoscaler"))
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(bad).field_violations[0][0] == "kind"


@pytest.mark.usefixtures("decided")
def test_replay_decision(client: ControlPlaneClient) -> None:
    stub = client.stub
    every = stub.ListDecisions(pb.ListDecisionsRequest(limit=1000)).decisions
    target = next(d for d in every if d.replayable and d.reason == "wake")  # 0 -> 5 under load
    resp = stub.ReplayDecision(pb.ReplayDecisionRequest(id=target.id))
    assert resp.matches and resp.autoscaler == "ours"
    assert resp.decision.id == target.id
    assert (resp.recorded.desired, resp.recorded.reason, resp.recorded.detail) == (
        target.desired,
        target.reason,
        target.detail,
    )
    assert (resp.replayed.desired, resp.replayed.reason) == (target.desired, target.reason)

    placement = next(d for d in every if d.kind == "placement")
    err = _fails(stub.ReplayDecision, pb.ReplayDecisionRequest(id=placement.id))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "not an autoscaler output" in (err.details() or "")
    pinned = next(d for d in every if d.reason == "pinned")
    err = _fails(stub.ReplayDecision, pb.ReplayDecisionRequest(id=pinned.id))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "on-call override" in (err.details() or "")
    err = _fails(stub.ReplayDecision, pb.ReplayDecisionRequest(id=10**9))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    err = _fails(stub.ReplayDecision, pb.ReplayDecisionRequest())
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_details(err).field_violations[0][0] == "id"

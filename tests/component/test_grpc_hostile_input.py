"""Issue 26, item 7, as a hostile or careless client tried it, over a real gRPC server on
both backends: each call that used to be accepted, hang the loop, fail as INTERNAL or
come back RESOURCE_EXHAUSTED is now INVALID_ARGUMENT naming the field, quickly, with the
caller's input cut short in the message."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from controlplane.api import ControlPlaneService
from controlplane.grpc.client import ControlPlaneClient, error_details
from controlplane.grpc.server import GrpcServer, serve
from controlplane.store.db import Store
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.policy import MAX_REPLICAS
from schema.policy_file import MAX_PROBLEMS
from tests.policy_texts import edited, example_policy

U32 = 2**32 - 1
LONG = "x" * 5000


@pytest.fixture
def server(store: Store) -> Iterator[GrpcServer]:
    srv = serve(ControlPlaneService(store), "127.0.0.1:0")
    yield srv
    srv.stop(grace=0)


@pytest.fixture
def client(server: GrpcServer) -> Iterator[ControlPlaneClient]:
    with ControlPlaneClient(f"127.0.0.1:{server.port}", timeout=10) as c:
        c.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=example_policy(), applied_by="test"))
        yield c


def _invalid(call: Any, request: Any) -> list[tuple[str, str]]:
    """The field violations of a call that must fail INVALID_ARGUMENT."""
    with pytest.raises(grpc.RpcError) as err:
        call(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert LONG not in err.value.details()  # echoed input is cut short
    return error_details(err.value).field_violations


def _spec(**kw: Any) -> pb.ModelSpec:
    base: dict[str, Any] = {
        "name": "mistral-7b",
        "shapes": [pb.ShapeOption(shape="1xH100", max_concurrency=16)],
        "max_replicas": 4,
        "clouds": ["aws"],
    }
    return pb.ModelSpec(**{**base, **kw})


def test_replica_counts_past_the_global_cap_are_refused(client: ControlPlaneClient) -> None:
    huge = _spec(min_replicas=U32, max_replicas=U32)
    violations = _invalid(
        client.stub.DeployModel, pb.DeployModelRequest(customer="acme", spec=huge)
    )
    assert [f for f, _ in violations] == ["spec.min_replicas", "spec.max_replicas"]
    assert all(str(MAX_REPLICAS) in r for _, r in violations)
    at_cap = _spec(max_replicas=MAX_REPLICAS)
    client.stub.DeployModel(pb.DeployModelRequest(customer="acme", spec=at_cap))
    pin = pb.PinModelRequest(customer="acme", name="mistral-7b", replicas=U32)
    assert [f for f, _ in _invalid(client.stub.PinModel, pin)] == ["replicas"]


@pytest.mark.parametrize("big", [2**63, 2**64 - 1])
def test_ids_past_int64_are_invalid_argument_naming_the_field(
    client: ControlPlaneClient, big: int
) -> None:
    assert _invalid(client.stub.ListEvents, pb.ListEventsRequest(since_id=big))[0][0] == "since_id"
    decisions = pb.ListDecisionsRequest(since_id=big)
    assert _invalid(client.stub.ListDecisions, decisions)[0][0] == "since_id"
    assert _invalid(client.stub.ReplayDecision, pb.ReplayDecisionRequest(id=big))[0][0] == "id"
    with pytest.raises(grpc.RpcError) as err:
        next(iter(client.stub.StreamEvents(pb.StreamEventsRequest(since_id=big), timeout=5)))
    assert (
        err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "since_id" in err.value.details()
    )


def test_ids_no_row_can_have_are_empty_or_not_found(client: ControlPlaneClient) -> None:
    # Valid uint64 ids past what the store's int4 id columns hold (PostgreSQL refused them).
    assert not client.stub.ListEvents(pb.ListEventsRequest(since_id=2**40)).events
    assert not client.stub.ListDecisions(pb.ListDecisionsRequest(since_id=2**63 - 1)).decisions
    with pytest.raises(grpc.RpcError) as err:
        client.stub.ReplayDecision(pb.ReplayDecisionRequest(id=2**40))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_long_names_and_odd_text_are_invalid_argument_not_resource_exhausted(
    client: ControlPlaneClient,
) -> None:
    get = pb.GetModelRequest(customer="acme", name=LONG)
    [(field, reason)] = _invalid(client.stub.GetModel, get)
    assert field == "name" and "(5000 chars)" in reason and len(reason) < 200
    deploy = pb.DeployModelRequest(customer="acme", spec=_spec(name=LONG))
    assert [f for f, _ in _invalid(client.stub.DeployModel, deploy)] == ["spec.name"]
    apply = pb.ApplyPolicyRequest(yaml=example_policy(), source=LONG)
    assert [f for f, _ in _invalid(client.stub.ApplyPolicy, apply)] == ["source"]
    # PostgreSQL cannot hold a NUL character: it failed there as INTERNAL.
    events = pb.ListEventsRequest(customer="ac\x00me")
    assert _invalid(client.stub.ListEvents, events) == [("customer", "contains a NUL character")]
    since = pb.ListDecisionsRequest(since=Timestamp(seconds=2**62))
    assert [f for f, _ in _invalid(client.stub.ListDecisions, since)] == ["since"]


def test_a_policy_with_hundreds_of_problems_is_one_bounded_invalid_argument(
    client: ControlPlaneClient,
) -> None:
    fields = "".join(f"    colour{i}: blue\n" for i in range(300))
    text = edited(example_policy(), "    priority: 50\n", f"    priority: 50\n{fields}")
    with pytest.raises(grpc.RpcError) as err:
        client.stub.ApplyPolicy(pb.ApplyPolicyRequest(yaml=text, source="p.yaml"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # was RESOURCE_EXHAUSTED
    problems = error_details(err.value).policy_problems
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1].reason == f"{300 - MAX_PROBLEMS} more problems not shown: fix these first"


def test_a_huge_model_spec_is_refused_before_it_is_converted(client: ControlPlaneClient) -> None:
    shapes = [pb.ShapeOption(shape="1xH100", max_concurrency=16)] * 200_000
    request = pb.DeployModelRequest(customer="acme", spec=_spec(shapes=shapes))
    started = time.monotonic()
    [(field, reason)] = _invalid(client.stub.DeployModel, request)
    assert time.monotonic() - started < 2.0  # was 12 s and 370 MB
    assert (field, reason) == ("spec.shapes", "at most 32 items (got 200000)")


def test_an_alias_bomb_is_a_problem_not_a_minute_of_cpu(client: ControlPlaneClient) -> None:
    bomb = "customer: acme\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10)
    )
    started = time.monotonic()
    got = client.stub.ValidatePolicy(pb.ValidatePolicyRequest(yaml=bomb, source="bomb.yaml"))
    assert time.monotonic() - started < 2.0  # was 36 s of CPU and 340 MB
    [problem] = got.problems
    assert not got.valid and (problem.file, problem.line) == ("bomb.yaml", 8)
    assert "aliases are expanded" in problem.reason

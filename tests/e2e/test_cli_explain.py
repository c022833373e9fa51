"""``gpucap explain MODEL`` (and gRPC ExplainModel) against a running API server: every pool
the model's policy allows, fastest first, with its expected time-to-ready phase by phase
and where each figure comes from; a cordoned pool says so; bad input gets the right code."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from controlplane.api.fit import usable_pools
from controlplane.grpc.client import ControlPlaneClient
from controlplane.store.models import Node, NodePhaseReport, Pool
from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.policy_file import parse_policy
from tests.component.oncall_kit import add_replica
from tests.e2e.conftest import Daemon, Gpucap
from tests.policy_texts import example_policy

EAST = "acme/acme-aws/us-east-1/p5.48xlarge"
# A node of llama-70b in EAST booted: 2 min to booted, 1 to the driver, 3 to the image, 1 to
# the weights (141 GB), 2 to ready.
REPORTED: tuple[tuple[str, int], ...] = (
    ("booted", 2),
    ("driver_ok", 3),
    ("image_pulled", 6),
    ("weights_fetched", 7),
    ("engine_started", 8),
    ("ready", 9),
)


def _booted_in_east(api: Daemon) -> None:
    """A node created an hour ago (boots older than a week teach nothing)."""
    rid = add_replica(api.store, "llama-70b", EAST, "ready", ["ready"])
    created = datetime.now(UTC) - timedelta(hours=1)
    with api.store.session() as s:
        node = s.get_one(Node, f"{rid}-n0")
        node.pending_at = created
        for phase, minute in REPORTED:
            at = created + timedelta(minutes=minute)
            s.add(NodePhaseReport(node_id=node.id, phase=phase, at=at, reported_at=at))


def test_explain_lists_the_allowed_pools_fastest_first(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    _booted_in_east(api)
    api.service.cordon_pool(EAST.replace("us-east-1", "us-west-2"), True, "maintenance")

    out = gpucap("explain", "llama-70b", "-o", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    pools = data["pools"]
    policy = parse_policy(example_policy(), "p.yaml").policy
    [model] = [m for m in policy.models if m.name == "llama-70b"]
    assert {p["pool_id"] for p in pools} == {p.id for p in usable_pools(policy, model)}
    seconds = [p["expected_ready_s"] for p in pools]
    assert seconds == sorted(seconds)
    # EAST learned from its boot: 9 minutes, every phase learned, and the fastest.
    east = pools[0]
    assert (east["pool_id"], east["source"], east["expected_ready_s"]) == (EAST, "phases", 540)
    assert {ph["source"] for ph in east["phases"]} == {"learned"}
    assert [ph["name"] for ph in east["phases"]] == [
        "capacity_vm",
        "bootstrap",
        "image",
        "fetch",
        "load_init",
    ]
    # A pool no node reported from: its cloud's defaults, with this model's engine time.
    gcp = next(p for p in pools if p["cloud"] == "gcp")
    assert gcp["source"] == "phases"
    assert [ph["source"] for ph in gcp["phases"]] == ["default"] * 4 + ["learned"]
    west = next(p for p in pools if "us-west-2" in p["pool_id"])
    assert west["cordoned"] is True
    # Every other pool of the customer, with the policy filter it fails (llama-70b runs on
    # 8xH100 or 8xH200 nodes: the 1xH100 pools are the ones it rules out).
    with api.store.session() as s:
        others = {p.id for p in s.query(Pool).filter_by(customer="acme", active=True)}
    others -= {p["pool_id"] for p in pools}
    assert others and {x["pool_id"] for x in data["excluded"]} == others
    assert {x["filter"] for x in data["excluded"]} == {"shape_not_accepted"}

    table = gpucap("explain", "acme/llama-70b")
    assert table.exit_code == 0, table.output
    assert EAST in table.stdout and "9.0m" in table.stdout and "cordoned" in table.stdout


def test_explain_refuses_what_is_not_there(gpucap: Gpucap, api: Daemon) -> None:
    api.service.apply_policy(example_policy(), "p.yaml", "alice")
    missing = gpucap("explain", "acme/nope")
    assert missing.exit_code != 0 and "not found" in missing.stderr
    assert "Traceback" not in missing.output
    with ControlPlaneClient(api.addr) as c, pytest.raises(grpc.RpcError) as err:
        c.stub.ExplainModel(pb.ExplainModelRequest(customer="acme"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "model" in (err.value.details() or "")

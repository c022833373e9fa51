"""The simulated cloud's indexes (``providers.sim.state``: ``Table.indexes``): a region's
listing, a create's find-first and the capacity checks read one bucket, and give what a scan
of every instance gave, in memory (whether written through the cloud's verbs or straight
into the live dict, as tests do) and on a shared file (where ``where`` scans)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from providers.base import NodeRequest
from providers.errors import CapacityUnavailable
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimProvider, SimTimings
from providers.sim.cloud import INSTANCES, open_shared
from providers.sim.state import _IndexedDict
from schema.types import Cloud

TIMINGS = SimTimings(boot_s=0.0, serve_s=0.0, terminate_s=1.0)


@dataclass
class Clock:
    t: float = 1000.0

    def __call__(self) -> float:
        return self.t


def make(kind: str, tmp_path: Path, clock: Clock, **kwargs: object) -> SimCloud:
    if kind == "file":
        return open_shared(tmp_path / "sim.db", timings=TIMINGS, clock=clock, **kwargs)
    return SimCloud(timings=TIMINGS, clock=clock, **kwargs)  # type: ignore[arg-type]


def req(intent: str, region: str = "us-east-1") -> NodeRequest:
    return NodeRequest(intent_id=intent, instance_type="p5.4xlarge", region=region)


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_listing_find_first_and_capacity_read_the_index(kind: str, tmp_path: Path) -> None:
    clock = Clock()
    sim = make(kind, tmp_path, clock)
    sim.set_capacity(Cloud.AWS, "us-east-1", "p5.4xlarge", 2)
    a = SimProvider(Cloud.AWS, "acct-a", sim, retry=NO_RETRY)
    b = SimProvider(Cloud.AWS, "acct-b", sim, retry=NO_RETRY)

    first = a.create_node(req("n1")).node
    assert a.create_node(req("n1")) == a.create_node(req("n1"))  # found, not made again
    assert not a.create_node(req("n1")).created
    a.create_node(req("n2", "us-west-2"))
    b.create_node(req("n3"))
    assert [n.intent_id for n in a.list_nodes("us-east-1", {})] == ["n1"]
    assert [n.intent_id for n in a.list_nodes("us-west-2", {})] == ["n2"]
    assert [n.intent_id for n in b.list_nodes("us-east-1", {})] == ["n3"]
    assert sim.in_use(Cloud.AWS, "us-east-1", "p5.4xlarge") == 2
    with pytest.raises(CapacityUnavailable):  # two of two hosts held, across accounts
        b.create_node(req("n4"))

    a.terminate_node("us-east-1", first.instance_id)
    assert a.list_nodes("us-east-1", {})[0].status.value == "stopping"
    with pytest.raises(CapacityUnavailable):  # still holds its host while it stops
        b.create_node(req("n4"))
    clock.t += 2.0
    assert a.list_nodes("us-east-1", {}) == []
    assert b.create_node(req("n4")).created  # its host is free now
    # the terminated instance is still what its token finds (created=False), as before
    assert not a.create_node(req("n1")).created
    # zones are chosen by least use: n4 did not land where n3 is (n1's zone is free too)
    zones = {i.intent_id: i.zone for i in sim.instances.values()}
    assert zones["n4"] != zones["n3"]


def test_writes_straight_into_the_live_dict_are_indexed() -> None:
    sim = SimCloud(timings=TIMINGS, clock=Clock())
    a = SimProvider(Cloud.AWS, "acct-a", sim, retry=NO_RETRY)
    node = a.create_node(req("n1")).node
    first = sim.instances[node.instance_id]
    sim.instances["sim-aws-999999"] = replace(first, instance_id="sim-aws-999999")  # (a test's dup)
    assert [n.instance_id for n in a.list_nodes("us-east-1", {})] == [
        node.instance_id,
        "sim-aws-999999",
    ]
    del sim.instances[node.instance_id]
    assert [n.instance_id for n in a.list_nodes("us-east-1", {})] == ["sim-aws-999999"]
    sim.instances.pop("sim-aws-999999")
    assert a.list_nodes("us-east-1", {}) == []
    assert sim.instances_with_intent("acct-a", "n1") == []


def test_indexed_dict_keeps_buckets_on_every_write() -> None:
    d = _IndexedDict((("first", lambda v: v[0]),))
    d["a"] = "x1"
    d["b"] = "x2"
    d.setdefault("c", "y1")
    d.update({"e": "y3"})
    assert list(d.bucket("first", "x").values()) == ["x1", "x2"]
    d["a"] = "x9"  # same bucket: keeps its place
    assert list(d.bucket("first", "x")) == ["a", "b"]
    d["b"] = "y2"  # moves
    assert list(d.bucket("first", "x")) == ["a"]
    assert list(d.bucket("first", "y")) == ["c", "e", "b"]
    k, v = d.popitem()
    assert (k, v) == ("e", "y3") and list(d.bucket("first", "y")) == ["c", "b"]
    d.clear()
    assert d.bucket("first", "x") == {} and d.bucket("first", "y") == {}
    assert INSTANCES.index("site") is not None
    with pytest.raises(KeyError):
        INSTANCES.index("nope")

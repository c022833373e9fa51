"""Placement is a pure function: table-driven cases and properties, no database."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from controlplane.placement import (
    ModelView,
    PlacementInput,
    PoolView,
    ReplicaView,
    capacity_units,
    place,
)
from schema.policy import Model, Overflow, ShapeOption
from schema.types import CapacityTier

MODEL = Model(
    name="llama-70b",
    shapes=[
        ShapeOption(shape="8xH100", max_concurrency=64),
        ShapeOption(shape="8xH200", max_concurrency=96),
    ],
    max_replicas=50,
)


def pool(pid: str, **kw: object) -> PoolView:
    base = PoolView(
        id=pid,
        cloud="aws",
        account="acme-aws",
        region="us-east-1",
        instance_type="p5.48xlarge",
        gpu_shape="8xH100",
        tier=CapacityTier.ON_DEMAND,
        price_usd_per_hour=55.04,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def inp(desired: float, pools: list[PoolView], **kw: object) -> PlacementInput:
    base = PlacementInput(
        model=ModelView("acme", "llama-70b", MODEL),
        desired=desired,
        replicas=(),
        pools=tuple(pools),
        overflow=Overflow(),
        now=1000.0,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_commitment_first_then_cheapest_per_unit_of_capacity():
    pools = [
        pool("gcp-h100", cloud="gcp", price_usd_per_hour=88.49, instance_type="a3-highgpu-8g"),
        pool("aws-h200", gpu_shape="8xH200", price_usd_per_hour=63.3, instance_type="p5en"),
        pool("aws-commit", tier=CapacityTier.COMMITTED, committed=2),
    ]
    plan = place(inp(4, pools))
    # 2 on the commitment; then 8xH200 at 63.3/96 beats 8xH100 at 55.04/64 per slot; the
    # commitment pool past its commitment is billed on demand like any other.
    assert [x.pool_id for x in plan.launches] == [
        "aws-commit",
        "aws-commit",
        "aws-h200",
        "aws-h200",
    ]
    assert plan.launches[2].gpu_shape == "8xH200"
    assert plan.unplaced == 0


def test_filters_count_every_rejection():
    pools = [
        pool("wrong-cloud", cloud="oci"),
        pool("cordoned", cordoned=True),
        pool("blocked", unavailable_until=2000.0),
        pool("expired-block", unavailable_until=999.0),
        pool("wrong-shape", gpu_shape="1xH100", instance_type="p5.4xlarge"),
        pool("shared", tier=CapacityTier.SHARED),
    ]
    spec = MODEL.model_copy(update={"clouds": ["aws", "gcp"]})
    plan = place(inp(2, pools, model=ModelView("acme", "llama-70b", spec)))
    assert [x.pool_id for x in plan.launches] == ["expired-block", "expired-block"]
    assert plan.rejections == {
        "cloud_not_allowed": 1,
        "cordoned": 1,
        "unavailable": 1,
        "shape_not_accepted": 1,
        "overflow_not_allowed": 1,
    }


def test_overflow_respects_replica_and_dollar_caps():
    pools = [pool("shared", tier=CapacityTier.SHARED, price_usd_per_hour=80.0)]
    over = Overflow(enabled=True, max_replicas=5, max_usd_per_hour=250.0)
    plan = place(
        inp(5, pools, overflow=over, shared_replicas_in_use=1, shared_usd_per_hour_in_use=80)
    )
    assert len(plan.launches) == 2  # 80 + 2 x 80 = 240 <= 250; a third would be 320
    assert plan.unplaced == 3


def test_overflow_only_for_listed_models():
    pools = [pool("shared", tier=CapacityTier.SHARED)]
    over = Overflow(enabled=True, max_replicas=10, models=["other-model"])
    plan = place(inp(1, pools, overflow=over))
    assert plan.launches == () and plan.rejections == {"overflow_not_allowed": 1}


def test_capacity_hint_spills_to_the_next_pool():
    pools = [
        pool("small", capacity_hint=1, price_usd_per_hour=10.0),
        pool("big", price_usd_per_hour=60.0),
    ]
    plan = place(inp(3, pools))
    assert [x.pool_id for x in plan.launches] == ["small", "big", "big"]


def test_gang_shape_launches_nodes_together():
    spec = Model(name="r1", shapes=[ShapeOption(shape="2x8xH100", max_concurrency=40)])
    plan = place(inp(1, [pool("p")], model=ModelView("acme", "r1", spec)))
    (launch,) = plan.launches
    assert launch.nodes == 2 and launch.gpu_shape == "2x8xH100"
    assert launch.price_usd_per_hour == 2 * 55.04


def test_drain_order_shared_first_then_not_ready_then_dearest():
    pools = [
        pool("commit", tier=CapacityTier.COMMITTED, committed=5),
        pool("od-cheap", price_usd_per_hour=40.0),
        pool("od-dear", price_usd_per_hour=90.0),
        pool("shared", tier=CapacityTier.SHARED),
    ]
    replicas = (
        ReplicaView("r-commit", "commit", "8xH100", ready=True, created_at=1.0),
        ReplicaView("r-cheap", "od-cheap", "8xH100", ready=True, created_at=2.0),
        ReplicaView("r-dear", "od-dear", "8xH100", ready=True, created_at=3.0),
        ReplicaView("r-cheap-starting", "od-cheap", "8xH100", ready=False, created_at=4.0),
        ReplicaView("r-shared", "shared", "8xH100", ready=True, created_at=5.0),
    )
    plan = place(inp(1, pools, replicas=replicas))
    assert [d.replica_id for d in plan.drains] == [
        "r-shared",
        "r-cheap-starting",
        "r-dear",
        "r-cheap",
    ]


def test_replicas_in_disallowed_pools_move():
    pools = [pool("aws"), pool("gcp", cloud="gcp", instance_type="a3-highgpu-8g")]
    replicas = (
        ReplicaView("r-gcp", "gcp", "8xH100", ready=True, created_at=1.0),
        ReplicaView("r-gone", "removed-pool", "8xH100", ready=True, created_at=2.0),
        ReplicaView("r-aws", "aws", "8xH100", ready=True, created_at=3.0),
    )
    spec = MODEL.model_copy(update={"clouds": ["aws"]})  # the policy dropped gcp
    plan = place(inp(3, pools, replicas=replicas, model=ModelView("acme", "llama-70b", spec)))
    assert {d.replica_id for d in plan.drains} == {"r-gcp", "r-gone"}
    assert [x.pool_id for x in plan.launches] == ["aws", "aws"]


@given(
    desired=st.integers(0, 40),
    live=st.integers(0, 40),
    hints=st.lists(st.one_of(st.none(), st.integers(0, 10)), min_size=1, max_size=6),
)
def test_properties(desired: int, live: int, hints: list[int | None]) -> None:
    pools = [
        pool(f"p{i}", capacity_hint=h, price_usd_per_hour=50.0 + i) for i, h in enumerate(hints)
    ]
    replicas = tuple(
        ReplicaView(f"r{i}", "p0", "8xH100", ready=i % 2 == 0, created_at=float(i))
        for i in range(live)
    )
    plan = place(inp(desired, pools, replicas=replicas))
    # Never both launches and drains; never more than asked; deterministic.
    assert not (plan.launches and plan.drains)
    assert len(plan.launches) + plan.unplaced == max(0, desired - live)
    assert len(plan.drains) == max(0, live - desired)
    assert plan == place(inp(desired, pools, replicas=replicas))
    # Capacity hints are never exceeded.
    for i, h in enumerate(hints):
        if h is not None:
            assert sum(x.nodes for x in plan.launches if x.pool_id == f"p{i}") <= h


# --- capacity units: a model of several shapes ------------------------------------------

H200_FIRST = Model(  # the preferred shape serves more; overflow is onto a smaller one
    name="llama-70b",
    shapes=[
        ShapeOption(shape="8xH200", max_concurrency=96),
        ShapeOption(shape="8xH100", max_concurrency=64),
    ],
    max_replicas=50,
)


def units(model: Model, shapes: list[str]) -> float:
    return sum(capacity_units(model, s) for s in shapes)


def test_a_larger_shape_counts_for_more_than_one_replica():
    assert capacity_units(MODEL, "8xH200") == 1.5
    assert capacity_units(MODEL, "8xH100") == 1.0
    assert capacity_units(MODEL, "8xA100") == 1.0  # not in the policy (any more): one
    # 3 units of 8xH100 capacity on 8xH200 pools (cheaper per slot): two replicas, not three.
    plan = place(inp(3, [pool("h200", gpu_shape="8xH200", price_usd_per_hour=63.3)]))
    assert [x.gpu_shape for x in plan.launches] == ["8xH200", "8xH200"]
    assert plan.unplaced == 0 and "3 wanted" in plan.detail


def test_overflow_onto_a_smaller_shape_launches_enough_of_it():
    # 2 replicas of 8xH200 (192 slots) wanted, only 8xH100 (64 slots) left: three of them.
    model = ModelView("acme", "llama-70b", H200_FIRST)
    plan = place(inp(2, [pool("h100")], model=model))
    assert [x.gpu_shape for x in plan.launches] == ["8xH100"] * 3
    assert plan.unplaced == 0
    # A capacity hint that lets only two through leaves one replica's worth unplaced.
    plan = place(inp(2, [pool("h100", capacity_hint=2)], model=model))
    assert len(plan.launches) == 2 and plan.unplaced == 1
    # max_replicas bounds the replicas run, not only the units asked for.
    capped = ModelView("acme", "llama-70b", H200_FIRST.model_copy(update={"max_replicas": 2}))
    plan = place(inp(2, [pool("h100")], model=capped))
    assert len(plan.launches) == 2 and plan.unplaced == 1
    assert "max_replicas 2 reached" in plan.detail


def test_a_scale_down_drains_only_what_leaves_desired_covered():
    pools = [pool("h100", price_usd_per_hour=40.0), pool("h200", gpu_shape="8xH200")]
    replicas = (
        ReplicaView("r-h200-a", "h200", "8xH200", ready=True, created_at=1.0),
        ReplicaView("r-h200-b", "h200", "8xH200", ready=True, created_at=2.0),
        ReplicaView("r-h100", "h100", "8xH100", ready=True, created_at=3.0),
    )
    # 4 units live, 3 wanted: the dearer 8xH200s come first in the drain order, but one
    # would leave 2.5; the 8xH100 leaves exactly 3.
    plan = place(inp(3, pools, replicas=replicas))
    assert [d.replica_id for d in plan.drains] == ["r-h100"]
    # 2 wanted: one 8xH200 goes (2.5 left), then nothing else fits.
    plan = place(inp(2, pools, replicas=replicas))
    assert [d.replica_id for d in plan.drains] == ["r-h200-b"]
    assert place(inp(4, pools, replicas=replicas)).drains == ()


def test_holding_the_live_units_launches_and_drains_nothing_but_replacements():
    # A paused model holds its live units: four 64-slot replicas are 2.67 of its 96-slot
    # first shape. Its whole count (2) would drain one of them.
    h100 = [pool("h100")]
    replicas = tuple(
        ReplicaView(f"r{i}", "h100", "8xH100", ready=True, created_at=float(i)) for i in range(4)
    )
    model = ModelView("acme", "llama-70b", H200_FIRST)
    held = units(H200_FIRST, ["8xH100"] * 4)
    assert place(inp(held, h100, replicas=replicas, model=model)).drains == ()
    assert place(inp(held, h100, replicas=replicas, model=model)).launches == ()
    assert len(place(inp(2, h100, replicas=replicas, model=model)).drains) == 1
    # One of them in a pool the policy no longer allows: moved, and replaced.
    moved = (ReplicaView("r-gone", "removed-pool", "8xH100", True, 9.0), *replicas[1:])
    plan = place(inp(held, h100, replicas=moved, model=model))
    assert [d.replica_id for d in plan.drains] == ["r-gone"]
    assert [x.pool_id for x in plan.launches] == ["h100"]


@given(
    desired=st.integers(0, 40),
    live=st.lists(st.sampled_from(["8xH100", "8xH200"]), max_size=30),
    offered=st.lists(st.sampled_from(["8xH100", "8xH200"]), min_size=1, max_size=3),
    first=st.sampled_from([MODEL, H200_FIRST]),
)
def test_capacity_unit_properties(
    desired: int, live: list[str], offered: list[str], first: Model
) -> None:
    pools = [pool(f"p{i}", gpu_shape=s, price_usd_per_hour=50.0 + i) for i, s in enumerate(offered)]
    replicas = tuple(
        ReplicaView(f"r{i}", "p0", s, ready=i % 2 == 0, created_at=float(i))
        for i, s in enumerate(live)
    )
    model = ModelView("acme", "llama-70b", first)
    plan = place(inp(desired, pools, replicas=replicas, model=model))
    assert not (plan.launches and plan.drains)
    before = units(first, live)
    launched = [x.gpu_shape for x in plan.launches]
    drained = {d.replica_id for d in plan.drains}
    after = (
        before
        + units(first, launched)
        - sum(capacity_units(first, r.gpu_shape) for r in replicas if r.id in drained)
    )
    # Desired is covered (pools here have no limits; max_replicas caps the replicas run),
    # never by more than the last launch, and a drain never uncovers it; nothing is
    # launched when it is covered ...
    if len(live) + len(launched) < first.max_replicas:
        assert plan.unplaced == 0 and after >= desired - 1e-9
    else:
        assert plan.unplaced == max(0, math.ceil(desired - after - 1e-9))
        assert not plan.unplaced or "max_replicas" in plan.detail
    if launched:
        assert after - capacity_units(first, launched[-1]) < desired
    if before >= desired - 1e-9:
        assert not launched
    # ... and a scale-down happens whenever some replica can go.
    if any(before - capacity_units(first, s) >= desired - 1e-9 for s in live):
        assert plan.drains

"""Usage metering on SQLite and PostgreSQL: what ``ControlPlaneService.usage`` answers equals
the sum of the nodes' lifetimes (request to release, less their stops) written as the
loop writes them, over ranges that cut them; and through the real control loop, with a
warm pool's stop and resume, on the simulated cloud."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from controlplane.api import ControlPlaneService, InvalidArgumentError, NotFoundError
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, NodeStop, Pool, Replica
from controlplane.store.usage import keep_stop
from tests.component import test_control_loop as base
from tests.component import test_warm_pool_loop as warm
from tests.component.test_control_loop import run
from tests.policy_texts import example_policy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=10)
EAST = "acme/acme-aws/us-east-1/p5.48xlarge"  # committed, 8 GPUs, $55.04/h
SMALL = "acme/acme-aws/us-east-1/p5.4xlarge"  # on demand, 1 GPU, $6.88/h
GCP = "acme/acme-gcp/us-central1/a3-highgpu-8g"  # on demand, 8 GPUs, $70/h
OCI = "acme/shared-oci/us-ashburn-1/BM.GPU.H100.8"  # shared (overflow), 8 GPUs, $80/h

loop, world = base.loop, base.world  # (the loop's fixtures: the demo policy, a sim world)


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def add_node(store: Store, node_id: str, model: str, pool_id: str, **stamps: object) -> None:
    """A replica of one node, as the loop records it: its pool's price and tier recorded
    with the intent, an instance once created, the given state stamps."""
    with store.session() as s:
        model_id = s.scalar(select(ModelRow.id).where(ModelRow.name == model))
        pool = s.get(Pool, pool_id)
        assert model_id is not None and pool is not None
        s.add(
            Replica(
                id=f"r-{node_id}",
                model_id=model_id,
                pool_id=pool_id,
                gpu_shape=pool.gpu_shape,
                state=str(stamps.get("state", "ready")),
                created_at=stamps.get("pending_at", T0),
            )
        )
        s.flush()
        fields: dict[str, object] = {
            "state": "ready",
            "pending_at": T0,
            "instance_id": f"i-{node_id}",
            "price_usd_per_hour": pool.price_usd_per_hour,
            "tier": pool.tier,
        }
        fields.update(stamps)
        s.add(
            Node(
                id=node_id,
                replica_id=f"r-{node_id}",
                pool_id=pool_id,
                customer=pool.customer,
                account=pool.account,
                cloud=pool.cloud,
                region=pool.region,
                instance_type=pool.instance_type,
                idempotency_token=node_id,
                **fields,
            )
        )


@pytest.fixture
def service(store: Store) -> ControlPlaneService:
    svc = ControlPlaneService(store, clock=lambda: NOW)
    svc.apply_policy(example_policy(), "examples/policy.yaml", "alice")
    return svc


@pytest.fixture
def fleet(store: Store, service: ControlPlaneService) -> Store:
    """Six nodes of acme, each a case; their lifetimes (hours) and costs in comments."""
    # 1..4 h, terminated: 3 h x 8 GPUs at $55.04
    add_node(store, "n-done", "llama-70b", EAST, state="terminated", pending_at=h(1),
             terminated_at=h(4))  # fmt: skip
    # 2..3 h, then its instance was lost (failed, no terminate): 1 h x 8 at $70
    add_node(store, "n-lost", "llama-70b", GCP, state="failed", pending_at=h(2),
             failed_at=h(3))  # fmt: skip
    # A create that never made an instance: nothing
    add_node(store, "n-nocreate", "llama-70b", GCP, state="failed", pending_at=h(2),
             failed_at=h(2.5), instance_id=None)  # fmt: skip
    # 6 h .. now (10 h), still ready: 4 h x 1 GPU at $6.88
    add_node(store, "n-running", "llama-8b", SMALL, pending_at=h(6))
    # Warm: 0..2 h, stopped 2..5 h, resumed 5 h, ready since: 7 h x 8 at $80
    add_node(store, "n-resumed", "llama-70b", OCI, pending_at=h(0), stopped_at=h(2),
             resuming_at=h(5))  # fmt: skip
    # Warm, stopped at 1.5 h and waiting since: 0.5 h x 8 at $80
    add_node(store, "n-waiting", "llama-70b", OCI, state="stopped", pending_at=h(1),
             stopped_at=h(1.5))  # fmt: skip
    return store


def _hours(service: ControlPlaneService, *keys: str, **kw: object) -> dict[tuple[str, ...], float]:
    view = service.usage("acme", group_by=list(keys), **kw)  # type: ignore[arg-type]
    return {tuple(getattr(r, k) for k in keys): round(r.gpu_hours, 9) for r in view.rows}


def test_usage_is_the_sum_of_node_lifetimes(fleet: Store, service: ControlPlaneService) -> None:
    view = service.usage("acme")
    [row] = view.rows
    assert (view.since, view.until) == (datetime(1970, 1, 1, tzinfo=UTC), NOW)
    assert row.nodes == 5  # (the create that made nothing bills nothing)
    assert row.node_hours == pytest.approx(3 + 1 + 4 + 7 + 0.5)
    assert row.gpu_hours == pytest.approx(3 * 8 + 1 * 8 + 4 * 1 + 7 * 8 + 0.5 * 8)
    assert row.cost_usd == pytest.approx(3 * 55.04 + 70 + 4 * 6.88 + 7 * 80 + 0.5 * 80)
    assert view.cost_usd == row.cost_usd


def test_ranges_cut_lives_and_stops(fleet: Store, service: ControlPlaneService) -> None:
    # [3 h, 6 h): n-done 1 h, n-lost none ([2, 3) ends at the range's start), n-resumed
    # 1 h (5..6; stopped 3..5), n-waiting none, n-running none (from 6 h).
    hours = _hours(service, "model", since=h(3), until=h(6))
    assert hours == {("llama-70b",): 1 * 8 + 1 * 8}
    # Adjacent ranges add up to the whole.
    parts = [_hours(service, since=h(a), until=h(b)).get((), 0.0) for a, b in ((0, 3), (3, 10))]
    assert sum(parts) == pytest.approx(_hours(service)[()])
    # A range that ends in the future is answered up to now.
    later = service.usage("acme", since=h(9), until=NOW + timedelta(days=1))
    assert later.until == NOW and later.rows[0].node_hours == pytest.approx(2.0)  # (8 and 1 GPUs)


def test_usage_groups_by_model_tier_and_cloud(fleet: Store, service: ControlPlaneService) -> None:
    assert _hours(service, "tier") == {
        ("committed",): 24.0,
        ("on_demand",): 8.0 + 4.0,
        ("shared",): 56.0 + 4.0,
    }
    assert _hours(service, "model", "cloud") == {
        ("llama-70b", "aws"): 24.0,
        ("llama-70b", "gcp"): 8.0,
        ("llama-70b", "oci"): 60.0,
        ("llama-8b", "aws"): 4.0,
    }
    everyone = service.usage(None, group_by=["customer"])
    assert [r.customer for r in everyone.rows] == ["acme"]


def test_a_failed_node_bills_until_its_instance_is_released(
    fleet: Store, service: ControlPlaneService
) -> None:
    """A node whose boot failed at 5 h is drained (failed_at stamped, its instance still
    there): it bills on until it is terminated, not up to its failure."""
    add_node(fleet, "n-timeout", "deepseek-r1", GCP, state="draining", pending_at=h(4),
             failed_at=h(5), draining_at=h(5))  # fmt: skip
    assert _hours(service, "model")[("deepseek-r1",)] == 6 * 8  # 4 h .. now
    with fleet.session() as s:
        row = s.get(Node, "n-timeout")
        assert row is not None
        row.state, row.terminated_at = "terminated", h(7)
    assert _hours(service, "model")[("deepseek-r1",)] == 3 * 8


def test_a_node_stopped_and_resumed_twice_bills_neither_stop(
    fleet: Store, service: ControlPlaneService
) -> None:
    """The row holds its latest stop only; the loop keeps the earlier one (``keep_stop``,
    as reconcile's move to stopped calls it) before writing the new stamps."""
    with fleet.session() as s:
        row = s.get(Node, "n-resumed")
        assert row is not None
        keep_stop(s, row)  # stopped again at 7 h: the 2..5 h stop is kept
        row.state, row.stopped_at = "stopped", h(7)
    with fleet.session() as s:
        row = s.get(Node, "n-resumed")
        assert row is not None
        row.state, row.resuming_at = "resuming", h(8)  # and resumed at 8 h
    with fleet.session() as s:
        assert [(k.stopped_at, k.resumed_at) for k in s.scalars(select(NodeStop))] == [(h(2), h(5))]
    # 0..2, 5..7, 8..10: 6 h of 8 GPUs
    assert _hours(service, "model", "cloud")[("llama-70b", "oci")] == 6 * 8 + 0.5 * 8
    assert _hours(service, "cloud", since=h(4), until=h(9))[("oci",)] == (2 + 1) * 8


def test_a_node_bills_its_price_and_tier_as_of_its_launch(
    fleet: Store, service: ControlPlaneService
) -> None:
    """The policy drops the commit and the price of EAST changes: its node launched before
    stays committed, at the old price; an intent recorded before the columns existed (null)
    is billed at its pool's."""
    with fleet.session() as s:
        pool = s.get(Pool, EAST)
        assert pool is not None
        pool.price_usd_per_hour, pool.tier = 1.0, "on_demand"
    view = service.usage("acme", group_by=["tier"])
    committed = next(r for r in view.rows if r.tier == "committed")
    assert committed.cost_usd == pytest.approx(3 * 55.04)
    with fleet.session() as s:
        node = s.get(Node, "n-done")
        assert node is not None
        node.price_usd_per_hour, node.tier = None, None
    view = service.usage("acme", group_by=["tier"])
    assert "committed" not in {r.tier for r in view.rows}
    on_demand = next(r for r in view.rows if r.tier == "on_demand")
    assert on_demand.cost_usd == pytest.approx(3 * 1.0 + 70 + 4 * 6.88)


def test_bad_requests_name_the_field(fleet: Store, service: ControlPlaneService) -> None:
    with pytest.raises(InvalidArgumentError) as bad:
        service.usage("acme", since=h(5), until=h(5))
    assert bad.value.field == "until"
    with pytest.raises(InvalidArgumentError) as bad:
        service.usage("acme", group_by=["tier", "region"])
    assert bad.value.field == "group_by[1]"
    with pytest.raises(NotFoundError):
        service.usage("nobody")
    with pytest.raises(InvalidArgumentError) as bad:
        service.usage("a" * 600)
    assert bad.value.field == "customer"


def _lifetimes_gpu_hours(store: Store, now: datetime) -> float:
    """GPU-hours of every node with an instance, from its rows, counted here the plain way:
    request to release (or now), less its recorded stops."""
    from schema.catalog import INSTANCE_TYPES_BY_NAME

    total = 0.0
    with store.session() as s:
        kept = list(s.scalars(select(NodeStop)))
        for n in s.scalars(select(Node).where(Node.instance_id.is_not(None))):
            end = n.terminated_at or n.failed_at or now
            seconds = (end - n.pending_at).total_seconds()
            stops = [(k.stopped_at, k.resumed_at) for k in kept if k.node_id == n.id]
            if n.stopped_at is not None:
                back = n.resuming_at if n.resuming_at and n.resuming_at >= n.stopped_at else None
                stops.append((n.stopped_at, back or end))
            seconds -= sum((b - a).total_seconds() for a, b in stops)
            total += seconds * INSTANCE_TYPES_BY_NAME[n.instance_type].gpus / 3600
    return total


def test_the_loop_records_what_usage_bills(loop, world, store: Store) -> None:  # type: ignore[no-untyped-def]
    """The real loop on the simulated cloud: a warm pool fills (a node booted, then
    stopped), a scale-up resumes it, another fills; every node carries its pool's price
    and tier, and usage equals the nodes' lifetimes less the stopped time."""
    ctl, load = loop
    sim, clock = world
    warm._apply_warm_policy(store)
    load.load[("demo", "chat-8b")] = 5.0
    run(ctl, clock, 30)
    load.load[("demo", "chat-8b")] = 40.0
    run(ctl, clock, 40)
    now = datetime.fromtimestamp(clock.t, UTC)
    service = ControlPlaneService(store, clock=lambda: now)
    with store.session() as s:
        nodes = list(s.scalars(select(Node)))
        prices = {p.id: p.price_usd_per_hour for p in s.scalars(select(Pool))}
        tiers = {p.id: p.tier for p in s.scalars(select(Pool))}
        assert nodes and all(n.price_usd_per_hour == prices[n.pool_id] for n in nodes)
        assert all(n.tier == tiers[n.pool_id] for n in nodes)
        assert any(n.stopped_at and n.resuming_at and n.resuming_at > n.stopped_at for n in nodes)
    view = service.usage("demo")
    assert view.gpu_hours == pytest.approx(_lifetimes_gpu_hours(store, now))
    assert view.gpu_hours > 0

"""On-call drain and cordon through the service, carried out by the real control loop
(simulated cloud, real database on both backends, hand-driven clock): the runbook's
"drain a node" and "cordon a region" end to end, asserted on the store and at the cloud."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext
from controlplane.placement import capacity_units
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Model, Node, Replica
from controlplane.telemetry import Metrics
from providers.sim import SimCloud, SimTimings
from schema.policy import Model as ModelSpec
from schema.types import NodeState
from tests.component.test_control_loop import (
    POLICY,
    TUNING,
    Clock,
    ScriptedLoad,
    assert_covers,
    assert_no_leak,
    live_nodes,
    run,
)

LLAMA = ("demo", "llama-70b")


class World:
    def __init__(self, store: Store) -> None:
        self.clock = Clock()
        self.sim = SimCloud(
            timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=self.clock
        )
        self.store = store
        # On the loop's clock: a drain's wait is timed from when on-call asked for it.
        self.svc = ControlPlaneService(
            store, clock=lambda: datetime.fromtimestamp(self.clock.t, UTC)
        )
        self.svc.apply_policy(POLICY, source="demo", applied_by="test")
        self.load = ScriptedLoad()
        self.loop = ControlLoop(
            LoopContext(
                store=store,
                providers=SimResolver(self.sim),
                metrics_source=self.load,
                health=SimHealth(self.sim),
                autoscaler=GpucapAutoscaler(),
                telemetry=Metrics(),
                tuning=TUNING,
                clock=self.clock,
            )
        )

    def run(self, seconds: int) -> None:
        run(self.loop, self.clock, seconds)

    def instance_status(self, instance_id: str) -> str:
        return self.sim.status(self.sim.instances[instance_id]).value

    def desired(self) -> int:
        with self.store.session() as s:
            return s.scalars(select(Model).where(Model.name == "llama-70b")).one().desired_replicas


@pytest.fixture
def world(store: Store) -> World:
    w = World(store)
    w.load.load[LLAMA] = 100.0  # -> 3 replicas of llama-70b
    w.run(20)
    nodes = live_nodes(store, "llama-70b")
    assert_covers(store, "llama-70b", 3)
    assert all(n.state == NodeState.READY for n in nodes)
    return w


def ready_replicas(store: Store) -> set[str]:
    with store.session() as s:
        return set(s.scalars(select(Replica.id).where(Replica.state == NodeState.READY.value)))


def ready_units(store: Store) -> float:
    """llama-70b's ready capacity, in its units (an 8xH200 replica is 1.5 8xH100s)."""
    with store.session() as s:
        m = s.scalars(select(Model).where(Model.name == "llama-70b")).one()
        spec = ModelSpec.model_validate(m.spec)
        ready = s.scalars(
            select(Replica).where(Replica.model_id == m.id, Replica.state == NodeState.READY)
        )
        return sum(capacity_units(spec, r.gpu_shape) for r in ready)


def test_a_drained_node_is_replaced_surge_first_then_terminated(world: World, store: Store) -> None:
    before = {n.id: n for n in live_nodes(store, "llama-70b")}
    desired = world.desired()
    # The largest replica: the others alone do not cover desired, so it needs a replacement.
    victim = max(before.values(), key=lambda n: (n.instance_type, n.id))
    assert victim.instance_id is not None
    assert ready_units(store) - units_of(store, victim.replica_id) < desired

    result = world.svc.drain_node(victim.id, reason="GPU fell off the bus")
    assert result.changed and result.drained == [] and "retiring" in result.message
    # Surge-first: the victim serves on until its replacement is ready, so the model's
    # ready capacity never falls below desired, and it drains once the others cover it.
    drained_at = None
    for second in range(20):
        world.run(1)
        with store.session() as s:
            node = s.get(Node, victim.id)
            assert node is not None
            if node.state != NodeState.READY and drained_at is None:
                drained_at = second
        assert ready_units(store) >= desired, f"capacity fell below desired at {second} s"
    assert drained_at is not None and drained_at > 0
    assert len(ready_replicas(store) - {n.replica_id for n in before.values()}) >= 1

    with store.session() as s:
        node = s.get(Node, victim.id)
        assert node is not None and node.state == NodeState.TERMINATED
        assert node.draining_at is not None and node.terminated_at is not None
        replica = s.get(Replica, victim.replica_id)
        assert replica is not None and replica.state == NodeState.TERMINATED
        assert replica.retire_reason == "GPU fell off the bus"
    assert world.instance_status(victim.instance_id) == "terminated"

    after = {n.id: n for n in live_nodes(store, "llama-70b")}
    assert all(n.state == NodeState.READY for n in after.values())
    assert victim.id not in after
    assert set(before) - {victim.id} <= set(after)  # the other replicas were left alone
    assert world.desired() == desired  # a drain is not a scale-down
    assert_no_leak(store, world.sim)

    # Draining it again (or any terminal node) is a no-op that says so.
    again = world.svc.drain_node(victim.id)
    assert not again.changed and "already terminated" in again.message


def units_of(store: Store, replica_id: str) -> float:
    with store.session() as s:
        r = s.get(Replica, replica_id)
        assert r is not None
        spec = ModelSpec.model_validate(s.get(Model, r.model_id).spec)
        return capacity_units(spec, r.gpu_shape)


def test_an_immediate_drain_leaves_at_once_and_waits_for_in_flight_requests(
    world: World, store: Store
) -> None:
    victim = sorted(live_nodes(store, "llama-70b"), key=lambda n: n.id)[0]
    assert victim.instance_id is not None
    world.sim.hold(victim.instance_id, 5)  # its engine holds five requests
    result = world.svc.drain_node(victim.id, reason="now", immediate=True)
    assert result.changed and result.drained == [victim.id]
    assert victim.replica_id not in ready_replicas(store)  # out of the endpoints at once
    world.run(10)
    # The drain waits for the requests (the demo policy's drain timeout: 30 s).
    assert world.instance_status(victim.instance_id) == "running"
    world.sim.hold(victim.instance_id, 0)
    world.run(3)
    assert world.instance_status(victim.instance_id) == "terminated"


def test_a_drain_gives_up_waiting_at_the_drain_timeout(world: World, store: Store) -> None:
    victim = sorted(live_nodes(store, "llama-70b"), key=lambda n: n.id)[0]
    assert victim.instance_id is not None
    world.sim.hold(victim.instance_id, 5)  # requests that never finish
    world.svc.drain_node(victim.id, immediate=True)
    world.run(25)
    assert world.instance_status(victim.instance_id) == "running"
    world.run(10)
    assert world.instance_status(victim.instance_id) == "terminated"


def test_cordon_then_drain_moves_the_replica_out_of_the_cordoned_pool(
    world: World, store: Store
) -> None:
    nodes = sorted(live_nodes(store, "llama-70b"), key=lambda n: n.id)
    victim = nodes[0]
    cordon = world.svc.cordon_pools(
        customer="demo", account=victim.account, region=victim.region, cordoned=True
    )
    cordoned = {v.row.id for v in cordon.changed}
    assert victim.pool_id in cordoned
    neighbours = {n.id: n.pool_id for n in nodes[1:] if n.pool_id in cordoned}
    assert neighbours  # the demo's first replicas all land in its AWS region

    # Cordoning alone moves nothing: existing replicas keep serving.
    world.run(10)
    assert {n.id for n in live_nodes(store, "llama-70b")} == {n.id for n in nodes}

    world.svc.drain_node(victim.id, reason="move out of the cordoned region")
    world.run(15)
    after = {n.id: n for n in live_nodes(store, "llama-70b")}
    assert len(after) == len(nodes) and all(n.state == NodeState.READY for n in after.values())
    [replacement] = set(after) - {n.id for n in nodes}
    assert after[replacement].pool_id not in cordoned
    for node_id, pool_id in neighbours.items():  # still in a cordoned pool, still serving
        assert after[node_id].pool_id == pool_id
    assert_no_leak(store, world.sim)

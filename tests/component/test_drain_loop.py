"""On-call drain and cordon through the service, carried out by the real control loop
(simulated cloud, real database on both backends, hand-driven clock): the runbook's
"drain a node" and "cordon a region" end to end, asserted on the store and at the cloud."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Model, Node, Replica
from controlplane.telemetry import Metrics
from providers.sim import SimCloud, SimTimings
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
        self.svc = ControlPlaneService(store)
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


def test_drained_node_is_terminated_and_its_replica_replaced(world: World, store: Store) -> None:
    before = {n.id: n for n in live_nodes(store, "llama-70b")}
    desired = world.desired()
    victim = sorted(before.values(), key=lambda n: n.id)[0]
    assert victim.instance_id is not None

    result = world.svc.drain_node(victim.id, reason="GPU fell off the bus")
    assert result.changed and result.drained == [victim.id]
    world.run(15)

    with store.session() as s:
        node = s.get(Node, victim.id)
        assert node is not None and node.state == NodeState.TERMINATED
        assert node.draining_at is not None and node.terminated_at is not None
        replica = s.get(Replica, victim.replica_id)
        assert replica is not None and replica.state == NodeState.TERMINATED
    assert world.instance_status(victim.instance_id) == "terminated"

    after = {n.id: n for n in live_nodes(store, "llama-70b")}
    assert len(after) == len(before) and all(n.state == NodeState.READY for n in after.values())
    assert victim.id not in after
    [replacement] = set(after) - set(before)
    assert after[replacement].replica_id != victim.replica_id
    assert set(before) - {victim.id} <= set(after)  # the other replicas were left alone
    assert world.desired() == desired  # a drain is not a scale-down
    assert_no_leak(store, world.sim)

    # Draining it again (or any terminal node) is a no-op that says so.
    again = world.svc.drain_node(victim.id)
    assert not again.changed and "already terminated" in again.message


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

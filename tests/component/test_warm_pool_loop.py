"""Warm pools through the whole loop on the simulated cloud and a real database (SQLite and
PostgreSQL): the pool fills (a replica booted to ready, then stopped), within its bound; a
scale-up resumes the warm replica instead of creating, ready sooner than a create; the pool
refills; a start that finds no host puts the replica back and a create goes elsewhere,
with an event."""

from __future__ import annotations

from sqlalchemy import select

from controlplane.api.endpoints import Endpoints
from controlplane.store.db import Store
from controlplane.store.models import Event, Node, Replica
from providers.sim import SimCloud
from schema.types import Cloud, NodeState
from tests.component import test_control_loop as base
from tests.component.test_control_loop import POLICY, Clock, run

loop, world = base.loop, base.world  # (the loop's fixtures: the demo policy, a sim world)

WARM = POLICY.replace(
    "    scale_to_zero_grace_s: 60\n  - name: llama-70b",
    "    scale_to_zero_grace_s: 60\n    warm_pool: {max_nodes: 1}\n  - name: llama-70b",
    1,
)


def _replicas(store: Store, warm: bool) -> list[Replica]:
    with store.session() as s:
        q = select(Replica).where(
            Replica.warm.is_(warm), Replica.state.notin_(["terminated", "failed"])
        )
        return [r for r in s.scalars(q) if r.pool_id and r.nodes]


def _events(store: Store, kind: str) -> list[Event]:
    with store.session() as s:
        return list(s.scalars(select(Event).where(Event.kind == kind)))


def _apply_warm_policy(store: Store) -> None:
    from controlplane.api import ControlPlaneService

    ControlPlaneService(store).apply_policy(WARM, source="demo", applied_by="test")


def test_scale_up_resumes_the_warm_node_and_the_pool_refills(loop, world, store):
    ctl, load = loop
    sim, clock = world
    _apply_warm_policy(store)
    load.load[("demo", "chat-8b")] = 5.0
    run(ctl, clock, 30)
    [warm] = [r for r in _replicas(store, True) if r.state == NodeState.STOPPED]
    assert len(_replicas(store, True)) == 1  # max_nodes: 1
    stopped = [i for i in sim.instances.values() if sim.status(i).value == "stopped"]
    assert len(stopped) == 1
    # A scale-up: the warm replica is taken, resumed, ready before a create could be.
    load.load[("demo", "chat-8b")] = 40.0
    ready_at: dict[str, float] = {}
    for _ in range(12):
        run(ctl, clock, 1)
        with store.session() as s:
            for r in s.scalars(select(Replica).where(Replica.state == NodeState.READY)):
                ready_at.setdefault(r.id, clock.t)
    [filling] = _replicas(store, True)  # created in the tick the warm replica was resumed
    with store.session() as s:
        launched = {r.id: r.created_at.timestamp() for r in s.scalars(select(Replica))}
        resumed = s.get(Replica, warm.id)
        assert resumed is not None and resumed.resumed_at is not None
    took = ready_at[warm.id] - resumed.resumed_at.timestamp()
    created_took = ready_at[filling.id] - launched[filling.id]
    assert took < created_took, (took, created_took)  # a start beats boot + bootstrap
    assert _events(store, "warm.resume")
    with store.session() as s:
        r = s.get(Replica, warm.id)
        assert r is not None and not r.warm and r.resumed_at is not None
    run(ctl, clock, 20)
    refill = _replicas(store, True)
    assert len(refill) == 1 and refill[0].id != warm.id
    assert refill[0].state == NodeState.STOPPED


def test_a_start_with_no_host_falls_back_to_a_create_with_an_event(loop, world, store):
    ctl, load = loop
    sim, clock = world
    _apply_warm_policy(store)
    load.load[("demo", "chat-8b")] = 5.0
    run(ctl, clock, 30)
    [warm] = _replicas(store, True)
    # The stopped node gave its host back; now us-east-1 has none left for it.
    busy = sim.in_use(Cloud.AWS, "us-east-1", "p5.4xlarge")
    sim.set_capacity(Cloud.AWS, "us-east-1", "p5.4xlarge", busy)
    load.load[("demo", "chat-8b")] = 40.0
    run(ctl, clock, 20)
    [failed] = _events(store, "warm.start_failed")
    assert "CapacityUnavailable" in failed.message
    with store.session() as s:
        back = s.get(Replica, warm.id)
        assert back is not None
        live = s.scalars(select(Node).where(Node.state == NodeState.READY)).all()
    assert back.warm and back.resumed_at is None  # back in the warm pool
    assert len(live) >= 2  # the model's capacity came from a create elsewhere
    assert any(n.region != "us-east-1" or n.instance_type != "p5.4xlarge" for n in live)
    assert isinstance(sim, SimCloud) and isinstance(clock, Clock)


READY = POLICY.replace(
    "    scale_to_zero_grace_s: 60\n  - name: llama-70b",
    "    scale_to_zero_grace_s: 60\n    warm_pool: {max_nodes: 1, mode: ready}\n"
    "  - name: llama-70b",
    1,
)


def test_ready_mode_keeps_a_running_replica_aside_and_a_scale_up_takes_it_at_once(
    loop, world, store
):
    from controlplane.api import ControlPlaneService

    ctl, load = loop
    sim, clock = world
    ControlPlaneService(store).apply_policy(READY, source="demo", applied_by="test")
    load.load[("demo", "chat-8b")] = 5.0
    run(ctl, clock, 30)
    [warm] = _replicas(store, True)
    assert warm.state == NodeState.READY  # booted to ready and left running: not stopped
    assert not [i for i in sim.instances.values() if sim.status(i).value == "stopped"]
    with store.session() as s:
        model_ready = s.scalars(
            select(Replica).where(Replica.warm.is_(False), Replica.state == NodeState.READY)
        ).all()
    before = {r.id for r in model_ready}
    assert warm.id not in before  # aside: not the model's capacity
    routed = {e.replica_id for e in Endpoints(store).ready("demo", "chat-8b")}
    assert warm.id not in routed and routed <= before  # nor routed to
    assert routed  # (the model's own replica is)
    instances = len(sim.instances)
    # A scale-up takes the warm replica in the tick it is placed: no start, no boot.
    load.load[("demo", "chat-8b")] = 40.0
    for _ in range(15):
        run(ctl, clock, 1)
        with store.session() as s:
            r = s.get(Replica, warm.id)
            assert r is not None
            if not r.warm:
                break
    assert r.state == NodeState.READY and r.resumed_at is not None
    assert _events(store, "warm.resume")
    # The resumed replica served from the tick it was taken: no node of it moved through
    # resuming, and the refill is a new instance created warm.
    with store.session() as s:
        nodes = s.scalars(select(Node).where(Node.replica_id == warm.id)).all()
        assert nodes and all(n.resuming_at is None and n.state == NodeState.READY for n in nodes)
    assert warm.id in {e.replica_id for e in Endpoints(store).ready("demo", "chat-8b")}
    run(ctl, clock, 30)
    [refill] = _replicas(store, True)
    assert refill.id != warm.id and refill.state == NodeState.READY
    assert len(sim.instances) > instances

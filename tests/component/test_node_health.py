"""Health for the whole life of a node, through the real control loop on a real database
(both backends) and a hand-driven clock: a ready engine that stops answering is failed
after the policy's consecutive failures and its replica replaced, first on the simulated
cloud and then over HTTP against wire-level fake engines (``tests/fakes/engine_server``)
probed by the daemon's own prober; a node that reports its ``ready`` phase is ready
without waiting for a probe."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import yaml
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService, PhaseReport
from controlplane.loop import ControlLoop, LoopContext
from controlplane.loop.context import BootConfig
from controlplane.node_tokens import NodeTokens
from controlplane.probes import HttpProber
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Event, Node, Replica
from controlplane.telemetry import Metrics
from providers.sim import SimCloud, SimTimings
from schema.types import NodeState
from tests.component.test_control_loop import (
    POLICY,
    TUNING,
    Clock,
    ScriptedLoad,
    assert_no_leak,
    live_nodes,
    run,
)
from tests.fakes.engine_server import FakeEngine, fake_engines

CHAT = ("demo", "chat-8b")


def make_loop(store: Store, sim: SimCloud, clock: Clock, health, policy: str = POLICY):
    svc = ControlPlaneService(store, clock=lambda: datetime.fromtimestamp(clock.t, UTC))
    svc.apply_policy(policy, source="demo", applied_by="test")
    load = ScriptedLoad()
    load.load[CHAT] = 10.0  # one replica of chat-8b (its min)
    ctx = LoopContext(
        store=store,
        providers=SimResolver(sim),
        metrics_source=load,
        health=health,
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=TUNING,
        clock=clock,
    )
    return ControlLoop(ctx), svc


def chat_nodes(store: Store) -> list[Node]:
    return sorted(live_nodes(store, "chat-8b"), key=lambda n: n.id)


def test_a_hung_engine_is_failed_after_three_failed_probes_and_replaced(store: Store) -> None:
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
    loop, _ = make_loop(store, sim, clock, SimHealth(sim))
    run(loop, clock, 20)
    [victim] = chat_nodes(store)
    assert victim.state == NodeState.READY and victim.instance_id is not None

    sim.hang(victim.instance_id)  # the engine stops answering; the instance runs on
    run(loop, clock, 2)  # two failed probes: counted, still ready
    with store.session() as s:
        node = s.get(Node, victim.id)
        assert node is not None and node.state == NodeState.READY and node.probe_failures == 2
    run(loop, clock, 1)  # the third (the policy's default failure_threshold)
    with store.session() as s:
        node = s.get(Node, victim.id)
        assert node is not None and node.state in (NodeState.DRAINING, NodeState.TERMINATING)
        assert node.error == "engine failed 3 health checks in a row"
        assert node.failed_at is not None
        kinds = set(s.scalars(select(Event.kind).where(Event.node == victim.id)))
        assert {"node.unhealthy", "node.failed"} <= kinds

    run(loop, clock, 15)
    [replacement] = chat_nodes(store)
    assert replacement.id != victim.id and replacement.state == NodeState.READY
    assert sim.status(sim.instances[victim.instance_id]).value == "terminated"
    assert_no_leak(store, sim)


def test_an_answer_between_failures_starts_the_count_again(store: Store) -> None:
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
    loop, _ = make_loop(store, sim, clock, SimHealth(sim))
    run(loop, clock, 20)
    [victim] = chat_nodes(store)
    assert victim.instance_id is not None
    for _ in range(3):  # flapping: two failures, then an answer, again and again
        sim.hang(victim.instance_id)
        run(loop, clock, 2)
        sim._hung.discard(victim.instance_id)
        run(loop, clock, 1)
    with store.session() as s:
        node = s.get(Node, victim.id)
        assert node is not None and node.state == NodeState.READY and node.probe_failures == 0


@pytest.fixture
def engines() -> Iterator:
    with fake_engines() as start:
        yield start


def policy_on(ports: dict[str, int]) -> str:
    doc = yaml.safe_load(POLICY)
    for m in doc["models"]:
        m["runtime"] = {"engine": "vllm", "port": ports[m["name"]]}
    return yaml.safe_dump(doc)


def test_a_killed_engine_is_detected_over_http_and_replaced(store: Store, engines) -> None:
    """The daemon's HTTP prober against real sockets: every simulated instance is reached
    on loopback, at its model's engine (one fake engine per model)."""
    clock = Clock()
    by_model: dict[str, FakeEngine] = {name: engines() for name in ("chat-8b", "llama-70b")}
    by_model["coder-32b"] = engines()
    sim = SimCloud(
        timings=SimTimings(boot_s=3, serve_s=0, terminate_s=1),
        clock=clock,
        address_of=lambda inst: "127.0.0.1",
    )
    policy = policy_on({name: e.port for name, e in by_model.items()})
    loop, _ = make_loop(store, sim, clock, HttpProber(), policy)
    run(loop, clock, 15)
    [victim] = chat_nodes(store)
    assert victim.state == NodeState.READY  # the prober found its engine serving

    chat = by_model["chat-8b"]
    port = chat.port
    chat.kill()  # connections refused from now on
    run(loop, clock, 3)
    with store.session() as s:
        node = s.get(Node, victim.id)
        assert node is not None and node.error == "engine failed 3 health checks in a row"
    run(loop, clock, 10)
    [replacement] = chat_nodes(store)
    assert replacement.id != victim.id
    assert replacement.state != NodeState.READY  # nothing answers at its engine yet

    engines(port=port)  # the engine comes back where the replacement's is
    run(loop, clock, 3)
    [replacement] = chat_nodes(store)
    assert replacement.state == NodeState.READY
    assert_no_leak(store, sim)


def test_a_reported_ready_phase_makes_a_node_ready_without_a_probe(store: Store) -> None:
    clock = Clock()
    # serve_s is an hour: the simulated engine never answers a probe in this test.
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=3600, terminate_s=1), clock=clock)
    loop, svc = make_loop(store, sim, clock, SimHealth(sim))
    tokens = NodeTokens(b"k" * 32)
    loop.ctx.boot = BootConfig(tokens, "https://gpucap.internal:9464/v1/node-phases")
    run(loop, clock, 6)
    [node] = chat_nodes(store)
    assert node.state == NodeState.RUNNING
    with store.session() as s:
        row = s.get(Node, node.id)
        assert row is not None
        replica = s.get(Replica, row.replica_id)
        assert replica is not None and replica.state != NodeState.READY
    assert svc.report_node_phase(PhaseReport(node.id, "ready", clock.t, tokens.for_node(node.id)))
    run(loop, clock, 1)
    [node] = chat_nodes(store)
    assert node.state == NodeState.READY

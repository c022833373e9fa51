"""A policy's warm pool in the full-loop replay (the daemon's own place job keeps it): the
pool fills with nodes booted to ready and stopped, a scale-up resumes them sooner than a
create, and a node is billed only while it runs (coldstart.md §4: a stopped instance bills
its volumes)."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select

from controlplane.loop.context import epoch
from controlplane.simulator.fullloop import FullLoop, outcome, policy_scenario
from controlplane.simulator.fullloop.run import EPOCH0
from controlplane.simulator.fullloop.scenario import WARM_VM_S
from controlplane.simulator.traces import ModelTrace, Trace
from controlplane.store.models import Event, Node, Replica
from schema.fleet import parse_fleet
from schema.policy_file import parse_policy
from tests.full_loop_texts import chat_fleet, chat_policy

# Creates as coldstart.md §5 has them for 8xH100 (10 min to a node), the rest short.
FLEET = parse_fleet(chat_fleet().replace("capacity_vm_s: 60", "capacity_vm_s: 600"))
WARM = chat_policy().replace(
    "    latency_slo_ms: 1000\n", "    latency_slo_ms: 1000\n    warm_pool: {max_nodes: 2}\n"
)


def bursts() -> Trace:
    """Quiet, a burst at 20 min, quiet again, a second burst at 50 min."""
    parts, t = [], 0.0
    for rate, span in ((1.0, 1200.0), (12.0, 300.0), (1.0, 1500.0), (12.0, 300.0)):
        parts.append(np.arange(t, t + span, 1.0 / rate))
        t += span
    return Trace({"chat": ModelTrace("chat", np.concatenate(parts))}, end_s=t, label="bursts")


def test_a_warm_pool_is_kept_resumed_and_billed_only_while_running() -> None:
    loaded = parse_policy(WARM)
    assert loaded.policy.models[0].warm_pool is not None
    done = FullLoop(policy_scenario(loaded, bursts(), FLEET)).run()
    with done.store.session() as s:
        resumes = s.scalars(select(Event).where(Event.kind == "warm.resume")).all()
        replicas = s.scalars(select(Replica)).all()
        nodes = s.scalars(select(Node).where(Node.instance_id.is_not(None))).all()
        took_resume = [
            epoch(r.ready_at) - epoch(r.resumed_at)  # type: ignore[operator]
            for r in replicas
            if r.resumed_at is not None and r.ready_at is not None and r.ready_at > r.resumed_at
        ]
        took_create = [
            epoch(r.ready_at) - epoch(r.created_at)  # type: ignore[operator]
            for r in replicas
            if r.resumed_at is None
            and not r.warm
            and r.ready_at is not None
            and epoch(r.created_at) >= EPOCH0  # (not the replay's opening replicas)
        ]
        stopped = [n for n in nodes if n.stopped_at is not None]
        # Node-hours a bill from request to release would charge for time spent stopped.
        end = EPOCH0 + done.scenario.end_s
        t0 = EPOCH0 + done.scenario.warmup_s
        idle_h = 0.0
        for n in stopped:
            lo = max(epoch(n.stopped_at), t0)  # type: ignore[type-var]
            resumed = epoch(n.resuming_at)
            hi = min(resumed if resumed is not None else end, end)
            idle_h += max(0.0, hi - lo) / 3600
    assert resumes, "a scale-up resumed a warm replica"
    assert stopped, "the pool was filled with stopped nodes"
    assert took_resume and took_create
    assert max(took_resume) < min(took_create)  # a start beats capacity + boot
    assert min(took_resume) >= WARM_VM_S  # and is no faster than a start can be
    got = outcome(done)
    naive_h = 0.0
    for n in nodes:
        lo = max(epoch(n.pending_at) or end, t0)
        hi = min(epoch(n.terminated_at or n.failed_at) or end, end)
        naive_h += max(0.0, hi - lo) / 3600
    gpus = 8  # 8xH100 nodes
    assert idle_h > 0.1
    assert got.run.summary().gpu_hours == pytest.approx((naive_h - idle_h) * gpus)

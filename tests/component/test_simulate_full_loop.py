"""The full-loop replay (``controlplane.simulator.fullloop``) against the daemon's loop
driven by hand, as tests/component/test_control_loop.py drives it: the same short trace,
served by the same data plane, through a ControlLoop on a real database (SQLite and
PostgreSQL) and the simulated cloud at the daemon's default intervals, gives the replay's
decisions and placements exactly."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.context import epoch
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.service import ControlPlaneService
from controlplane.simulator.fullloop import FullLoop, fleet_scenario, replay
from controlplane.simulator.fullloop.run import (
    EPOCH0,
    Configured,
    VirtualClock,
    decider,
    open_warm,
)
from controlplane.simulator.fullloop.serving import DataPlane, ReplayMetrics
from controlplane.simulator.fullloop.sweep import sweep, sweep_size
from controlplane.simulator.traces import ModelTrace, Trace
from controlplane.store.db import Store
from controlplane.store.models import DecisionRecord, Model, Replica
from controlplane.telemetry import Metrics
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimTimings
from schema.fleet import parse_fleet
from schema.types import NodeState
from tests.full_loop_texts import chat_fleet

# One model on 1xH100; its node runs 60 s after the request and serves 30 s later.
FLEET = parse_fleet(chat_fleet("1xH100", min_replicas=1))
TIMINGS = SimTimings(boot_s=60, serve_s=30)


def short_trace() -> Trace:
    """20 minutes: a quiet start, a burst at 5 minutes, then a slow fall."""
    rng = np.random.default_rng(3)
    parts, t = [], 0.0
    for rate, span in ((2.0, 300.0), (14.0, 240.0), (6.0, 300.0), (1.0, 360.0)):
        n = rng.poisson(rate * span)
        parts.append(np.sort(rng.uniform(t, t + span, n)))
        t += span
    arrivals = np.concatenate(parts)
    return Trace({"chat": ModelTrace("chat", arrivals)}, end_s=t, label="short")


def decisions(store: Store) -> list[tuple[Any, ...]]:
    with store.session() as s:
        rows = s.scalars(select(DecisionRecord).order_by(DecisionRecord.at, DecisionRecord.id))
        return [(epoch(d.at), d.kind, d.model, d.desired, d.reason, d.detail) for d in rows]


def placements(store: Store) -> list[tuple[Any, ...]]:
    with store.session() as s:
        rows = s.scalars(select(Replica))
        return sorted(
            (epoch(r.created_at), r.pool_id, r.gpu_shape, epoch(r.ready_at), epoch(r.ended_at))
            for r in rows
        )


def by_hand(store: Store, trace: Trace) -> DataPlane:
    """The daemon's jobs at its default intervals, on a hand clock, every 5 s (the gcd of
    the intervals), each job when its interval divides the time, as the scheduler starts
    them all at once; the model opens warm, as in the replay."""
    scenario = fleet_scenario(FLEET, trace)
    clock = VirtualClock()
    opened = datetime.fromtimestamp(EPOCH0, UTC)
    ControlPlaneService(store, clock=lambda: opened).apply_policy(
        scenario.policy_text, source="simulate", applied_by="simulate"
    )
    world = SimCloud(timings=TIMINGS, default_capacity=1_000_000, clock=clock)
    plane = DataPlane(scenario.loads)
    tuning = Tuning()
    ctl = ControlLoop(
        LoopContext(
            store=store,
            providers=SimResolver(world, retry=NO_RETRY),
            metrics_source=ReplayMetrics(plane, scenario.loads, "sim", tuning.collect_s, EPOCH0),
            health=SimHealth(world),
            autoscaler=GpucapAutoscaler(),
            telemetry=Metrics(),
            tuning=tuning,
            clock=clock,
        )
    )

    open_warm(ctl, scenario, clock)  # (the world's history: the warm replicas' launches)

    def sync(now: float) -> None:
        with store.session() as s:
            ready = s.execute(
                select(Replica.id).join(Model).where(Replica.state == NodeState.READY.value)
            ).all()
        plane.sync({"chat": {rid: 8 for (rid,) in ready}}, now)

    for t in range(0, int(scenario.end_s) + 1, 5):
        clock.t = EPOCH0 + t
        plane.advance(t)
        if t % 300 == 0:
            ctl.refresh_offerings()
        if t % 15 == 0:
            ctl.collect_metrics()
            ctl.decide()
            ctl.place()
            sync(t)
        if t % 10 == 0:
            ctl.reconcile()
            sync(t)
    return plane


def test_the_replay_makes_the_hand_driven_loops_decisions_and_placements(store):
    trace = short_trace()
    plane = by_hand(store, trace)
    loop = FullLoop(fleet_scenario(FLEET, trace))
    done = loop.run()
    assert loop.store is not None
    ours, theirs = decisions(loop.store), decisions(store)
    assert len(ours) > 5 and {d[1] for d in ours} == {"autoscale", "placement"}
    assert {d[4] for d in ours if d[1] == "autoscale"} - {"steady", "hold_dip"}  # it scaled
    assert ours == theirs
    assert placements(loop.store) == placements(store)
    assert len(placements(store)) > 2
    assert done.plane.starts("chat") == plane.starts("chat")  # every request served alike


def test_a_sparse_trace_sleeps_between_bursts_without_ticking():
    """Two bursts two days apart on a model that scales to zero: every request is served,
    and the days asleep cost no ticks (a tick every 5 s would be ~35,000)."""
    fleet = FLEET.model_copy(
        update={"models": [FLEET.models[0].model_copy(update={"min_replicas": 0})]}
    )
    day = 86400.0
    arrivals = np.concatenate([np.arange(0, 120, 0.5), 2 * day + np.arange(0, 120, 0.5)])
    trace = Trace({"chat": ModelTrace("chat", arrivals)}, end_s=2 * day + 600, label="sparse")
    out = replay(fleet_scenario(fleet, trace))
    row = out.as_dict()
    assert row["unserved"] == 0 and row["models"]["chat"]["requests"] == arrivals.size
    assert row["cold_starts"] >= 2  # woke twice, from zero
    assert out.ticks < 2_000
    # Asleep, nothing is charged: far less than two days of one node.
    assert row["gpu_hours"] < 2.0


@pytest.mark.parametrize("peer", ["knative", "hpa"])
def test_the_peers_run_in_the_same_loop(peer):
    out = replay(fleet_scenario(FLEET, short_trace()), autoscaler=peer).as_dict()
    assert out["autoscaler"] == peer
    assert out["models"]["chat"]["requests"] > 1000
    assert out["cold_starts"] >= 1 and out["gpu_hours"] > 0


def test_a_knob_changes_the_loops_decisions():
    """The knob reaches the decider through the loop: a lower target per replica keeps more
    replicas (more GPU-hours), the policy in the store staying the customer's."""
    scenario = fleet_scenario(FLEET, short_trace())
    tight, loose = (replay(scenario, knob=k).as_dict() for k in (0.3, 1.0))
    assert tight["knob"] == 0.3 and loose["knob"] == 1.0
    assert tight["gpu_hours"] > loose["gpu_hours"]
    assert tight["slo_attainment"] >= loose["slo_attainment"]


def test_the_full_loop_sweep_keeps_the_cheapest_passing_run():
    scenario = fleet_scenario(FLEET, short_trace())
    seen: list[float | None] = []
    result = sweep(scenario, "ours", 0.95, done=lambda o: seen.append(o.run.knob))
    assert len(result.tried) == len(seen) <= sweep_size("ours")
    passing = [o for o in result.tried if o.run.summary().slo_attainment >= 0.95]
    assert result.best is not None and passing
    assert result.best.run.summary().gpu_hours == min(o.run.summary().gpu_hours for o in passing)
    assert result.best.run.knob in seen
    # No knob reaches an attainment of more than one: nothing passes, the closest is kept.
    none = sweep(scenario, "ours", 1.01)
    assert none.best is None and len(none.tried) == 2
    closest = none.closest()
    assert closest is not None
    assert closest.run.summary().slo_attainment == max(
        o.run.summary().slo_attainment for o in none.tried
    )


def test_skyserve_is_configured_from_the_profiled_service_time_and_ours_is_not():
    scenario = fleet_scenario(FLEET, short_trace())
    profile = scenario.profiled_service_s()
    assert set(profile) == {"chat"} and profile["chat"] > 0
    sky = decider("skyserve", None, profile)
    assert isinstance(sky, Configured) and sky.profiled_s == profile
    assert decider("ours", None, profile) == GpucapAutoscaler()

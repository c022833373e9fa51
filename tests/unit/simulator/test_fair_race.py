"""Issue 23, "a fair race": each point of the setup that tilted the bench, pinned through
whole replays (the runner and the engine), not only through a decider's own arithmetic."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autoscaler.baselines import RayServeAutoscaler, RayServeConfig, SkyServeAutoscaler
from autoscaler.types import AutoscalerInput, Decision, MetricsWindow, State
from controlplane.simulator.capacity import ColdStartCapacity
from controlplane.simulator.engine import Engine, ModelOutcome, RunOutcome
from controlplane.simulator.runner import SWEEP_PROBES, Simulation
from controlplane.simulator.traces import TraceSpec, read_trace
from schema.fleet import parse_fleet
from tests.unit.simulator.helpers import PHASES_100, Scripted, model
from tests.unit.simulator.test_fleet_and_runs import FLEET  # its template: 1xH100, 2 slots


def _steady(tmp_path: Path, gap_s: float = 2.0, end_s: float = 1200.0) -> Simulation:
    path = tmp_path / "steady.csv"
    times = np.arange(0.0, end_s, gap_s)
    path.write_text("timestamp,model,service_s\n" + "".join(f"{t},x,1\n" for t in times))
    return Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(path))]))


@dataclass(frozen=True)
class RecordingRay(RayServeAutoscaler):
    seen: list[AutoscalerInput] = field(default_factory=list)

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        self.seen.append(inp)
        return super().decide(inp, state)


def test_f_ray_serve_look_back_longer_than_the_default_window_is_honoured(
    tmp_path: Path,
) -> None:
    sim = _steady(tmp_path)
    ray = RecordingRay(config=RayServeConfig(look_back_period_s=240.0))
    assert ray.window_s == 240.0
    sim.run_autoscaler(ray)
    late = [i.metrics for i in ray.seen if i.now > sim.warmup_s + 300]
    assert late
    for m in late[:: max(1, len(late) // 50)]:
        assert isinstance(m, MetricsWindow)
        ts = [s.t for s in m.samples]
        # 240 s of 1 s samples up to the last push: the whole look-back, not 30 s of it
        assert ts[-1] - ts[0] >= 239.0


@dataclass(frozen=True)
class RecordingSky(SkyServeAutoscaler):
    ages: list[float] = field(default_factory=list)

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        d, st = super().decide(inp, state)
        if d.reason != "skyserve_between_decisions" and isinstance(inp.metrics, MetricsWindow):
            self.ages.append(inp.now - inp.metrics.samples[-1].t)
        return d, st


def test_e_skyserve_decisions_see_load_balancer_syncs_of_any_age(tmp_path: Path) -> None:
    sim = _steady(tmp_path, end_s=3600.0)
    sky = RecordingSky()
    sim.run_autoscaler(sky)
    ages = sky.ages
    assert len(ages) > 100
    # never newer than a sync, never older than one sync gap (20 s +- 2) and a 1 s scrape
    assert all(-1e-6 <= a <= 23.0 + 1e-6 for a in ages)
    # not locked onto the syncs (0 s every time) nor at one offset: spread over 0-20 s
    assert min(ages) < 5.0 and max(ages) > 15.0
    assert len({round(a) for a in ages}) >= 10
    # the same syncs in every run (seeded by the model): the replay is deterministic
    again = RecordingSky()
    sim.run_autoscaler(again)
    assert again.ages == ages


def _one_replica_when_busy(inp: AutoscalerInput) -> int:
    return 1 if inp.now < 150.0 else 0


@pytest.mark.parametrize("rejects", [False, True])
def test_e_a_request_with_no_ready_replica_is_answered_at_once_where_the_data_plane_rejects(
    rejects: bool,
) -> None:
    # No replica at first; one is asked for at 0 and ready at 100 (PHASES_100). Requests at
    # 10 and 50 find none ready; the one at 120 finds it.
    run = model([10.0, 50.0, 120.0], 5.0, slo_s=2.0)
    out = Engine(
        [run],
        300.0,
        Scripted(_one_replica_when_busy),
        ColdStartCapacity({"m": PHASES_100}),
        tick_s=1.0,
        metric_lag_s=0.0,
        scrape_interval_s=1.0,
        history_s=10.0,
        rejects_without_ready=rejects,
    ).run()
    m = out.models["m"]
    if rejects:  # SkyServe's load balancer: 503 at once, a miss, no slot held
        assert (m.met_slo, m.unserved) == (1, 2)
        np.testing.assert_allclose(m.waits, [90.0, 50.0, 0.0])  # until a replica was ready
    else:  # queued until the replica is ready (Knative's activator, Ray's handle)
        assert (m.met_slo, m.unserved) == (1, 0)
        np.testing.assert_allclose(m.waits, [90.0, 55.0, 0.0])


def test_d_hpa_runs_under_keda_to_zero_where_the_fleet_allows_zero(tmp_path: Path) -> None:
    # Busy for 10 minutes, idle for 30, busy again: the template allows 0 replicas.
    path = tmp_path / "gap.csv"
    times = [*np.arange(0.0, 600.0, 2.0), *np.arange(2400.0, 3000.0, 2.0)]
    path.write_text("timestamp,model,service_s\n" + "".join(f"{t},x,1\n" for t in times))
    sim = Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(path))]))
    out = sim.run("hpa")
    timeline = out.models["x"].timeline
    zero = [p.t for p in timeline if 600.0 < p.t < 2400.0 and p.live == 0]
    # KEDA's cooldown (300 s) after the last activity it saw (its 30 s poll, 15 s lag)
    assert zero and 900.0 < zero[0] <= 600.0 + 15.0 + 300.0 + 30.0
    assert any(p.live > 0 for p in timeline if p.t > 2400.0)  # and back on the next request
    assert out.models["x"].cold_starts >= 1


def test_c_cold_starts_are_drawn_per_launch_the_same_for_every_decider() -> None:
    phases = parse_fleet(FLEET).coldstart  # capacity_vm_s 30 (the median), spread 0.857
    a, b = (ColdStartCapacity({"x": phases, "y": phases}, draws=True) for _ in range(2))
    took_a = [g.ready_at - g.requested_at for g in (a.acquire("x", 0.0) for _ in range(200))]
    b.acquire("y", 0.0)  # another model's launches do not shift this one's sequence
    took_b = [g.ready_at - g.requested_at for g in (b.acquire("x", 5.0) for _ in range(200))]
    np.testing.assert_allclose(took_a, took_b)  # the k-th launch: the same time in each run
    rest = phases.total_s - phases.capacity_vm_s
    node = np.array(took_a) - rest
    assert node.min() > 0 and len(set(np.round(node, 6))) == 200  # every launch its own
    assert abs(float(np.median(node)) - 30.0) < 6.0
    p90 = float(np.percentile(node, 90))
    assert 2.0 < p90 / 30.0 < 4.5  # coldstart.md: P90 about 3x the P50
    fixed = ColdStartCapacity({"x": phases})  # without draws: the phase model's time
    assert {fixed.acquire("x", 0.0).ready_at for _ in range(3)} == {phases.total_s}


def test_c_a_decider_is_told_only_what_the_launches_so_far_taught() -> None:
    phases = parse_fleet(FLEET).coldstart
    cap = ColdStartCapacity({"x": phases}, draws=True)
    assert cap.expected_cold_start_s("x", 0.0) == phases.total_s  # nothing observed yet
    g1, g2, g3 = (cap.acquire("x", 0.0) for _ in range(3))
    first = min(g1, g2, g3, key=lambda g: g.ready_at)
    # Before any is ready: still the phase model, not the launches' true times.
    assert cap.expected_cold_start_s("x", first.ready_at - 1e-3) == phases.total_s
    assert cap.expected_cold_start_s("x", first.ready_at) == first.ready_at
    # A launch cancelled before it was ready is never observed.
    last = max(g1, g2, g3, key=lambda g: g.ready_at)
    cap.release(last, last.ready_at - 1.0)
    done = sorted(g.ready_at for g in (g1, g2, g3) if g is not last)
    assert cap.expected_cold_start_s("x", 1e9) == pytest.approx(float(np.median(done)))


def test_c_replays_tell_ours_the_learned_estimate(tmp_path: Path) -> None:
    path = tmp_path / "ramp.csv"
    times = np.cumsum(1.0 / np.linspace(0.5, 8.0, 7000))  # 0.5 -> 8 requests/s
    path.write_text("timestamp,model,service_s\n" + "".join(f"{t},x,1\n" for t in times))
    sim = Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(path))]))
    seen: list[float] = []

    @dataclass(frozen=True)
    class Recording(RayServeAutoscaler):
        def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
            seen.append(inp.cold_start_s)
            return super().decide(inp, state)

    out = sim.run_autoscaler(Recording(), 0.1)
    assert out.models["x"].cold_starts > 0
    assert seen[0] == sim.cold_start_s["x"]  # the phase model before any launch
    assert len(set(seen)) > 1  # then what the launches so far showed


def test_a_each_peer_counts_at_the_better_of_its_defaults_and_its_tuning(
    tmp_path: Path,
) -> None:
    sim = _steady(tmp_path, end_s=900.0)
    for peer in ("knative", "skyserve", "rayserve", "hpa"):
        result = sim.sweep(peer, 0.9)
        raced = {o.autoscaler for o in result.tried}
        assert raced == {peer, f"{peer}-tuned"}
        assert len(result.tried) <= sim.sweep_size(peer)
        ok = [o for o in result.tried if o.summary().slo_attainment >= 0.9]
        assert result.best is not None
        assert result.best.summary().gpu_hours == min(o.summary().gpu_hours for o in ok)
    assert {o.autoscaler for o in sim.sweep("ours", 0.9).tried} == {"ours"}


class _Curve(Simulation):
    """A simulation whose replays are a given attainment curve over the knob (GPU-hours
    falling as the knob rises), to check how the knob is searched."""

    def __init__(self, passes: Callable[[float], bool]) -> None:  # no fleet or trace
        self.passes = passes
        self.probed: list[float] = []

    def run(self, name: str, knob: Any = None, progress: Any = None) -> RunOutcome:
        self.probed.append(float(knob))
        ok = self.passes(float(knob))
        model = ModelOutcome("m", 100, 100 if ok else 50, 0, np.zeros(100), 10 / knob, 0, 0, 0, [])
        return RunOutcome(name, knob, 1.0, {"m": model})


@pytest.mark.parametrize("name", ["ours", "knative", "hpa"])
def test_b_every_knob_is_bisected_to_the_cheapest_passing_value(name: str) -> None:
    curve = _Curve(lambda k: k <= 0.4625)  # off the old grid (0.45, 0.5)
    result = curve.sweep(name, 0.99)
    per_variant = len(result.tried) // len(curve.variants(name))
    assert per_variant == SWEEP_PROBES  # the same search for every decider
    assert result.best is not None
    assert 0.4625 - 0.95 / 2**6 <= float(result.best.knob) <= 0.4625  # type: ignore[arg-type]
    # The cheap end passing ends the search; the safe end failing does too.
    assert len(_Curve(lambda k: True).sweep("ours", 0.99).tried) == 1
    none = _Curve(lambda k: False).sweep("ours", 0.99)
    assert none.best is None and len(none.tried) == 2


def test_b_a_non_monotone_curve_keeps_the_cheapest_passing_run_seen() -> None:
    # passes below 0.3 and in a pocket around 0.525 (the first midpoint): the pocket counts
    curve = _Curve(lambda k: k < 0.3 or 0.52 < k < 0.53)
    result = curve.sweep("ours", 0.99)
    assert result.best is not None and result.best.knob == pytest.approx(0.525)

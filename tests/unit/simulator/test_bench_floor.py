"""bench/floor.py: the least misses any replay must leave to stay within a GPU-hour budget.
Hand-checked small cases, and soundness against real replays: no replay the simulator
actually makes may beat a budget the bound rules out."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from autoscaler.types import AutoscalerInput
from controlplane.simulator.runner import ALL, Simulation
from controlplane.simulator.traces import TraceSpec, read_trace
from schema.fleet import parse_fleet
from tests.unit.simulator.helpers import Scripted, engine, model
from tests.unit.simulator.helpers import bench_load as _load_of


def test_fcfs_misses_by_hand(floor: ModuleType) -> None:
    three = _load_of(floor, [0.0, 0.0, 0.0], 1.0)
    # One slot: starts at 0, 1, 2 -> waits 0, 1, 2 against an SLO of 0.5.
    assert floor.fcfs_misses(three, 1, 0.0, 10.0) == 2
    # Three slots: nobody waits; a window opening after the arrivals counts none of them.
    assert floor.fcfs_misses(three, 3, 0.0, 10.0) == 0
    assert floor.fcfs_misses(three, 1, 0.5, 10.0) == 0
    # The window closes at 0.4: whoever still waits starts then (0.4 <= 0.5: on time).
    assert floor.fcfs_misses(three, 1, 0.0, 0.4) == 0
    # No replica at all: late exactly when it arrived more than the SLO before the close.
    spread = _load_of(floor, [0.0, 1.0, 2.0, 2.8], 1.0)
    assert floor.fcfs_misses(spread, 0, 0.0, 3.0) == 3


def test_a_steady_load_that_needs_two_replicas(floor: ModuleType) -> None:
    # A request a second, 1.5 s each, one slot per replica: one replica falls behind at
    # once (request k waits 0.5 k), two never queue. 1000 requests: 10 may be late at 0.99.
    steady = _load_of(floor, [float(k) for k in range(1000)], 1.5)
    assert floor.fewest_replicas(steady, 10) == 2
    # Two replicas all along: 2000 GPU-s. Saving 200 below that takes an end window of
    # 100 s at one replica (about 99 late) or a window longer than the cold start of 100 s.
    ruled = floor.floor([steady], 1800 / 3600, 0.99)
    assert ruled.allowed == 10 and ruled.deficit_gpu_s == pytest.approx(200.0)
    assert ruled.rules_out and ruled.least_misses > 80
    # Saving 5 GPU-s needs only the last few seconds: not ruled out.
    assert not floor.floor([steady], 1995 / 3600, 0.99).rules_out
    # At or above what two replicas cost, nothing needs saving.
    assert floor.floor([steady], 2000 / 3600, 0.99).least_misses == 0


def test_windows_shorter_than_a_cold_start_are_not_a_way_out(floor: ModuleType) -> None:
    # The same load with a quiet middle (no request for 300 s): a window there leaves
    # nobody late, and the bound must see it (so it rules nothing out).
    quiet = [float(k) for k in range(400)] + [float(k) for k in range(700, 1000)]
    load = _load_of(floor, quiet, 1.5, cold_start_s=100.0)
    f = floor.floor([load], 1800 / 3600, 0.99)
    assert f.models[0].middle == 0 and f.least_misses == 0 and not f.rules_out
    # With a cold start longer than the quiet stretch, no window inside it saves anything.
    slow = _load_of(floor, quiet, 1.5, cold_start_s=400.0)
    assert floor.floor([slow], 1800 / 3600, 0.99).rules_out


def _scripted(
    floor: ModuleType, arrivals: list[float], desired: dict[float, int], end: float
) -> tuple[float, float, object]:
    """(GPU-hours, attainment, load) of a scripted schedule on the engine: 2 replicas of 8
    slots ready at 0, then ``desired`` from each listed time on; 100 s cold starts."""

    def plan(inp: AutoscalerInput) -> int:
        return next((n for t, n in sorted(desired.items(), reverse=True) if inp.now >= t), 2)

    run = model(arrivals, 3.5, slots=8, slo_s=0.5, initial=2)
    out = engine([run], Scripted(plan), end).run().models["m"]
    load = floor.Load("m", run.arrivals, run.service_s, 8, 0.5, 1, 100.0, end)
    return out.gpu_hours, out.met_slo / out.requests, load


def test_schedules_at_the_edge_of_the_bound_are_allowed(floor: ModuleType) -> None:
    steady = [0.25 * k for k in range(4 * 1200)]  # 14 in service at every moment
    # One replica for the last 50 s (shorter than a cold start, but none comes back): it
    # saves 50 GPU-s and leaves about 150 late.
    hours, attained, load = _scripted(floor, steady, {1150.0: 1}, 1200.0)
    assert 2350 <= hours * 3600 <= 2354 and attained < 0.97  # (+ draining its last requests)
    f = floor.floor([load], hours, attained)
    assert f.models[0].n == 2 and 0 < f.least_misses <= f.allowed
    # A 150 s quiet stretch: one replica from 400 s, the second asked back at 450 s (ready at
    # 550 s, 100 s cold start). It saves 50 GPU-s and leaves nobody late.
    quiet = [t for t in steady if not 400 <= t < 550]
    hours, attained, load = _scripted(floor, quiet, {400.0: 1, 450.0: 2}, 1200.0)
    assert 2350 <= hours * 3600 <= 2354 and attained == 1.0
    assert not floor.floor([load], hours, attained).rules_out


FLEET = """
name: floor
coldstart: {capacity_vm_s: 60, bootstrap_s: 10, image_pull_s: 5, weight_fetch_s: 5, load_init_s: 20}
models:
  - name: steady
    shape: 1xH100
    slots: 8
    slo_s: 0.5
    service: {per_request_s: 3.5}
template:
  shape: 1xH100
  slots: 2
  slo_s: 0.5
  service: {per_request_s: 4.0}
"""


def _trace(tmp_path: Path, bursty: bool) -> Path:
    """``steady``: 14 requests in service at every moment (4/s, 3.5 s each), so two replicas
    of 8 slots never queue and one falls behind at once. ``bursty``: random, with a burst."""
    lines = ["timestamp,model,input_tokens,output_tokens,service_s"]
    lines += [f"{0.25 * k:.2f},steady,,,3.5" for k in range(4 * 1200)]
    if bursty:
        rng = np.random.default_rng(3)
        t = np.sort(np.concatenate([rng.uniform(0, 1200, 900), rng.uniform(500, 560, 200)]))
        lines += [f"{x:.3f},bursty,,,{rng.uniform(1, 6):.3f}" for x in t]
    path = tmp_path / f"trace-{bursty}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _simulation(tmp_path: Path, bursty: bool) -> Simulation:
    return Simulation(
        parse_fleet(FLEET), read_trace([TraceSpec.parse(str(_trace(tmp_path, bursty)))])
    )


def test_no_replay_beats_a_budget_the_bound_rules_out(floor: ModuleType, tmp_path: Path) -> None:
    sim = _simulation(tmp_path, bursty=True)
    loads = floor.loads_of(sim)
    for name in ALL:
        for knob in (0.9, 1.0, 1.2) if name == "oracle" else (0.3, 0.6, 0.9):
            s = sim.run(name, knob).summary()
            # With this replay's own misses allowed, its own GPU-hours are not ruled out.
            assert not floor.floor(loads, s.gpu_hours, s.slo_attainment).rules_out, (name, knob)


def test_the_bound_rules_out_less_than_a_steady_load_needs(
    floor: ModuleType, tmp_path: Path
) -> None:
    sim = _simulation(tmp_path, bursty=False)
    (load,) = floor.loads_of(sim)
    best = sim.sweep("oracle", 0.99).best
    assert best is not None
    hours = best.summary().gpu_hours
    assert not floor.floor([load], hours, 0.99).rules_out
    # Two replicas all along, less what ends a cold start early, is the floor; a tenth less
    # would need one replica for long enough to leave hundreds late.
    f = floor.floor([load], 0.9 * hours, 0.99)
    assert f.models[0].n == 2 and f.rules_out and f.least_misses > 5 * f.allowed

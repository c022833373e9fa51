"""bench/bound.py: the least GPU-hours any replay can spend at an SLO-attainment target.
Soundness against real replays of every autoscaler (none may spend less than the bound at
the attainment it reached), hand-checked small cases, checks that a deliberately overstated
bound is caught, and its distance from the oracle where the oracle meets every request."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from controlplane.simulator.runner import ALL, ORACLE, Simulation
from controlplane.simulator.traces import TraceSpec, read_trace
from schema.fleet import parse_fleet
from tests.unit.simulator.helpers import bench_load

KNOBS = {ORACLE: (0.8, 1.0)}
PEER_KNOBS = (0.3, 0.9)
# Replays with many misses make the branch and bound slow: the bound reported at its time
# limit (the relaxation's, raised by what it proved) is still a bound, and is what is checked.
LIMIT_S = 1.0


def _load(bound: ModuleType, arrivals: list[float], service: float, **kw: Any) -> Any:
    return bench_load(bound, arrivals, service, **{"slots": 2, **kw})


def test_a_constant_load_costs_its_replicas_all_along(bound: ModuleType) -> None:
    # 10 s requests every 2.5 s: 4 in service at every moment, 2 replicas of 2 slots. Two
    # replicas all along cost 2000 replica-seconds and leave nobody late; no replay can do
    # with less than two at any time (the depth rule), so the bound is 2000 less what the
    # opening and the closing cell give away (the first 10 s have fewer requests, as the
    # span opens empty; the last cell's cost is its mean).
    load = _load(bound, [2.5 * k for k in range(400)], 10.0)
    b = bound.lower_bound([load], 1.0)
    assert b.allowed == 0 and b.solved
    assert 1985 / 3600 <= b.gpu_hours <= 2000 / 3600
    # GPUs per replica multiply it.
    eight = bound.lower_bound([_load(bound, [2.5 * k for k in range(400)], 10.0, gpus=8)], 1.0)
    assert eight.gpu_hours == pytest.approx(8 * b.gpu_hours, rel=1e-6)


def test_a_burst_costs_a_cold_start_unless_its_requests_may_be_late(bound: ModuleType) -> None:
    # One replica's load (10 s requests every 5 s, 2 slots), and two more requests at 500 s:
    # four in service for 10 s. Serving them on time takes a second replica for those 10 s,
    # charged from a cold start (100 s) before: 1000 + 100 + 10 replica-seconds at best.
    steady = [5.0 * k for k in range(200)]
    load = _load(bound, sorted([*steady, 500.0, 500.0]), 10.0)
    strict = bound.lower_bound([load], 1.0)
    # (The cells are 5 s: the cold start's rule gives away up to two of them.)
    assert (1000 + 100 - 10) / 3600 <= strict.gpu_hours <= 1110 / 3600
    # With those two requests allowed to be late, one replica all along is the bound.
    loose = bound.lower_bound([load], 200 / 202)
    assert loose.allowed == 2
    assert 990 / 3600 <= loose.gpu_hours <= 1000 / 3600
    # One allowed miss saves nothing: the other burst request still needs the replica.
    assert bound.lower_bound([load], 201 / 202).gpu_hours >= (1000 + 100 - 10) / 3600


def test_the_misses_go_where_they_save_the_most(bound: ModuleType) -> None:
    # Two models with the same burst, one on 8-GPU replicas: the target pools every
    # request, so the two misses allowed go to the expensive model's burst.
    steady = sorted([*[5.0 * k for k in range(200)], 500.0, 500.0])
    cheap = _load(bound, steady, 10.0, name="cheap")
    dear = _load(bound, steady, 10.0, name="dear", gpus=8)
    b = bound.lower_bound([cheap, dear], 402 / 404)
    alone = bound.lower_bound([cheap], 1.0).gpu_hours
    no_burst = bound.lower_bound([dear], 200 / 202).gpu_hours
    assert b.allowed == 2
    assert b.gpu_hours == pytest.approx(alone + no_burst, rel=1e-3)


def test_the_lp_relaxation_is_weaker_and_still_a_bound(bound: ModuleType) -> None:
    load = _load(bound, [5.0 * k for k in range(200)], 7.0)  # 1.4 in service: 1 replica
    exact = bound.lower_bound([load], 1.0)
    relaxed = bound.lower_bound([load], 1.0, integer=False)
    assert relaxed.gpu_hours <= exact.gpu_hours + 1e-9
    assert exact.gpu_hours >= 990 / 3600  # whole replicas: one all along


FLEET = """
name: bound
coldstart: {capacity_vm_s: 60, bootstrap_s: 10, image_pull_s: 5, weight_fetch_s: 5, load_init_s: 20}
models:
  - name: steady
    shape: 1xH100
    slots: 8
    slo_s: 0.5
    service: {per_request_s: 3.5}
template:
  shape: 8xH100
  slots: 4
  slo_s: 0.5
  service: {per_request_s: 4.0}
"""


def _trace(tmp_path: Path) -> Path:
    """``steady``: a regular 4 requests a second with a quiet stretch; ``bursty`` (the
    template, 8 GPUs a replica): random with a burst, service times random."""
    rng = np.random.default_rng(7)
    lines = ["timestamp,model,input_tokens,output_tokens,service_s"]
    lines += [f"{0.25 * k:.2f},steady,,,3.5" for k in range(4 * 1200) if not 600 <= k / 4 < 800]
    t = np.sort(np.concatenate([rng.uniform(0, 1200, 1500), rng.uniform(500, 540, 250)]))
    lines += [f"{x:.3f},bursty,,,{rng.uniform(1, 8):.3f}" for x in t]
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory) -> tuple[Simulation, list[object]]:
    """Every autoscaler at two knobs on the two-model trace: (simulation, summaries)."""
    path = _trace(tmp_path_factory.mktemp("bound"))
    sim = Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(path))]))
    runs = [sim.run(name, knob).summary() for name in ALL for knob in KNOBS.get(name, PEER_KNOBS)]
    return sim, runs


def test_no_replay_spends_less_than_the_bound(
    bound: ModuleType, floor: ModuleType, replays: tuple[Simulation, list[object]]
) -> None:
    sim, runs = replays
    loads = floor.loads_of(sim)
    ratios = []
    for s in runs:
        b = bound.lower_bound(loads, s.slo_attainment, time_limit_s=LIMIT_S)
        assert b.gpu_hours <= s.gpu_hours, (s.autoscaler, s.knob, b.gpu_hours, s.gpu_hours)
        ratios.append(s.gpu_hours / b.gpu_hours)
    # Not vacuous: the cheapest replays come within a third of it.
    assert min(ratios) < 1.35


def test_an_overstated_bound_is_caught(
    bound: ModuleType, floor: ModuleType, replays: tuple[Simulation, list[object]]
) -> None:
    # The check above has teeth: a bound that claims longer cold starts than the fleet's,
    # or that allows none of a replay's misses, is beaten by some real replay.
    sim, runs = replays
    loads = floor.loads_of(sim)
    slow = [replace(ld, cold_start_s=6 * ld.cold_start_s) for ld in loads]
    assert any(
        bound.lower_bound(slow, s.slo_attainment, time_limit_s=LIMIT_S).gpu_hours > s.gpu_hours
        for s in runs
    )
    late = [s for s in runs if s.slo_attainment < 1.0]
    assert late and any(bound.lower_bound(loads, 1.0).gpu_hours > s.gpu_hours for s in late)


def test_the_bound_is_close_below_the_oracle_where_it_meets_every_request(
    bound: ModuleType, floor: ModuleType, replays: tuple[Simulation, list[object]]
) -> None:
    sim, _ = replays
    oracle = sim.sweep(ORACLE, 1.0).best
    assert oracle is not None
    hours = oracle.summary().gpu_hours
    b = bound.lower_bound(floor.loads_of(sim), 1.0)
    assert 0.8 * hours <= b.gpu_hours <= hours

"""Scrape samples against a brute-force integral, the oracle's demand curve on a hand case,
the oracle requesting capacity exactly one cold start ahead, and its cheapest headroom per
model against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.types import NoData
from controlplane.simulator.metrics import LoadMeter
from controlplane.simulator.oracle import (
    ModelPoint,
    OracleAutoscaler,
    cheapest_mix,
    forward_max,
    replica_plan,
    zero_wait_concurrency,
)
from tests.unit.simulator.helpers import PHASES_100, Scripted, engine, model


def _brute(
    arr: np.ndarray, start: np.ndarray, end: np.ndarray, a: float, b: float
) -> tuple[float, float]:
    in_flight = np.clip(np.minimum(b, end) - np.maximum(a, start), 0, None).sum()
    queued = np.clip(np.minimum(b, start) - np.maximum(a, arr), 0, None).sum()
    return in_flight / (b - a), queued / (b - a)


@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=60),
    waits=st.lists(st.floats(0.0, 4.0), min_size=60, max_size=60),
    services=st.lists(st.floats(0.01, 9.0), min_size=60, max_size=60),
    split=st.integers(1, 40),
)
def test_samples_are_exact_time_averages(
    gaps: list[float], waits: list[float], services: list[float], split: int
) -> None:
    arr = np.cumsum(gaps)
    n = arr.size
    start = np.maximum.accumulate(arr + np.array(waits[:n]))  # FCFS: starts never go back
    svc = np.array(services[:n])
    end = start + svc
    meter = LoadMeter(arr, svc, None, interval_s=1.0, history_s=1000.0)
    horizon = int(np.ceil(end.max())) + 2
    # In two steps, as ticks do; only starts before each step's time are known then.
    for upto in (min(split, horizon), horizon):
        known = start[start < upto].tolist()
        meter.update(known, upto)
    samples = list(meter.samples)
    assert [s.t for s in samples] == [float(k + 1) for k in range(horizon)]
    for k, s in enumerate(samples):
        flight, queue = _brute(arr, start, end, k, k + 1.0)
        assert s.in_flight == pytest.approx(flight, abs=1e-6)
        assert s.queue_depth == pytest.approx(queue, abs=1e-6)
        assert s.arrival_rate == float(np.count_nonzero((arr >= k) & (arr < k + 1)))
        assert s.completion_rate == float(np.count_nonzero((end >= k) & (end < k + 1)))


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 30.0), min_size=1, max_size=40),
    waits=st.lists(st.floats(0.0, 4.0), min_size=40, max_size=40),
    services=st.lists(st.floats(0.01, 9.0), min_size=40, max_size=40),
    ticks=st.lists(st.integers(1, 120), min_size=1, max_size=8),
    history=st.integers(1, 12),
)
def test_a_short_history_keeps_exact_samples_across_long_steps(
    gaps: list[float],
    waits: list[float],
    services: list[float],
    ticks: list[int],
    history: int,
) -> None:
    """Steps longer than the history (a model woken after sleeping) compute only the bins
    kept; the counts carried over the skipped ones must leave those exact."""
    arr = np.cumsum(gaps)
    n = arr.size
    start = np.maximum.accumulate(arr + np.array(waits[:n]))
    svc = np.array(services[:n])
    end = start + svc
    meter = LoadMeter(arr, svc, None, interval_s=1.0, history_s=float(history))
    horizon = int(np.ceil(end.max())) + 2
    upto = 0
    for step in [*ticks, horizon]:
        upto = min(upto + step, horizon)
        meter.update(start[start < upto].tolist(), upto)
        samples = list(meter.samples)
        assert [s.t for s in samples] == [
            float(k) for k in range(upto - len(samples) + 1, upto + 1)
        ]
        assert len(samples) == min(history, upto)
        for s in samples:
            k = s.t - 1.0
            flight, queue = _brute(arr, start, end, k, k + 1.0)
            assert s.in_flight == pytest.approx(flight, abs=1e-6)
            assert s.queue_depth == pytest.approx(queue, abs=1e-6)
            assert s.completion_rate == float(np.count_nonzero((end >= k) & (end < k + 1)))


def test_a_model_asleep_for_years_costs_no_memory_for_the_gap() -> None:
    # Two requests 10^9 s apart: binning every second between them took terabytes.
    arr = np.array([0.0, 1e9])
    svc = np.array([2.0, 3.0])
    meter = LoadMeter(arr, svc, None, interval_s=1.0, history_s=60.0)
    meter.update([0.0], 10)
    meter.update([0.0, 1e9], int(1e9) + 2)
    last = list(meter.samples)[-2:]
    assert [s.in_flight for s in last] == [1.0, 1.0]  # the second request, in service
    assert [s.arrival_rate for s in last] == [1.0, 0.0]
    assert sum(s.completion_rate or 0.0 for s in meter.samples) == 0.0


def test_zero_wait_concurrency_hand_case() -> None:
    conc = zero_wait_concurrency(np.array([0.0, 0.5, 3.0]), np.array([2.0, 2.0, 1.0]), 5.0).dense()
    # [0,1): 2 at once; [1,2): still 2; [2,3): one left until 2.5; [3,4): 1; [4,5): 0.
    assert conc[:5].tolist() == [2.0, 2.0, 1.0, 1.0, 0.0]


def _busy_brute(arr: np.ndarray, svc: np.ndarray, nbins: int) -> np.ndarray:
    """Most requests in service at any instant of each 1 s bin, every one on arrival."""
    out = np.zeros(nbins)
    for k in range(nbins):
        for t in [float(k), *arr[(arr >= k) & (arr < k + 1)].tolist()]:
            out[k] = max(out[k], np.count_nonzero((arr <= t) & (t < arr + svc)))
    return out


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 5000.0), min_size=1, max_size=25),
    services=st.lists(st.floats(0.0, 40.0), min_size=25, max_size=25),
    slots=st.integers(1, 4),
    headroom=st.sampled_from([0.6, 1.0, 1.5]),
    lo=st.integers(0, 1),
    width=st.integers(1, 4000),
)
def test_sparse_busy_runs_and_plan_equal_the_dense_ones(
    gaps: list[float], services: list[float], slots: int, headroom: float, lo: int, width: int
) -> None:
    """Gaps of up to 5,000 s split the runs (MERGE_GAP_S is an hour) and the plan's
    regions; bin by bin, both must equal the dense definitions."""
    arr = np.cumsum(gaps)
    svc = np.array(services[: arr.size])
    end_s = float(np.ceil((arr + svc).max())) + 1.0
    conc = zero_wait_concurrency(arr, svc, end_s)
    dense = _busy_brute(arr, svc, conc.nbins)
    assert conc.dense().tolist() == dense.tolist()
    plan = replica_plan(conc, slots, headroom, lo, 50, width)
    need = np.clip(np.ceil(headroom * dense / slots - 1e-9), lo, 50)
    expected = forward_max(need, width).astype(np.int64)
    assert plan.dense().tolist() == expected.tolist()
    assert [plan.at(k) for k in range(conc.nbins)] == expected.tolist()


def test_forward_max() -> None:
    v = np.array([0, 3, 0, 0, 1, 0, 0], dtype=float)
    assert forward_max(v, 3).tolist() == [3, 3, 1, 1, 1, 0, 0]
    assert forward_max(v, 20).tolist() == [3, 3, 1, 1, 1, 0, 0]  # wider than the series


def test_oracle_requests_one_cold_start_ahead_and_never_waits() -> None:
    run = model([500.0], 10.0, slo_s=0.5)
    oracle = OracleAutoscaler.plan([run], 700.0, {"m": PHASES_100.total_s}, headroom=1.0)
    eng = engine([run], oracle, end_s=700.0, wake_lead_s=PHASES_100.total_s + 1.0)
    m = eng.run().models["m"]
    assert m.waits.tolist() == [0.0] and m.met_slo == 1
    # Requested at 399 (cold start 100 + one tick ahead), released at 511: 112 s.
    assert m.gpu_hours == pytest.approx(112 / 3600, abs=2 / 3600)
    assert m.cold_starts == 1


def test_the_oracle_replays_the_same_without_metrics() -> None:
    """The runner replays the oracle unmetered (it plans on the trace itself; computing
    metrics was most of its wall time): the outcome is the metered replay's, and an
    unmetered engine hands every decision NoData, never a window."""
    rng = np.random.default_rng(7)
    arrivals = np.sort(np.concatenate([rng.uniform(0, 900, 300), rng.uniform(2000, 2300, 400)]))
    run = model(arrivals.tolist(), rng.uniform(1.0, 20.0, arrivals.size).tolist(), slots=4)
    end = 3000.0
    outcomes = []
    for metered in (True, False):
        oracle = OracleAutoscaler.plan([run], end, {"m": PHASES_100.total_s}, headroom=0.8)
        eng = engine(
            [run], oracle, end_s=end, wake_lead_s=PHASES_100.total_s + 1.0, metered=metered
        )
        outcomes.append(eng.run().models["m"])
    with_metrics, without = outcomes
    assert without.waits.tolist() == with_metrics.waits.tolist()
    assert without.timeline == with_metrics.timeline
    assert (without.gpu_hours, without.cold_starts, without.scale_events) == (
        with_metrics.gpu_hours,
        with_metrics.cold_starts,
        with_metrics.scale_events,
    )
    assert with_metrics.cold_starts >= 2 and with_metrics.met_slo < with_metrics.requests

    seen = Scripted(lambda inp: 1)
    engine([run], seen, end_s=200.0, metered=False).run()
    assert seen.seen and all(isinstance(i.metrics, NoData) for i in seen.seen)


def test_cheapest_mix_hand_case() -> None:
    points = {
        "a": [ModelPoint(0.6, 90, 1.0), ModelPoint(1.0, 100, 2.0)],
        "b": [ModelPoint(0.6, 500, 5.0), ModelPoint(1.0, 1000, 10.0)],
    }
    # 1,045 of 1,100 met: a's ten misses fit the budget, b's five hundred do not.
    assert cheapest_mix(points, 1100, 0.95) == {"a": 0.6, "b": 1.0}
    assert cheapest_mix(points, 1100, 1.0) == {"a": 1.0, "b": 1.0}
    assert cheapest_mix(points, 1100, 1.01) is None


@settings(max_examples=60, deadline=None)
@given(
    table=st.lists(
        st.lists(st.tuples(st.integers(0, 50), st.floats(0.0, 100.0)), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    ),
    target=st.floats(0.0, 1.0),
)
def test_cheapest_mix_is_the_brute_force_minimum(
    table: list[list[tuple[int, float]]], target: float
) -> None:
    points = {
        f"m{i}": [ModelPoint(float(k), met, gpu) for k, (met, gpu) in enumerate(opts)]
        for i, opts in enumerate(table)
    }
    requests = 50 * len(table)
    feasible = [
        sum(p.gpu_hours for p in combo)
        for combo in itertools.product(*points.values())
        if sum(p.met_slo for p in combo) / requests >= target
    ]
    mix = cheapest_mix(points, requests, target)
    if not feasible:
        assert mix is None
        return
    assert mix is not None
    chosen = [next(p for p in points[m] if p.headroom == h) for m, h in mix.items()]
    assert sum(p.met_slo for p in chosen) / requests >= target
    assert sum(p.gpu_hours for p in chosen) == pytest.approx(min(feasible))

"""gpucap's own autoscaler: table-driven cases on synthetic time."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest

from autoscaler import GpucapAutoscaler, decide, forecast
from autoscaler.types import Decision, MetricsSample, MetricsWindow, NoData
from autoscaler.window import mean_metric

from .synthetic import SPEC, FluidRun, desired_series, inp, window

OURS = GpucapAutoscaler()
T = SPEC.target_per_replica  # 70 in flight per replica, 100 slots


def test_module_entry_point_is_the_default_policy() -> None:
    w = window(100.0, conc=140.0, rate=70.0)
    assert decide(inp(100.0, w, ready=2), {})[0] == OURS.decide(inp(100.0, w, ready=2), {})[0]


@pytest.mark.parametrize(
    ("label", "metrics", "state", "live", "want"),
    [
        ("no data holds the last decision", NoData("scrape failed"), {"desired": 5}, 3, 5),
        ("no data on a first tick holds live", NoData("scrape failed"), {}, 3, 3),
        ("empty window is no data", MetricsWindow(()), {"desired": 4}, 2, 4),
        ("stale window is no data", window(-500.0, conc=1000.0), {"desired": 4}, 2, 4),
    ],
)
def test_missing_metrics_hold_scale(
    label: str, metrics: MetricsWindow | NoData, state: dict, live: int, want: int
) -> None:
    d, _ = OURS.decide(inp(0.0, metrics, ready=live), state)
    assert (d.desired, d.reason) == (want, "hold_no_data"), label


def test_wakes_from_zero_on_the_first_queued_request() -> None:
    w = window(1000.0, queue=lambda t: 1.0 if t == 1000.0 else 0.0)
    d, _ = OURS.decide(inp(1000.0, w, ready=0), {"desired": 0, "last_busy": 0.0})
    assert (d.desired, d.reason) == (1, "wake")


def test_scale_up_is_immediate_and_sized_on_the_peak_offered_load() -> None:
    # 2 s per request, 100 req/s -> 200 in flight, steady; 70 per replica -> 3 replicas
    w = window(600.0, conc=200.0, rate=100.0, length=600)
    d, st = OURS.decide(inp(600.0, w, ready=1), {"desired": 1})
    assert d.desired == math.ceil(200.0 / T)
    assert d.reason == "scale_up_forecast"
    assert st["cost"] == pytest.approx(2.0)


@pytest.mark.parametrize(("utilization", "want"), [(0.7, 6), (0.9, 5)])
def test_the_spare_over_a_steady_load_is_the_knobs_up_to_a_quarter(
    utilization: float, want: int
) -> None:
    # 420 in flight, steady, 100 slots per replica. At most a quarter over the peak (MIN_MARGIN:
    # at 0.7 the reserve 420 / 70 = 6 replicas is the larger), but never more than the knob
    # asks for: at 0.9, 420 / 90 -> 5 replicas, not 420 x 1.25 / 100 -> 6.
    spec = dataclasses.replace(SPEC, target_per_replica=utilization * 100.0)
    w = window(600.0, conc=420.0, rate=210.0, length=600)
    d, _ = OURS.decide(inp(600.0, w, ready=want, spec=spec), {"desired": want})
    assert (d.desired, d.reason) == (want, "steady")


def test_queue_backlog_while_capacity_starts_does_not_launch_more() -> None:
    # Offered load needs 3 replicas; 3 are live (1 ready, 2 starting); a big backlog queues.
    st: dict = {"desired": 3}
    for now in (600.0, 605.0, 610.0, 615.0):
        backlog = (now - 500.0) * 10.0  # grows every tick
        w = window(now, conc=100.0, rate=100.0, queue=backlog, length=600)
        d, st = OURS.decide(inp(now, w, ready=1, starting=2), {**st, "cost": 2.0})
        assert d.desired == 3, now


def _backlog_window(now: float, backlog: float) -> MetricsWindow:
    # 70 req/s x 2 s = 140 in flight on 2 ready replicas (200 slots), until a backlog of
    # `backlog` requests built up in the last seconds (the slots then read full).
    return window(
        now,
        conc=lambda t: 140.0 if t <= now - 4 else 200.0,
        rate=70.0,
        queue=lambda t: 0.0 if t <= now - 4 else backlog,
        length=600,
    )


@pytest.mark.parametrize(
    ("label", "backlog", "starting", "wave_age", "want"),
    [
        # 30,000 x 2 s = 60,000 slot-seconds waiting; until capacity asked for now arrives
        # (a cold start and a tick, 305 s) the 2 replicas' 60 spare slots drain 18,300 of
        # them; the rest must drain within 305 s more: ceil((140 + 41,700 / 305) / 100).
        ("a backlog asks only for what drains it", 30_000.0, 0, None, 3),
        ("a larger one asks for more", 300_000.0, 0, None, 21),
        # 6 starting, launched 100 s ago: they serve from 205 s on, so the backlog grows
        # by -60 x 205, then shrinks by 660 x 100: ceil((140 + 521,700 / 305) / 100).
        ("starting replicas count from their arrival", 300_000.0, 6, 100.0, 19),
        # without a record of their launch (a restart), they count as arriving now
        ("an unknown wave counts as arriving now", 300_000.0, 6, None, 15),
        # capacity on its way that drains it in time: nothing more
        ("nothing twice", 30_000.0, 6, 100.0, 8),
    ],
)
def test_a_backlog_asks_for_what_drains_it_within_a_cold_start(
    label: str, backlog: float, starting: int, wave_age: float | None, want: int
) -> None:
    now = 600.0
    state: dict = {"desired": 2 + starting, "cost": 2.0}
    if wave_age is not None:
        state["wave"] = now - wave_age
    d, _ = OURS.decide(inp(now, _backlog_window(now, backlog), 2, starting), state)
    assert d.desired == want, label
    # Knative's count (every waiting request as concurrent demand) would ask for 430+.
    assert d.desired < (200 + backlog) / T / 10


def test_a_surge_backlog_drains_within_a_cold_start_without_a_second_wave() -> None:
    # 5 -> 150 req/s of 2 s requests on one replica: 300 in flight, 3 replicas at full
    # slots, 4 with the 25 % spare. While the first wave boots (300 s) the queue grows by
    # 200 x 300 s of work; sized on the load alone, it would drain on 100 spare slots over
    # three more cold starts, and reading full slots as load ratchets up each time.
    cold = 300.0
    run = FluidRun(OURS, SPEC, lambda t: 150.0 if t > 600 else 5.0, cold_start_s=cold, ready=1)
    run.run(3000.0)
    launches = [t for t, d, live in run.decisions if d.desired > live]
    assert launches and max(launches) < 600 + 30  # one wave, within its first ticks
    # 3 replicas carry the load at full slots, 2 more drain the first wave's backlog (200 x
    # 305 s of work) within 305 s, and the queue already there at the first tick rounds up
    peak = max(d.desired for _, d, _ in run.decisions)
    assert peak == 6
    waiting = [s.t for s in run.samples if s.queue_depth >= 0.5]
    assert not waiting or max(waiting) < 600 + 2 * (cold + 5) + 30
    # once drained, the replicas bought for the backlog go (down to the load with spare)
    assert run.decisions[-1][1].desired == math.ceil(300 * 1.25 / 100)


def test_full_slots_after_a_queue_drains_are_not_offered_load() -> None:
    # The queue emptied at t=540 (just before this window); for the next service times
    # (20 s each) the slots still hold requests that waited: 600 in flight against 10 req/s
    # x 20 s = 200 offered. Without the record of the queue, 600 reads as load.
    now = 600.0
    w = window(now, conc=lambda t: 600.0 if t < 560 else 200.0, rate=10.0, length=60)
    state = {"desired": 6, "cost": 20.0, "dip": []}
    drained, _ = OURS.decide(inp(now, w, ready=6), {**state, "queued_t": 540.0})
    assert drained.desired == math.ceil(200 * 1.25 / 100)
    unknown, _ = OURS.decide(inp(now, w, ready=6), state)
    assert unknown.desired == math.ceil(600 * 1.25 / 100)


def test_a_growing_queue_is_at_least_the_load_its_busy_slots_hold() -> None:
    # A cost read far too low (1.4 s for 4.5 s requests): arrivals x cost say 73 in flight,
    # but the queue keeps growing behind 200 busy slots, so the load is at least 200:
    # ceil(200 x 1.25 / 100) replicas, not the 2 already there.
    now = 600.0
    w = window(now, conc=200.0, rate=52.0, queue=lambda t: 7.6 * (t - 400.0), length=60)
    d, _ = OURS.decide(inp(now, w, ready=2), {"desired": 2, "cost": 1.4, "dip": []})
    assert d.desired == math.ceil(200 * 1.25 / 100)


def test_nothing_is_released_while_requests_wait() -> None:
    # 10 ready replicas, a queue of 50 and almost no arrivals: the need is 1, but the
    # backlog is served first; once it is gone the surplus goes (no dip was recorded).
    now = 600.0
    state = {"desired": 10, "cost": 2.0, "dip": []}
    queued = window(now, conc=1000.0, rate=1.0, queue=50.0, length=60)
    d, _ = OURS.decide(inp(now, queued, ready=10), state)
    assert (d.desired, d.reason) == (10, "hold_backlog")
    calm = window(now, conc=2.0, rate=1.0, length=60)
    d, _ = OURS.decide(inp(now, calm, ready=10), state)
    assert (d.desired, d.reason) == (5, "scale_down")  # at most half at once


def test_saturated_without_a_learned_cost_reads_the_service_stage() -> None:
    # One replica full (100 slots) since a start with a wrong prior (spec: 2 s per request);
    # 37 req/s arrive, 10 complete per second, the queue grows by 27 per second. Little's
    # law on the service stage: 100 in service / 10 per second = 10 s per request, so the
    # offered load is 370 in flight.
    w = window(600.0, conc=100.0, rate=37.0, queue=lambda t: 27.0 * (t - 400.0), length=120)
    d, _ = OURS.decide(inp(600.0, w, ready=1), {"desired": 1})
    assert "per-request cost 10.0" in d.detail
    assert "peak load 370.0" in d.detail
    # and the 5,400 waiting (54,000 slot-seconds) plus the 270 x 305 s more that queue
    # before new capacity arrives must drain within 305 s more, at 100 slots a replica
    assert d.desired == math.ceil((370 + (5400 * 10 + 270 * 305) / 305) / 100)
    assert d.reason == "scale_up_backlog"


def test_holds_through_a_dip_shorter_than_a_cold_start_then_releases() -> None:
    def rate(t: float) -> float:
        return 100.0 if t < 1200 or 1400 <= t < 1600 else 10.0

    run = FluidRun(OURS, SPEC, rate, service_s=2.0, cold_start_s=300.0, ready=3)
    decisions = run.run(3000.0)
    by_t = {t: d.desired for t, d, _ in decisions}
    assert all(by_t[t] >= 3 for t in by_t if 1200 <= t < 1600)  # dip of 200 s < 300 s
    assert by_t[2995.0] == 1  # after the load stays low for longer than a cold start
    released = min(t for t in by_t if t > 1600 and by_t[t] < 3)
    assert released >= 1600 + 300


def _detail(d: Decision, name: str) -> int:
    """A count from a decision's detail: ``need`` (-> need N) or ``ready`` ((ready N))."""
    pattern = {"need": r"-> need (\d+)", "ready": r"\(ready (\d+)\)"}[name]
    match = re.search(pattern, d.detail)
    assert match, f"no {name} in {d.detail!r}"
    return int(match.group(1))


def test_a_bursts_replicas_still_starting_are_cancelled_after_half_a_cold_start() -> None:
    # A one-minute burst over a steady load launches replicas that would arrive ten minutes
    # later; the one ready replica drains the burst's queue long before that. What is still
    # starting goes as the needs that asked for it age past half a cold start (300 s here),
    # so none of it ever arrives; a ready replica is never released for it.
    def rate(t: float) -> float:
        return 150.0 if 1000 <= t < 1060 else 30.0

    run = FluidRun(OURS, SPEC, rate, service_s=2.0, cold_start_s=600.0, ready=1)
    decisions = run.run(2500.0)
    seen = [(t, d, live, _detail(d, "need"), _detail(d, "ready")) for t, d, live in decisions]
    assert max(d.desired for t, d, *_ in seen if t < 1100) > 1  # the burst launched capacity

    cancels = [
        (t, d.desired, live, ready)
        for t, d, live, _, ready in seen
        if d.reason == "cancel_starting"
    ]
    assert cancels, "the burst's starting replicas were never cancelled"
    for t, desired, live, ready in cancels:
        recent = max(need for u, _, _, need, _ in seen if t - 300 < u <= t)
        assert ready <= desired < live
        assert desired >= recent  # what a need of the last half cold start asks for stays
        # ... and what goes was asked for only by older needs
        assert desired == max(ready, recent)
    assert cancels[-1][0] < 1000 + 600  # all gone before the first would have arrived
    assert all(ready == 1 for *_, ready in seen)  # none of them ever became ready
    assert all(d.desired >= 1 for _, d, *_ in seen)  # the ready replica stays


def test_starting_replicas_are_never_cancelled_within_a_stable_window_of_their_need() -> None:
    # The demo's tuning (12 s stable window, 20 s scale-down delay, 2 s ticks, 10 s expected
    # cold start) with replicas that take 60 s (a pool out of capacity, retried elsewhere):
    # half the dip hold is 10 s, less than the window the needs are peaks over.
    spec = dataclasses.replace(
        SPEC, stable_window_s=12.0, burst_window_s=3.0, scale_down_delay_s=20.0
    )
    run = FluidRun(
        OURS,
        spec,
        lambda t: 75.0 if t % 80 < 25 else 15.0,  # 25 s bursts every 80 s
        service_s=3.0,
        cold_start_s=10.0,
        tick_s=2.0,
        ready=1,
        boot_s=60.0,
    )
    decisions = run.run(600.0)
    needs = [(t, _detail(d, "need")) for t, d, _ in decisions]
    cancels = [(t, d.desired) for t, d, _ in decisions if d.reason == "cancel_starting"]
    assert cancels  # late replicas are still cancelled once their need is gone ...
    for t, desired in cancels:  # ... but never on a need younger than the stable window
        assert desired >= max(n for u, n in needs if t - spec.stable_window_s < u <= t)


def test_scale_to_zero_after_the_grace_period_only() -> None:
    spec = dataclasses.replace(SPEC, scale_to_zero_grace_s=600.0, scale_down_delay_s=0.0)
    run = FluidRun(OURS, spec, lambda t: 5.0 if t < 500 else 0.0, cold_start_s=60.0, ready=1)
    series = [(t, d.desired) for t, d, _ in run.run(2000.0)]
    zero_at = min(t for t, n in series if n == 0)
    assert 500 + 600 <= zero_at <= 500 + 600 + 120
    assert all(n >= 1 for t, n in series if t < zero_at)


@pytest.mark.parametrize(
    ("cold_start_s", "zero_from", "held_by"),
    [(900.0, 500 + 900, "hold_dip"), (60.0, 500 + 600, "hold_idle_grace")],
)
def test_the_idle_grace_and_the_dip_hold_run_side_by_side_not_one_after_the_other(
    cold_start_s: float, zero_from: float, held_by: str
) -> None:
    # A 600 s grace and the load gone at 500 s. With a 900 s cold start the model goes to
    # zero a cold start after its load (the ski-rental hold outlasts the grace); with a
    # 60 s one, after the grace. Each is a lower bound on the idle time, so the later one
    # counts, not their sum: stacked, every sleep of a sparse model held its replica for
    # the grace and then a cold start more.
    spec = dataclasses.replace(SPEC, scale_to_zero_grace_s=600.0, scale_down_delay_s=0.0)
    run = FluidRun(OURS, spec, lambda t: 5.0 if t < 500 else 0.0, cold_start_s=cold_start_s)
    run.ready = 1
    decisions = run.run(3000.0)
    zero_at = min(t for t, d, _ in decisions if d.desired == 0)
    assert zero_from <= zero_at <= zero_from + 75  # (+ the 60 s stable window, a tick)
    assert held_by in {d.reason for t, d, _ in decisions if 500 < t < zero_at}


@pytest.mark.parametrize(("lo", "hi", "conc", "want"), [(3, 10, 0.0, 3), (0, 4, 7000.0, 4)])
def test_bounds(lo: int, hi: int, conc: float, want: int) -> None:
    spec = dataclasses.replace(SPEC, min_replicas=lo, max_replicas=hi)
    w = window(600.0, conc=conc, rate=conc / 2, length=600)
    d, _ = OURS.decide(inp(600.0, w, ready=3, spec=spec), {"desired": 3, "dip": []})
    assert d.desired == want


def test_slots_still_full_after_a_queue_do_not_teach_a_higher_cost() -> None:
    # 2 s requests at 50 req/s (100 in service) for 10 minutes, then a minute of queue,
    # then the backlog being served: 300 in service at the same 50 req/s for 30 s (would
    # read as 6 s requests), then back to 100.
    def sample(t: int) -> MetricsSample:
        queued = 600 <= t < 660
        in_flight = 100.0 if t < 600 or t >= 690 else 300.0
        return MetricsSample(float(t), 50.0, in_flight, 40.0 if queued else 0.0)

    state: dict = {}
    forecast.fold(state, [sample(t) for t in range(1200)], "concurrency", 1.0)
    assert state["queued_t"] == 659.0
    assert state["cost"] == pytest.approx(2.0, rel=0.01)


def test_trend_looks_ahead_by_the_cold_start() -> None:
    ramp = lambda t: 20.0 + 0.2 * t  # noqa: E731  +12 req/s per minute
    first = {}
    for cold_start_s in (0.0, 300.0):
        run = FluidRun(OURS, SPEC, ramp, service_s=2.0, cold_start_s=cold_start_s, ready=3)
        decisions = run.run(1000.0)
        first[cold_start_s] = [
            next(t for t, d, _ in decisions if d.desired >= n) for n in (4, 5, 6)
        ]
        # 220 req/s x 2 s at the end: 440 in flight, x 1.25 margin = 6 replicas of 100
        assert decisions[-1][1].desired >= 6
    # With a 300 s cold start the rise over that horizon is asked for earlier, each step.
    assert all(a < b for a, b in zip(first[300.0], first[0.0], strict=True)), first


# The 6 h baseline is the plain mean of the history until it spans 6 h (here 1.5 h).
_SURGE = (50.0 * 3600 + 150.0 * 1800) / 5400  # 1 h at 50 req/s, then 30 min at 150
_DROP = (150.0 * 3600 + 100.0 * 1800) / 5400  # 1 h at 150 req/s, then 30 min at 100


@pytest.mark.parametrize(
    ("label", "rate", "baseline", "want"),
    [
        # 150 req/s x 2 s = 300 in flight at 70 of 100 slots per replica: ceil(300 / 70)
        ("a steady level keeps target headroom", lambda t: 150.0, 150.0, 5),
        # The same level 30 min after a 3x surge: the reserve for the typical level
        # (83 req/s x 2 s / 0.7 = 238) is used up by the surge, not tripled with it; the
        # cover is the current load plus the least margin: ceil(300 x 1.25 / 100)
        ("a surge uses up the reserve", lambda t: 50.0 if t < 3600 else 150.0, _SURGE, 4),
        # In a lull the reserve shrinks with the load (the current level is below the
        # baseline of 133 req/s): target headroom on 100 req/s, ceil(200 / 70)
        ("a drop shrinks the reserve", lambda t: 150.0 if t < 3600 else 100.0, _DROP, 3),
    ],
)
def test_burst_reserve_is_sized_on_the_slow_baseline(  # type: ignore[no-untyped-def]
    label: str, rate, baseline: float, want: int
) -> None:
    run = FluidRun(OURS, SPEC, rate, service_s=2.0, cold_start_s=300.0, ready=5)
    decisions = run.run(5400.0)
    assert decisions[-1][1].desired == want, label
    assert run.state["baseline"] == pytest.approx(baseline, rel=0.02), label


def test_a_first_bucket_weighs_one_nth_not_for_long() -> None:
    # Mid-traffic (a daemon restart: 15 in flight at the first sample, more than its 10
    # arrivals), the first 30 s read low (a noisy 1.5 s per request), then 2 s.
    samples = [
        MetricsSample(
            t=float(t), arrival_rate=10.0, in_flight=15.0 if t < 30 else 20.0, queue_depth=0.0
        )
        for t in range(0, 180)
    ]
    st: dict = {}
    forecast.fold(st, samples, "concurrency", 1.0)
    # Four buckets after the low one: the mean (1.5 + 2 + 2 + 2 + 2) / 5 = 1.9 s, where a
    # plain EWMA (0.1 per bucket) would still be at 2 - 0.5 x 0.9**4 = 1.67 s.
    assert st["cost"] == pytest.approx(1.9, abs=0.02)


def test_a_cold_origin_does_not_teach_a_low_cost() -> None:
    # Traffic starts from nothing: 10 req/s of 20 s requests, so the in-service count fills
    # for 20 s. The buckets inside that fill read up to 40 % cheaper requests; they are
    # skipped, not averaged in (the 1/n average kept them for minutes: 19.3 s, 3.5 % low,
    # after five minutes; enough to flap a constant load across a replica boundary).
    samples = [
        MetricsSample(t=float(t), arrival_rate=10.0, in_flight=10.0 * min(t, 20.0), queue_depth=0.0)
        for t in range(1, 301)
    ]
    st: dict = {}
    forecast.fold(st, samples, "concurrency", 1.0)
    assert st["cost"] == pytest.approx(20.0, rel=0.005)


@pytest.mark.parametrize("profiled", [False, True])
def test_slots_filling_from_a_cold_origin_do_not_read_as_costlier_requests(
    profiled: bool,
) -> None:
    # Seen on the deepseek-r1 bench day: traffic starts from nothing at 150 req/s of 50 s
    # requests (like service times: ServeGen's token defaults), so the slots fill for 50 s
    # and nothing completes before. A minute in, Little's law on the service stage read
    # 316 s per request and asked for 1,853 replicas where about 290 carry the load (the
    # warm start, not charged, hid it). The profiled service time (the simulator's) or the
    # filling lower bound (the daemon's, which has no profile) stands until the reading does.
    service, lam = 50.0, 150.0
    spec = dataclasses.replace(
        SPEC,
        max_concurrency_per_replica=64.0,
        target_per_replica=25.6,
        mean_service_s=service if profiled else None,
    )
    samples = [MetricsSample(float(t), lam, lam * min(t, service), 0.0) for t in range(1, 1201)]
    auto, state, live = GpucapAutoscaler(), {}, 1
    desired = []
    for now in range(5, 1201, 5):
        w = MetricsWindow(tuple(samples[max(0, now - 60) : now]))
        d, state = auto.decide(inp(float(now), w, ready=live, spec=spec), state)
        live = d.desired
        desired.append(d.desired)
    steady = desired[-1]
    assert steady == math.ceil(lam * service / 25.6)  # the reserve at the target: 293
    assert max(desired) == steady


def test_a_rate_step_does_not_read_as_cheaper_requests() -> None:
    # 50 s per request, the rate doubles from 100 to 200 req/s at t = 600: the in-service
    # count follows over the next 50 s. Pairing each 30 s bucket's in-flight with its own
    # arrivals read the step as 4 % cheaper requests (48 s) just as capacity was being
    # sized for it; paired with the arrivals of the last service time, it stays at 50 s.
    def rate(t: float) -> float:
        return 100.0 if t < 600 else 200.0

    def in_flight(t: float) -> float:
        return 100.0 * 50.0 + 100.0 * min(max(t - 600.0, 0.0), 50.0)

    samples = [
        MetricsSample(t=float(t), arrival_rate=rate(t), in_flight=in_flight(t), queue_depth=0)
        for t in range(1, 1201)
    ]
    st: dict = {}
    learned = []
    for k in range(0, 1200, 5):
        forecast.fold(st, samples[max(0, k - 120) : k + 5], "concurrency", 1.0)
        if k >= 300:
            learned.append(st["cost"])
    assert min(learned) == pytest.approx(50.0, rel=0.01)
    assert max(learned) == pytest.approx(50.0, rel=0.01)


def test_queued_offered_load_averages_a_whole_service_time_of_arrivals() -> None:
    # Saturated for the whole window (100 in flight, 100 waiting); 20 s per request, so the
    # offered load is the arrivals of the last 20 s x 20. A 300 req/s second at the window's
    # start averages with the 19 s after it; alone it would read as 6,000 in flight.
    samples = tuple(
        MetricsSample(
            t=float(t), arrival_rate=300.0 if t == 0 else 10.0, in_flight=100.0, queue_depth=100
        )
        for t in range(60)
    )
    peak = max(OURS._offered_load(samples, 20.0, "concurrency", 1.0))
    assert peak == pytest.approx((300.0 + 19 * 10.0) / 20 * 20.0)


def test_the_baseline_forgets_a_surge_within_hours() -> None:
    # An hour at 300 req/s, then 18 h at 30: the 6 h baseline comes down to the new level:
    # 30 + 270 x 1/6 x e^(-(18 - 5) / 6) ~ 35.2.
    st = _fold_days(19 / 24, lambda t: 300.0 if t < 3600 else 30.0)
    assert st["baseline"] == pytest.approx(35.2, rel=0.02)


def _fold_days(days: float, rate_at) -> dict:  # type: ignore[no-untyped-def]
    st: dict = {}
    samples = [
        MetricsSample(t=float(t), arrival_rate=rate_at(t), in_flight=2 * rate_at(t), queue_depth=0)
        for t in range(0, int(days * 86400), 10)
    ]
    forecast.fold(st, samples, "concurrency", 10.0)
    return st


def daily(t: float) -> float:
    """Quiet nights, a steep morning ramp at 08:00-09:00."""
    h = (t % 86400) / 3600
    return 20.0 if h < 8 else (20.0 + 80.0 * (h - 8) if h < 9 else 100.0)


def test_daily_seasonality_is_used_once_history_covers_a_day() -> None:
    short = forecast.view(_fold_days(0.9, daily))
    assert short.season is None
    st = _fold_days(2.0 + 7.9 / 24, daily)  # two days and 07:54 of the third
    model = forecast.view(st)
    assert model.season is not None
    ratio = model.season_peak_ratio(st["seen_t"], 900.0)
    assert ratio is not None and ratio > 1.3
    assert len(json.dumps(st)) < 12_000  # compact: 288 slots, not raw history


def test_seasonal_ramp_is_provisioned_before_it_arrives() -> None:
    st = _fold_days(2.0 + 7.9 / 24, daily)
    now = st["seen_t"]
    w = window(now, conc=60.0, rate=30.0, length=120)
    # An hour's lead (the 08:00-09:00 ramp is 5x): the profile, not the flat recent rate,
    # says what the capacity asked for now will meet.
    with_season, _ = OURS.decide(inp(now, w, ready=1, cold_start_s=3600.0), st)
    no_history = {k: v for k, v in st.items() if k != "season"}
    without, _ = OURS.decide(inp(now, w, ready=1, cold_start_s=3600.0), no_history)
    assert with_season.desired > without.desired


def test_state_is_json_and_small_after_a_long_run() -> None:
    run = FluidRun(OURS, SPEC, lambda t: 50.0 + 30.0 * ((t // 600) % 2), cold_start_s=120.0)
    run.ready = 2
    run.run(4000.0)
    text = json.dumps(run.state)
    assert len(text) < 12_000
    assert json.loads(text)["desired"] == run.decisions[-1][1].desired


def test_every_decision_has_a_reason_code_and_detail() -> None:
    run = FluidRun(OURS, SPEC, lambda t: 50.0 if t < 1000 else 0.0, cold_start_s=60.0, ready=1)
    for _, d, _ in run.run(2500.0):
        assert d.reason and d.reason.islower() and " " not in d.reason
        assert d.detail
    assert desired_series(run.decisions)[-1] == 0


def _first_up(run: FluidRun) -> float | None:
    """The time of the first decision above the live count it saw."""
    return next((t for t, d, live in run.decisions if d.desired > live), None)


@pytest.mark.parametrize(
    ("label", "spike_s", "delay_s", "scales_up"),
    [
        ("no delay: a 30 s spike launches at once", 30.0, 0.0, True),
        # Each need covers the stable window's peak (60 s), so a 30 s spike keeps the need
        # up for ~90 s: a 120 s delay outlasts it.
        ("a spike shorter than the delay launches nothing", 30.0, 120.0, False),
        ("a rise that outlasts the delay launches", 400.0, 120.0, True),
    ],
)
def test_scale_up_delay_launches_only_what_persisted(
    label: str, spike_s: float, delay_s: float, scales_up: bool
) -> None:
    # 100 in flight on two ready replicas (200 slots), then 180 for spike_s seconds: no
    # queue, but above what two replicas carry with the forecast path's 25 % spare.
    spec = dataclasses.replace(SPEC, scale_up_delay_s=delay_s)
    run = FluidRun(
        OURS,
        spec,
        lambda t: 90.0 if 600 < t <= 600 + spike_s else 50.0,
        cold_start_s=120.0,
        ready=2,
    )
    run.run(600.0 + spike_s + 200.0)
    first = _first_up(run)
    if not scales_up:
        assert first is None, label
        held = [d.reason for t, d, _ in run.decisions if 600 < t <= 600 + spike_s]
        assert "hold_scale_up_delay" in held, label
        return
    assert first is not None, label
    assert 600 < first <= 600 + delay_s + 2 * run.tick_s, label
    if delay_s:
        assert first >= 600 + delay_s - run.tick_s, label  # not before the need persisted


def test_scale_up_delay_goes_to_the_least_need_of_its_window() -> None:
    # The need steps 2 -> 6 -> 4 replicas 20 s apart under a 60 s delay: once 60 s have
    # passed, the least need over the window is 4, not the 6 of the peak.
    spec = dataclasses.replace(SPEC, scale_up_delay_s=60.0)
    st: dict = {"desired": 2}
    out = []
    for now in range(600, 700, 5):
        conc = 140.0 if now < 610 else (420.0 if now < 630 else 280.0)
        w = window(float(now), conc=conc, rate=conc / 2.0)
        d, st = OURS.decide(inp(float(now), w, ready=2, spec=spec), {**st, "cost": 2.0})
        out.append((now, d.desired, d.reason))
    # The need of 2 last seen at 605 leaves the window at 665.
    early = [(now, desired, why) for now, desired, why in out if now < 665]
    assert {(d, why) for now, d, why in early if now >= 610} == {(2, "hold_scale_up_delay")}
    assert dict((now, (d, why)) for now, d, why in out)[665] == (4, "scale_up_forecast")
    assert {d for now, d, _ in out if now >= 665} == {4}


def test_a_scale_up_delay_never_delays_a_wake_from_zero() -> None:
    spec = dataclasses.replace(SPEC, scale_up_delay_s=300.0)
    w = window(1000.0, queue=lambda t: 1.0 if t == 1000.0 else 0.0)
    d, _ = OURS.decide(inp(1000.0, w, ready=0, spec=spec), {"desired": 0, "last_busy": 0.0})
    assert (d.desired, d.reason) == (1, "wake")


def test_a_first_burst_reads_the_cost_from_the_minute_before_it() -> None:
    # Recorded by `make demo`: a model one minute old (no learned cost yet) serves 12.5 req/s
    # of 4 s requests (50 in flight), then a 4x burst saturates its 80 slots. The queue
    # gauge grew faster than the rate gauge says requests arrived (they are scraped at
    # different instants), so arrivals minus queue growth left ~0.1 completions/s and the
    # requests read as costing 543 s: a need of 157 replicas for 200 requests in flight.
    # (Here: 18.9 req/s over the window, the queue up 207 in 11 s, 55.8 in service: 558 s.)
    def rate(t: float) -> float:
        return 12.5 if t <= 998 else 51.0

    def conc(t: float) -> float:
        return 50.0 if t <= 998 else 80.0

    def queue(t: float) -> float:
        return {999.0: 123.0, 1000.0: 207.0}.get(t, 0.0)

    spec = dataclasses.replace(SPEC, max_replicas=200, mean_service_s=None)
    w = window(1000.0, conc=conc, rate=rate, queue=queue, length=12)
    d, st = OURS.decide(inp(1000.0, w, ready=1, spec=spec, cold_start_s=10.0), {"desired": 1})
    assert "per-request cost 4.0," in d.detail
    assert d.desired <= math.ceil(51.0 * 4.0 / T)  # at most the burst's whole load at target
    # 12 s later the window queues all along (the demo's next reading was 2.17 s, from
    # gauges as inconsistent): the last unqueued reading stands until a cost is learned.
    w = window(1012.0, conc=80.0, rate=51.0, queue=lambda t: 400.0 + 20.0 * (t - 1000.0))
    d, _ = OURS.decide(inp(1012.0, w, ready=1, starting=2, spec=spec, cold_start_s=10.0), st)
    assert "per-request cost 4.0," in d.detail


def test_a_window_queued_all_along_reads_the_service_stage_or_the_last_calm_reading() -> None:
    # 100 in service, the queue growing 25/s against 50 req/s of arrivals: 25 completions/s,
    # so 4 s each (Little's law on the service stage, not on the whole system's 100 + queue).
    w = window(1000.0, conc=100.0, rate=50.0, queue=lambda t: 25.0 * (t - 988.0), length=12)
    model = forecast.view({})
    cost, unqueued = GpucapAutoscaler._cost(model, w.samples, 50.0, 250.0, 1.0, SPEC)
    assert cost == pytest.approx(4.0, rel=0.01) and not unqueued
    # A reading from before the window saturated stands over that estimate.
    assert GpucapAutoscaler._cost(model, w.samples, 50.0, 250.0, 1.0, SPEC, 3.0) == (3.0, False)


def test_a_cold_origin_saturated_at_once_reads_the_service_stage_not_its_first_second() -> None:
    # Traffic starts from nothing at 50 req/s of 4 s requests on one 100-slot replica: the
    # first second holds 50 in flight (reads 1 s per request, the slots still filling), then
    # the queue grows by 25/s. That one unqueued second used to stand as the cost (and size
    # the backlog) until the queue was gone; it is only a lower bound.
    def sample(t: int) -> MetricsSample:
        return MetricsSample(float(t), 50.0, 50.0 if t == 1 else 100.0, 25.0 * (t - 1))

    w = MetricsWindow(tuple(sample(t) for t in range(1, 13)))
    model = forecast.view({})
    args = (model, w.samples, 50.0, mean(w, "concurrency"), 1.0, SPEC, None)
    cost, unqueued = GpucapAutoscaler._cost(*args, 0.0)
    assert not unqueued and 3.5 < cost < 5.0
    # Mid-traffic (no cold origin: a restart) the same second is a steady reading.
    assert GpucapAutoscaler._cost(*args, None) == (pytest.approx(1.0), True)


@pytest.mark.parametrize("queued_before_window", [False, True])
def test_slots_full_of_requests_that_waited_do_not_read_as_the_cost(
    queued_before_window: bool,
) -> None:
    # 2 s requests at 50 req/s: after a queue ends at t = 950, the slots hold 300 requests
    # that waited for 4 s, then the 100 of the load. Read over the whole calm part: 2.32 s.
    def sample(t: int) -> MetricsSample:
        return MetricsSample(float(t), 50.0, 300.0 if t <= 954 else 100.0, 40.0 * (t <= 950))

    first = 951 if queued_before_window else 941
    w = MetricsWindow(tuple(sample(t) for t in range(first, 1001)))
    cost, unqueued = GpucapAutoscaler._cost(
        forecast.view({}), w.samples, 50.0, mean(w, "concurrency"), 1.0, SPEC, None, None, 950.0
    )
    assert (cost, unqueued) == (pytest.approx(2.0), True)


def test_a_calm_reading_after_a_queue_bounds_the_service_stage_from_above() -> None:
    # Recorded by `make demo`: a model woken from zero by 45 waiting requests (3 s each)
    # bursts 15 s later. Its only calm seconds follow the wake's queue, with the slots
    # still full of requests that waited (6 s here, an upper bound); the service stage of
    # the burst, from gauges scraped at different instants, read 16.3 s and asked for 29
    # replicas. Here 2 s requests: the calm seconds read 6 s, the service stage 9.1 s.
    def sample(t: int) -> MetricsSample:
        if t <= 950:
            return MetricsSample(float(t), 50.0, 100.0, 40.0)
        if t <= 954:
            return MetricsSample(float(t), 50.0, 300.0, 0.0)
        return MetricsSample(float(t), 50.0, 100.0, 49.0 * (t - 954))

    w = MetricsWindow(tuple(sample(t) for t in range(941, 1001)))
    cost, unqueued = GpucapAutoscaler._cost(
        forecast.view({}), w.samples, 50.0, mean(w, "concurrency"), 1.0, SPEC, None, None, None
    )
    assert (cost, unqueued) == (pytest.approx(6.0), False)


def test_the_service_stage_counts_requests_that_moved_from_the_queue_into_service() -> None:
    # 50 req/s of 4 s requests queue all along; a second replica arrives at t = 7 and takes
    # 100 of the queue into service: completions go from 25/s to 50/s. Read from the queue
    # alone, the 100 that moved into service count as completed (3.14 s); the requests in
    # the system (served + waiting) grew by 125 in 11 s: 38.6 completions/s, 150 served.
    def sample(t: int) -> MetricsSample:
        if t <= 6:
            return MetricsSample(float(t), 50.0, 100.0, 500.0 + 25.0 * (t - 1))
        return MetricsSample(float(t), 50.0, 200.0, 525.0)

    w = MetricsWindow(tuple(sample(t) for t in range(1, 13)))
    cost, unqueued = GpucapAutoscaler._cost(
        forecast.view({}), w.samples, 50.0, mean(w, "concurrency"), 1.0, SPEC
    )
    assert not unqueued and cost == pytest.approx(150.0 / (50.0 - 125.0 / 11.0))


def mean(w: MetricsWindow, metric: str) -> float:
    value = mean_metric(w.samples, metric)
    assert value is not None
    return value


def test_a_completion_counter_reads_the_service_stage_despite_a_lagging_rate() -> None:
    # 100 slots busy with 4 s requests (25 complete per second), the queue growing 25/s;
    # the rate, scraped at another instant than the gauges, still reads 40 req/s for 50.
    # From arrivals minus the growth the service stage reads 100 / 15 = 6.7 s per request
    # (what `make demo` over-read); a counted completion rate reads the 4 s it is.
    def sample(t: int, counted: bool) -> MetricsSample:
        done = 25.0 if counted else None
        return MetricsSample(float(t), 40.0, 100.0, 25.0 * t, completion_rate=done)

    for counted, want in ((False, 100.0 / 15.0), (True, 4.0)):
        w = MetricsWindow(tuple(sample(t, counted) for t in range(1, 13)))
        cost, unqueued = GpucapAutoscaler._cost(
            forecast.view({}), w.samples, 40.0, mean(w, "concurrency"), 1.0, SPEC
        )
        assert not unqueued and cost == pytest.approx(want)
    # A count some samples lack is not a rate: the window falls back to the gauges.
    partial = MetricsWindow((sample(1, False), *(sample(t, True) for t in range(2, 13))))
    cost, _ = GpucapAutoscaler._cost(
        forecast.view({}), partial.samples, 40.0, mean(partial, "concurrency"), 1.0, SPEC
    )
    assert cost == pytest.approx(100.0 / 15.0)

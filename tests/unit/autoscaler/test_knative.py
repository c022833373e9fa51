"""Knative KPA baseline pinned to autoscalers.md §1 (synthetic time, table-driven)."""

from __future__ import annotations

import pytest

from autoscaler.baselines import KnativeAutoscaler, KnativeConfig
from autoscaler.types import NoData

from .synthetic import SPEC, inp, window

KPA = KnativeAutoscaler()
# Out of the box (§1.8): pod retention 0 s, not the model's keep-alive.
STOCK = KnativeAutoscaler(config=KnativeConfig(scale_to_zero_pod_retention_s=0.0))
SETTLED = {"reached_initial": True, "started": True}  # past initial scale and restart


def test_defaults_match_the_reference() -> None:
    cfg = KnativeConfig()
    assert (cfg.stable_window_s, cfg.panic_window_s) == (60.0, 6.0)
    assert cfg.panic_threshold_percentage == 200.0
    assert (cfg.max_scale_up_rate, cfg.max_scale_down_rate) == (1000.0, 2.0)
    assert (cfg.scale_to_zero_grace_s, cfg.target_burst_capacity) == (30.0, 211.0)
    assert cfg.scale_to_zero_pod_retention_s is None  # the model's keep-alive (see below)
    assert (KPA.tick_s, KPA.metric_lag_s) == (2.0, 1.0)


@pytest.mark.parametrize(
    ("label", "ready", "stable_conc", "panic_conc", "want", "reason"),
    [
        # dspc = ceil(S / 70); no panic below 2x ready
        ("exact fit", 2, 140.0, 140.0, 2, "knative_stable"),
        ("one over", 2, 141.0, 141.0, 3, "knative_stable"),
        ("ratio 1.5 is calm", 2, 210.0, 210.0, 3, "knative_stable"),
        ("ratio 2.0 panics", 2, 280.0, 280.0, 4, "knative_panic"),
        # panic is judged on the 6 s window only
        ("short spike panics", 2, 100.0, 300.0, 5, "knative_panic"),
        # max scale-down rate 2: at most halve per tick
        ("halve at most", 10, 1.0, 1.0, 5, "knative_stable"),
        # max scale-up rate 1000 x ready
        ("scale-up cap", 1, 10**6, 10.0, 1000, "knative_stable"),
    ],
)
def test_tick_decision(
    label: str, ready: int, stable_conc: float, panic_conc: float, want: int, reason: str
) -> None:
    now = 1000.0
    w = window(now, conc=lambda t: panic_conc if t > now - 6 else stable_conc, length=60)
    # stable = average over 60 s: 54 samples of stable_conc + 6 of panic_conc
    d, _ = KPA.decide(inp(now, w, ready=ready), SETTLED)
    assert d.reason == reason, label
    assert d.desired == want, label


def test_panic_counts_only_ready_pods_so_starting_capacity_does_not_stop_it() -> None:
    # 5 pods are starting; the ratio is still computed over the single ready pod.
    d, st = KPA.decide(inp(100.0, window(100.0, conc=200.0), ready=1, starting=5), SETTLED)
    assert d.reason == "knative_panic" and st["panic_time"] == 100.0
    assert d.desired == 3


def test_never_scales_down_while_panicking_and_exits_60s_after_last_trigger() -> None:
    st: dict = dict(SETTLED)
    d, st = KPA.decide(inp(0.0, window(0.0, conc=700.0), ready=2), st)
    assert (d.desired, d.reason) == (10, "knative_panic")
    # Load vanishes: the output holds at the panic maximum for the whole panic period.
    t = 2.0
    while t <= 60.0:
        d, st = KPA.decide(inp(t, window(t, conc=0.0), ready=10), st)
        assert (d.desired, d.reason) == (10, "knative_panic"), t
        t += 2.0
    # panicTime + 60 < now: panic ends, the stable decision takes over (halved at most).
    d, st = KPA.decide(inp(62.0, window(62.0, conc=0.0), ready=10), st)
    assert d.reason != "knative_panic"
    assert d.desired == 5


def test_panic_grows_with_load_but_never_shrinks() -> None:
    st: dict = dict(SETTLED)
    d, st = KPA.decide(inp(0.0, window(0.0, conc=300.0), ready=1), st)
    assert d.desired == 5
    d, st = KPA.decide(inp(2.0, window(2.0, conc=600.0), ready=1), st)
    assert d.desired == 9
    d, st = KPA.decide(inp(4.0, window(4.0, conc=300.0), ready=1), st)
    assert d.desired == 9


def test_restart_with_ready_pods_starts_in_panic_at_current_scale() -> None:
    d, st = KPA.decide(inp(0.0, window(0.0, conc=0.0), ready=6), {})
    assert (d.desired, d.reason) == (6, "knative_panic")


def test_scale_to_zero_needs_a_quiet_stable_window_then_the_grace_period() -> None:
    # Busy until t=100, then silent. One ready pod, active since t=0; the activator is in
    # the path (EBC = 1*100 - 211 - P < 0), so the grace starts when the PA goes inactive
    # ... or earlier, when the activator entered the path.
    st: dict = dict(SETTLED)
    busy = lambda t: 10.0 if t <= 100 else 0.0  # noqa: E731
    series = []
    t = 0.0
    while t <= 260.0:
        d, st = STOCK.decide(inp(t, window(t, conc=busy, length=120), ready=1), st)
        series.append((t, d.desired, d.reason))
        t += 2.0
    zero_at = next(t for t, n, _ in series if n == 0)
    # the 60 s average reaches 0 at t=162 (last busy sample at 100 leaves at 160+)
    assert 160.0 <= zero_at <= 162.0 + 30.0
    assert all(n == 1 for t, n, _ in series if t < zero_at)


def test_scale_to_zero_waits_grace_when_activator_was_not_in_path() -> None:
    # One ready pod with CC 1000: EBC = 1000 - 211 - P >= 0, so pods serve directly and the
    # 30 s grace starts only when the PA goes inactive (desired 0 after a quiet window).
    spec = SPEC.__class__(
        **{**SPEC.__dict__, "max_concurrency_per_replica": 1000.0, "target_per_replica": 700.0}
    )
    st: dict = {**SETTLED, "active_since": -1000.0}
    d, st = STOCK.decide(inp(-2.0, window(-2.0, conc=1.0), ready=1, spec=spec), st)
    assert st["proxy_since"] is None
    t, zero_at = 0.0, None
    while t <= 200.0 and zero_at is None:
        d, st = STOCK.decide(inp(t, window(t, conc=0.0), ready=1, spec=spec), st)
        if d.desired == 0:
            zero_at = t
        else:
            assert d.reason == "knative_inactive_grace"
        t += 2.0
    assert zero_at == 30.0


def _zero_time(kpa: KnativeAutoscaler, spec: object, st: dict, until: float) -> float | None:
    t = 0.0
    while t <= until:
        d, st = kpa.decide(inp(t, window(t, conc=0.0), ready=1, spec=spec), st)  # type: ignore[arg-type]
        if d.desired == 0:
            return t
        assert d.desired == 1
        t += 2.0
    return None


@pytest.mark.parametrize(
    ("retention", "slots", "zero_at"),
    [
        # the model's 600 s keep-alive as the retention period: a floor under both paths
        (None, 100.0, 600.0),  # activator in the path (EBC < 0) since the first tick
        (None, 1000.0, 600.0),  # pods serving directly
        # an explicit retention shorter than the grace: the grace still applies
        (10.0, 1000.0, 30.0),
        # the fast path (activator in the path for the grace) cannot beat the retention
        (90.0, 100.0, 90.0),
    ],
)
def test_pod_retention_is_a_floor_under_the_grace_and_the_fast_path(
    retention: float | None, slots: float, zero_at: float
) -> None:
    spec = SPEC.__class__(
        **{**SPEC.__dict__, "max_concurrency_per_replica": slots, "scale_to_zero_grace_s": 600.0}
    )
    kpa = KnativeAutoscaler(config=KnativeConfig(scale_to_zero_pod_retention_s=retention))
    # Active for long, quiet since before t=0: the PA goes inactive on the first tick.
    st: dict = {**SETTLED, "active_since": -1000.0, "proxy_since": -1000.0 if slots < 211 else None}
    assert _zero_time(kpa, spec, st, 1000.0) == zero_at


def test_scale_from_zero_is_immediate_on_activator_stats() -> None:
    # No ready pod: only the activator reports, so one queued request is the whole average.
    w = window(500.0, conc=lambda t: 1.0 if t == 500.0 else 0.0)
    d, _ = KPA.decide(inp(500.0, w, ready=0), SETTLED)
    assert d.desired == 1


def test_initial_scale_holds_one_pod_until_first_ready() -> None:
    d, st = KPA.decide(inp(0.0, window(0.0, conc=0.0), ready=0), {})
    assert d.desired == 1
    d, st = KPA.decide(inp(2.0, window(2.0, conc=0.0), ready=0, starting=1), st)
    assert d.desired == 1
    assert not st.get("reached_initial")


def test_scale_down_delay_is_a_max_window() -> None:
    kpa = KnativeAutoscaler(config=KnativeConfig(scale_down_delay_s=30.0))
    st: dict = dict(SETTLED)
    d, st = kpa.decide(inp(0.0, window(0.0, conc=280.0), ready=4), st)
    assert d.desired == 4
    d, st = kpa.decide(inp(2.0, window(2.0, conc=140.0), ready=4), st)
    assert d.desired == 4  # held by the window
    d, st = kpa.decide(inp(32.0, window(32.0, conc=140.0), ready=4), st)
    assert d.desired == 2


def test_no_data_holds_the_previous_decision() -> None:
    d, st = KPA.decide(inp(0.0, window(0.0, conc=280.0), ready=2), dict(SETTLED))
    d2, _ = KPA.decide(inp(2.0, NoData("scrape failed"), ready=4), st)
    assert (d2.desired, d2.reason) == (d.desired, "knative_no_data")


def test_bounds_apply() -> None:
    spec = SPEC.__class__(**{**SPEC.__dict__, "min_replicas": 3, "max_replicas": 5})
    d, _ = KPA.decide(inp(0.0, window(0.0, conc=7000.0), ready=2, spec=spec), SETTLED)
    assert d.desired == 5
    d, _ = KPA.decide(inp(0.0, window(0.0, conc=0.0), ready=2, spec=spec), SETTLED)
    assert d.desired == 3


def test_restart_panic_applies_on_the_first_tick_with_metrics() -> None:
    _, st = KPA.decide(inp(0.0, NoData("no scrape yet"), ready=4), {})
    d, _ = KPA.decide(inp(2.0, window(2.0, conc=1.0), ready=4), st)
    assert (d.desired, d.reason) == (4, "knative_panic")


def test_a_pa_active_for_less_than_a_stable_window_is_held_at_one() -> None:
    # §1.7 step 2: a pod that just became ready is kept a whole stable window before the PA
    # can go inactive, even with no traffic at all (out of the box, no retention); then
    # the activator, in the path since the first tick, takes it to zero at once.
    st: dict = dict(SETTLED)
    t, reasons = 0.0, []
    while True:
        d, st = STOCK.decide(inp(t, window(t, conc=0.0), ready=1), st)
        if d.desired == 0:
            break
        reasons.append(d.reason)
        t += 2.0
    assert t == 60.0
    assert set(reasons) == {"knative_hold_one"}

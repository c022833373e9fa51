"""Kubernetes HPA baseline pinned to autoscalers.md §4.1-4.2."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.baselines import HpaAutoscaler, HpaConfig
from autoscaler.types import NoData

from .synthetic import SPEC, inp, window

HPA = HpaAutoscaler()
T = SPEC.target_per_replica


def tick(hpa: HpaAutoscaler, st: dict, t: float, total: float, ready: int, starting: int = 0):
    return hpa.decide(inp(t, window(t, conc=total, length=15), ready=ready, starting=starting), st)


def test_defaults_match_the_reference() -> None:
    cfg = HpaConfig()
    assert (cfg.sync_period_s, cfg.tolerance, cfg.downscale_stabilization_s) == (15, 0.1, 300)
    assert (cfg.scale_up_limit_factor, cfg.scale_up_limit_minimum) == (2.0, 4.0)
    assert HPA.tick_s == 15.0


@pytest.mark.parametrize(
    ("per_pod_ratio", "want"),
    [(1.05, 4), (0.95, 4), (1.09, 4), (0.91, 4), (1.15, 5), (0.85, 4), (1.5, 6), (2.0, 8)],
)
def test_tolerance_and_ceil(per_pod_ratio: float, want: int) -> None:
    d, _ = tick(HPA, {"desired": 4}, 0.0, 4 * T * per_pod_ratio, 4)
    assert d.desired == want


@pytest.mark.parametrize(
    ("per_pod_ratio", "want"),
    # At 20 pods the ceil no longer hides the band: 0.95 and 0.91 would be 19 without it.
    [(0.95, 20), (0.91, 20), (0.89, 18), (0.85, 17), (0.5, 10)],
)
def test_tolerance_holds_a_scale_down_inside_the_band(per_pod_ratio: float, want: int) -> None:
    d, _ = tick(HPA, {"desired": 20}, 0.0, 20 * T * per_pod_ratio, 20)
    assert d.desired == want


def test_scale_up_cap_legacy_is_max_of_double_and_four() -> None:
    d, _ = tick(HPA, {"desired": 1}, 0.0, 100 * T, 1)
    assert d.desired == 4
    d, _ = tick(HPA, {"desired": 10}, 0.0, 100 * T, 10)
    assert d.desired == 20


def test_scale_down_waits_for_the_300s_stabilization_window() -> None:
    st: dict = {"desired": 8}
    d, st = tick(HPA, st, 0.0, 8 * T, 8)
    t = 15.0
    while t < 300.0:
        d, st = tick(HPA, st, t, 2 * T, 8)
        assert d.desired == 8, t
        t += 15.0
    d, st = tick(HPA, st, 300.0, 2 * T, 8)
    assert d.desired == 2


def test_missing_pods_count_as_zero_on_scale_up_and_full_on_scale_down() -> None:
    # 2 ready at 2x target, 2 still loading: ratio over 4 pods = 4T/4T = 1 -> keep current
    d, _ = tick(HPA, {"desired": 4}, 0.0, 4 * T, 2, starting=2)
    assert d.desired == 4
    # 2 ready at 3x target, 2 loading: 6T over 4 pods -> 1.5 -> 6
    d, _ = tick(HPA, {"desired": 4}, 0.0, 6 * T, 2, starting=2)
    assert d.desired == 6
    # 2 ready nearly idle, 2 loading counted at target: (0.2T + 2T) / 4T = 0.55 -> 3
    d, _ = tick(HPA, {"desired": 4}, 0.0, 0.2 * T, 2, starting=2)
    assert d.desired == 3


def test_never_scales_from_zero_and_keeps_at_least_one() -> None:
    # The HPA alone (no KEDA, as where the model keeps replicas: min_replicas >= 1).
    hpa = HpaAutoscaler(config=HpaConfig(keda=False))
    d, _ = tick(hpa, {"desired": 0}, 0.0, 50 * T, 0)
    assert (d.desired, d.reason) == (0, "hpa_scaling_disabled")
    d, _ = tick(hpa, {}, 0.0, 0.0, 0)
    assert d.desired == 1  # a new Deployment starts at minReplicas (1)
    d, _ = tick(hpa, {"desired": 1}, 0.0, 0.0, 1)
    assert d.desired == 1
    # min_replicas 1: KEDA's scale to zero does not apply, the default is the HPA alone
    spec = dataclasses.replace(SPEC, min_replicas=1)
    d, _ = HPA.decide(inp(0.0, window(0.0, conc=50 * T, length=15), spec=spec), {"desired": 0})
    assert (d.desired, d.reason) == (0, "hpa_scaling_disabled")


def test_keda_scales_from_and_to_zero_where_the_model_allows_zero() -> None:
    # Issue 23 (d): SPEC allows 0 replicas, so the HPA runs under a KEDA ScaledObject.
    d, st = tick(HPA, {}, 0.0, 0.0, 0)  # created at 0 replicas, idle: stays there
    assert (d.desired, d.reason) == (0, "hpa_scaling_disabled")
    d, st = tick(HPA, st, 15.0, 50 * T, 0)  # requests wait, but KEDA polls every 30 s
    assert d.desired == 0
    d, st = tick(HPA, st, 30.0, 50 * T, 0)  # the poll sees activity: 0 -> 1
    assert (d.desired, d.reason) == (1, "keda_activate")
    d, st = tick(HPA, st, 45.0, 3 * T, 1)  # the HPA owns 1 -> N
    assert (d.desired, d.reason) == (3, "hpa_scale_up")
    out = []
    t = 60.0
    while t <= 420.0:  # idle from 60 s: last active at 30 s, so 0 after 330 s
        d, st = tick(HPA, st, t, 0.0, 1)
        out.append((t, d.desired, d.reason))
        t += 15.0
    zero = next(t for t, n, _ in out if n == 0)
    assert zero == 360.0  # the first poll past 30 + 300 s
    assert all(n >= 1 for t, n, _ in out if t < zero)  # the HPA alone keeps one
    assert "keda_scale_to_zero" in {r for _, _, r in out}


def test_behavior_policies_limit_each_15s_period() -> None:
    hpa = HpaAutoscaler(config=HpaConfig(behavior=True))
    d, st = tick(hpa, {"desired": 2}, 0.0, 100 * T, 2)
    assert d.desired == 6  # max(2 + 4 pods, 2 x 200 %)
    d, st = tick(hpa, st, 15.0, 100 * T, 6)
    assert d.desired == 12  # new period: max(6 + 4, 12)
    # scale-down: 300 s window of max, then 100 % per period allows any drop
    spec_t = 300.0
    t = 30.0
    while t < spec_t + 30.0:
        d, st = tick(hpa, st, t, 1 * T, 12)
        t += 15.0
    assert d.desired == 1


def test_tokens_per_s_metric_is_per_pod() -> None:
    spec = dataclasses.replace(SPEC, metric="tokens_per_s", target_per_replica=1000.0)
    w = window(0.0, length=15)
    samples = tuple(dataclasses.replace(s, tokens_per_s=6000.0) for s in w.samples)
    d, _ = HPA.decide(inp(0.0, w.__class__(samples), ready=3, spec=spec), {"desired": 3})
    assert d.desired == 6


def test_no_data_holds() -> None:
    d, _ = HPA.decide(inp(0.0, NoData("adapter down"), ready=3), {"desired": 3})
    assert (d.desired, d.reason) == (3, "hpa_no_data")


def test_pending_pods_are_ignored_and_loading_ones_are_missing() -> None:
    # 2 ready pods at 2x target. 4 pods on nodes still provisioning (Pending) change
    # nothing: ceil(2 x 2) = 4. 4 pods loading the model (running, no metric yet) count
    # 0 % on the way up: 4T over 6 pods is below target, so the direction flips and the
    # recommendation stays at the current 2.
    w = window(0.0, conc=4 * T, length=15)
    d, _ = HPA.decide(inp(0.0, w, ready=2, provisioning=4), {"desired": 2})
    assert d.desired == 4
    d, _ = HPA.decide(inp(0.0, w, ready=2, starting=4), {"desired": 2})
    assert d.desired == 2

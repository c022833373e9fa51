"""SkyServe RequestRateAutoscaler baseline pinned to autoscalers.md §2.1."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.baselines import SkyServeAutoscaler, SkyServeConfig
from autoscaler.baselines.skyserve import target_qps_per_replica
from autoscaler.types import NoData

from .synthetic import SPEC, inp, window

SKY = SkyServeAutoscaler()
# target 70 in flight at 2 s per request -> 35 QPS per replica (Little's law)
QPS_PER_REPLICA = 35.0


def run(st: dict, t0: float, qps: float, ticks: int, every: float = 20.0) -> tuple[list, dict]:
    out = []
    for i in range(ticks):
        t = t0 + i * every
        d, st = SKY.decide(inp(t, window(t, rate=qps, length=60)), st)
        out.append(d)
    return out, st


def test_defaults_match_the_reference() -> None:
    cfg = SkyServeConfig()
    assert (cfg.qps_window_s, cfg.decision_interval_s, cfg.no_replica_interval_s) == (60, 20, 5)
    assert (cfg.upscale_threshold, cfg.downscale_threshold) == (15, 60)
    # Timestamps reach the controller with the load balancer's sync every 20 s (§2).
    assert (SKY.metric_lag_s, SKY.metric_push_s) == (0.0, 20.0)
    # ... on the load balancer's own phase, not the decisions' (issue 23 e).
    assert SKY.metric_push_random_phase and SKY.rejects_without_ready
    assert target_qps_per_replica(SPEC) == QPS_PER_REPLICA


def test_from_zero_snaps_to_raw_at_once() -> None:
    d, st = SKY.decide(inp(0.0, window(0.0, rate=100.0, length=60)), {})
    assert (d.desired, d.reason) == (3, "skyserve_from_zero")  # ceil(100 / 35)


@pytest.mark.parametrize(
    ("start", "qps", "agreeing", "changes"),
    [
        (2, 140.0, 14, False),  # 14 x 20 s = 280 s of "up": not yet
        (2, 140.0, 15, True),  # 15 agreeing decisions = 300 s: scale up
        (4, 35.0, 59, False),  # 59 x 20 s of "down": not yet
        (4, 35.0, 60, True),  # 60 = 1200 s: scale down
    ],
)
def test_hysteresis_needs_consecutive_agreeing_decisions(
    start: int, qps: float, agreeing: int, changes: bool
) -> None:
    st: dict = {"desired": start}
    out, st = run(st, 100.0, qps, agreeing)
    raw = -(-qps // QPS_PER_REPLICA)
    assert all(d.desired == start for d in out[:-1])
    assert out[-1].desired == (raw if changes else start)


def test_a_tick_at_equality_resets_the_count() -> None:
    st: dict = {"desired": 2}
    _, st = run(st, 0.0, 140.0, 14)
    assert st["up_ctr"] == 14
    _, st = run(st, 280.0, 70.0, 1)  # raw == target: both counters reset
    assert st["up_ctr"] == 0
    out, st = run(st, 300.0, 140.0, 14)
    assert all(d.desired == 2 for d in out)


def test_opposite_direction_resets_the_other_counter() -> None:
    st: dict = {"desired": 2}
    _, st = run(st, 0.0, 140.0, 10)
    _, st = run(st, 200.0, 10.0, 1)
    assert (st["up_ctr"], st["down_ctr"]) == (0, 1)


def test_decides_every_20s_at_a_target_and_every_5s_at_zero() -> None:
    st: dict = {"desired": 2, "last_decision": 0.0}
    d, st2 = SKY.decide(inp(10.0, window(10.0, rate=1000.0, length=60)), st)
    assert d.reason == "skyserve_between_decisions" and st2 == st
    st = {"desired": 0, "last_decision": 0.0}
    d, _ = SKY.decide(inp(5.0, window(5.0, rate=10.0, length=60)), st)
    assert d.desired == 1


def test_qps_is_requests_in_the_last_60s_over_60() -> None:
    # 30 requests in the window (0.5/s for 60 one-second samples) -> 0.5 QPS -> 1 replica
    st: dict = {"desired": 0}
    d, _ = SKY.decide(inp(100.0, window(100.0, rate=0.5, length=600)), st)
    assert d.desired == 1
    assert "qps 0.50" in d.detail


def test_needs_a_service_time_to_turn_concurrency_into_qps() -> None:
    spec = dataclasses.replace(SPEC, mean_service_s=None)
    with pytest.raises(ValueError, match="mean_service_s"):
        SKY.decide(inp(0.0, window(0.0, rate=1.0), spec=spec), {})
    explicit = dataclasses.replace(spec, extra={"target_qps_per_replica": 10.0})
    d, _ = SKY.decide(inp(0.0, window(0.0, rate=25.0, length=60), spec=explicit), {})
    assert d.desired == 3


def test_no_data_holds() -> None:
    d, _ = SKY.decide(inp(0.0, NoData("lb down"), ready=3), {"desired": 3})
    assert (d.desired, d.reason) == (3, "skyserve_no_data")


def test_the_first_target_is_min_replicas_whatever_runs() -> None:
    # Issue 23 (e): RequestRateAutoscaler starts at target_num_replicas = min_replicas, not
    # at the replicas the replay opens with. min 0: from zero, raw at once.
    d, st = SKY.decide(inp(0.0, window(0.0, rate=35.0, length=60), ready=5), {})
    assert (d.desired, d.reason) == (1, "skyserve_from_zero")
    # min 2, raw 4: the target starts at 2 and the upscale must wait out its 300 s.
    spec = dataclasses.replace(SPEC, min_replicas=2)
    d, st = SKY.decide(inp(0.0, window(0.0, rate=140.0, length=60), ready=5, spec=spec), {})
    assert (d.desired, d.reason) == (2, "skyserve_upscale_pending")
    # Before its first decision (no data yet) it leaves what runs alone and sets no target.
    d, st = SKY.decide(inp(0.0, NoData("no scrape yet"), ready=5), {})
    assert d.desired == 5 and "desired" not in st

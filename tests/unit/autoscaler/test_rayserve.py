"""Ray Serve default policy baseline pinned to autoscalers.md §3."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.baselines import RayServeAutoscaler, RayServeConfig
from autoscaler.types import NoData

from .synthetic import SPEC, inp, window

RAY = RayServeAutoscaler()
TARGET = 70.0  # SPEC.target_per_replica stands in for target_ongoing_requests


def loop(
    ray: RayServeAutoscaler, st: dict, t0: float, ongoing: float, ready: int, n: int, dt: float
) -> tuple[list, dict]:
    out = []
    for i in range(1, n + 1):
        t = t0 + i * dt
        d, st = ray.decide(inp(t, window(t, conc=ongoing, length=30), ready=ready), st)
        out.append(d)
    return out, st


def test_defaults_match_the_reference() -> None:
    cfg = RayServeConfig()
    assert (cfg.look_back_period_s, cfg.upscale_delay_s, cfg.downscale_delay_s) == (30, 30, 600)
    assert cfg.downscale_to_zero_delay_s is None
    assert (cfg.upscaling_factor, cfg.downscaling_factor) == (1.0, 1.0)
    # Metrics pushed to the controller every 10 s (§3.1), decided on every 0.1 s (§3.2).
    assert (RAY.tick_s, RAY.metric_lag_s, RAY.metric_push_s) == (0.1, 0.0, 10.0)


@pytest.mark.parametrize("dt", [0.1, 1.0])
def test_upscale_needs_more_than_300_loops(dt: float) -> None:
    st: dict = {"desired": 2, "last_t": 0.0}
    loops_per_call = round(dt / 0.1)
    calls = 300 // loops_per_call  # exactly 300 loops: not yet
    out, st = loop(RAY, st, 0.0, 4 * TARGET, 2, calls, dt)
    assert all(d.desired == 2 for d in out)
    out, st = loop(RAY, st, calls * dt, 4 * TARGET, 2, 1, dt)  # loop 301+
    assert (out[-1].desired, out[-1].reason) == (4, "rayserve_upscale")


def test_downscale_needs_more_than_6000_loops_and_a_flip_resets() -> None:
    st: dict = {"desired": 4, "last_t": 0.0}
    out, st = loop(RAY, st, 0.0, TARGET, 4, 599, 1.0)
    assert all(d.desired == 4 for d in out) and st["ctr"] == -5990
    _, st = loop(RAY, st, 599.0, 8 * TARGET, 4, 1, 1.0)  # one upward loop resets
    assert st["ctr"] > 0
    out, st = loop(RAY, st, 600.0, TARGET, 4, 601, 1.0)  # 6000 loops: not yet; 6010: yes
    assert out[-2].desired == 4 and out[-1].desired == 1


def test_cold_start_fast_path_bypasses_the_delay() -> None:
    d, st = RAY.decide(inp(1.0, window(1.0, conc=5.0, length=30), ready=0), {"desired": 0})
    assert (d.desired, d.reason) == (1, "rayserve_cold_start")
    # while nothing runs, the target is kept (no further scale-up on the backlog)
    d, st = RAY.decide(inp(2.0, window(2.0, conc=5000.0, length=30), ready=0), {"desired": 3})
    assert d.desired == 3


def test_to_zero_only_from_one_replica() -> None:
    spec = dataclasses.replace(SPEC, min_replicas=0)
    st: dict = {"desired": 3, "last_t": 0.0}
    d = None
    for i in range(1, 602):
        t = float(i)
        d, st = RAY.decide(inp(t, window(t, conc=0.0, length=30), ready=3, spec=spec), st)
    assert d is not None and d.desired == 1  # bounded to >= 1 from above 1
    for i in range(602, 1203):
        t = float(i)
        d, st = RAY.decide(inp(t, window(t, conc=0.0, length=30), ready=1, spec=spec), st)
    assert d.desired == 0


@pytest.mark.parametrize(
    ("up", "down", "current", "ongoing", "want"),
    [
        (0.5, 1.0, 2, 6 * TARGET, 4),  # ceil(2 + 0.5 x (6 - 2))
        (1.0, 0.1, 10, 8 * TARGET, 9),  # ceil(10 - 0.2) == 10 -> forced progress to 9
        (1.0, 0.5, 10, 2 * TARGET, 6),  # ceil(10 + 0.5 x (2 - 10))
    ],
)
def test_smoothing_factors(up: float, down: float, current: int, ongoing: float, want: int) -> None:
    ray = RayServeAutoscaler(
        config=RayServeConfig(
            upscaling_factor=up, downscaling_factor=down, upscale_delay_s=0, downscale_delay_s=0
        )
    )
    st: dict = {"desired": current, "last_t": 0.0}
    out, _ = loop(ray, st, 0.0, ongoing, current, 1, 0.1)
    assert out[-1].desired == want


def test_no_data_holds() -> None:
    d, _ = RAY.decide(inp(0.0, NoData("push missing"), ready=2), {"desired": 2})
    assert (d.desired, d.reason) == (2, "rayserve_no_data")


def test_a_running_deployment_keeps_its_replicas_on_the_first_decision() -> None:
    d, _ = RAY.decide(inp(0.0, window(0.0, conc=TARGET, length=30), ready=4), {})
    assert d.desired == 4  # downscaling still waits 600 s


def test_the_smoothing_starts_from_running_replicas_not_starting_ones() -> None:
    # §3.2: current = running replicas. With 2 running and 6 still starting, a down-factor
    # of 0.5 at 2 x target ongoing goes from 2 (not from 8): ceil(2 + 0.5 x 0) = 2.
    ray = RayServeAutoscaler(
        config=RayServeConfig(downscaling_factor=0.5, upscale_delay_s=0, downscale_delay_s=0)
    )
    st: dict = {"desired": 8, "last_t": 0.0}
    w = window(0.1, conc=2 * TARGET, length=30)
    d, _ = ray.decide(inp(0.1, w, ready=2, starting=6), st)
    assert d.desired == 2  # from live (8) it would be ceil(8 + 0.5 x (2 - 8)) = 5

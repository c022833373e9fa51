"""Ray Serve's default autoscaling policy, re-implemented as a simulator baseline.

Follows ``autoscalers.md`` §3 (ray-project/ray ``python/ray/serve/autoscaling_policy.py`` @
00590c45): the ongoing-requests metric averaged over a 30 s look-back, desired =
total / target_ongoing_requests with up/down smoothing factors, the 0 -> N cold-start fast
path that bypasses every delay, and the signed delay counter kept across 0.1 s control
loops (upscale 30 s, downscale 600 s, to-zero only from exactly one replica)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from autoscaler.baselines.common import clamp, concurrency_target, hold
from autoscaler.types import UTILIZATION_SWEEP, AutoscalerInput, Decision, Knob, NoData, State
from autoscaler.window import mean_concurrency, recent


@dataclass(frozen=True)
class RayServeConfig:
    look_back_period_s: float = 30.0  # §3.3
    upscale_delay_s: float = 30.0  # §3.3
    downscale_delay_s: float = 600.0  # §3.3
    downscale_to_zero_delay_s: float | None = None  # §3.3: None -> downscale_delay_s
    # §3.3: upscaling/downscaling_factor None -> smoothing_factor 1.0
    upscaling_factor: float = 1.0
    downscaling_factor: float = 1.0
    control_loop_interval_s: float = 0.1  # §3.3: CONTROL_LOOP_INTERVAL_S


@dataclass(frozen=True)
class RayServeAutoscaler:
    """Ray Serve's default policy. Decides every 0.1 s control loop; when called less often
    it counts the loops that elapsed since the last call (its inputs only change when a
    metrics push or a replica state change arrives, so the result is the same)."""

    name: str = "rayserve"
    config: RayServeConfig = field(default_factory=RayServeConfig)
    tick_s: float = 0.1  # §3.2: CONTROL_LOOP_INTERVAL_S
    # §3.1: metrics pushed to the controller every 10 s ("adds up to about 10 s of lag"):
    # the 0.1 s loop sees them up to the last push, 0-10 s old.
    metric_lag_s: float = 0.0
    metric_push_s: float = 10.0
    metric_push_phase_s: float = 0.0  # (the loop is 100x faster: any phase gives the same)
    wakes_on_arrival: bool = False
    knob: Knob = Knob(
        name="target_ongoing_requests",
        # §3.3: any positive value; max_ongoing_requests (the slot count) caps what one
        # replica admits, so the range is a fraction of it.
        fractions=UTILIZATION_SWEEP,
        source="autoscalers.md §3.3",
    )

    @property
    def window_s(self) -> float:
        """§3.1: the metric is averaged over ``look_back_period_s``, whatever its value (the
        simulator keeps this much history)."""
        return self.config.look_back_period_s

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        cfg, spec, now = self.config, inp.spec, inp.now
        st: dict[str, Any] = dict(state)
        if isinstance(inp.metrics, NoData):
            return hold(inp, st, "rayserve_no_data", inp.metrics.reason)
        # The target before any decision: initial_replicas None -> min_replicas (§3.3) for a
        # new deployment; a running one keeps the replicas it has when this policy takes over.
        target = int(
            st.get("desired", clamp(inp.replicas.live, spec.min_replicas, spec.max_replicas))
        )
        last = st.get("last_t")
        loops = 1 if last is None else max(1, round((now - last) / cfg.control_loop_interval_s))
        st["last_t"] = now

        samples = recent(inp.metrics, now, cfg.look_back_period_s)
        total = mean_concurrency(samples) or 0.0
        current = inp.replicas.ready  # running replicas
        target_ongoing = concurrency_target(spec)

        # §3.2: cold-start fast path, bypassing every delay.
        if current == 0:
            if total > 0:
                target = max(math.ceil(1 * cfg.upscaling_factor), target)
                reason = "rayserve_cold_start"
            else:
                reason = "rayserve_idle_zero"
            target = clamp(target, spec.min_replicas, spec.max_replicas)
            st["desired"] = target
            return Decision(target, reason, f"ongoing {total:.2f}, no running replica"), st

        desired = total / target_ongoing
        delta = desired - current
        factor = cfg.upscaling_factor if delta > 0 else cfg.downscaling_factor
        scaled = math.ceil(current + factor * delta)
        if math.ceil(desired) < current and scaled == current:
            scaled -= 1  # guarantees progress when scaling down
        bounded = clamp(scaled, spec.min_replicas, spec.max_replicas)

        # §3.2: the delay logic, a signed counter of consecutive control loops.
        ctr = int(st.get("ctr", 0))
        reason = "rayserve_steady"
        if bounded > target:
            ctr = max(ctr, 0) + loops
            reason = "rayserve_upscale_pending"
            if ctr > int(cfg.upscale_delay_s / cfg.control_loop_interval_s):
                target, ctr, reason = bounded, 0, "rayserve_upscale"
        elif bounded < target:
            ctr = min(ctr, 0) - loops
            reason = "rayserve_downscale_pending"
            if target == 1:
                delay = cfg.downscale_to_zero_delay_s
                if delay is None:
                    delay = cfg.downscale_delay_s
            else:
                delay = cfg.downscale_delay_s
                bounded = max(1, bounded)
            if ctr < -int(delay / cfg.control_loop_interval_s):
                target, ctr, reason = bounded, 0, "rayserve_downscale"
        else:
            ctr = 0
        st.update(desired=target, ctr=ctr)
        detail = (
            f"ongoing {total:.2f} / target {target_ongoing:g} -> {desired:.2f}; running "
            f"{current}; counter {ctr}"
        )
        return Decision(target, reason, detail), st

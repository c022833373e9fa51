"""gpucap's own autoscaling policy.

TODO(issue 3): burst fast path counting starting capacity, cold-start look-ahead forecast,
dip holding. This first version is the steady-state core the daemon runs today."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.types import AutoscalerInput, Decision, MetricsWindow, NoData, State


def _load(window: MetricsWindow, metric: str, since: float) -> float | None:
    samples = window.since(since)
    if not samples:
        return None
    if metric == "tokens_per_s":
        vals = [s.tokens_per_s for s in samples if s.tokens_per_s is not None]
        return sum(vals) / len(vals) if vals else None
    return sum(s.in_flight + s.queue_depth for s in samples) / len(samples)


def _clamp(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, n))


@dataclass(frozen=True)
class GpucapAutoscaler:
    name: str = "ours"

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        spec, live = inp.spec, inp.replicas.live
        if isinstance(inp.metrics, NoData):
            held = _clamp(live, spec.min_replicas, spec.max_replicas)
            return Decision(held, "hold_no_data", inp.metrics.reason), state
        load = _load(inp.metrics, spec.metric, inp.now - spec.stable_window_s)
        if load is None:
            held = _clamp(live, spec.min_replicas, spec.max_replicas)
            return Decision(held, "hold_no_data", "no samples in the stable window"), state
        last_busy = float(state.get("last_busy", inp.now))
        if load > 0:
            last_busy = inp.now
        want = math.ceil(load / spec.target_per_replica) if load > 0 else 0
        if want == 0 and live > 0 and inp.now - last_busy < spec.scale_to_zero_grace_s:
            want = 1  # idle, but inside the grace period: keep one warm
        desired = _clamp(want, spec.min_replicas, spec.max_replicas)
        new_state = {"last_busy": last_busy, "last_up": state.get("last_up", -math.inf)}
        if desired > live:
            new_state["last_up"] = inp.now
            return Decision(desired, "scale_up", f"load {load:.1f} needs {desired}"), new_state
        if desired < live and inp.now - float(new_state["last_up"]) < spec.scale_down_delay_s:
            return Decision(live, "hold_scale_down_delay", f"load {load:.1f}"), new_state
        reason = "scale_down" if desired < live else "steady"
        return Decision(desired, reason, f"load {load:.1f} needs {desired}"), new_state


def decide(inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
    return GpucapAutoscaler().decide(inp, state)

"""Knative Serving KPA (Knative Pod Autoscaler), re-implemented as a simulator baseline.

Follows ``autoscalers.md`` §1 (knative/serving @ 98e5ef9): stable and panic window averages
of revision-wide concurrency, per-tick decision with rate clamps relative to READY pods,
the panic state machine (enter at 2.0x ready capacity, never scale down while panicking),
the scale-down-delay max window, min/max/initial scale, and the path to zero through the
activator. Every default below is Knative's out-of-the-box value, cited by section."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from autoscaler.baselines.common import clamp, concurrency_target, hold
from autoscaler.types import UTILIZATION_SWEEP, AutoscalerInput, Decision, Knob, NoData, State
from autoscaler.window import concurrency, recent


@dataclass(frozen=True)
class KnativeConfig:
    stable_window_s: float = 60.0  # autoscalers.md §1.8: stable-window 60s
    panic_window_percentage: float = 10.0  # §1.8: panic-window-percentage 10 -> 6 s (§1.1)
    panic_threshold_percentage: float = 200.0  # §1.8: panic-threshold-percentage 200
    max_scale_up_rate: float = 1000.0  # §1.8
    max_scale_down_rate: float = 2.0  # §1.8
    target_burst_capacity: float = 211.0  # §1.8
    enable_scale_to_zero: bool = True  # §1.8
    scale_to_zero_grace_s: float = 30.0  # §1.8: scale-to-zero-grace-period 30s
    # §1.8: scale-to-zero-pod-retention-period, 0 s out of the box; None maps the model's
    # keep-alive (``ScalingSpec.scale_to_zero_grace_s``) onto it, as a Knative user sets
    # the per-revision annotation for a model whose cold start takes minutes. (Left at 0 s,
    # KPA drops to zero about 90 s after the last request, §1.7, where the policy asks for
    # a 600 s keep-alive that the other peers' own delays happen to cover.)
    scale_to_zero_pod_retention_s: float | None = None
    scale_down_delay_s: float = 0.0  # §1.8: scale-down-delay 0s
    initial_scale: int = 1  # §1.8 / §1.6: initial-scale 1, allow-zero-initial-scale false
    activation_scale: int = 1  # §1.3: only matters when > 1

    @property
    def panic_window_s(self) -> float:
        # §1.1: W_p = round(W_s * pct / 100), at least 1 s
        return max(1.0, float(round(self.stable_window_s * self.panic_window_percentage / 100)))


def _window_average(inp: AutoscalerInput, length: float) -> float:
    """§1.1: average over the buckets that hold data. With no ready pod only the activator
    reports (and only while it holds requests), so zero-valued samples are not data then."""
    assert not isinstance(inp.metrics, NoData)
    samples = recent(inp.metrics, inp.now, length)
    vals = [concurrency(s) for s in samples]
    if inp.replicas.ready == 0:
        vals = [v for v in vals if v > 0]
    return sum(vals) / len(vals) if vals else 0.0  # §1.1: no data for a window -> 0


@dataclass(frozen=True)
class KnativeAutoscaler:
    """KPA with Knative's defaults (``config``), deciding every 2 s on 1 s scrapes."""

    name: str = "knative"
    config: KnativeConfig = field(default_factory=KnativeConfig)
    tick_s: float = 2.0  # §1.1: tickInterval 2 s
    metric_lag_s: float = 1.0  # §1.1 / §7: 1 s scrape
    metric_push_s: float = 0.0
    metric_push_phase_s: float = 0.0
    wakes_on_arrival: bool = True  # §1.1: MultiScaler.Poke decides at once from scale 0
    knob: Knob = Knob(
        name="container-concurrency x container-concurrency-target-percentage",
        # §1.8: container-concurrency-target-percentage is allowed in (0, 100]
        fractions=UTILIZATION_SWEEP,
        source="autoscalers.md §1.2, §1.8",
    )

    @property
    def window_s(self) -> float:
        return self.config.stable_window_s  # §1.1: the longest window it reads

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        cfg, spec, now = self.config, inp.spec, inp.now
        st: dict[str, Any] = dict(state)
        first_tick = not st.get("started")  # the first tick with metrics
        if isinstance(inp.metrics, NoData):
            # §1.1/§1.3: ErrNoData makes Scale return an invalid result; scale is unchanged.
            return hold(inp, st, "knative_no_data", inp.metrics.reason)

        target = concurrency_target(spec)  # §1.2: CC x TU (or the target annotation)
        ready = inp.replicas.ready
        stable = _window_average(inp, cfg.stable_window_s)
        panic = _window_average(inp, cfg.panic_window_s)

        # §1.3: the per-tick decision, relative to READY pods only.
        r1 = max(1, ready)
        max_up = math.ceil(cfg.max_scale_up_rate * r1)
        max_down = math.floor(r1 / cfg.max_scale_down_rate)
        dspc = math.ceil(stable / target)
        dppc = math.ceil(panic / target)
        stable_pods = clamp(dspc, max_down, max_up)
        panic_pods = clamp(dppc, max_down, max_up)
        if cfg.activation_scale > 1:
            stable_pods = max(stable_pods, cfg.activation_scale) if stable_pods else 0
            panic_pods = max(panic_pods, cfg.activation_scale) if panic_pods else 0
        over_panic = dppc / r1 >= cfg.panic_threshold_percentage / 100.0

        # §1.4: on a (re)start with more than one ready pod, start in panic at the current
        # count so lost metric history does not scale down.
        if first_tick and ready > 1:
            st["panic_time"], st["max_panic_pods"] = now, ready
        st["started"] = True
        panic_time = st.get("panic_time")
        if over_panic:
            panic_time = now  # enter, or extend
        elif panic_time is not None and panic_time + cfg.stable_window_s < now:
            panic_time = None  # exit 60 s after the last over-threshold tick
            st["max_panic_pods"] = 0
        st["panic_time"] = panic_time
        if panic_time is not None:
            want = max(stable_pods, panic_pods)
            max_panic = max(int(st.get("max_panic_pods", 0)), want)
            st["max_panic_pods"] = max_panic
            desired, reason = max_panic, "knative_panic"
        else:
            desired, reason = stable_pods, "knative_stable"

        # §1.5: scale-down delay = max over the last delay period (2 s granularity).
        if cfg.scale_down_delay_s > 0:
            hist = [
                (t, v) for t, v in st.get("delay_window", []) if t > now - cfg.scale_down_delay_s
            ]
            hist.append((now, desired))
            st["delay_window"] = hist
            desired = max(v for _, v in hist)

        # §1.7: excess burst capacity decides whether the activator is in the request path.
        ebc = math.floor(
            ready * spec.max_concurrency_per_replica - cfg.target_burst_capacity - panic
        )
        proxied = not (desired > 0 and ebc >= 0)
        if not proxied:
            st["proxy_since"] = None
        elif st.get("proxy_since") is None:
            st["proxy_since"] = now

        # §1.6: bounds; the initial scale is a floor until the revision first reaches it.
        lo = spec.min_replicas
        if not st.get("reached_initial"):
            if ready >= cfg.initial_scale:
                st["reached_initial"] = True
            else:
                lo = max(lo, cfg.initial_scale)
        desired = clamp(desired, lo, spec.max_replicas)

        detail = (
            f"stable {stable:.2f} panic {panic:.2f} over target {target:g}/pod; "
            f"ready {ready}; panic ratio {dppc / r1:.2f}"
        )
        desired, reason = self._scale_to_zero(inp, st, desired, reason)
        st["desired"] = desired
        return Decision(desired, reason, detail), st

    def _scale_to_zero(
        self, inp: AutoscalerInput, st: dict[str, Any], desired: int, reason: str
    ) -> tuple[int, str]:
        """§1.7: the path to zero. Desired 0 marks the PA inactive once it has been active
        for a stable window (held at 1 until then); from inactive it goes to 0 after the
        grace period, or as soon as the activator has been in the path that long -- but
        never before the pod retention period (a hard floor in ``kpa/scaler.go``, checked
        ahead of the activator fast path: "Can't scale to 0; InactiveFor < retention")."""
        cfg, now, live = self.config, inp.now, inp.replicas.live
        if inp.replicas.ready > 0 and st.get("active_since") is None:
            st["active_since"] = now
        if desired > 0 or not cfg.enable_scale_to_zero:
            st["inactive_since"] = None
            if desired == 0 and live > 0:
                return 1, "knative_hold_one"
            return desired, reason
        if live == 0:
            st["active_since"], st["inactive_since"] = None, None
            return 0, "knative_zero"
        active_since = st.get("active_since")
        if st.get("inactive_since") is None:
            if active_since is not None and now - active_since < cfg.stable_window_s:
                return 1, "knative_hold_one"
            st["inactive_since"] = now
        retention = cfg.scale_to_zero_pod_retention_s
        if retention is None:
            retention = inp.spec.scale_to_zero_grace_s
        inactive_for = now - st["inactive_since"]
        proxy_since = st.get("proxy_since")
        fast_path = proxy_since is not None and now - proxy_since >= cfg.scale_to_zero_grace_s
        if inactive_for >= retention and (inactive_for >= cfg.scale_to_zero_grace_s or fast_path):
            st["active_since"] = None
            return 0, "knative_scale_to_zero"
        return 1, "knative_inactive_grace"

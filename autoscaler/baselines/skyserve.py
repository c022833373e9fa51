"""SkyPilot SkyServe ``RequestRateAutoscaler``, re-implemented as a simulator baseline.

Follows ``autoscalers.md`` §2.1 (skypilot-org/skypilot ``sky/serve/autoscalers.py`` @
4b81f5d0): QPS over a 60 s window, a raw target of ceil(QPS / target QPS per replica), and
hysteresis counters that need 300 s (up) / 1200 s (down) of consecutive agreeing decisions
at a 20 s decision interval (5 s while the target is 0, which also snaps straight up).
Actuation compares the target with non-terminal replicas (starting ones count), which the
simulator does with the returned desired count."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from autoscaler.baselines.common import clamp, concurrency_target, hold
from autoscaler.types import (
    UTILIZATION_SWEEP,
    AutoscalerInput,
    Decision,
    Knob,
    NoData,
    ScalingSpec,
    State,
)
from autoscaler.window import request_count


@dataclass(frozen=True)
class SkyServeConfig:
    qps_window_s: float = 60.0  # §2 constants: AUTOSCALER_QPS_WINDOW_SIZE_SECONDS
    decision_interval_s: float = 20.0  # AUTOSCALER_DEFAULT_DECISION_INTERVAL_SECONDS
    no_replica_interval_s: float = 5.0  # AUTOSCALER_NO_REPLICA_DECISION_INTERVAL_SECONDS
    upscale_delay_s: float = 300.0  # AUTOSCALER_DEFAULT_UPSCALE_DELAY_SECONDS
    downscale_delay_s: float = 1200.0  # AUTOSCALER_DEFAULT_DOWNSCALE_DELAY_SECONDS

    @property
    def upscale_threshold(self) -> int:
        return int(self.upscale_delay_s / self.decision_interval_s)  # §2.1: 15

    @property
    def downscale_threshold(self) -> int:
        return int(self.downscale_delay_s / self.decision_interval_s)  # §2.1: 60


def target_qps_per_replica(spec: ScalingSpec) -> float:
    """SkyServe's knob. An explicit ``target_qps_per_replica`` extra wins; otherwise the
    concurrency target per replica is turned into a rate by Little's law (qps =
    concurrency / mean service time), which keeps one sweep axis for every decider."""
    explicit = spec.extra.get("target_qps_per_replica")
    if explicit:
        return float(explicit)
    if not spec.mean_service_s or spec.mean_service_s <= 0:
        raise ValueError(
            "skyserve: ScalingSpec.mean_service_s (or extra target_qps_per_replica) is "
            "required to turn the per-replica target into requests/s"
        )
    return concurrency_target(spec) / spec.mean_service_s


@dataclass(frozen=True)
class SkyServeAutoscaler:
    """RequestRateAutoscaler with SkyServe's default delays and windows."""

    name: str = "skyserve"
    config: SkyServeConfig = field(default_factory=SkyServeConfig)
    # Called every 5 s (the decision interval at target 0); at a target > 0 it decides
    # only every 20 s and holds in between (§2 constants).
    tick_s: float = 5.0
    # §2 LB_CONTROLLER_SYNC_INTERVAL_SECONDS: the load balancer ships request timestamps every
    # 20 s, so a decision sees them up to the last sync ("up to 20 s stale", §2.1). The sync
    # loop and the decision loop each sleep their own interval after their own work, so
    # their phases are independent: each sync lands at its own (seeded) point of its 20 s
    # period and a decision sees data 0-20 s old (the phase below is then unused).
    metric_lag_s: float = 0.0
    metric_push_s: float = 20.0
    metric_push_phase_s: float = 10.0
    metric_push_random_phase: bool = True
    # sky/serve/load_balancer.py: with no ready replica the load balancer answers 503 ("No
    # ready replicas. Use sky serve status ...") at once; it holds nothing for a replica to
    # come. (The request was recorded for the autoscaler's QPS first.)
    rejects_without_ready: bool = True
    # Its target is requests/s per replica, which its users set from profiling the model
    # (target_qps_per_replica): told the profiled mean service time where a spec lacks it.
    needs_profiled_service: bool = True
    wakes_on_arrival: bool = False
    knob: Knob = Knob(
        name="target_qps_per_replica (as target concurrency / mean service time)",
        fractions=UTILIZATION_SWEEP,
        source="autoscalers.md §2.1 (any positive QPS; range is a fraction of slot capacity)",
    )

    @property
    def window_s(self) -> float:
        return self.config.qps_window_s

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        cfg, spec, now = self.config, inp.spec, inp.now
        st: dict[str, Any] = dict(state)
        if isinstance(inp.metrics, NoData):
            if "desired" not in st:  # not started deciding: what runs stays, no target yet
                live = clamp(inp.replicas.live, spec.min_replicas, spec.max_replicas)
                return Decision(live, "skyserve_no_data", inp.metrics.reason), st
            return hold(inp, st, "skyserve_no_data", inp.metrics.reason)
        # The target before any decision is its own: RequestRateAutoscaler starts at
        # target_num_replicas = min_replicas ("SkyServe will launch min_replicas replicas of
        # your service", docs serving/autoscaling.rst), whatever runs when it takes over.
        target = int(st.get("desired", spec.min_replicas))
        last = st.get("last_decision")
        interval = cfg.no_replica_interval_s if target == 0 else cfg.decision_interval_s
        if last is not None and now - last < interval - 1e-9:
            return Decision(target, "skyserve_between_decisions", ""), st
        st["last_decision"] = now

        qps = request_count(inp.metrics, now, cfg.qps_window_s) / cfg.qps_window_s
        per_replica = target_qps_per_replica(spec)
        raw = clamp(math.ceil(qps / per_replica), spec.min_replicas, spec.max_replicas)
        up, down = int(st.get("up_ctr", 0)), int(st.get("down_ctr", 0))
        if target == 0:
            target, reason, up, down = raw, "skyserve_from_zero", 0, 0
        elif raw > target:
            up, down = up + 1, 0
            reason = "skyserve_upscale_pending"
            if up >= cfg.upscale_threshold:
                target, up, reason = raw, 0, "skyserve_upscale"
        elif raw < target:
            down, up = down + 1, 0
            reason = "skyserve_downscale_pending"
            if down >= cfg.downscale_threshold:
                target, down, reason = raw, 0, "skyserve_downscale"
        else:
            up, down, reason = 0, 0, "skyserve_steady"
        st.update(desired=target, up_ctr=up, down_ctr=down)
        detail = (
            f"qps {qps:.2f} / {per_replica:.3g} per replica -> raw {raw}; "
            f"counters up {up}/{cfg.upscale_threshold} down {down}/{cfg.downscale_threshold}"
        )
        return Decision(target, reason, detail), st

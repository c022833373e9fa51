"""Kubernetes HorizontalPodAutoscaler, re-implemented as a simulator baseline.

Follows ``autoscalers.md`` §4.1-4.2 (kubernetes/kubernetes ``pkg/controller/podautoscaler``):
a per-pod (``Pods``) metric, here in-flight plus waiting requests per pod (or tokens/s per
pod), desired = ceil(current x metric / target) with the 10 % tolerance and the missing-pod
rules, then either the legacy normalisation (no ``behavior`` in the spec, the out-of-the-box
path: 300 s scale-down stabilization, scale-up cap max(2 x current, 4)) or the ``behavior``
defaults (scale-up policies 4 pods / 100 % per 15 s, scale-down 100 % per 15 s after a 300 s
stabilization). Synced every 15 s. The HPA never scales a target that is at 0 replicas and
its minReplicas is at least 1: scale to zero is KEDA's job (§4.3), and where the model's
``min_replicas`` is 0 the baseline runs as users run it, under a KEDA ScaledObject
(minReplicaCount 0): every 30 s poll, active when the metric is above the activation
threshold (0); active at 0 replicas -> 1; inactive for the 300 s cooldown -> 0. The HPA
owns 1 <-> N."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from autoscaler.baselines.common import clamp, hold
from autoscaler.types import UTILIZATION_SWEEP, AutoscalerInput, Decision, Knob, NoData, State
from autoscaler.window import mean_metric, recent


@dataclass(frozen=True)
class HpaConfig:
    sync_period_s: float = 15.0  # §4.1: --horizontal-pod-autoscaler-sync-period
    tolerance: float = 0.1  # §4.1: --horizontal-pod-autoscaler-tolerance
    downscale_stabilization_s: float = 300.0  # §4.2: default 5 min
    scale_up_limit_factor: float = 2.0  # §4.2: scaleUpLimitFactor (legacy path)
    scale_up_limit_minimum: float = 4.0  # §4.2: scaleUpLimitMinimum (legacy path)
    behavior: bool = False  # §4.2: no `behavior` in the spec is the default
    # §4.2 behavior defaults: scaleUp window 0, {Pods 4, Percent 100} per 15 s, Max;
    # scaleDown window = the controller flag (300 s), {Percent 100} per 15 s.
    scale_up_window_s: float = 0.0
    scale_up_pods: int = 4
    scale_up_percent: float = 100.0
    scale_down_percent: float = 100.0
    policy_period_s: float = 15.0
    # §4.3 KEDA, where the model allows 0 replicas (minReplicaCount 0, its default).
    keda: bool = True
    keda_polling_interval_s: float = 30.0  # pollingInterval
    keda_cooldown_s: float = 300.0  # cooldownPeriod
    keda_activation_threshold: float = 0.0  # activationThreshold (activity: value > it)


@dataclass(frozen=True)
class HpaAutoscaler:
    name: str = "hpa"
    config: HpaConfig = field(default_factory=HpaConfig)
    tick_s: float = 15.0  # §4.1: sync period
    # §7: one Prometheus scrape plus the poll; the 15 s scrape interval is [inferred].
    metric_lag_s: float = 15.0
    metric_push_s: float = 0.0
    metric_push_phase_s: float = 0.0
    wakes_on_arrival: bool = False
    knob: Knob = Knob(
        name="target averageValue per pod",
        fractions=UTILIZATION_SWEEP,
        source="autoscalers.md §4.1 (any positive per-pod target)",
    )

    @property
    def window_s(self) -> float:
        return self.config.sync_period_s  # the metric read at a sync: its mean over one period

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        cfg, spec, now = self.config, inp.spec, inp.now
        st: dict[str, Any] = dict(state)
        hpa_min = max(1, spec.min_replicas)  # minReplicas defaults to 1; 0 needs an alpha gate
        keda = cfg.keda and spec.min_replicas == 0
        # currentReplicas is the scale target's spec.replicas, i.e. what the HPA (or KEDA)
        # last set; a new Deployment starts at >= minReplicas (KEDA: where it is).
        first = max(inp.replicas.live, 0 if keda else hpa_min)
        current = int(st["desired"]) if "desired" in st else first
        if keda:
            current, reason = self._keda(inp, st, current)
            if reason is not None:
                st["desired"] = current
                return Decision(current, reason, "KEDA ScaledObject (§4.3)"), st
        if current == 0:
            st["desired"] = 0
            return Decision(0, "hpa_scaling_disabled", "target is at 0 replicas (§4.2)"), st
        if isinstance(inp.metrics, NoData):
            return hold(inp, {**st, "desired": current}, "hpa_no_data", inp.metrics.reason)

        total = mean_metric(recent(inp.metrics, now, cfg.sync_period_s), spec.metric)
        ready, missing = inp.replicas.ready, inp.replicas.starting
        if total is None or ready == 0:
            st["desired"] = current  # FailedGetPodsMetric: no pod reports a value
            return Decision(current, "hpa_no_metrics", "no ready pod reports the metric"), st
        target = max(spec.target_per_replica, 1e-9)
        rec = self._recommend(total, ready, missing, target, current)
        desired, reason = (
            self._normalize_behavior(st, rec, current, hpa_min, spec.max_replicas, now)
            if cfg.behavior
            else self._normalize_legacy(st, rec, current, hpa_min, spec.max_replicas, now)
        )
        st["desired"] = desired
        detail = (
            f"metric {total / ready:.2f}/pod over {ready} ready ({missing} unready) vs "
            f"target {target:g}: recommendation {rec}, current {current}"
        )
        return Decision(desired, reason, detail), st

    def _keda(
        self, inp: AutoscalerInput, st: dict[str, Any], current: int
    ) -> tuple[int, str | None]:
        """§4.3: the ScaledObject's executor at its polls (every ``pollingInterval`` from
        its creation, the first call): active at 0 replicas -> 1, inactive past the
        cooldown since it was last active (creation, initialCooldownPeriod 0, before
        that) -> 0. Between polls and when it changes nothing, the HPA acts (reason None).
        A failed query (NoData) changes nothing."""
        cfg, now = self.config, inp.now
        created = float(st.setdefault("keda_created", now))
        period = cfg.keda_polling_interval_s
        poll = math.floor((now - created) / period + 1e-9)
        if poll <= int(st.get("keda_poll", -1)) or isinstance(inp.metrics, NoData):
            return current, None
        st["keda_poll"] = poll
        # The HPA's own query (its per-pod metric summed), as the Prometheus scaler reads it.
        value = mean_metric(recent(inp.metrics, now, cfg.sync_period_s), inp.spec.metric)
        if (value or 0.0) > cfg.keda_activation_threshold:
            st["keda_active"] = now
            if current == 0:
                return 1, "keda_activate"
            return current, None
        if current > 0 and now > float(st.get("keda_active", created)) + cfg.keda_cooldown_s:
            return 0, "keda_scale_to_zero"
        return current, None

    def _recommend(
        self, total: float, ready: int, missing: int, target: float, current: int
    ) -> int:
        """§4.1 replica calculation for a per-pod metric. Ready pods report; pods still
        loading the model (running, not ready) have no metric yet ("missing"); pods whose
        node is still provisioning are Pending and ignored."""
        tol = self.config.tolerance
        ratio = (total / ready) / target
        if missing == 0:
            if abs(1.0 - ratio) <= tol:
                return current
            return math.ceil(ratio * ready)
        # Missing pods count as 100 % of target on a scale-down, 0 % on a scale-up.
        filled = total + (missing * target if ratio < 1.0 else 0.0)
        considered = ready + missing
        new_ratio = (filled / considered) / target
        if (
            abs(1.0 - new_ratio) <= tol
            or (ratio < 1.0 and new_ratio > 1.0)
            or (ratio > 1.0 and new_ratio < 1.0)
        ):
            return current
        new = math.ceil(new_ratio * considered)
        if (new_ratio < 1.0 and new > current) or (new_ratio > 1.0 and new < current):
            return current
        return new

    def _normalize_legacy(
        self, st: dict[str, Any], rec: int, current: int, lo: int, hi: int, now: float
    ) -> tuple[int, str]:
        """§4.2 without ``behavior``: the max recommendation of the last 300 s, then the
        scale-up cap max(2 x current, 4), then [min, max]."""
        cfg = self.config
        cutoff = now - cfg.downscale_stabilization_s
        recs = [(t, r) for t, r in st.get("recs", []) if t > cutoff]
        stabilized = max([rec] + [r for _, r in recs])
        recs.append((now, rec))
        st["recs"] = recs
        up_limit = math.ceil(max(cfg.scale_up_limit_factor * current, cfg.scale_up_limit_minimum))
        desired = clamp(stabilized, lo, min(hi, up_limit))
        if desired > current:
            return desired, "hpa_scale_up"
        if desired < current:
            return desired, "hpa_scale_down"
        return desired, "hpa_stabilized" if stabilized != rec else "hpa_steady"

    def _normalize_behavior(
        self, st: dict[str, Any], rec: int, current: int, lo: int, hi: int, now: float
    ) -> tuple[int, str]:
        """§4.2 with ``behavior`` defaults: min over the up window, max over the down
        window, then the per-period rate policies (selectPolicy Max), then [min, max]."""
        cfg = self.config
        keep = max(cfg.downscale_stabilization_s, cfg.scale_up_window_s)
        recs = [(t, r) for t, r in st.get("recs", []) if t > now - keep]
        up_rec = min([rec] + [r for t, r in recs if t > now - cfg.scale_up_window_s])
        down_rec = max([rec] + [r for t, r in recs if t > now - cfg.downscale_stabilization_s])
        recs.append((now, rec))
        st["recs"] = recs
        stabilized = min(max(current, up_rec), down_rec)

        events = [(t, d) for t, d in st.get("events", []) if t > now - cfg.policy_period_s]
        added = sum(d for _, d in events if d > 0)
        removed = -sum(d for _, d in events if d < 0)
        up_start = current - added + removed
        up_limit = max(
            up_start + cfg.scale_up_pods,
            math.ceil(up_start * (1 + cfg.scale_up_percent / 100.0)),
        )
        up_limit = max(up_limit, current)  # the up limit never forces a scale-down
        down_start = current + removed - added
        down_limit = math.floor(down_start * (1 - cfg.scale_down_percent / 100.0))
        down_limit = min(down_limit, current)
        desired = clamp(stabilized, max(lo, down_limit), min(hi, up_limit))
        if desired != current:
            events.append((now, desired - current))
        st["events"] = events
        if desired > current:
            return desired, "hpa_scale_up"
        if desired < current:
            return desired, "hpa_scale_down"
        return desired, "hpa_stabilized" if stabilized != rec else "hpa_steady"

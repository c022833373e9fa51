"""Inputs and outputs of every autoscaler (ours and the peer baselines)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# Decider memory between ticks, threaded explicitly (Ray Serve's ``policy_state``): the
# previous state comes in, a new one goes out, never mutated in place. JSON-serialisable so
# the daemon can persist it and restore it after a restart (SkyPilot dump_dynamic_states).
State = Mapping[str, Any]


@dataclass(frozen=True)
class MetricsSample:
    """Load observed over one scrape interval ending at ``t`` (seconds)."""

    t: float
    arrival_rate: float  # requests/s arriving
    in_flight: float  # requests being served, averaged over the interval
    queue_depth: float  # requests waiting for a slot (includes those waiting for a replica)
    tokens_per_s: float | None = None  # generated tokens/s, where known
    # Requests/s completing, where known (vLLM's request_success_total). With it the
    # per-request cost of a queueing model is read on the service stage directly
    # (Little's law: in flight / completions) instead of from arrivals minus the growth of
    # the gauges, which a rate scraped at another instant than the gauges skews.
    completion_rate: float | None = None


@dataclass(frozen=True)
class MetricsWindow:
    """Recent samples, oldest first. Their times are <= the decision's ``now``."""

    samples: tuple[MetricsSample, ...]

    def since(self, t0: float) -> tuple[MetricsSample, ...]:
        return tuple(s for s in self.samples if s.t > t0)


@dataclass(frozen=True)
class NoData:
    """Metrics are missing or stale. Never read as zero load: the decision holds scale."""

    reason: str


@dataclass(frozen=True)
class ReplicaCounts:
    ready: int = 0  # serving
    starting: int = 0  # node running, model loading
    provisioning: int = 0  # intent recorded / cloud creating the node
    draining: int = 0  # leaving; not counted as capacity

    @property
    def live(self) -> int:
        """Replicas that are serving or on their way to serving."""
        return self.ready + self.starting + self.provisioning


@dataclass(frozen=True)
class ScalingSpec:
    """What the autoscaler needs of a model's policy, in plain units (seconds, per replica).

    ``target_per_replica`` is the load one replica should carry in ``metric`` units
    (in-flight requests for concurrency, tokens/s for tokens_per_s), i.e. the shape's
    capacity times the policy's target utilization."""

    min_replicas: int
    max_replicas: int
    target_per_replica: float
    metric: Literal["concurrency", "tokens_per_s"] = "concurrency"
    max_concurrency_per_replica: float = 1.0  # hard slot count of one replica
    latency_slo_s: float = 2.0
    scale_to_zero_grace_s: float = 600.0
    stable_window_s: float = 60.0
    burst_window_s: float = 6.0
    scale_down_delay_s: float = 120.0
    scale_up_delay_s: float = 0.0  # scale up to the least need over this window (HPA's)
    max_scale_up_rate: float = 1000.0  # at most this x live replicas per decision
    max_scale_down_rate: float = 2.0  # at most live / this per decision
    extra: Mapping[str, float] = field(default_factory=dict)  # knobs of specific deciders
    # Expected service time of one request on one replica (profiling or the simulator's
    # service-time model). Lets rate-targeted deciders (SkyServe's target QPS per replica)
    # translate ``target_per_replica`` by Little's law: qps = concurrency / service time.
    mean_service_s: float | None = None
    # What one replica sustains in ``metric`` units; defaults to the slot count for
    # concurrency. The knob sweep of ``gpucap simulate --slo-target`` is relative to it.
    capacity_per_replica: float | None = None

    def replica_capacity(self) -> float:
        """One replica's capacity in ``metric`` units (for knob ranges and headroom)."""
        if self.capacity_per_replica is not None:
            return self.capacity_per_replica
        if self.metric == "concurrency":
            return self.max_concurrency_per_replica
        return self.target_per_replica / 0.7  # autoscalers.md §1.8: default utilization 70 %


@dataclass(frozen=True)
class AutoscalerInput:
    model: str
    now: float
    metrics: MetricsWindow | NoData
    replicas: ReplicaCounts
    spec: ScalingSpec
    cold_start_s: float  # expected time-to-ready of a new replica in the best candidate pool


@dataclass(frozen=True)
class Decision:
    """The desired replica count and why. ``reason`` is a stable code for filtering and
    metrics; ``detail`` a sentence for on-call ("why did it do that?")."""

    desired: int
    reason: str
    detail: str = ""


class Autoscaler(Protocol):
    # Read-only (a property) so frozen dataclasses satisfy the protocol.
    @property
    def name(self) -> str: ...

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]: ...


# The sweep every decider's knob uses, as fractions of one replica's capacity: the documented
# range of a target utilization, (0, 1] (autoscalers.md §1.8: container-concurrency-target-
# percentage in (0, 100]), finer where the 0.99 SLO-attainment answers tend to fall. One grid
# for all, so no decider gets a finer choice than another.
UTILIZATION_SWEEP: tuple[float, ...] = (
    0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 1.0,
)  # fmt: skip


@dataclass(frozen=True)
class Knob:
    """The main knob that ``gpucap simulate --slo-target`` sweeps for one autoscaler.

    ``name`` is the autoscaler's own name for it; the sweep always sets ``field`` of the
    :class:`ScalingSpec` (``target_per_replica`` for every decider here) to each of
    ``fractions`` times one replica's capacity. ``source`` says where the range comes from."""

    name: str
    fractions: tuple[float, ...]
    source: str
    field: str = "target_per_replica"

    def values(self, spec: ScalingSpec) -> tuple[float, ...]:
        cap = spec.replica_capacity()
        return tuple(f * cap for f in self.fractions)

    def apply(self, spec: ScalingSpec, value: float) -> ScalingSpec:
        changes: dict[str, Any] = {self.field: value}
        return dataclasses.replace(spec, **changes)


class TimedAutoscaler(Autoscaler, Protocol):
    """An autoscaler as the simulator runs it: at its own decision interval (``tick_s``),
    on metrics ``metric_lag_s`` old, with a window of at least ``window_s`` of samples.
    ``metric_push_s`` > 0: the metrics reach the decider in batches, every ``metric_push_s``
    at ``metric_push_phase_s`` past a multiple of it (Ray Serve's pushes, SkyServe's load
    balancer syncs), so what it sees ends at the last batch (then ``metric_lag_s`` is 0).
    ``wakes_on_arrival``: it is also called at once when a request reaches a model with no
    live replica (Knative's activator "poke"; gpucap's immediate wake)."""

    @property
    def tick_s(self) -> float: ...
    @property
    def metric_lag_s(self) -> float: ...
    @property
    def metric_push_s(self) -> float: ...
    @property
    def metric_push_phase_s(self) -> float: ...
    @property
    def window_s(self) -> float: ...
    @property
    def wakes_on_arrival(self) -> bool: ...
    @property
    def knob(self) -> Knob: ...

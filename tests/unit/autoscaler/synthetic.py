"""Synthetic time for autoscaler tests: windows of samples and a tiny fluid replica model."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autoscaler.types import (
    AutoscalerInput,
    Decision,
    MetricsSample,
    MetricsWindow,
    NoData,
    ReplicaCounts,
    ScalingSpec,
)

SPEC = ScalingSpec(
    min_replicas=0,
    max_replicas=1000,
    target_per_replica=70.0,  # Knative's default: CC 100 x 70 %
    max_concurrency_per_replica=100.0,
    mean_service_s=2.0,
)


def window(
    now: float,
    conc: Callable[[float], float] | float = 0.0,
    rate: Callable[[float], float] | float = 0.0,
    queue: Callable[[float], float] | float = 0.0,
    length: float = 120.0,
    step: float = 1.0,
) -> MetricsWindow:
    """1 s samples over ``(now - length, now]``; each value a constant or a function of t."""

    def val(v: Callable[[float], float] | float, t: float) -> float:
        return v(t) if callable(v) else float(v)

    n = int(length / step)
    samples = tuple(
        MetricsSample(
            t=t, arrival_rate=val(rate, t), in_flight=val(conc, t), queue_depth=val(queue, t)
        )
        for t in (now - (n - 1 - i) * step for i in range(n))
    )
    return MetricsWindow(samples)


def inp(
    now: float,
    metrics: MetricsWindow | NoData,
    ready: int = 0,
    starting: int = 0,
    provisioning: int = 0,
    spec: ScalingSpec = SPEC,
    cold_start_s: float = 300.0,
) -> AutoscalerInput:
    return AutoscalerInput(
        model="m",
        now=now,
        metrics=metrics,
        replicas=ReplicaCounts(ready=ready, starting=starting, provisioning=provisioning),
        spec=spec,
        cold_start_s=cold_start_s,
    )


@dataclass
class FluidRun:
    """Replays a rate profile through a decider with a fluid replica model: a replica is
    ready ``cold_start_s`` after it is asked for; each serves ``slots`` requests at once,
    each request takes ``service_s``; excess work queues."""

    decider: Any
    spec: ScalingSpec
    rate: Callable[[float], float]
    service_s: float = 2.0
    cold_start_s: float = 120.0
    tick_s: float = 5.0
    # How long a replica really takes when not the expected ``cold_start_s`` (a pool out of
    # capacity, retried in the next).
    boot_s: float | None = None
    no_data: Callable[[float], bool] = lambda t: False
    ready: int = 0
    pending: list[float] = field(default_factory=list)  # ready times of starting replicas
    queue: float = 0.0  # requests in the system
    samples: list[MetricsSample] = field(default_factory=list)
    decisions: list[tuple[float, Decision, int]] = field(default_factory=list)
    state: Any = field(default_factory=dict)

    def run(self, until: float, start: float = 0.0) -> list[tuple[float, Decision, int]]:
        t = start
        while t < until:
            t += 1.0
            self.ready += sum(1 for r in self.pending if r <= t)
            self.pending = [r for r in self.pending if r > t]
            lam = self.rate(t)
            cap = self.ready * self.spec.max_concurrency_per_replica
            # Sub-steps of at most one service time: in one whole second, a sub-second
            # service would read all of that second's arrivals as in flight at once.
            n = max(1, math.ceil(1.0 / self.service_s - 1e-9))
            served = waiting = 0.0
            for _ in range(n):
                self.queue += lam / n  # requests in the system (served + waiting)
                in_flight = min(self.queue, cap)
                served, waiting = served + in_flight / n, waiting + (self.queue - in_flight) / n
                self.queue -= in_flight / self.service_s / n  # completions this sub-step
                if self.queue < 1e-3:  # the fluid never quite empties; real queues do
                    self.queue = 0.0
            self.samples.append(MetricsSample(t, lam, served, waiting))
            self.samples = self.samples[-120:]
            if t % self.tick_s:
                continue
            metrics: MetricsWindow | NoData = (
                NoData("test") if self.no_data(t) else MetricsWindow(tuple(self.samples))
            )
            live = self.ready + len(self.pending)
            d, self.state = self.decider.decide(
                AutoscalerInput(
                    "m",
                    t,
                    metrics,
                    ReplicaCounts(ready=self.ready, starting=len(self.pending)),
                    self.spec,
                    self.cold_start_s,
                ),
                self.state,
            )
            self.decisions.append((t, d, live))
            if d.desired > live:
                boot = self.cold_start_s if self.boot_s is None else self.boot_s
                self.pending += [t + boot] * (d.desired - live)
            elif d.desired < live:
                drop = live - d.desired
                cut = min(drop, len(self.pending))  # least initialised first
                self.pending = sorted(self.pending)[: len(self.pending) - cut]
                self.ready -= drop - cut
        return self.decisions


def desired_series(decisions: Sequence[tuple[float, Decision, int]]) -> list[int]:
    return [d.desired for _, d, _ in decisions]

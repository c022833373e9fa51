"""Where traffic metrics come from. A source returns, per model, one sample for the interval
that just ended, or ``None`` when it has nothing (never zero for "unknown").

- :class:`SyntheticTraffic` generates bursty demand (:class:`TrafficShape`, the shapes the
  demo's load generator sends as real requests) and serves it with the replicas that are
  actually ready (so its queue grows when capacity lags);
- the Prometheus source (``prometheus_source``) and the built-in scraper of the engines
  (``engine_scraper``) read real engines behind the same protocol.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from autoscaler.types import MetricsSample, MetricsWindow, NoData

ModelKey = tuple[str, str]  # (customer, model)


@dataclass(frozen=True)
class Capacity:
    """What serves a model right now: ready replicas and slots per replica."""

    ready_replicas: int
    slots_per_replica: float


class MetricsSource(Protocol):
    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]: ...


@dataclass(frozen=True)
class TrafficShape:
    """Demand for one model: a base request rate with a slow wave and periodic bursts."""

    base_rps: float
    service_s: float  # mean time one request holds a slot
    burst_factor: float = 4.0
    burst_every_s: float = 90.0
    burst_len_s: float = 25.0
    wave_period_s: float = 300.0
    tokens_per_request: float = 250.0
    first_burst_s: float = 10.0
    phase_s: float | None = None  # how much later the bursts come; None: seeded per model

    def rate(self, t: float, phase: float = 0.0) -> float:
        """Requests/s at ``t`` seconds after traffic starts; ``phase`` delays the bursts."""
        wave = 1.0 + 0.3 * math.sin(2 * math.pi * t / self.wave_period_s)
        since = (t - self.first_burst_s - phase) % self.burst_every_s
        bursting = t >= self.first_burst_s + phase and since < self.burst_len_s
        return self.base_rps * wave * (self.burst_factor if bursting else 1.0)

    def peak_rps(self) -> float:
        """No instant's rate is above this."""
        return self.base_rps * 1.3 * max(self.burst_factor, 1.0)


def burst_phase(seed: int, key: ModelKey, shape: TrafficShape) -> float:
    """The shape's phase, else one seeded per model so their bursts do not all coincide."""
    if shape.phase_s is not None:
        return shape.phase_s
    return random.Random(f"{seed}:{key}").uniform(0, shape.burst_every_s / 2)


@dataclass
class SyntheticTraffic:
    """Seeded, reproducible demo traffic. Requests that find no free slot wait in a queue
    (and are served later), so an under-provisioned model shows queue depth."""

    shapes: Mapping[ModelKey, TrafficShape]
    seed: int = 7
    _queue: dict[ModelKey, float] = field(default_factory=dict)
    _last: float | None = None
    _start: float | None = None

    def rate(self, key: ModelKey, t: float) -> float:
        """Requests/s at ``t`` seconds after the first collection."""
        shape = self.shapes[key]
        return shape.rate(t, burst_phase(self.seed, key, shape))

    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        dt = 1.0 if self._last is None else max(1e-3, now - self._last)
        self._last = now
        if self._start is None:
            self._start = now
        out: dict[ModelKey, MetricsSample | None] = {}
        for key, shape in self.shapes.items():
            cap = capacity.get(key)
            if cap is None:
                continue
            rate = self.rate(key, now - self._start)
            slots = cap.ready_replicas * cap.slots_per_replica
            offered = rate * shape.service_s + self._queue.get(key, 0.0)  # Little's law
            in_flight = min(offered, slots)
            queued = offered - in_flight
            # Queued work drains at the rate spare slots free up; keep it bounded.
            self._queue[key] = min(queued, 10_000.0) * math.exp(-dt / max(shape.service_s, 1))
            out[key] = MetricsSample(
                t=now,
                arrival_rate=rate,
                in_flight=in_flight,
                queue_depth=queued,
                tokens_per_s=in_flight / shape.service_s * shape.tokens_per_request,
                completion_rate=in_flight / shape.service_s,  # what is served ends at this rate
            )
        return out


@dataclass
class MetricsBuffer:
    """The recent samples per model, bounded by age. In memory: after a restart the window
    is empty, the autoscaler sees NoData, and it holds scale until the window refills."""

    horizon_s: float = 900.0
    max_staleness_s: float = 60.0
    _samples: dict[ModelKey, deque[MetricsSample]] = field(default_factory=dict)

    def add(self, key: ModelKey, sample: MetricsSample) -> None:
        q = self._samples.setdefault(key, deque())
        q.append(sample)
        while q and q[0].t < sample.t - self.horizon_s:
            q.popleft()

    def window(self, key: ModelKey, now: float) -> MetricsWindow | NoData:
        q = self._samples.get(key)
        if not q:
            return NoData("no metrics collected yet")
        if now - q[-1].t > self.max_staleness_s:
            return NoData(f"metrics stale: last sample {now - q[-1].t:.0f}s ago")
        return MetricsWindow(tuple(s for s in q if s.t <= now))

    def forget(self, keep: set[ModelKey]) -> None:
        for key in list(self._samples):
            if key not in keep:
                del self._samples[key]

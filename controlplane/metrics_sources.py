"""Where traffic metrics come from. A source returns, per model, one sample for the interval
that just ended, or ``None`` when it has nothing (never zero for "unknown").

- :class:`SyntheticTraffic` generates bursty demand for the demo and serves it with the
  replicas that are actually ready (so the demo's queue grows when capacity lags);
- a Prometheus source (reading vLLM/gateway metrics) plugs in behind the same protocol.
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
        # Each model's bursts are offset by a seeded phase so they do not all coincide.
        phase = random.Random(f"{self.seed}:{key}").uniform(0, shape.burst_every_s / 2)
        wave = 1.0 + 0.3 * math.sin(2 * math.pi * t / shape.wave_period_s)
        since = (t - shape.first_burst_s - phase) % shape.burst_every_s
        bursting = t >= shape.first_burst_s + phase and since < shape.burst_len_s
        return shape.base_rps * wave * (shape.burst_factor if bursting else 1.0)

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

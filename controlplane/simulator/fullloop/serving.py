"""The request-level data plane of the full-loop replay, on the trace's clock.

The rules of ``controlplane.simulator.engine`` (its module docstring), with the replicas
taken from the store instead of the engine's own bookkeeping: a model's requests are served
first-come first-served by the concurrency slots of the replicas the store says are ready
(``sync`` after every job that can change that); a replica that leaves ready (drained,
failed) takes no new request, and the ones it holds finish. Requests are never dropped; one
still waiting at the end is unserved and a miss.

It is also the loop's metrics source (:class:`ReplayMetrics`): each collect reports the
scrape interval that just ended, computed exactly from the requests' arrival, start and end
times (``controlplane.simulator.metrics.LoadMeter``), so what the decider reads is what the
replay served.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from autoscaler.types import MetricsSample
from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.simulator.fcfs import advance
from controlplane.simulator.metrics import LoadMeter


@dataclass
class ModelLoad:
    """One model's requests: arrival and service seconds on the trace's clock."""

    name: str
    arrivals: np.ndarray
    service_s: np.ndarray
    output_tokens: np.ndarray | None = None


@dataclass
class _Served:
    load: ModelLoad
    arr: list[float]
    svc: list[float]
    i: int = 0  # the next request to start (FCFS)
    starts: list[float] = field(default_factory=list)
    slots: list[tuple[float, str]] = field(default_factory=list)  # (free at, replica id)
    ready: set[str] = field(default_factory=set)


class DataPlane:
    def __init__(self, loads: list[ModelLoad]) -> None:
        self._models = {
            m.name: _Served(m, m.arrivals.tolist(), m.service_s.tolist()) for m in loads
        }

    @property
    def names(self) -> list[str]:
        return list(self._models)

    def starts(self, model: str) -> list[float]:
        return self._models[model].starts

    def advance(self, until: float, inclusive: bool = False) -> None:
        """Start, FCFS, every request whose start is before ``until``."""
        for ms in self._models.values():
            _advance(ms, until, inclusive)

    def sync(self, ready: Mapping[str, Mapping[str, int]], now: float) -> None:
        """The ready replicas per model (replica id -> slots), as the store has them at
        ``now``: new ones take requests from now on, the ones gone take none. Call after
        :meth:`advance` to ``now``."""
        for name, ms in self._models.items():
            now_ready = ready.get(name, {})
            for rid, slots in now_ready.items():
                if rid not in ms.ready:
                    for _ in range(slots):
                        heapq.heappush(ms.slots, (now, rid))
            ms.ready = set(now_ready)

    def queued(self, model: str, now: float) -> int:
        """Requests arrived by ``now`` that have not started."""
        ms = self._models[model]
        return bisect.bisect_right(ms.arr, now) - ms.i

    def next_arrival(self, now: float) -> float | None:
        """The first request after ``now`` of any model, if one is left."""
        nxt = [
            ms.arr[k]
            for ms in self._models.values()
            if (k := bisect.bisect_right(ms.arr, now)) < len(ms.arr)
        ]
        return min(nxt) if nxt else None


def _advance(ms: _Served, until: float, inclusive: bool) -> None:
    if ms.slots and ms.i < len(ms.arr):
        ms.i = advance(
            ms.slots, ms.arr, ms.svc, ms.i, ms.starts, until, inclusive, ms.ready.__contains__
        )


class ReplayMetrics:
    """The loop's ``MetricsSource``: at each collect, per model, the sample of the scrape
    interval (``interval_s``, the collect job's) that ends at ``now``. The clock is the
    loop's (epoch seconds); the trace's starts at ``epoch0``."""

    def __init__(
        self,
        plane: DataPlane,
        loads: list[ModelLoad],
        customer: str,
        interval_s: float,
        epoch0: float,
    ) -> None:
        self._plane = plane
        self._customer = customer
        self._dt = interval_s
        self._epoch0 = epoch0
        self._meters = {
            m.name: LoadMeter(m.arrivals, m.service_s, m.output_tokens, interval_s, interval_s)
            for m in loads
        }

    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        del capacity  # the replay knows exactly what was served
        t = now - self._epoch0
        upto = int(np.floor(t / self._dt + 1e-9))
        out: dict[ModelKey, MetricsSample | None] = {}
        for name, meter in self._meters.items():
            if upto > meter.next_bin:
                meter.update(self._plane.starts(name), upto)
            window = meter.window()
            if not window:
                out[(self._customer, name)] = None
                continue
            last = window[-1]
            out[(self._customer, name)] = MetricsSample(
                last.t + self._epoch0,
                last.arrival_rate,
                last.in_flight,
                last.queue_depth,
                last.tokens_per_s,
                last.completion_rate,
            )
        return out

"""Probing the engines on the nodes (the I/O edge of ``lifecycle.health``): each reconcile
pass asks every target's health endpoint, and a draining node's metrics for the requests
it still holds, concurrently over one aiohttp session with a bound on connections in
flight and a budget of targets per pass (the least recently probed first), so a fleet of
thousands of nodes costs one pass a few seconds, not one timeout per node."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from controlplane.lifecycle.health import Probe


@dataclass(frozen=True)
class ProbeTarget:
    """One node's engine, where and how it answers (its runtime's, ``runtimes.resolve``)."""

    node_id: str
    instance_id: str
    address: str | None  # its private address; None: not known yet (not probed)
    port: int
    health_path: str
    metrics_path: str
    load_metrics: tuple[str, ...]  # gauges whose sum is the requests it holds
    timeout_s: float = 2.0
    read_load: bool = False  # read its metrics too (a draining node)


def in_flight(text: str, names: Sequence[str]) -> int | None:
    """The sum of the named gauges over all their series in a Prometheus text exposition
    (None: none of them is there, so nothing is known)."""
    wanted, total, seen = set(names), 0.0, False
    for family in text_string_to_metric_families(text):
        if family.name in wanted:
            for sample in family.samples:
                total += sample.value
                seen = True
    return round(total) if seen else None


@dataclass
class HttpProber:
    """Probes over HTTP; remembers when it last probed each node (the budget's order)."""

    concurrency: int = 64
    budget: int = 2000  # targets per pass
    _tick: itertools.count[int] = field(default_factory=itertools.count)
    _last: dict[str, int] = field(default_factory=dict)

    def probe(self, targets: Sequence[ProbeTarget]) -> Mapping[str, Probe]:
        reachable = [t for t in targets if t.address]
        chosen = sorted(reachable, key=lambda t: self._last.get(t.node_id, -1))[: self.budget]
        if not chosen:
            return {}
        tick = next(self._tick)
        live = {t.node_id for t in targets}
        self._last = {k: v for k, v in self._last.items() if k in live}
        for t in chosen:
            self._last[t.node_id] = tick
        return asyncio.run(self._probe_all(chosen))

    async def _probe_all(self, targets: Sequence[ProbeTarget]) -> dict[str, Probe]:
        gate = asyncio.Semaphore(self.concurrency)
        connector = aiohttp.TCPConnector(limit=self.concurrency)
        async with aiohttp.ClientSession(connector=connector) as http:

            async def one(t: ProbeTarget) -> tuple[str, Probe]:
                async with gate:
                    return t.node_id, await _probe(http, t)

            return dict(await asyncio.gather(*(one(t) for t in targets)))


async def _probe(http: aiohttp.ClientSession, t: ProbeTarget) -> Probe:
    base = f"http://{t.address}:{t.port}"
    timeout = aiohttp.ClientTimeout(total=t.timeout_s)
    try:
        async with http.get(base + t.health_path, timeout=timeout) as resp:
            serving = 200 <= resp.status < 300
    except (aiohttp.ClientError, TimeoutError, OSError):
        return Probe(False)
    if not (serving and t.read_load):
        return Probe(serving)
    try:
        async with http.get(base + t.metrics_path, timeout=timeout) as resp:
            text = await resp.text() if resp.status == 200 else ""
        return Probe(True, in_flight(text, t.load_metrics))
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
        return Probe(True)  # it serves, but what it holds is unknown: the drain waits on

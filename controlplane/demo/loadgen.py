"""The demo's load generator: real HTTP completions to the engines gpucap starts, as a
router in front of them would send them.

It follows ``WatchEndpoints`` on the daemon's gRPC API (each snapshot replaces the set it
had; after a broken stream it resumes from the last revision it applied) and, for each
model it has a :class:`~controlplane.metrics_sources.TrafficShape` for, sends ``POST
/v1/completions`` at the shape's rate (a Poisson process, thinned from the shape's peak),
each to the model's endpoint with the fewest of its requests in flight. Requests in flight
are bounded: an arrival past the bound is shed, and one with no endpoint to go to is
counted as such, so the offered rate stays the shape's whatever the engines do.

What happened is counted on the daemon's registry (``gpucap_demo_requests_total{customer,
model,outcome}``, ``gpucap_demo_request_seconds``, ``gpucap_demo_requests_in_flight``) and
logged every ``report_every_s`` (``demo.load``, one line per model)."""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import aiohttp
import grpc
import prometheus_client as prom
import structlog

from controlplane.grpc.client import ControlPlaneClient
from controlplane.metrics_sources import ModelKey, TrafficShape, burst_phase
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

log = structlog.get_logger("gpucap.demo.load")

COMPLETIONS_PATH = "/v1/completions"
# Outcomes (a bounded label): served; the engine answered an error; no answer in time; the
# connection was refused or broken; nowhere to send it; past the bound on requests in flight.
OK, ERROR, TIMEOUT, REFUSED, NO_ENDPOINT, SHED = (
    "ok",
    "error",
    "timeout",
    "refused",
    "no_endpoint",
    "shed",
)


class Targets:
    """Each model's endpoints as the last snapshot gave them, and this generator's requests
    in flight on each (the router's "least requests" pick)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_model: dict[ModelKey, tuple[str, ...]] = {}
        self._in_flight: Counter[str] = Counter()
        self._turn = itertools.count()

    def replace(self, endpoints: Iterable[pb.Endpoint]) -> None:
        by_model: dict[ModelKey, list[str]] = {}
        for e in endpoints:
            by_model.setdefault((e.customer, e.model), []).append(f"{e.address}:{e.port}")
        with self._lock:
            self._by_model = {k: tuple(v) for k, v in by_model.items()}

    def of(self, key: ModelKey) -> tuple[str, ...]:
        with self._lock:
            return self._by_model.get(key, ())

    def in_flight(self, target: str) -> int:
        with self._lock:
            return self._in_flight[target]

    def take(self, key: ModelKey) -> str | None:
        """The endpoint the next request goes to (its count taken), None: there is none.
        Ties go round, so an idle model's requests still visit every endpoint."""
        with self._lock:
            targets = self._by_model.get(key, ())
            if not targets:
                return None
            start = next(self._turn) % len(targets)
            turned = targets[start:] + targets[:start]
            chosen = min(turned, key=lambda t: self._in_flight[t])
            self._in_flight[chosen] += 1
            return chosen

    def give_back(self, target: str) -> None:
        with self._lock:
            self._in_flight[target] -= 1
            if self._in_flight[target] <= 0:
                del self._in_flight[target]


@dataclass
class Totals:
    """One model's requests since the generator started."""

    sent: int = 0  # (counted with its outcome)
    outcomes: Counter[str] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)  # served ones, since last report
    by_target: Counter[str] = field(default_factory=Counter)  # requests sent to each
    failed_by_target: Counter[str] = field(default_factory=Counter)  # answered by none


class _Telemetry:
    def __init__(self, registry: prom.CollectorRegistry) -> None:
        labels = ["customer", "model"]
        self.requests = prom.Counter(
            "gpucap_demo_requests_total",
            "Requests the demo's load generator made, by outcome.",
            [*labels, "outcome"],
            registry=registry,
        )
        self.seconds = prom.Histogram(
            "gpucap_demo_request_seconds",
            "Latency of the demo's requests that were served.",
            labels,
            buckets=(0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 8, 13, 20, 30),
            registry=registry,
        )
        self.in_flight = prom.Gauge(
            "gpucap_demo_requests_in_flight",
            "The demo's requests awaiting an answer.",
            labels,
            registry=registry,
        )


@dataclass
class LoadGenerator:
    addr: str  # the daemon's gRPC address
    shapes: Mapping[ModelKey, TrafficShape]
    seed: int = 7
    concurrency: int = 512  # requests in flight, every model together
    timeout_s: float = 60.0  # one request
    report_every_s: float = 10.0
    registry: prom.CollectorRegistry | None = None
    token: str | None = None
    targets: Targets = field(default_factory=Targets)

    def __post_init__(self) -> None:
        self._totals = {key: Totals() for key in self.shapes}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._known = threading.Event()  # the first snapshot came
        self._telemetry = _Telemetry(self.registry) if self.registry is not None else None
        self._threads: list[threading.Thread] = []
        self._client: ControlPlaneClient | None = None
        self._stream: grpc.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_async: asyncio.Event | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._client = ControlPlaneClient(self.addr, token=self.token)
        ready = threading.Event()
        for name, target in (("watch", self._follow), ("send", lambda: self._send_all(ready))):
            t = threading.Thread(target=target, name=f"gpucap-demo-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        ready.wait(5)

    def stop(self) -> None:
        """Stops sending; requests still out are abandoned (the daemon is going)."""
        self._stopping.set()
        self._known.set()
        if self._stream is not None:
            self._stream.cancel()
        if self._loop is not None and self._stop_async is not None:
            self._loop.call_soon_threadsafe(self._stop_async.set)
        if self._client is not None:
            self._client.close()  # (ends a stream opened since, too)
        for t in self._threads:
            t.join(10)

    def totals(self, key: ModelKey) -> Totals:
        """A copy of one model's counts."""
        with self._lock:
            t = self._totals[key]
            return Totals(
                t.sent,
                Counter(t.outcomes),
                list(t.latencies_s),
                Counter(t.by_target),
                Counter(t.failed_by_target),
            )

    # ------------------------------------------------------------------ endpoints
    def _follow(self) -> None:
        assert self._client is not None
        revision = 0
        while not self._stopping.is_set():
            try:
                self._stream = self._client.stub.WatchEndpoints(
                    pb.WatchEndpointsRequest(since_revision=revision)
                )
                for snap in self._stream:
                    self.targets.replace(snap.endpoints)
                    revision = snap.revision
                    self._known.set()
            except grpc.RpcError as exc:
                if self._stopping.is_set():
                    return
                code = exc.code() if isinstance(exc, grpc.Call) else None
                log.warning("demo.load.watch_broken", code=str(code), note="resuming in 1 s")
            self._stopping.wait(1.0)

    # ------------------------------------------------------------------ requests
    def _send_all(self, ready: threading.Event) -> None:
        asyncio.run(self._run(ready))

    async def _run(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_async = asyncio.Event()
        ready.set()
        connector = aiohttp.TCPConnector(limit=self.concurrency)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        out: set[asyncio.Task[None]] = set()
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
            # Traffic starts once the endpoints are known (the first snapshot is the state
            # now), not with every request counted as having nowhere to go.
            await asyncio.to_thread(self._known.wait, 10.0)
            started = time.monotonic()
            jobs = [
                asyncio.create_task(self._arrivals(key, shape, started, http, out))
                for key, shape in self.shapes.items()
            ]
            jobs.append(asyncio.create_task(self._report()))
            await self._stop_async.wait()
            for task in [*jobs, *out]:
                task.cancel()
            await asyncio.gather(*jobs, *out, return_exceptions=True)

    async def _arrivals(
        self,
        key: ModelKey,
        shape: TrafficShape,
        started: float,
        http: aiohttp.ClientSession,
        out: set[asyncio.Task[None]],
    ) -> None:
        """A Poisson process at the shape's rate: candidates at its peak rate, each kept
        with the probability rate/peak (thinning), so bursts start and end on time."""
        rng = random.Random(f"{self.seed}:{key}:arrivals")
        phase, peak = burst_phase(self.seed, key, shape), shape.peak_rps()
        if peak <= 0:
            return
        t = 0.0
        while True:
            t += rng.expovariate(peak)
            delay = started + t - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if rng.random() * peak >= shape.rate(t, phase):
                continue
            if len(out) >= self.concurrency:
                self._count(key, SHED)
                continue
            target = self.targets.take(key)
            if target is None:
                self._count(key, NO_ENDPOINT)
            else:
                with self._lock:
                    self._totals[key].by_target[target] += 1
                # No "model": the engine serves one, under its weights' path, not gpucap's name.
                body = {"prompt": "gpucap demo", "max_tokens": round(shape.tokens_per_request)}
                task = asyncio.create_task(self._request(key, target, body, http))
                out.add(task)
                task.add_done_callback(out.discard)

    async def _request(
        self,
        key: ModelKey,
        target: str,
        body: dict[str, object],
        http: aiohttp.ClientSession,
    ) -> None:
        began = time.monotonic()
        if self._telemetry is not None:
            self._telemetry.in_flight.labels(*key).inc()
        outcome = ERROR
        try:
            async with http.post(f"http://{target}{COMPLETIONS_PATH}", json=body) as resp:
                await resp.read()
                outcome = OK if resp.status == 200 else ERROR
        except TimeoutError:
            outcome = TIMEOUT
        except (aiohttp.ClientConnectionError, OSError):
            outcome = REFUSED
        except aiohttp.ClientError:
            outcome = ERROR
        finally:
            self.targets.give_back(target)
            if self._telemetry is not None:
                self._telemetry.in_flight.labels(*key).dec()
        self._count(key, outcome, time.monotonic() - began, target)

    def _count(
        self, key: ModelKey, outcome: str, took: float = 0.0, target: str | None = None
    ) -> None:
        with self._lock:
            t = self._totals[key]
            t.sent += 1
            t.outcomes[outcome] += 1
            if target is not None and outcome != OK:
                t.failed_by_target[target] += 1
            if outcome == OK:
                t.latencies_s.append(took)
        if self._telemetry is not None:
            self._telemetry.requests.labels(*key, outcome).inc()
            if outcome == OK:
                self._telemetry.seconds.labels(*key).observe(took)

    async def _report(self) -> None:
        last = {key: Totals() for key in self.shapes}
        while True:
            await asyncio.sleep(self.report_every_s)
            for key in self.shapes:
                with self._lock:  # (the latencies are the report's: taken and cleared)
                    now = self.totals(key)
                    self._totals[key].latencies_s.clear()
                before = last[key]
                lat = sorted(now.latencies_s)
                failed = now.outcomes - before.outcomes
                del failed[OK]
                log.info(
                    "demo.load",
                    customer=key[0],
                    model=key[1],
                    rps=round((now.sent - before.sent) / self.report_every_s, 1),
                    ok=now.outcomes[OK] - before.outcomes[OK],
                    failed=dict(failed),
                    p50_s=round(statistics.median(lat), 2) if lat else None,
                    p95_s=round(lat[int(0.95 * (len(lat) - 1))], 2) if lat else None,
                    endpoints=len(self.targets.of(key)),
                )
                last[key] = now

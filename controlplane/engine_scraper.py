"""Traffic per model scraped from the engines themselves: the :class:`MetricsSource` for a
daemon with no Prometheus (the demo on a host without one).

Each collection lists the engines to scrape (ready and draining replicas: the API's
``scrape_targets``, what ``/sd/prometheus`` gives Prometheus), GETs every engine's metrics
page concurrently (a bound on connections in flight, a timeout per scrape) and reads the
engine's own names
(``runtimes``). It answers what the default PromQL answers (``runtimes/queries.py``), over
the scrapes each engine gave within ``window_s``:

- in flight and queued: the gauges' sum over the model's engines, as scraped now;
- completions and tokens per second: each counter's increase over the window (a counter
  that went down was reset, and counts from zero, as Prometheus' ``rate`` reads it);
- arrivals: completions plus the growth of running + waiting (the least-squares slope,
  as ``deriv``), floored at zero: the engines count no arrivals.

Silence is handled as :class:`~controlplane.prometheus_source.PrometheusSource` handles it:
a model none of whose engines answered, or whose engines have not been scraped twice
yet, is ``None`` (NoData: the autoscaler holds scale). An engine that does not answer (refused,
timed out, an HTTP error, a page that is not Prometheus text) is skipped, counted in
``gpucap_engine_scrape_errors_total{customer,model,reason}`` and logged once per collection;
``collect`` never raises.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp
import structlog
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.types import MetricsSample
from controlplane.api.endpoints import Endpoint
from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.telemetry import Metrics
from runtimes import ENGINES
from runtimes.base import Metrics as EngineMetrics
from schema.runtime import Engine

log = structlog.get_logger("gpucap.metrics.engines")

SOURCE = "engines"
# An engine's page is a few KB; one much larger is not its metrics.
MAX_PAGE_BYTES = 4 * 1024 * 1024

Listing = Callable[[], Sequence[Endpoint]]


@dataclass(frozen=True)
class Scrape:
    """What one engine's page said at ``t``."""

    t: float
    running: float
    waiting: float
    completions: float
    tokens: float


class ScrapeFailed(Exception):
    """``reason``: a short, bounded label value."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def read_page(text: str, names: EngineMetrics, t: float) -> Scrape:
    """The engine's numbers from its Prometheus text page (every series of a name summed:
    an engine may label them by model or by rank). A gauge missing from the page is a
    page that is not this engine's: ScrapeFailed."""
    wanted = {
        names.running: "running",
        names.waiting: "waiting",
        names.completions_total: "completions",
        names.generation_tokens_total: "tokens",
    }
    found: dict[str, float] = defaultdict(float)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:  # (a counter's family drops "_total"; samples keep it)
                if sample.name in wanted:
                    found[wanted[sample.name]] += sample.value
    except (ValueError, TypeError, IndexError) as exc:
        raise ScrapeFailed("bad_response", f"not Prometheus text: {exc}") from None
    missing = [n for n, k in wanted.items() if k not in found]
    if missing:
        raise ScrapeFailed("bad_response", f"no {', '.join(missing)} on the page")
    return Scrape(t, found["running"], found["waiting"], found["completions"], found["tokens"])


def increase(values: Sequence[float]) -> float:
    """A counter's increase over consecutive readings; a reading below the one before is a
    restart from zero (Prometheus' reset rule)."""
    return sum(b - a if b >= a else b for a, b in zip(values, values[1:], strict=False))


def slope(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of (t, value), as PromQL's ``deriv``."""
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mt) * (v - mv) for t, v in points) / var


@dataclass(frozen=True)
class Rates:
    """One engine's per-second rates over its window."""

    completions: float
    tokens: float
    growth: float  # d(running + waiting)/dt


def rates(history: Sequence[Scrape]) -> Rates | None:
    """None until there are two scrapes some time apart."""
    if len(history) < 2 or history[-1].t <= history[0].t:
        return None
    span = history[-1].t - history[0].t
    return Rates(
        completions=increase([s.completions for s in history]) / span,
        tokens=increase([s.tokens for s in history]) / span,
        growth=slope([(s.t, s.running + s.waiting) for s in history]),
    )


_Key = tuple[str, str, str]  # (replica id, node id, address:port): one engine's history


@dataclass
class EngineScraper:
    endpoints: Listing  # what to scrape (``ControlPlaneService.scrape_targets``)
    telemetry: Metrics | None = None
    window_s: float = 60.0  # the default PromQL's [1m]
    timeout_s: float = 2.0  # per scrape
    concurrency: int = 64  # scrapes in flight
    _history: dict[_Key, deque[Scrape]] = field(default_factory=dict)

    # ------------------------------------------------------------------ MetricsSource
    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        if not capacity:
            return {}
        try:
            listed = [e for e in self.endpoints() if (e.customer, e.model) in capacity]
            scraped = asyncio.run(self._scrape_all(listed, now))
        except Exception as exc:  # (the store or the event loop): a tick must not die of it
            log.warning(
                "metrics.source_failed",
                source=SOURCE,
                error=f"{type(exc).__name__}: {exc}",
                note="every model reads as NoData; the autoscaler holds scale",
            )
            if self.telemetry is not None:
                self.telemetry.metrics_source_errors.labels(SOURCE, "listing").inc()
            return {key: None for key in capacity}
        self._record(listed, scraped, now)
        return {key: self._sample(key, cap, listed, now) for key, cap in capacity.items()}

    # ------------------------------------------------------------------ scrapes
    async def _scrape_all(
        self, listed: Sequence[Endpoint], now: float
    ) -> dict[_Key, Scrape | ScrapeFailed]:
        if not listed:
            return {}
        gate = asyncio.Semaphore(self.concurrency)
        connector = aiohttp.TCPConnector(limit=self.concurrency)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:

            async def one(e: Endpoint) -> tuple[_Key, Scrape | ScrapeFailed]:
                async with gate:
                    try:
                        return _key(e), await _scrape(http, e, now)
                    except ScrapeFailed as exc:
                        return _key(e), exc

            return dict(await asyncio.gather(*(one(e) for e in listed)))

    def _record(
        self, listed: Sequence[Endpoint], scraped: Mapping[_Key, Scrape | ScrapeFailed], now: float
    ) -> None:
        failed: list[str] = []
        for e in listed:
            got = scraped[_key(e)]
            if isinstance(got, ScrapeFailed):
                failed.append(f"{e.model}@{e.target}: {got}")
                if self.telemetry is not None:
                    counter = self.telemetry.engine_scrape_errors
                    counter.labels(e.customer, e.model, got.reason).inc()
                continue
            q = self._history.setdefault(_key(e), deque())
            q.append(got)
            while q and q[0].t < now - self.window_s:
                q.popleft()
        if failed:
            log.warning("metrics.engines_unreachable", failed=len(failed), engines=failed[:5])
        live = {_key(e) for e in listed}
        for k in list(self._history):
            if k not in live:  # (left the endpoints: drained, failed or replaced)
                del self._history[k]

    # ------------------------------------------------------------------ one model
    def _sample(
        self, key: ModelKey, cap: Capacity, listed: Sequence[Endpoint], now: float
    ) -> MetricsSample | None:
        fresh = [
            q
            for e in listed
            if (e.customer, e.model) == key
            and (q := self._history.get(_key(e)))
            and q[-1].t == now  # answered this collection
        ]
        if not fresh:
            return None  # no engine answered (or none is listed): nothing is known
        known = [r for q in fresh if (r := rates(q)) is not None]
        if not known:
            return None  # first scrapes: no rate yet, as Prometheus has none
        done = sum(r.completions for r in known)
        return MetricsSample(
            t=now,
            arrival_rate=max(0.0, done + sum(r.growth for r in known)),
            in_flight=sum(q[-1].running for q in fresh),
            queue_depth=sum(q[-1].waiting for q in fresh),
            tokens_per_s=sum(r.tokens for r in known),
            completion_rate=done,
        )


def _key(e: Endpoint) -> _Key:
    return (e.replica_id, e.node_id, e.target)


async def _scrape(http: aiohttp.ClientSession, e: Endpoint, now: float) -> Scrape:
    names = ENGINES[Engine(e.engine)].metrics
    url = f"http://{e.target}{e.metrics_path}"
    try:
        async with http.get(url) as resp:
            if resp.status != 200:
                raise ScrapeFailed("http_error", f"HTTP {resp.status} from {url}")
            body = await resp.content.read(MAX_PAGE_BYTES + 1)
    except TimeoutError:
        raise ScrapeFailed("timeout", f"{url}: no answer in time") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise ScrapeFailed("unreachable", f"{url}: {type(exc).__name__}: {exc}") from None
    if len(body) > MAX_PAGE_BYTES:
        raise ScrapeFailed("bad_response", f"{url}: page larger than {MAX_PAGE_BYTES} bytes")
    return read_page(body.decode("utf-8", "replace"), names, now)

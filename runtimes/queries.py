"""The metrics source's default PromQL, from every engine's own metric names: each query is
the union (``or``) of one per engine, so one daemon config reads every model whatever engine
its replicas run. Every query returns one series per model, labelled ``customer`` and
``model`` (the scrape config copies them from the node's gpucap-customer / gpucap-model tags;
see the README). Rates use [1m] so scrape intervals up to 30 s still give two points; the
gauges are instantaneous (the autoscaler's own windows do the averaging)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runtimes import ENGINES
from runtimes.base import Metrics

BY = "sum by (customer, model)"


def _union(part: Callable[[Metrics], str], engines: Iterable[Metrics] | None = None) -> str:
    chosen = list(engines) if engines is not None else [e.metrics for e in ENGINES.values()]
    return " or ".join(f"({part(m)})" for m in chosen)


def completion_rate(window: str = "1m", engines: Iterable[Metrics] | None = None) -> str:
    """Requests/s finishing, from each engine's completions counter."""
    return _union(lambda m: f"{BY} (rate({m.completions_total}[{window}]))", engines)


def arrival_rate(window: str = "1m", engines: Iterable[Metrics] | None = None) -> str:
    """Requests/s arriving. The engines count no arrivals, so by conservation of requests:
    completions plus the growth of those in the system (running + waiting, deriv over the
    same window). Completions alone read a burst as the capacity serving it; a gateway's
    request counter, where there is one, can be configured instead."""

    def one(m: Metrics) -> str:
        done = f"{BY} (rate({m.completions_total}[{window}]))"
        growth = f"{BY} (deriv({m.running}[{window}]) + deriv({m.waiting}[{window}]))"
        return f"clamp_min({done} + {growth}, 0)"

    return _union(one, engines)


def in_flight(engines: Iterable[Metrics] | None = None) -> str:
    return _union(lambda m: f"{BY} ({m.running})", engines)


def queue_depth(engines: Iterable[Metrics] | None = None) -> str:
    return _union(lambda m: f"{BY} ({m.waiting})", engines)


def tokens_per_s(window: str = "1m", engines: Iterable[Metrics] | None = None) -> str:
    return _union(lambda m: f"{BY} (rate({m.generation_tokens_total}[{window}]))", engines)


def freshness(engines: Iterable[Metrics] | None = None) -> str:
    """When the newest scraped sample is from: a Prometheus that stopped ingesting keeps
    answering gauges from up to 5 minutes back (its lookback delta), so age is checked."""
    return _union(lambda m: f"max by (customer, model) (timestamp({m.running}))", engines)

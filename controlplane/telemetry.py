"""Structured JSON logs (structlog) and Prometheus metrics for the daemon."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from providers.metered import CALLS, CallCounts


def configure_logging(level: str = "info", json: bool = True) -> None:
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=level.upper())
    # APScheduler logs every run at INFO; our own job metrics and logs say what matters.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        # One write per line (PrintLogger prints the message and its newline apart): a
        # line from another thread cannot land between them, even with another lock.
        logger_factory=structlog.WriteLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of the write, so a logger made
    earlier never writes to a stream that was swapped out and closed since (a test runner
    capturing output, a daemoniser redirecting it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class CloudCalls(Collector):
    """``gpucap_cloud_calls_total{cloud,account,region,verb}``: every cloud call the process
    made, as ``providers.metered`` counted it at the one seam all jobs and the API call
    through (so calls per tick, per (account, region), can be read off it)."""

    def __init__(self, counts: CallCounts = CALLS) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "gpucap_cloud_calls",
            "Cloud API calls made, by cloud, account, region and verb.",
            labels=["cloud", "account", "region", "verb"],
        )
        for (cloud, account, region, verb), n in sorted(self.counts.snapshot().items()):
            family.add_metric([cloud, account, region, verb], n)
        yield family


class Metrics:
    """The daemon's Prometheus metrics, on a registry of their own (tests build several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.tick_seconds = Histogram(
            "gpucap_job_tick_seconds",
            "Duration of one tick of a daemon job.",
            ["job"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.tick_errors = Counter(
            "gpucap_job_errors_total", "Ticks that ended in an error.", ["job", "error"], registry=r
        )
        self.desired_replicas = Gauge(
            "gpucap_model_desired_replicas",
            "Replicas the autoscaler wants.",
            ["customer", "model"],
            registry=r,
        )
        self.ready_replicas = Gauge(
            "gpucap_model_ready_replicas",
            "Replicas serving.",
            ["customer", "model"],
            registry=r,
        )
        self.warm_nodes = Gauge(
            "gpucap_warm_nodes",
            "Nodes waiting in a model's warm pool (lifecycle.warm), by pool.",
            ["customer", "model", "pool"],
            registry=r,
        )
        self.warm_usd_per_hour = Gauge(
            "gpucap_warm_usd_per_hour",
            "What a model's warm nodes cost while they wait: stopped, their boot volumes; "
            "ready, the nodes' price.",
            ["customer", "model", "pool"],
            registry=r,
        )
        self.nodes = Gauge(
            "gpucap_nodes", "Nodes by pool and state.", ["pool", "state"], registry=r
        )
        self.provider_errors = Counter(
            "gpucap_provider_errors_total",
            "Errors returned by cloud providers, by type.",
            ["cloud", "account", "type"],
            registry=r,
        )
        self.cloud_calls = CloudCalls()
        r.register(self.cloud_calls)
        self.provider_calls = Counter(
            "gpucap_provider_calls_total",
            "Calls made to cloud providers.",
            ["cloud", "call"],
            registry=r,
        )
        self.metrics_source_errors = Counter(
            "gpucap_metrics_source_errors_total",
            "Collections that got no metrics because the source failed, by reason.",
            ["source", "reason"],
            registry=r,
        )
        # The built-in scraper (controlplane/engine_scraper.py): an engine that did not
        # answer is skipped, its model read from the engines that did.
        self.engine_scrape_errors = Counter(
            "gpucap_engine_scrape_errors_total",
            "Engine metrics scrapes that failed, by reason.",
            ["customer", "model", "reason"],
            registry=r,
        )

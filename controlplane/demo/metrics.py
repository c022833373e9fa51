"""Where the demo's traffic metrics come from, chosen when the daemon starts: a real
Prometheus where one is installed (a child of the daemon, ``controlplane/demo/prometheus.py``,
read through :class:`~controlplane.prometheus_source.PrometheusSource` with the default
PromQL over a short window), else the built-in scraper reading the engines itself
(:class:`~controlplane.engine_scraper.EngineScraper`). A Prometheus that does not start is
logged and the scraper used instead: the demo runs either way.

``$GPUCAP_DEMO_PROMETHEUS`` names the binary (empty: none, the built-in scraper); unset,
``prometheus`` on the PATH."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from autoscaler.types import MetricsSample
from controlplane.demo.prometheus import PrometheusProcess
from controlplane.engine_scraper import EngineScraper
from controlplane.http_endpoint import SD_PATH
from controlplane.metrics_sources import Capacity, MetricsSource, ModelKey
from controlplane.prometheus_source import PrometheusSource
from controlplane.telemetry import Metrics
from runtimes import queries
from schema.daemon_config import MetricsQueries

if TYPE_CHECKING:
    from controlplane.daemon import Daemon

log = structlog.get_logger("gpucap.demo")

BINARY_ENV = "GPUCAP_DEMO_PROMETHEUS"


def prometheus_binary() -> str | None:
    named = os.environ.get(BINARY_ENV)
    if named is not None:
        return named or None
    return shutil.which("prometheus")


def short_queries(window: str) -> MetricsQueries:
    """The default PromQL (``runtimes/queries.py``) with its rates over ``window``."""
    return MetricsQueries(
        arrival_rate=queries.arrival_rate(window),
        in_flight=queries.in_flight(),
        queue_depth=queries.queue_depth(),
        tokens_per_s=queries.tokens_per_s(window),
        completion_rate=queries.completion_rate(window),
        freshness=queries.freshness(),
    )


class DemoMetrics:
    """A :class:`MetricsSource` and a daemon companion (``controlplane.daemon.Companion``)."""

    def __init__(self, home: Path, telemetry: Metrics, window_s: float = 15.0) -> None:
        self.home, self.telemetry, self.window_s = home, telemetry, window_s
        self.source: MetricsSource | None = None  # (None until the daemon starts)
        self.prometheus: PrometheusProcess | None = None

    def start(self, daemon: Daemon) -> None:
        assert daemon.service is not None
        binary = prometheus_binary()
        if binary is not None and daemon.metrics_port is not None:
            sd = f"http://127.0.0.1:{daemon.metrics_port}{SD_PATH}"
            self.prometheus = PrometheusProcess(binary, self.home / "prometheus", sd)
            try:
                url = self.prometheus.start()
            except (RuntimeError, OSError) as exc:
                log.warning("demo.prometheus_failed", error=str(exc), using="built-in scraper")
                self.prometheus.stop()
                self.prometheus = None
            else:
                self.source = PrometheusSource(
                    url,
                    short_queries(f"{self.window_s:g}s"),
                    timeout_s=2.0,
                    telemetry=self.telemetry,
                )
                log.info("demo.metrics", source="prometheus", url=url, discovers=sd)
                return
        self.source = EngineScraper(
            daemon.service.scrape_targets, telemetry=self.telemetry, window_s=self.window_s
        )
        log.info("demo.metrics", source="built-in scraper", prometheus=binary or "not installed")

    def stop(self) -> None:
        if self.prometheus is not None:
            self.prometheus.stop()

    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        if self.source is None:
            return {}
        return self.source.collect(now, capacity)

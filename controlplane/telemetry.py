"""Structured JSON logs (structlog) and Prometheus metrics for the daemon."""

from __future__ import annotations

import logging
import os
import platform
import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from providers.metered import CALLS, CallCounts


def configure_logging(level: str = "info", json: bool = True) -> None:
    """Every log line of the process as one JSON object on stderr: gpucap's own (structlog)
    and the libraries' (the stdlib ``logging`` root: botocore, grpc, apscheduler, alembic),
    the latter through structlog's ``ProcessorFormatter`` with the same processors, so a
    library's traceback is one line too (its ``exception`` field)."""
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    )
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        # One write per line (PrintLogger prints the message and its newline apart): a
        # line from another thread cannot land between them, even with another lock.
        logger_factory=structlog.WriteLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    # (StreamHandler writes the line and its newline in one write, too.)
    handler = logging.StreamHandler(_CurrentStderr())  # type: ignore[arg-type]
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    handler.set_name(_HANDLER)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(old)  # (configured again: one handler, not two)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # warnings.warn lines are log lines too
    # APScheduler logs every run at INFO; our own job metrics and logs say what matters.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


_HANDLER = "gpucap-json"


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


class UsageCounters(Collector):
    """``gpucap_gpu_seconds_total``, ``gpucap_node_seconds_total`` and
    ``gpucap_cost_usd_total`` by customer, capacity tier and cloud: usage metering's totals
    since the first node (``controlplane.usage``), set from the store on each reconcile
    tick (``loop/fleet_gauges.py``).

    Totals, not increments: counting in the process (adding each tick's seconds) would
    start again from zero at each restart and count twice when two daemons each served a
    part of a tick or a failover replayed one. Derived from the store's rows, every daemon
    reports the same history, a restarted one or a new leader included, so the series
    carry on without a reset. Only the acting daemon reports them (a standby clears
    them): aggregate across daemons with ``max``, not ``sum``. A total that the rows make
    smaller (a warm node's resume undone because its start failed) is held at the larger
    value in this process, so a counter never goes down."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (customer, tier, cloud) -> (GPU-seconds, node-seconds, USD)
        self._totals: dict[tuple[str, str, str], tuple[float, float, float]] = {}

    def update(self, totals: dict[tuple[str, str, str], tuple[float, float, float]]) -> None:
        with self._lock:
            for key, new in totals.items():
                old = self._totals.get(key, (0.0, 0.0, 0.0))
                self._totals[key] = (max(old[0], new[0]), max(old[1], new[1]), max(old[2], new[2]))

    def clear(self) -> None:
        with self._lock:
            self._totals = {}

    def collect(self) -> Iterator[Metric]:
        labels = ["customer", "tier", "cloud"]
        families = (
            CounterMetricFamily(
                "gpucap_gpu_seconds",
                "GPU-seconds billed since the first node (usage metering), by customer, "
                "capacity tier and cloud.",
                labels=labels,
            ),
            CounterMetricFamily(
                "gpucap_node_seconds",
                "Node-seconds billed since the first node, by customer, tier and cloud.",
                labels=labels,
            ),
            CounterMetricFamily(
                "gpucap_cost_usd",
                "What the nodes cost since the first node (each at its price as of its "
                "launch), by customer, capacity tier and cloud.",
                labels=labels,
            ),
        )
        with self._lock:
            totals = sorted(self._totals.items())
        for key, values in totals:
            for family, value in zip(families, values, strict=True):
                family.add_metric(list(key), value)
        yield from families


class SweptGauge(Gauge):
    """A labelled gauge that one job writes in full on each tick: every label set the job's
    last successful tick did not write (a deleted model, a pool gone, a warm pool dropped
    from the spec) is removed at the end of that tick (``Metrics.end_tick``), so it leaves
    /metrics instead of keeping its last value forever. ``labels()`` marks a label set seen
    (calling it without setting keeps the last value); ``begin`` starts a tick, ``sweep``
    ends one. A tick that failed sweeps nothing: what it did not reach is not known gone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._seen_lock = threading.Lock()
        self._seen: set[tuple[str, ...]] = set()
        self._written: set[tuple[str, ...]] = set()
        super().__init__(*args, **kwargs)

    def labels(self, *labelvalues: object, **labelkwargs: object) -> SweptGauge:
        child = super().labels(*labelvalues, **labelkwargs)
        key = child._labelvalues  # (the label values as strings, in label order)
        with self._seen_lock:
            self._seen.add(key)
            self._written.add(key)
        return child

    def begin(self) -> None:
        with self._seen_lock:
            self._seen = set()

    def sweep(self) -> None:
        with self._seen_lock:
            gone, self._written = self._written - self._seen, set(self._seen)
        for key in gone:
            self.remove(*key)


def build_info() -> tuple[str, str, str]:
    """(version, commit, python) of this process: the installed package's version, the
    commit from ``GPUCAP_COMMIT`` (set by an image build) or the work tree's git, else
    "unknown"."""
    try:
        version = metadata.version("gpucap")
    except metadata.PackageNotFoundError:
        version = "unknown"
    commit = os.environ.get("GPUCAP_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(
                ["git", "rev-parse", "--short=12", "HEAD"],
                cwd=Path(__file__).resolve().parent,
                capture_output=True,
                text=True,
                timeout=2,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            commit = ""
    return version, commit or "unknown", platform.python_version()


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
        self.desired_replicas = SweptGauge(
            "gpucap_model_desired_replicas",
            "Replicas the autoscaler wants.",
            ["customer", "model"],
            registry=r,
        )
        self.ready_replicas = SweptGauge(
            "gpucap_model_ready_replicas",
            "Replicas serving.",
            ["customer", "model"],
            registry=r,
        )
        self.warm_nodes = SweptGauge(
            "gpucap_warm_nodes",
            "Nodes waiting in a model's warm pool (lifecycle.warm), by pool.",
            ["customer", "model", "pool"],
            registry=r,
        )
        self.warm_usd_per_hour = SweptGauge(
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
        self.usage = UsageCounters()  # (set by loop/fleet_gauges.py on each reconcile tick)
        r.register(self.usage)
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
        self.build_info = Gauge(
            "gpucap_build_info",
            "Always 1: the daemon's version, commit and Python version as labels.",
            ["version", "commit", "python"],
            registry=r,
        )
        self.build_info.labels(*build_info()).set(1)
        self.job_last_success = Gauge(
            "gpucap_job_last_success_timestamp_seconds",
            "When a job's last tick that ended without an error ended (Unix seconds).",
            ["job"],
            registry=r,
        )
        self.job_interval = Gauge(
            "gpucap_job_interval_seconds",
            "How often each job is scheduled (the stuck-job alert counts in intervals).",
            ["job"],
            registry=r,
        )
        # The fleet's gauges (controlplane/loop/fleet_gauges.py, on each reconcile tick).
        self.usd_per_hour = SweptGauge(
            "gpucap_usd_per_hour",
            "What the live nodes cost per hour, by customer and capacity tier (committed, "
            "on_demand, shared: the overflow); 0 for a tier with pools and no live node.",
            ["customer", "tier"],
            registry=r,
        )
        self.overflow_max_usd_per_hour = SweptGauge(
            "gpucap_overflow_max_usd_per_hour",
            "The overflow cap of a customer's active policy (overflow.max_usd_per_hour), "
            "for customers whose overflow is enabled with a cap.",
            ["customer"],
            registry=r,
        )
        self.pool_blocked = SweptGauge(
            "gpucap_pool_blocked",
            "1 while an active pool takes no launch because of a stockout, quota or "
            "credential block (the pool as a whole or every known zone), else 0.",
            ["customer", "pool", "cloud", "region", "tier"],
            registry=r,
        )
        self.time_to_ready = Histogram(
            "gpucap_node_time_to_ready_seconds",
            "Cold starts: from a node's intent (or its resume) to its engine ready, by "
            "customer, cloud and capacity tier.",
            ["customer", "cloud", "tier"],
            registry=r,
            buckets=(5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600, 900, 1200, 1800),
        )
        self.staging_copies = SweptGauge(
            "gpucap_staging_copies",
            "Staged weight copies (controlplane/loop/staging.py) by customer and state.",
            ["customer", "state"],
            registry=r,
        )
        self.staging_progress = SweptGauge(
            "gpucap_staging_progress_ratio",
            "Bytes copied over bytes to copy, of each weight copy under way.",
            ["customer", "model", "account", "region"],
            registry=r,
        )
        # The gc sweep (controlplane/loop/gc.py): instances carrying gpucap's tags with no
        # live record, found by the last sweep of each account (terminated as found: a
        # count that stays above 0 is an instance that does not go away).
        self.gc_orphans = SweptGauge(
            "gpucap_gc_orphans",
            "Tagged instances with no live record found by the last gc sweep, by account.",
            ["customer", "cloud", "account"],
            registry=r,
        )
        # Which job writes each swept gauge in full (the daemon's job names).
        self._swept_by_job: dict[str, tuple[SweptGauge, ...]] = {
            "collect_metrics": (self.ready_replicas,),
            "decide": (self.desired_replicas,),
            "place": (self.warm_nodes, self.warm_usd_per_hour),
            "reconcile": (
                self.usd_per_hour,
                self.overflow_max_usd_per_hour,
                self.pool_blocked,
                self.staging_copies,
                self.staging_progress,
            ),
        }

    def standing_by(self, job: str) -> None:
        """``job`` fired on a standby daemon (another one acts): no last success of its
        own to report (a deposed leader's would look stuck), nor the fleet as it last saw
        it (the acting daemon reports it)."""
        self.job_last_success.remove(job)
        if job == "reconcile":
            self.usage.clear()
        gauges = self._swept_by_job.get(job, ())
        for g in (*gauges, self.gc_orphans) if job == "reconcile" else gauges:
            g.clear()

    def begin_tick(self, job: str) -> None:
        """A tick of ``job`` starts: the label sets of its gauges are marked unseen."""
        for g in self._swept_by_job.get(job, ()):
            g.begin()

    def end_tick(self, job: str, at: float, ok: bool) -> None:
        """A tick of ``job`` ended at ``at`` (Unix seconds). Ended without an error: its
        last-success time is set and its gauges' label sets it did not write are removed
        (deleted models, pools gone); with one, nothing is swept."""
        if not ok:
            return
        self.job_last_success.labels(job).set(at)
        for g in self._swept_by_job.get(job, ()):
            g.sweep()

"""The daemon's /metrics, scraped over HTTP from an in-process daemon on the simulated
cloud: build info, each job's last successful tick, $/h by customer and tier, the overflow
cap, blocked pools; and the series of a deleted model and of a dropped account's pools
leave /metrics (``telemetry.SweptGauge``) while the others stay."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from controlplane.daemon import Daemon
from controlplane.store.models import Node
from controlplane.telemetry import Metrics
from tests.component.test_control_loop import POLICY
from tests.component.test_daemon_leadership import make_daemon

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(d: Daemon) -> Series:
    url = f"http://127.0.0.1:{d.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def named(series: Series, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        k: v
        for (n, k), v in series.items()
        if n == name and all(dict(k).get(a) == b for a, b in labels.items())
    }


def wait_for(what: Callable[[], bool], within: float = 30.0) -> None:
    t0 = time.monotonic()
    while not what():
        assert time.monotonic() - t0 < within, f"not within {within} s"
        time.sleep(0.1)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = make_daemon(f"sqlite:///{tmp_path / 'gpucap.db'}")
    d.start()
    yield d
    d.stop()


def without_model(policy: str, name: str) -> str:
    """The policy with model ``name``'s entry cut out (the demo policy's layout)."""
    start = policy.index(f"  - name: {name}\n")
    end = policy.find("\n  - name: ", start + 1)
    end = policy.index("\noverflow:", start) if end < 0 else end
    return policy[:start] + policy[end + 1 :]


def test_metrics_the_daemon_exports_and_series_of_deleted_models_leave(daemon: Daemon) -> None:
    started = time.time()
    jobs = {"collect_metrics", "decide", "place", "reconcile"}

    def ticked() -> bool:
        s = scrape(daemon)
        done = {dict(k)["job"] for k in named(s, "gpucap_job_last_success_timestamp_seconds")}
        return (
            jobs <= done
            and bool(named(s, "gpucap_usd_per_hour", tier="committed"))
            and bool(named(s, "gpucap_model_ready_replicas", model="coder-32b"))
            and bool(named(s, "gpucap_model_desired_replicas", model="coder-32b"))
        )

    wait_for(ticked)
    s = scrape(daemon)
    ((labels, one),) = named(s, "gpucap_build_info").items()
    assert one == 1 and dict(labels)["version"] == "0.1.0" and dict(labels)["python"]
    for job in jobs:
        ((_, at),) = named(s, "gpucap_job_last_success_timestamp_seconds", job=job).items()
        assert started - 1 <= at <= time.time() + 1
    # Every tier the demo customer has pools of, priced by its live nodes (0 with none).
    tiers = {dict(k)["tier"] for k in named(s, "gpucap_usd_per_hour", customer="demo")}
    assert tiers == {"committed", "on_demand", "shared"}
    assert named(s, "gpucap_overflow_max_usd_per_hour", customer="demo") == {
        (("customer", "demo"),): 600.0
    }
    gcp_pools = named(s, "gpucap_pool_blocked", cloud="gcp")
    assert gcp_pools and set(gcp_pools.values()) == {0.0}
    # The nodes that became ready: their cold starts observed once each, with their price.
    wait_for(lambda: bool(named(scrape(daemon), "gpucap_node_time_to_ready_seconds_count")))
    s = scrape(daemon)
    assert daemon.store is not None

    def observed_once_each() -> bool:
        assert daemon.store is not None
        with daemon.store.session() as db:
            readied = db.scalar(select(func.count(Node.id)).where(Node.ready_at.is_not(None)))
        counts = named(scrape(daemon), "gpucap_node_time_to_ready_seconds_count")
        return sum(counts.values()) == readied

    wait_for(observed_once_each)  # (never more: a node is not observed twice)
    assert sum(named(s, "gpucap_usd_per_hour", customer="demo").values()) > 0
    # Usage metering's counters: what the nodes billed so far, by tier and cloud.
    wait_for(lambda: bool(named(scrape(daemon), "gpucap_gpu_seconds_total", customer="demo")))
    s = scrape(daemon)
    assert sum(named(s, "gpucap_cost_usd_total", customer="demo").values()) > 0

    # The model leaves the policy (deleted) and so does the GCP account (its pools).
    policy = without_model(POLICY, "coder-32b")
    gcp = policy.index("  - name: demo-gcp\n")
    policy = policy[:gcp] + policy[policy.index("  - name: shared-oci\n") :]
    assert daemon.service is not None
    daemon.service.apply_policy(policy, source="test", applied_by="test", allow_deletes=True)

    def gone() -> bool:
        s = scrape(daemon)
        return not (
            named(s, "gpucap_model_ready_replicas", model="coder-32b")
            or named(s, "gpucap_model_desired_replicas", model="coder-32b")
            or named(s, "gpucap_pool_blocked", cloud="gcp")
        )

    wait_for(gone)
    s = scrape(daemon)
    # ... while the models and pools still there keep theirs.
    assert named(s, "gpucap_model_desired_replicas", model="chat-8b")
    assert named(s, "gpucap_model_ready_replicas", model="chat-8b")
    assert named(s, "gpucap_pool_blocked", cloud="aws")


def test_a_failed_tick_sweeps_nothing_and_the_next_good_one_does() -> None:
    m = Metrics()
    m.begin_tick("decide")
    m.desired_replicas.labels("c", "a").set(2)
    m.desired_replicas.labels("c", "b").set(3)
    m.end_tick("decide", 100.0, ok=True)
    m.begin_tick("decide")
    m.desired_replicas.labels("c", "a").set(4)  # b not reached: the tick fails
    m.end_tick("decide", 110.0, ok=False)
    get = m.registry.get_sample_value
    assert get("gpucap_model_desired_replicas", {"customer": "c", "model": "b"}) == 3
    assert get("gpucap_job_last_success_timestamp_seconds", {"job": "decide"}) == 100.0
    m.begin_tick("decide")
    m.desired_replicas.labels("c", "a").set(4)
    m.end_tick("decide", 120.0, ok=True)
    assert get("gpucap_model_desired_replicas", {"customer": "c", "model": "b"}) is None
    assert get("gpucap_model_desired_replicas", {"customer": "c", "model": "a"}) == 4
    assert get("gpucap_job_last_success_timestamp_seconds", {"job": "decide"}) == 120.0


def test_a_standby_reports_neither_last_successes_nor_the_fleet() -> None:
    """A deposed leader's gauges would otherwise stay at what it last saw (a stuck job,
    replicas below desired) beside the acting daemon's."""
    m = Metrics()
    for job, gauge in (("decide", m.desired_replicas), ("reconcile", m.usd_per_hour)):
        m.begin_tick(job)
        gauge.labels("c", "a").set(2)
        m.end_tick(job, 100.0, ok=True)
    m.gc_orphans.labels("c", "aws", "c-aws").set(1)
    m.standing_by("decide")
    get = m.registry.get_sample_value
    assert get("gpucap_job_last_success_timestamp_seconds", {"job": "decide"}) is None
    assert get("gpucap_model_desired_replicas", {"customer": "c", "model": "a"}) is None
    assert get("gpucap_usd_per_hour", {"customer": "c", "tier": "a"}) == 2  # (reconcile's)
    m.standing_by("reconcile")
    assert get("gpucap_usd_per_hour", {"customer": "c", "tier": "a"}) is None
    assert get("gpucap_gc_orphans", {"customer": "c", "cloud": "aws", "account": "c-aws"}) is None

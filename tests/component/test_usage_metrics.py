"""Usage metering's Prometheus counters (``telemetry.UsageCounters``), set from the store on
a reconcile tick's fleet gauges, on SQLite and PostgreSQL: they equal GetUsage's totals
since the first node; a tick again, a restarted daemon and a new leader report the same
totals (nothing counted twice, no reset); a standby reports none."""

from __future__ import annotations

from datetime import datetime

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import LoopContext
from controlplane.loop.fleet_gauges import FleetGauges
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.usage import node_uses
from controlplane.telemetry import Metrics
from controlplane.usage import EPOCH, micros, usage
from providers.sim import SimCloud
from tests.component.test_control_loop import TUNING, ScriptedLoad
from tests.component.test_usage import NOW, fleet, h, service  # noqa: F401  (fixtures)

Totals = dict[tuple[str, str, str, str], float]  # (metric, customer, tier, cloud)


def tick(
    store: Store, metrics: Metrics, gauges: FleetGauges | None = None, at: datetime = NOW
) -> Totals:
    """One reconcile tick's fleet gauges at ``at``, by a daemon with ``metrics`` and
    ``gauges`` (None: a process of its own); returns the usage counters as /metrics
    shows them."""
    sim = SimCloud(clock=at.timestamp)
    ctx = LoopContext(
        store=store,
        providers=SimResolver(sim),
        metrics_source=ScriptedLoad(),
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=metrics,
        tuning=TUNING,
        clock=at.timestamp,
    )
    (gauges or FleetGauges()).run(ctx)
    return scraped(metrics)


def scraped(metrics: Metrics) -> Totals:
    out: Totals = {}
    text = generate_latest(metrics.registry).decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in _NAMES:
                out[(s.name, s.labels["customer"], s.labels["tier"], s.labels["cloud"])] = s.value
    return out


_NAMES = ("gpucap_gpu_seconds_total", "gpucap_node_seconds_total", "gpucap_cost_usd_total")


def test_the_counters_are_the_usage_since_the_first_node(
    fleet: Store,  # noqa: F811
    service: ControlPlaneService,  # noqa: F811
) -> None:
    totals = tick(fleet, Metrics())
    view = service.usage(None, group_by=["tier", "cloud"])
    assert view.rows
    for r in view.rows:
        key = (r.customer, r.tier, r.cloud)
        assert totals[("gpucap_gpu_seconds_total", *key)] == pytest.approx(r.gpu_hours * 3600)
        assert totals[("gpucap_node_seconds_total", *key)] == pytest.approx(r.node_hours * 3600)
        assert totals[("gpucap_cost_usd_total", *key)] == pytest.approx(r.cost_usd)
    assert len(totals) == 3 * len(view.rows)
    # (the fleet: 24 GPU-hours committed on AWS, by hand)
    assert totals[("gpucap_gpu_seconds_total", "acme", "committed", "aws")] == 24 * 3600


def test_a_tick_again_a_restart_and_a_new_leader_count_nothing_twice(
    fleet: Store,  # noqa: F811
    service: ControlPlaneService,  # noqa: F811
) -> None:
    metrics, gauges = Metrics(), FleetGauges()
    first = tick(fleet, metrics, gauges)
    assert tick(fleet, metrics, gauges) == first  # the same tick again: the same totals
    assert tick(fleet, Metrics()) == first  # another process (restarted, or a new leader)


def test_ticks_that_settle_released_nodes_keep_the_totals_exact(
    fleet: Store,  # noqa: F811
) -> None:
    """One process ticking along the fleet's day: nodes released more than SETTLE before a
    tick are summed once and not read again; at every tick the totals are what the whole
    history computed afresh says."""
    metrics, gauges = Metrics(), FleetGauges()
    for at in (h(0.5), h(3.5), h(4.2), h(5.5), h(8), NOW):
        totals = tick(fleet, metrics, gauges, at)
        with fleet.session() as s:
            rows = usage(node_uses(s, EPOCH, at), 0, micros(at), ("tier", "cloud"))
        expected = {
            ("gpucap_gpu_seconds_total", r.customer, r.tier, r.cloud): r.gpu_micros / 1e6
            for r in rows
        }
        assert {k: v for k, v in totals.items() if k[0] == "gpucap_gpu_seconds_total"} == expected
    assert gauges._usage_totals._settled  # (the ticks did settle some nodes)


def test_a_standby_reports_no_usage(fleet: Store, service: ControlPlaneService) -> None:  # noqa: F811
    metrics = Metrics()
    assert tick(fleet, metrics)
    metrics.standing_by("reconcile")
    assert scraped(metrics) == {}


def test_a_total_the_rows_make_smaller_is_held_in_the_process() -> None:
    """A warm node's resume undone (its start failed) takes back the time since the resume:
    the counter holds its larger value rather than go down."""
    metrics = Metrics()
    metrics.usage.update({("acme", "shared", "oci"): (100.0, 10.0, 5.0)})
    metrics.usage.update({("acme", "shared", "oci"): (90.0, 9.0, 4.5)})
    assert scraped(metrics)[("gpucap_gpu_seconds_total", "acme", "shared", "oci")] == 100.0

"""The control loop's metrics and decide jobs fed by a real Prometheus: the autoscaler's
desired replica count follows the load the (stand-in) vLLM replicas serve, and a model with
no series holds its scale instead of reading as idle."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.prometheus_source import PrometheusSource
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.migrate import upgrade
from controlplane.store.models import Model
from controlplane.telemetry import Metrics
from providers.sim import SimCloud
from schema.daemon_config import MetricsQueries
from tests.fakes.prometheus_server import PrometheusFleet

pytestmark = pytest.mark.xdist_group("prometheus")

POLICY = resources.files("controlplane.demo").joinpath("policy.yaml").read_text()

# Windows of seconds, not minutes, so the test runs on the wall clock Prometheus uses.
TUNING = replace(
    Tuning(),
    stable_window_s=3.0,
    burst_window_s=1.0,
    scale_down_delay_s=2.0,
    cold_start_scale=0.001,
)
QUERIES = MetricsQueries(
    arrival_rate="sum by (customer, model) (rate(vllm:request_success_total[3s]))",
    tokens_per_s="sum by (customer, model) (rate(vllm:generation_tokens_total[3s]))",
)


# Arrivals from a gateway's request counter, which sees a model that no server runs.
GATEWAY = QUERIES.model_copy(
    update={"arrival_rate": "sum by (customer, model) (rate(gateway_requests_total[3s]))"}
)


@pytest.fixture
def queries() -> MetricsQueries:
    return QUERIES


@pytest.fixture
def loop(
    tmp_path: Path, prometheus: PrometheusFleet, queries: MetricsQueries
) -> Iterator[ControlLoop]:
    # The store is not under test here (test_control_loop.py runs it on both databases).
    url = f"sqlite:///{tmp_path / 'gpucap.db'}"
    upgrade(url)
    store = Store.from_url(url)
    ControlPlaneService(store).apply_policy(POLICY, source="demo", applied_by="test")
    sim = SimCloud()
    ctx = LoopContext(
        store=store,
        providers=SimResolver(sim),
        metrics_source=PrometheusSource(prometheus.url, queries, timeout_s=2.0),
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=TUNING,
    )
    try:
        yield ControlLoop(ctx)
    finally:
        store.close()


def desired(loop: ControlLoop) -> dict[str, tuple[int, str]]:
    with loop.ctx.store.session() as s:
        return {m.name: (m.desired_replicas, m.desired_reason) for m in s.scalars(select(Model))}


def tick_until(loop: ControlLoop, model: str, ok: object, timeout_s: float) -> list[int]:
    """Collect and decide every 0.25 s until ``ok(desired)``; the desired counts seen."""
    assert callable(ok)
    seen: list[int] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        loop.collect_metrics()
        loop.decide()
        seen.append(desired(loop)[model][0])
        if ok(seen[-1]):
            return seen
        time.sleep(0.25)
    raise AssertionError(f"{model}: desired never satisfied the condition; saw {seen}")


def test_desired_replicas_follow_the_load_prometheus_reports(loop, prometheus):
    # 200 requests in flight at 100 req/s (2 s each) -> 200 / (64 x 0.7) -> 5 replicas.
    replica = prometheus.add("demo", "llama-70b", running=200, waiting=0, rps=100)
    try:
        prometheus.server.wait_scraped(replica, samples=4)
        seen = tick_until(loop, "llama-70b", lambda d: d == 5, timeout_s=8)
        assert max(seen) == 5  # never overshot on the way

        # No series for the other models: they hold (NoData), never read as zero load.
        state = desired(loop)
        assert state["chat-8b"][1] == "hold_no_data"
        assert state["coder-32b"][1] == "hold_no_data"

        # Load drops to 10 in flight at 5 req/s -> 1 replica, after the scale-down delay.
        prometheus.set_load(replica, running=10, rps=5)
        seen = tick_until(loop, "llama-70b", lambda d: d == 1, timeout_s=15)
        assert all(a >= b for a, b in zip(seen, seen[1:], strict=False))  # only downwards
    finally:
        prometheus.remove(replica)


@pytest.mark.parametrize("queries", [GATEWAY])
def test_a_model_at_zero_wakes_on_its_gateway_counter(loop, prometheus):
    # coder-32b may scale to zero and runs no replica: no vLLM server reports for it. The
    # gateway's counter is the first request's signal; the model wakes to one replica.
    assert desired(loop)["coder-32b"][0] == 0
    loop.collect_metrics()
    loop.decide()
    assert desired(loop)["coder-32b"] == (0, "hold_no_data")  # no gateway series yet
    prometheus.exporter.set_gateway("demo", "coder-32b", rps=0.5)
    try:
        seen = tick_until(loop, "coder-32b", lambda d: d >= 1, timeout_s=10)
        assert seen[-1] == 1 and desired(loop)["coder-32b"][1] == "wake"
    finally:
        prometheus.exporter.set_gateway("demo", "coder-32b", rps=0.0)

"""The built-in scraper (controlplane/engine_scraper.py) against wire-level fake engines
(tests/fakes/engine_server.py) over real HTTP: what the default PromQL reads from the same
counters and gauges, per model across its engines; an engine that does not answer skipped
and counted; silence as NoData; and the endpoint list read from the store through the API's
listing, on both store backends."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import pytest

from autoscaler.types import MetricsSample
from controlplane.api import ControlPlaneService, Endpoint
from controlplane.engine_scraper import EngineScraper, increase, slope
from controlplane.metrics_sources import Capacity
from controlplane.store.db import Store
from controlplane.telemetry import Metrics
from tests.component.oncall_kit import add_replica
from tests.fakes.engine_server import FakeEngine, fake_engines
from tests.policy_texts import engines_policy

CHAT, CODE = ("acme", "chat"), ("acme", "code")
CAP = {CHAT: Capacity(2, 16.0), CODE: Capacity(1, 16.0)}
POOL = "acme/acme-aws/us-east-1/p5.4xlarge"


@pytest.fixture
def engine() -> Iterator[Callable[..., FakeEngine]]:
    with fake_engines() as start:
        yield start


def endpoint(e: FakeEngine, model: str, replica: str, customer: str = "acme") -> Endpoint:
    return Endpoint(
        customer=customer,
        model=model,
        replica_id=replica,
        node_id=f"{replica}-n0",
        pool_id=POOL,
        address="127.0.0.1",
        port=e.port,
        engine=e.spec.engine.value,
        metrics_path=e.spec.metrics.path,
    )


def load(e: FakeEngine, *, running: int, waiting: int, done: int, tokens: int) -> None:
    """What the engine's page says: its gauges and (as if it had served them) its counters."""
    e.in_flight, e.waiting = running, waiting
    with e.state.lock:
        e.state.completions, e.state.generation_tokens = done, tokens


def errors(m: Metrics, model: str, reason: str) -> float:
    value = m.registry.get_sample_value(
        "gpucap_engine_scrape_errors_total",
        {"customer": "acme", "model": model, "reason": reason},
    )
    return value or 0.0


def test_a_model_reads_as_the_default_promql_reads_its_engines(
    engine: Callable[..., FakeEngine],
) -> None:
    # chat on vLLM and SGLang (each with its own names), code on TensorRT-LLM (another path).
    a, b, c = engine("vllm"), engine("sglang"), engine("trtllm")
    listed = [endpoint(a, "chat", "r1"), endpoint(b, "chat", "r2"), endpoint(c, "code", "r3")]
    scraper = EngineScraper(lambda: listed, window_s=60.0)
    for e in (a, b, c):
        load(e, running=2, waiting=0, done=100, tokens=1000)
    first = scraper.collect(1000.0, CAP)
    assert first == {CHAT: None, CODE: None}  # one scrape: no rate yet (Prometheus has none)

    load(a, running=6, waiting=2, done=150, tokens=1500)  # +50 done, +6 in the system
    load(b, running=2, waiting=0, done=120, tokens=1100)  # +20 done
    load(c, running=4, waiting=1, done=110, tokens=1200)
    got = scraper.collect(1010.0, CAP)
    assert got[CHAT] == MetricsSample(
        t=1010.0,
        arrival_rate=pytest.approx(7.0 + 0.6),  # completions + deriv(running + waiting)
        in_flight=8.0,
        queue_depth=2.0,
        tokens_per_s=pytest.approx(60.0),
        completion_rate=pytest.approx(7.0),
    )
    assert got[CODE] == MetricsSample(
        t=1010.0,
        arrival_rate=pytest.approx(1.0 + 0.3),
        in_flight=4.0,
        queue_depth=1.0,
        tokens_per_s=pytest.approx(20.0),
        completion_rate=pytest.approx(1.0),
    )


def test_counts_from_real_requests_and_a_window_that_slides(
    engine: Callable[..., FakeEngine],
) -> None:
    e = engine("vllm", request_s=0.0)
    scraper = EngineScraper(lambda: [endpoint(e, "chat", "r1")], window_s=5.0)
    cap = {CHAT: Capacity(1, 16.0)}
    scraper.collect(0.0, cap)
    for _ in range(10):
        _complete(e)
    assert scraper.collect(2.0, cap)[CHAT].completion_rate == pytest.approx(5.0)  # type: ignore[union-attr]
    # Past the window the first scrape leaves it: the rate is over the last 5 s only.
    got = scraper.collect(6.0, cap)[CHAT]
    assert got is not None and got.completion_rate == pytest.approx(0.0)
    assert got.arrival_rate == 0.0  # (never below zero)


def _complete(e: FakeEngine) -> None:
    req = urllib.request.Request(
        e.url + "/v1/completions",
        data=json.dumps({"prompt": "hi", "max_tokens": 4}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200


def test_an_engine_that_does_not_answer_is_skipped_and_counted(
    engine: Callable[..., FakeEngine],
) -> None:
    up, killed, hung, alone = engine(), engine(), engine(), engine()
    listed = [
        endpoint(up, "chat", "r1"),
        endpoint(killed, "chat", "r2"),
        endpoint(hung, "chat", "r3"),
        endpoint(alone, "code", "r4"),
    ]
    telemetry = Metrics()
    scraper = EngineScraper(lambda: listed, telemetry=telemetry, timeout_s=0.5)
    for e in (up, killed, hung, alone):
        load(e, running=3, waiting=0, done=0, tokens=0)
    scraper.collect(0.0, CAP)
    killed.kill()
    hung.hang()
    alone.kill()
    load(up, running=3, waiting=0, done=10, tokens=40)
    began = time.monotonic()
    got = scraper.collect(10.0, CAP)
    assert time.monotonic() - began < 2.0  # concurrent: the hung one costs its timeout once
    chat = got[CHAT]
    assert chat is not None and (chat.in_flight, chat.completion_rate) == (3.0, 1.0)  # up's only
    assert got[CODE] is None  # its only engine is down: nothing is known, not zero load
    assert errors(telemetry, "chat", "unreachable") == 1
    assert errors(telemetry, "chat", "timeout") == 1
    assert errors(telemetry, "code", "unreachable") == 1


def test_a_page_that_is_not_the_engines_is_a_failed_scrape(
    engine: Callable[..., FakeEngine],
) -> None:
    trt = engine("trtllm")
    # TensorRT-LLM's /metrics is not its Prometheus page (the fake answers 404 there), and
    # an SGLang page read for vLLM's names has none of them.
    wrong = replace(endpoint(trt, "chat", "r1"), metrics_path="/metrics")
    vllm_names_on_sglang = replace(endpoint(engine("sglang"), "code", "r2"), engine="vllm")
    telemetry = Metrics()
    scraper = EngineScraper(lambda: [wrong, vllm_names_on_sglang], telemetry=telemetry)
    assert scraper.collect(0.0, CAP) == {CHAT: None, CODE: None}
    assert errors(telemetry, "chat", "http_error") == 1
    assert errors(telemetry, "code", "bad_response") == 1


def test_a_listing_that_fails_reads_every_model_as_nodata() -> None:
    def broken() -> Sequence[Endpoint]:
        raise RuntimeError("database is locked")

    telemetry = Metrics()
    assert EngineScraper(broken, telemetry=telemetry).collect(0.0, CAP) == {CHAT: None, CODE: None}
    labels = {"source": "engines", "reason": "listing"}
    assert telemetry.registry.get_sample_value("gpucap_metrics_source_errors_total", labels) == 1


def test_a_restarted_engine_counts_from_zero_and_a_gone_one_is_forgotten(
    engine: Callable[..., FakeEngine],
) -> None:
    assert increase([100, 120, 5, 15]) == 20 + 5 + 10  # the reset: 5 counted from zero
    assert slope([(0, 1), (1, 3), (2, 5)]) == pytest.approx(2.0)
    a, b = engine(), engine()
    listed = [endpoint(a, "chat", "r1"), endpoint(b, "chat", "r2")]
    scraper = EngineScraper(lambda: listed)
    scraper.collect(0.0, CAP)
    scraper.collect(1.0, CAP)
    listed.pop()  # r2 drained: it leaves the endpoints, and its history with it
    scraper.collect(2.0, CAP)
    assert len(scraper._history) == 1


# ---------------------------------------------------------------------- through the store
def test_reads_the_endpoints_the_api_lists(store: Store, engine: Callable[..., FakeEngine]) -> None:
    e = engine("sglang")
    svc = ControlPlaneService(store)
    svc.apply_policy(engines_policy({"chat": ("sglang", e.port)}), source="test", applied_by="t")
    add_replica(store, "chat", POOL, "ready", ["ready"], rid="r1", private_ip="127.0.0.1")
    scraper = EngineScraper(svc.list_endpoints)
    cap = {CHAT: Capacity(1, 16.0)}
    load(e, running=5, waiting=1, done=0, tokens=0)
    scraper.collect(0.0, cap)
    load(e, running=5, waiting=1, done=30, tokens=300)
    got = scraper.collect(10.0, cap)[CHAT]
    assert got is not None
    assert (got.in_flight, got.queue_depth, got.completion_rate) == (5.0, 1.0, 3.0)

"""PrometheusSource against a real Prometheus scraping vLLM-shaped replicas (tests/fakes/
prometheus_server.py): values per model, missing series, staleness, and every way the
server can fail to answer (down, wedged, erroring, not Prometheus at all)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.prometheus_source import Credentials, PrometheusSource
from controlplane.telemetry import Metrics
from runtimes import queries
from schema.daemon_config import (
    BasicAuth,
    MetricsConfig,
    MetricsQueries,
)
from tests.fakes.prometheus_server import (
    TEST_PASSWORD,
    TEST_USER,
    BearerProxy,
    PrometheusFleet,
    VllmReplica,
    running_prometheus,
)
from tests.tls_certs import ca_signed_localhost

# Shared with the component test of the control loop: one Prometheus per worker.
pytestmark = pytest.mark.xdist_group("prometheus")

# Rates over 3 s instead of the default 1 m: rate() divides by the whole range, so over a
# window older than the series it under-reads, and these series are seconds old.
SHORT = MetricsQueries(
    arrival_rate=queries.arrival_rate("3s"),
    completion_rate=queries.completion_rate("3s"),
    tokens_per_s=queries.tokens_per_s("3s"),
)


def caps(*keys: ModelKey) -> dict[ModelKey, Capacity]:
    return {k: Capacity(1, 64.0) for k in keys}


def errors(m: Metrics, reason: str) -> float:
    v = m.registry.get_sample_value(
        "gpucap_metrics_source_errors_total", {"source": "prometheus", "reason": reason}
    )
    return v or 0.0


@pytest.fixture
def fleet(prometheus: PrometheusFleet) -> Iterator[PrometheusFleet]:
    """The session's Prometheus; replicas a test adds are removed after it."""
    before = list(prometheus.replicas)
    yield prometheus
    for r in list(prometheus.replicas):
        if r not in before:
            prometheus.remove(r)


@pytest.fixture(scope="module")
def served(prometheus: PrometheusFleet) -> Iterator[list[VllmReplica]]:
    """Two customers, one model name each plus an idle model, scraped 4 times (enough for a
    3 s rate window). Tests read them and never change them."""
    fleet = prometheus
    replicas = [
        fleet.add("acme", "llama-70b", running=10, waiting=3, rps=4.0, tokens_per_s=400),
        fleet.add("acme", "llama-70b", running=12, waiting=1, rps=6.0, tokens_per_s=600),
        fleet.add("acme", "chat-8b"),  # serving, but idle: real zeros
        fleet.add("globex", "llama-70b", running=5, waiting=0, rps=2.5, tokens_per_s=250),
    ]
    for r in replicas:
        fleet.server.wait_scraped(r, samples=4)
    yield replicas
    for r in replicas:
        fleet.remove(r)


def test_samples_per_model_match_what_the_replicas_serve(fleet, served):
    telemetry = Metrics()
    source = PrometheusSource(fleet.url, SHORT, telemetry=telemetry)
    now = time.time()
    out = source.collect(
        now,
        caps(("acme", "llama-70b"), ("acme", "chat-8b"), ("globex", "llama-70b")),
    )

    acme = out[("acme", "llama-70b")]
    assert acme is not None
    assert acme.t == now
    assert acme.in_flight == 22  # summed over the model's two replicas
    assert acme.queue_depth == 4
    assert acme.arrival_rate == pytest.approx(10.0, rel=0.05)  # scrape-time jitter only
    assert acme.completion_rate == pytest.approx(10.0, rel=0.05)  # a steady state
    assert acme.tokens_per_s == pytest.approx(1000.0, rel=0.05)

    globex = out[("globex", "llama-70b")]  # same model name, other customer: kept apart
    assert globex is not None
    assert (globex.in_flight, globex.queue_depth) == (5, 0)
    assert globex.arrival_rate == pytest.approx(2.5, rel=0.05)

    idle = out[("acme", "chat-8b")]  # series present with value zero: a real zero
    assert idle is not None
    assert (idle.arrival_rate, idle.in_flight, idle.queue_depth, idle.tokens_per_s) == (
        0,
        0,
        0,
        0,
    )
    assert errors(telemetry, "unreachable") == 0


def test_default_vllm_queries_read_the_gauges_and_rates(fleet, served):
    out = PrometheusSource(fleet.url).collect(time.time(), caps(("acme", "llama-70b")))
    sample = out[("acme", "llama-70b")]
    assert sample is not None
    assert (sample.in_flight, sample.queue_depth) == (22, 4)
    # rate(...[1m]) over a series seconds old under-reads (PromQL divides by the range)
    # but never over-reads.
    assert 0 < sample.arrival_rate <= 10.0 * 1.05
    assert sample.tokens_per_s is not None and 0 < sample.tokens_per_s <= 1000.0 * 1.05


def test_arrivals_are_completions_plus_the_growth_of_the_queue(fleet):
    # A burst: the slots are full, 8 requests/s complete and the queue grows by 5/s, so
    # 13/s arrive. Read from the completion counter alone (vLLM counts no arrivals) the
    # burst would look like the capacity serving it.
    burst = fleet.add("acme", "burst-8b", running=64, waiting=10, waiting_growth=5.0, rps=8.0)
    fleet.server.wait_scraped(burst, samples=5)
    sample = PrometheusSource(fleet.url, SHORT).collect(time.time(), caps(("acme", "burst-8b")))[
        ("acme", "burst-8b")
    ]
    assert sample is not None
    assert sample.completion_rate == pytest.approx(8.0, rel=0.05)
    assert sample.arrival_rate == pytest.approx(13.0, rel=0.05)
    assert sample.queue_depth > 10


def test_model_without_series_is_none_not_zero(fleet, served):
    gone = fleet.add("acme", "gone-7b", running=3, rps=1.0)
    fleet.server.wait_scraped(gone, samples=2)
    source = PrometheusSource(fleet.url, SHORT)
    keys = caps(("acme", "llama-70b"), ("acme", "gone-7b"), ("acme", "never-served"))
    assert source.collect(time.time(), keys)[("acme", "gone-7b")] is not None

    fleet.remove(gone)  # the replica leaves discovery: Prometheus marks its series stale
    fleet.server.wait_until(
        'vllm:num_requests_running{model="gone-7b"}', lambda r: not r, timeout_s=10
    )
    out = source.collect(time.time(), keys)
    assert out[("acme", "gone-7b")] is None
    assert out[("acme", "never-served")] is None
    assert out[("acme", "llama-70b")] is not None


GATEWAY = "sum by (customer, model) (rate(gateway_requests_total[3s]))"


def test_a_model_at_zero_replicas_reads_its_gateway_arrivals(fleet, served):
    # No vLLM server runs chat-32b: the gateway's counter is its only series.
    fleet.exporter.set_gateway("acme", "chat-32b", rps=2.0)
    key = ("acme", "chat-32b")
    fleet.server.wait_until(  # four scrapes: a 3 s rate over a newer series under-reads
        'count_over_time(gateway_requests_total{model="chat-32b"}[1m]) >= 4', bool
    )
    via_gateway = PrometheusSource(fleet.url, SHORT.model_copy(update={"arrival_rate": GATEWAY}))
    sample = via_gateway.collect(time.time(), {key: Capacity(0, 64.0)})[key]
    assert sample is not None
    assert sample.arrival_rate == pytest.approx(2.0, rel=0.05)
    assert (sample.in_flight, sample.queue_depth) == (0, 0)  # no server to run or queue
    # With a replica ready, the missing vLLM gauges are missing data, not zeros ...
    assert via_gateway.collect(time.time(), {key: Capacity(1, 64.0)}) == {key: None}
    # ... and vLLM's own queries have no arrivals for a model no server runs: it holds.
    vllm_only = PrometheusSource(fleet.url, SHORT)
    assert vllm_only.collect(time.time(), {key: Capacity(0, 64.0)}) == {key: None}


def test_a_model_missing_one_required_metric_is_none(fleet, served):
    # A queue query that matches nothing for chat-8b (only llama-70b has waiting requests).
    queries = SHORT.model_copy(
        update={"queue_depth": "sum by (customer, model) (vllm:num_requests_waiting > 0)"}
    )
    out = PrometheusSource(fleet.url, queries).collect(
        time.time(), caps(("acme", "llama-70b"), ("acme", "chat-8b"))
    )
    assert out[("acme", "llama-70b")] is not None
    assert out[("acme", "chat-8b")] is None


def test_samples_older_than_max_age_are_none(fleet, served):
    # Asked 90 s ahead, Prometheus still answers the gauges from its 5-minute lookback, as
    # one that stopped ingesting would; the freshness query shows the newest sample's age.
    long_rates = MetricsQueries(
        arrival_rate="sum by (customer, model) (rate(vllm:request_success_total[5m]))",
        tokens_per_s=None,
    )
    later = time.time() + 90
    key = ("acme", "llama-70b")
    assert PrometheusSource(fleet.url, long_rates, max_age_s=60).collect(later, caps(key)) == {
        key: None
    }
    fresh_enough = PrometheusSource(fleet.url, long_rates, max_age_s=120).collect(later, caps(key))[
        key
    ]
    assert fresh_enough is not None and fresh_enough.in_flight == 22


def test_prometheus_down_gives_none_for_every_model_and_counts_it():
    with running_prometheus(wait_scrape=False) as own:
        url = own.url
    # Stopped: nothing listens on its port any more.
    telemetry = Metrics()
    keys = caps(("acme", "llama-70b"), ("globex", "coder-32b"))
    with structlog.testing.capture_logs() as logs:
        out = PrometheusSource(url, telemetry=telemetry).collect(time.time(), keys)
    assert out == {k: None for k in keys}
    assert errors(telemetry, "unreachable") == 1
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["reason"] == "unreachable"


def test_wedged_prometheus_is_bounded_by_the_timeout(fleet, served):
    telemetry = Metrics()
    source = PrometheusSource(fleet.url, SHORT, timeout_s=0.5, telemetry=telemetry)
    key = ("acme", "llama-70b")
    with fleet.server.paused():
        t0 = time.monotonic()
        out = source.collect(time.time(), caps(key))
        took = time.monotonic() - t0
    assert out == {key: None}
    assert took < 1.5  # one bound for the whole collection, not 0.5 s per query
    assert errors(telemetry, "timeout") == 1
    # Once it answers again, so does the source.
    assert source.collect(time.time(), caps(key))[key] is not None


def test_query_error_http_error_and_non_prometheus_answers(fleet, served):
    key = ("acme", "llama-70b")
    telemetry = Metrics()

    bad_promql = SHORT.model_copy(update={"in_flight": "sum by (customer, model) ("})
    source = PrometheusSource(fleet.url, bad_promql, telemetry=telemetry)
    assert source.collect(time.time(), caps(key)) == {key: None}
    assert errors(telemetry, "query_error") == 1

    wrong_path = PrometheusSource(f"{fleet.url}/no-such-prefix", telemetry=telemetry)
    assert wrong_path.collect(time.time(), caps(key)) == {key: None}
    assert errors(telemetry, "http_error") == 1

    # A model server's own /metrics endpoint answers every path with text, not JSON.
    not_prometheus = PrometheusSource(f"http://{fleet.exporter.addr}", telemetry=telemetry)
    assert not_prometheus.collect(time.time(), caps(key)) == {key: None}
    assert errors(telemetry, "bad_response") == 1

    # A range selector answers with a matrix, not one value per model.
    matrix = SHORT.model_copy(update={"in_flight": "vllm:num_requests_running[1m]"})
    source = PrometheusSource(fleet.url, matrix, telemetry=telemetry)
    assert source.collect(time.time(), caps(key)) == {key: None}
    assert errors(telemetry, "bad_response") == 2


def test_no_models_asks_nothing():
    # No capacity -> no query at all (an unroutable URL would otherwise fail).
    telemetry = Metrics()
    source = PrometheusSource("http://127.0.0.1:1", telemetry=telemetry)
    assert source.collect(time.time(), {}) == {}
    assert errors(telemetry, "unreachable") == 0


# --- reaching a Prometheus off loopback: TLS, mTLS, basic auth, bearer tokens -----------


@pytest.fixture(scope="module")
def secured() -> Iterator[PrometheusFleet]:
    """A second Prometheus behind https (a test CA), client certificates and basic auth."""
    with running_prometheus(secured=True) as fleet:
        replica = fleet.add("acme", "llama-70b", running=7, waiting=2, rps=3.0)
        fleet.server.wait_scraped(replica, samples=4)
        yield fleet


def secured_config(fleet: PrometheusFleet, password_file: Path, **changes: Any) -> MetricsConfig:
    sec = fleet.server.security
    assert sec is not None
    fields: dict[str, Any] = {
        "source": "prometheus",
        "url": fleet.url,
        "queries": SHORT,
        "tls_ca": str(sec.pki.ca),
        "tls_cert": str(sec.pki.client.cert),
        "tls_key": str(sec.pki.client.key),
        "basic_auth": BasicAuth(username=TEST_USER, password_file=str(password_file)),
    }
    return MetricsConfig(**{**fields, **changes})


def test_https_with_a_client_certificate_and_basic_auth_reads_the_samples(secured, tmp_path):
    password = tmp_path / "prom-password"
    password.write_text(TEST_PASSWORD + "\n")  # (a trailing newline, as editors leave it)
    source = PrometheusSource.from_config(secured_config(secured, password), Metrics())
    sample = source.collect(time.time(), caps(("acme", "llama-70b")))[("acme", "llama-70b")]
    assert sample is not None
    assert (sample.in_flight, sample.queue_depth) == (7, 2)
    assert sample.arrival_rate == pytest.approx(3.0, rel=0.05)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("wrong password", "unauthorized"),
        ("no password file", "credentials"),
        ("system CAs only", "tls"),
        ("no client certificate", "tls"),
    ],
)
def test_refused_tls_or_credentials_read_as_no_data_with_their_reason(
    secured, tmp_path, change: str, reason: str
):
    password = tmp_path / "prom-password"
    password.write_text("wrong" if change == "wrong password" else TEST_PASSWORD)
    by_change: dict[str, dict[str, Any]] = {
        "no password file": {
            "basic_auth": BasicAuth(username=TEST_USER, password_file=str(tmp_path / "gone"))
        },
        "system CAs only": {"tls_ca": None},
        "no client certificate": {"tls_cert": None, "tls_key": None},
    }
    changes = by_change.get(change, {})
    telemetry = Metrics()
    source = PrometheusSource.from_config(secured_config(secured, password, **changes), telemetry)
    key = ("acme", "llama-70b")
    with structlog.testing.capture_logs() as logs:
        assert source.collect(time.time(), caps(key)) == {key: None}
    assert errors(telemetry, reason) == 1
    (warning,) = [e for e in logs if e["log_level"] == "warning"]
    assert warning["reason"] == reason
    assert TEST_PASSWORD not in repr(logs)


def test_a_bearer_token_is_read_from_its_file_at_every_collection(fleet, served, tmp_path):
    proxy = BearerProxy(fleet.server, "token-1")
    try:
        token = tmp_path / "token"
        token.write_text("token-1\n")
        telemetry = Metrics()
        source = PrometheusSource(
            proxy.url, SHORT, telemetry=telemetry, credentials=Credentials(token_file=str(token))
        )
        key = ("acme", "llama-70b")
        first = source.collect(time.time(), caps(key))[key]
        assert first is not None and first.in_flight == 22
        proxy.token = "token-2"  # rotated at the server: refused until the file follows
        assert source.collect(time.time(), caps(key)) == {key: None}
        assert errors(telemetry, "unauthorized") == 1
        token.write_text("token-2")  # picked up without a restart
        assert source.collect(time.time(), caps(key))[key] is not None
    finally:
        proxy.stop()


def test_a_client_certificate_rotated_in_place_is_used_without_a_restart(secured, tmp_path):
    password = tmp_path / "prom-password"
    password.write_text(TEST_PASSWORD)
    sec = secured.server.security
    assert sec is not None
    # Start with a client certificate from another CA: refused.
    (tmp_path / "other").mkdir()
    other = ca_signed_localhost(tmp_path / "other").client
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    shutil.copy(other.cert, cert)
    shutil.copy(other.key, key)
    telemetry = Metrics()
    source = PrometheusSource.from_config(
        secured_config(secured, password, tls_cert=str(cert), tls_key=str(key)), telemetry
    )
    k = ("acme", "llama-70b")
    assert source.collect(time.time(), caps(k)) == {k: None}
    assert errors(telemetry, "tls") == 1
    # The renewed certificate lands in the same files: the next collection uses it.
    shutil.copy(sec.pki.client.cert, cert)
    shutil.copy(sec.pki.client.key, key)
    sample = source.collect(time.time(), caps(k))[k]
    assert sample is not None and sample.in_flight == 7
    # A half-written rotation (a key that is not PEM) fails the collection, not the daemon.
    key.write_text("not a key\n")
    assert source.collect(time.time(), caps(k)) == {k: None}
    assert errors(telemetry, "tls") == 2

"""A real Prometheus (Debian's ``/usr/bin/prometheus``) scraping a stand-in for vLLM servers.

:class:`VllmExporter` serves vLLM's metric names (``vllm:num_requests_running`` and friends,
labelled ``model_name`` as vLLM labels them) for replicas the test adds, each also labelled
``customer``/``model`` (in production the scrape config copies those from the node's
gpucap-customer/gpucap-model tags; see the README). The test sets each replica's load; the
counters grow linearly at the set rates, computed at scrape time, so a rate over any window
is known exactly. One exporter is one static target: Prometheus' service discovery batches
target changes for up to 5 s, series changes show at the next scrape. The scrape config
carries the README's relabel rule that restores vLLM's colon names.

Prometheus listens on 127.0.0.1 on a free port with a temporary data directory and scrapes
every second; the session fixture stops it. It skips when the binary is missing, and fails
under ``CI=true`` (like the PostgreSQL fixture).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tests.tls_certs import LocalPki, ca_signed_localhost

PROMETHEUS_BIN = os.environ.get("GPUCAP_TEST_PROMETHEUS", "/usr/bin/prometheus")
SCRAPE_INTERVAL_S = 1.0
VLLM_NAMES_RELABEL = {
    "source_labels": ["__name__"],
    "regex": "vllm_(.+)",
    "target_label": "__name__",
    "replacement": "vllm:$1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Counter:
    """A counter growing at ``rate``/s since ``since`` from ``base``."""

    rate: float = 0.0
    base: float = 0.0
    since: float = field(default_factory=time.time)

    def value(self, now: float) -> float:
        return self.base + self.rate * max(0.0, now - self.since)

    def set_rate(self, rate: float, now: float) -> None:
        self.base, self.since, self.rate = self.value(now), now, rate


class VllmReplica:
    """One vLLM server's load, driven by the test; served by a :class:`VllmExporter`."""

    def __init__(
        self,
        customer: str,
        model: str,
        replica_id: str,
        *,
        running: float = 0.0,
        waiting: float = 0.0,
        rps: float = 0.0,
        tokens_per_s: float = 0.0,
        waiting_growth: float = 0.0,
    ) -> None:
        self.customer, self.model, self.id = customer, model, replica_id
        self.running = running
        # A gauge that moves linearly, like the counters (a queue growing under a burst).
        self.waiting = _Counter(waiting_growth, waiting)
        self.requests = _Counter(rps)
        self.tokens = _Counter(tokens_per_s)

    def set_load(
        self,
        *,
        running: float | None = None,
        waiting: float | None = None,
        rps: float | None = None,
        tokens_per_s: float | None = None,
    ) -> None:
        now = time.time()
        if running is not None:
            self.running = running
        if waiting is not None:
            self.waiting = _Counter(0.0, waiting)
        if rps is not None:
            self.requests.set_rate(rps, now)
        if tokens_per_s is not None:
            self.tokens.set_rate(tokens_per_s, now)


class VllmExporter:
    """vLLM's metric names for any number of replicas, on one loopback port with a
    CollectorRegistry of its own. A replica removed here vanishes from the next scrape, and
    Prometheus marks its series stale."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replicas: dict[str, VllmReplica] = {}
        self._gateway: dict[tuple[str, str], _Counter] = {}
        self._next = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server, _ = start_http_server(0, "127.0.0.1", registry=self.registry)
        self.addr = f"127.0.0.1:{self._server.server_address[1]}"

    def add(self, customer: str, model: str, **load: float) -> VllmReplica:
        with self._lock:
            self._next += 1
            replica = VllmReplica(customer, model, f"r{self._next}", **load)
            self._replicas[replica.id] = replica
        return replica

    def remove(self, replica: VllmReplica) -> None:
        with self._lock:
            self._replicas.pop(replica.id, None)

    def set_load(self, replica: VllmReplica, **load: float) -> None:
        with self._lock:  # never half an update in one scrape
            replica.set_load(**load)

    def set_gateway(self, customer: str, model: str, rps: float) -> None:
        """A gateway's request counter for a model (``gateway_requests_total``), which
        counts arrivals whether or not any replica serves the model."""
        with self._lock:
            counter = self._gateway.setdefault((customer, model), _Counter())
            counter.set_rate(rps, time.time())

    @property
    def replicas(self) -> list[VllmReplica]:
        with self._lock:
            return list(self._replicas.values())

    def collect(self) -> Iterator[Metric]:
        now = time.time()
        # vLLM labels its own model name (often the HF id); gpucap keys on customer/model,
        # which production scrape configs copy from the node's gpucap-* tags.
        names = ["customer", "model", "replica", "model_name"]
        running = GaugeMetricFamily("vllm:num_requests_running", "Running.", labels=names)
        waiting = GaugeMetricFamily("vllm:num_requests_waiting", "Waiting.", labels=names)
        success = CounterMetricFamily(
            "vllm:request_success", "Finished requests.", labels=[*names, "finished_reason"]
        )
        tokens = CounterMetricFamily("vllm:generation_tokens", "Generated.", labels=names)
        with self._lock:
            for r in self._replicas.values():
                labels = [r.customer, r.model, r.id, f"served/{r.model}"]
                running.add_metric(labels, r.running)
                waiting.add_metric(labels, r.waiting.value(now))
                success.add_metric([*labels, "stop"], r.requests.value(now))
                tokens.add_metric(labels, r.tokens.value(now))
            gateway = CounterMetricFamily(
                "gateway_requests", "Requests the gateway received.", labels=["customer", "model"]
            )
            for (customer, model), counter in self._gateway.items():
                gateway.add_metric([customer, model], counter.value(now))
        yield from (running, waiting, success, tokens, gateway)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class PrometheusError(RuntimeError):
    pass


# The basic-auth user the secured Prometheus accepts. Prometheus' web config wants a bcrypt
# hash; this one is of TEST_PASSWORD (cost 4, hashed once: a test value, not a secret).
TEST_USER = "gpucap"
TEST_PASSWORD = "not-a-secret-test-password"
TEST_PASSWORD_BCRYPT = "$2b$04$Q.TVfS0hGKvS.YV6nzLChedtVD/icXLuY2yl8laZ3QX.m5rHrajXG"


@dataclass(frozen=True)
class WebSecurity:
    """Prometheus' --web.config.file: https with a certificate from a test CA, client
    certificates required (mTLS) and basic auth; plus the client side that passes."""

    pki: LocalPki  # the test CA and the server and client certificates it signs

    def web_config(self) -> dict[str, Any]:
        return {
            "tls_server_config": {
                "cert_file": str(self.pki.server.cert),
                "key_file": str(self.pki.server.key),
                "client_auth_type": "RequireAndVerifyClientCert",
                "client_ca_file": str(self.pki.ca),
            },
            "basic_auth_users": {TEST_USER: TEST_PASSWORD_BCRYPT},
        }

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(str(self.pki.client.cert), str(self.pki.client.key))
        return context

    def client_headers(self) -> dict[str, str]:
        pair = base64.b64encode(f"{TEST_USER}:{TEST_PASSWORD}".encode()).decode()
        return {"Authorization": f"Basic {pair}"}


class BearerProxy:
    """An authenticating proxy in front of a Prometheus (as managed Prometheus services and
    auth gateways are): a request without ``Authorization: Bearer <token>`` gets 401,
    others are forwarded (GET only) and answered with Prometheus' own status and body."""

    def __init__(self, upstream: PrometheusServer, token: str) -> None:
        self.token = token
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.headers.get("Authorization") != f"Bearer {proxy.token}":
                    self._answer(401, b'{"status":"error","error":"unauthorized"}')
                    return
                try:
                    status, body = 200, upstream.get(self.path)
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                self._answer(status, body)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class PrometheusServer:
    """One Prometheus process scraping ``targets`` every second."""

    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        binary: str = PROMETHEUS_BIN,
        security: WebSecurity | None = None,
    ) -> None:
        self.workdir = workdir
        self.targets = targets
        self.binary = binary
        self.security = security
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        scheme = "https" if self.security else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def get(self, path: str, timeout_s: float = 5.0) -> bytes:
        """GET ``path`` as a client that passes this server's security."""
        sec = self.security
        request = urllib.request.Request(
            f"{self.url}{path}", headers=sec.client_headers() if sec else {}
        )
        context = sec.client_context() if sec else None
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as r:
            body: bytes = r.read()
            return body

    # ------------------------------------------------------------------ process
    def start(self, ready_timeout_s: float = 20.0) -> None:
        config = self.workdir / "prometheus.yml"
        config.write_text(
            json.dumps(  # JSON is YAML
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "scrape_configs": [
                        {
                            "job_name": "vllm",
                            "scrape_interval": f"{SCRAPE_INTERVAL_S:g}s",
                            "scrape_timeout": "1s",
                            "static_configs": [{"targets": self.targets}],
                            # The README's rule: prometheus_client serves colon names as
                            # vllm_* over OpenMetrics (prometheus/client_python#1177), which
                            # Prometheus asks for first; restore vLLM's names.
                            "metric_relabel_configs": [VLLM_NAMES_RELABEL],
                        }
                    ],
                }
            )
        )
        web = []
        if self.security is not None:
            web_config = self.workdir / "web.yml"
            web_config.write_text(json.dumps(self.security.web_config()))
            web = [f"--web.config.file={web_config}"]
        # The port is chosen free, then handed over: a rare race with another process is
        # retried with a fresh port.
        for _attempt in range(3):
            self.port = _free_port()
            log = open(self.workdir / "prometheus.log", "wb")  # noqa: SIM115 (child owns it)
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn",
                    *web,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            if self._wait_ready(ready_timeout_s):
                return
            self.stop()
        raise PrometheusError(f"prometheus did not become ready: {self.log_tail()}")

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                self.get("/-/ready", timeout_s=1)
                return True
            time.sleep(0.1)
        return False

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.workdir / "prometheus.log").read_text()[-2000:]
        return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)  # in case a test left it paused
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Freeze the process (SIGSTOP): connections are accepted by the kernel but never
        answered, the way a wedged server behaves."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)

    # ------------------------------------------------------------------ queries
    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        doc = json.loads(self.get(f"/api/v1/query?{urllib.parse.urlencode(params)}"))
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def wait_until(
        self, promql: str, ok: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 15.0
    ) -> list[dict[str, Any]]:
        """Poll ``promql`` until ``ok(result)``; bounded."""
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if ok(result):
                return result
            time.sleep(0.2)
        raise PrometheusError(f"timed out waiting for {promql!r}; last result {result}")

    def wait_scraped(self, replica: VllmReplica, samples: int = 2, timeout_s: float = 15.0) -> None:
        """Until Prometheus holds ``samples`` scrapes of the replica (a rate needs two)."""
        sel = f'vllm:num_requests_running{{replica="{replica.id}"}}'
        self.wait_until(
            f"count_over_time({sel}[1m])",
            lambda r: bool(r) and float(r[0]["value"][1]) >= samples,
            timeout_s,
        )


@dataclass
class PrometheusFleet:
    """A running Prometheus and the exporter it scrapes."""

    server: PrometheusServer
    exporter: VllmExporter

    @property
    def url(self) -> str:
        return self.server.url

    def add(self, customer: str, model: str, **load: float) -> VllmReplica:
        return self.exporter.add(customer, model, **load)

    def remove(self, replica: VllmReplica) -> None:
        self.exporter.remove(replica)

    def set_load(self, replica: VllmReplica, **load: float) -> None:
        self.exporter.set_load(replica, **load)

    @property
    def replicas(self) -> list[VllmReplica]:
        return self.exporter.replicas


def prometheus_binary() -> str:
    """The binary (``$GPUCAP_TEST_PROMETHEUS``, Debian's path, else on PATH), or skip with
    the reason (fail under CI=true)."""
    for candidate in (PROMETHEUS_BIN, "prometheus"):
        found = shutil.which(candidate)
        if found is not None:
            return found
    why = f"{PROMETHEUS_BIN} not found (apt-get install -y prometheus)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"Prometheus is required under CI=true: {why}")
    pytest.skip(why)


@contextlib.contextmanager
def running_prometheus(
    ready_timeout_s: float = 20.0, *, wait_scrape: bool = True, secured: bool = False
) -> Iterator[PrometheusFleet]:
    """Prometheus and its exporter, ready (and with the target scraped once, unless
    ``wait_scrape`` is false); ``secured``: behind https, mTLS and basic auth."""
    binary = prometheus_binary()
    exporter = VllmExporter()
    try:
        with tempfile.TemporaryDirectory(prefix="gpucap-prom-") as tmp:
            security = WebSecurity(ca_signed_localhost(Path(tmp))) if secured else None
            server = PrometheusServer(Path(tmp), [exporter.addr], binary, security)
            try:
                server.start(ready_timeout_s)
                if wait_scrape:
                    server.wait_until(
                        f'up{{instance="{exporter.addr}"}} == 1', bool, timeout_s=ready_timeout_s
                    )
                yield PrometheusFleet(server, exporter)
            finally:
                server.stop()
    finally:
        exporter.stop()


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusFleet]:
    """One Prometheus per test session (per xdist worker: mark users with
    ``xdist_group("prometheus")`` so they share it)."""
    with running_prometheus() as fleet:
        yield fleet

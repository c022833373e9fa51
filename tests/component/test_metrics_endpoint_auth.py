"""The daemon's HTTP port (/metrics, /sd/prometheus, the probes, node reports) follows the gRPC
API's rule: on loopback as it is; on any other address only over TLS with a bearer token,
which every path but /healthz and /readyz (and the node reports, with their own boot token)
then needs. Real HTTP over a real socket, bound to 0.0.0.0 and reached through 127.0.0.1."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from controlplane import http_endpoint
from controlplane.api import ControlPlaneService
from controlplane.daemon import Daemon, Wiring
from controlplane.grpc.server import InsecureBindError
from controlplane.health import Readiness
from controlplane.loop import Tuning
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from providers.sim import SimCloud
from schema.daemon_config import DaemonConfig, GrpcConfig
from tests.component.test_control_loop import POLICY
from tests.tls_certs import CertFiles, self_signed_localhost

TOKEN = "s3cret-token"


@pytest.fixture
def certs(tmp_path: Path) -> CertFiles:
    return self_signed_localhost(tmp_path)


@pytest.fixture
def served(sqlite_store: Store, certs: CertFiles) -> Iterator[str]:
    """The port on 0.0.0.0 with TLS and the token; its https URL through 127.0.0.1."""
    registry = CollectorRegistry()
    Counter("gpucap_test_things", "a metric the scrape must show", registry=registry).inc()
    svc = ControlPlaneService(sqlite_store)
    wsgi = http_endpoint.app(
        registry,
        svc.report_node_phase,
        svc.prometheus_sd,
        ready=lambda: Readiness(False, "standby", {"store": {"ok": False, "detail": "test"}}),
        authorize=http_endpoint.bearer_token(TOKEN),
    )
    server, _ = http_endpoint.serve(
        "0.0.0.0", 0, wsgi, tls_cert=certs.cert, tls_key=certs.key, authenticated=True
    )
    try:
        yield f"https://localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(
    url: str, certs: CertFiles, token: str | None = None, method: str = "GET"
) -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=str(certs.cert))
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    data = b"{}" if method == "POST" else None
    req = urllib.request.Request(url, headers=headers, method=method, data=data)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_metrics_and_sd_need_the_token(served: str, certs: CertFiles) -> None:
    for path in (http_endpoint.SD_PATH, "/metrics"):
        assert _get(served + path, certs)[0] == 401
        assert _get(served + path, certs, token="wrong")[0] == 401
    status, body = _get(served + "/metrics", certs, token=TOKEN)
    assert status == 200 and b"gpucap_test_things_total 1.0" in body
    status, body = _get(served + http_endpoint.SD_PATH, certs, token=TOKEN)
    assert status == 200 and json.loads(body) == []


def test_the_probes_need_no_token(served: str, certs: CertFiles) -> None:
    status, body = _get(served + http_endpoint.HEALTHZ_PATH, certs)
    assert status == 200 and json.loads(body) == {"alive": True}
    status, body = _get(served + http_endpoint.READYZ_PATH, certs)
    assert status == 503 and json.loads(body)["ready"] is False


def test_node_reports_are_judged_by_their_own_boot_token(served: str, certs: CertFiles) -> None:
    # Not the API token's 401: the report itself answers (an empty report is a bad one).
    status, body = _get(served + http_endpoint.PHASES_PATH, certs, method="POST")
    assert status == 400 and b"missing or invalid bearer token" not in body


def test_a_client_that_never_speaks_does_not_hold_up_the_probes(
    served: str, certs: CertFiles
) -> None:
    port = int(served.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)):  # no TLS handshake, ever
        assert _get(served + http_endpoint.HEALTHZ_PATH, certs)[0] == 200


def test_plain_http_gets_no_answer_over_tls(served: str) -> None:
    port = int(served.rsplit(":", 1)[1])
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10).read()


@pytest.mark.parametrize(
    ("tls", "authenticated", "missing"),
    [
        (False, False, "TLS (certificate + key) and an API token"),
        (True, False, "an API token"),
        (False, True, "TLS (certificate + key)"),
    ],
)
def test_off_loopback_needs_tls_and_a_token(
    certs: CertFiles, tls: bool, authenticated: bool, missing: str
) -> None:
    wsgi = http_endpoint.app(CollectorRegistry(), lambda _r: False)
    with pytest.raises(InsecureBindError) as err:
        http_endpoint.serve(
            "0.0.0.0",
            0,
            wsgi,
            tls_cert=certs.cert if tls else None,
            tls_key=certs.key if tls else None,
            authenticated=authenticated,
        )
    assert f"'0.0.0.0:0' without {missing}" in str(err.value)


def test_loopback_stays_open_and_plain() -> None:
    registry = CollectorRegistry()
    Counter("gpucap_test_open", "x", registry=registry).inc()
    server, _ = http_endpoint.serve("127.0.0.1", 0, http_endpoint.app(registry, lambda _r: False))
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert b"gpucap_test_open_total 1.0" in resp.read()
    finally:
        server.shutdown()
        server.server_close()


def test_a_daemon_serves_its_port_off_loopback_with_the_grpc_tls_and_token(
    tmp_path: Path, certs: CertFiles
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    sim = SimCloud()
    wiring = Wiring(
        database_url=f"sqlite:///{tmp_path / 'gpucap.db'}",
        providers=SimResolver(sim),
        health=SimHealth(sim),
        metrics_source=SyntheticTraffic({}),
        tuning=Tuning(),
        policy_texts=[("demo", POLICY)],
    )
    grpc = GrpcConfig(
        addr="127.0.0.1:0",
        tls_cert=str(certs.cert),
        tls_key=str(certs.key),
        token_file=str(token_file),
    )
    daemon = Daemon(DaemonConfig(grpc=grpc, metrics_addr="0.0.0.0:0"), wiring)
    daemon.start()
    try:
        url = f"https://localhost:{daemon.metrics_port}"
        assert _get(url + "/metrics", certs)[0] == 401
        status, body = _get(url + "/metrics", certs, token=TOKEN)
        assert status == 200 and b"gpucap_build_info" in body
        assert _get(url + http_endpoint.HEALTHZ_PATH, certs)[0] == 200
    finally:
        daemon.stop()

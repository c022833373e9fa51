"""The image's HEALTHCHECK (``python -m controlplane.healthcheck --config FILE``) asks
``/healthz`` the way the daemon of that config serves it: plain HTTP, or TLS when the config
gives the API a certificate (the metrics port shares it), on 127.0.0.1 when the daemon
listens on every address."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane import http_endpoint
from controlplane.healthcheck import healthz_url
from schema.daemon_config import DaemonConfig
from tests.tls_certs import self_signed_localhost


def _healthz_only(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    ok = environ["PATH_INFO"] == http_endpoint.HEALTHZ_PATH
    start_response("200 OK" if ok else "404 Not Found", [("Content-Type", "text/plain")])
    return [b"ok" if ok else b"no"]


@pytest.fixture
def serving(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Path, bool]]:
    """A config file and a server on 127.0.0.1 as that config's daemon would serve."""
    tls = request.param
    certs = self_signed_localhost(tmp_path) if tls else None
    server, _ = http_endpoint.serve(
        "127.0.0.1",
        0,
        _healthz_only,
        tls_cert=certs.cert if certs else None,
        tls_key=certs.key if certs else None,
    )
    port = server.server_address[1]
    grpc = f"grpc: {{tls_cert: {certs.cert}, tls_key: {certs.key}}}\n" if certs else ""
    config = tmp_path / "daemon.yaml"
    config.write_text(f"metrics_addr: 0.0.0.0:{port}\n{grpc}")
    try:
        yield config, tls
    finally:
        server.shutdown()
        server.server_close()


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controlplane.healthcheck", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("serving", [False, True], indirect=True, ids=["http", "tls"])
def test_a_live_daemon_is_healthy_over_plain_http_and_over_tls(
    serving: tuple[Path, bool],
) -> None:
    config, _ = serving
    done = _check(config)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("serving", [False, True], indirect=True, ids=["http", "tls"])
def test_the_wrong_scheme_is_unhealthy(serving: tuple[Path, bool], tmp_path: Path) -> None:
    """The check follows the config: a config that disagrees with the server fails."""
    config, tls = serving
    lines = config.read_text().splitlines()
    port = lines[0].rsplit(":", 1)[1]
    other = tmp_path / "other.yaml"
    if tls:  # ask plain HTTP of a TLS server
        other.write_text(f"metrics_addr: 0.0.0.0:{port}\n")
    else:  # ask TLS of a plain server
        (tmp_path / "c").mkdir()
        certs = self_signed_localhost(tmp_path / "c")
        grpc = f"grpc: {{tls_cert: {certs.cert}, tls_key: {certs.key}}}"
        other.write_text(f"metrics_addr: 0.0.0.0:{port}\n{grpc}\n")
    assert _check(other).returncode == 1


def test_a_closed_port_or_an_unreadable_config_is_unhealthy(tmp_path: Path) -> None:
    closed = tmp_path / "closed.yaml"
    closed.write_text("metrics_addr: 127.0.0.1:9\n")
    assert _check(closed).returncode == 1
    broken = tmp_path / "broken.yaml"
    broken.write_text("metrics_addr: [not, an, address\n")
    done = _check(broken)
    assert done.returncode == 1 and "broken.yaml" in done.stderr
    assert _check(tmp_path / "missing.yaml").returncode == 1


@pytest.mark.parametrize(
    ("addr", "tls", "url"),
    [
        ("0.0.0.0:9464", False, "http://127.0.0.1:9464/healthz"),
        ("[::]:9464", True, "https://127.0.0.1:9464/healthz"),
        ("10.1.2.3:9000", True, "https://10.1.2.3:9000/healthz"),
        ("[::1]:9464", False, "http://[::1]:9464/healthz"),
        ("", False, None),
    ],
)
def test_the_url_follows_the_config(addr: str, tls: bool, url: str | None) -> None:
    grpc = {"tls_cert": "c.pem", "tls_key": "k.pem"} if tls else {}
    config = DaemonConfig.model_validate({"metrics_addr": addr, "grpc": grpc})
    assert healthz_url(config) == url

"""The daemon's HTTP port: Prometheus ``/metrics``, ``/sd/prometheus`` (HTTP service discovery
of every ready engine, ``controlplane.api.endpoints``), the unauthenticated probes
``/healthz`` (200 while the process serves HTTP) and ``/readyz`` (200 when ready, else 503;
both bodies JSON naming each check, ``controlplane.health``), and ``POST /v1/node-phases`` where a
booting node reports its phases with curl (``bootstrap/node.sh``: a JSON body ``{node_id,
phase, at, detail}``, its boot token as ``Authorization: Bearer``). The same API call as gRPC
``ReportNodePhase``; answers 200 ``{"recorded": bool}``, or 400/401/403 ``{"error": ...}``.

The same rule as the gRPC API: on loopback as it is; on any other address only over TLS and
with a bearer token, which every path but the probes (and the node reports, which carry
their own boot token) must then carry (401 otherwise)."""

from __future__ import annotations

import hmac
import json
import ssl
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from controlplane.api import (
    InvalidArgumentError,
    PermissionDeniedError,
    PhaseReport,
    UnauthenticatedError,
)
from controlplane.grpc.server import check_bind_allowed
from controlplane.health import Readiness

MAX_BODY = 4096
PHASES_PATH = "/v1/node-phases"
SD_PATH = "/sd/prometheus"
HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"
# Served to anyone, also when callers must authenticate: Kubernetes probes carry no token.
PROBE_PATHS = frozenset({HEALTHZ_PATH, READYZ_PATH})
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
# Whether an ``Authorization`` header's value lets the caller read /metrics and /sd.
Authorize = Callable[[str], bool]


def bearer_token(token: str) -> Authorize:
    """The daemon's API token as ``Authorization: Bearer <token>``, compared in constant
    time (the gRPC API's shared token)."""
    expected = f"Bearer {token}".encode()

    def authorize(header: str) -> bool:
        return hmac.compare_digest(header.encode(), expected)

    return authorize


def app(
    registry: CollectorRegistry,
    report: Callable[[PhaseReport], bool],
    sd: Callable[[], list[dict[str, Any]]] | None = None,
    *,
    ready: Callable[[], Readiness] | None = None,
    authorize: Authorize | None = None,
) -> WsgiApp:
    """``sd``: the Prometheus HTTP SD target groups (``/sd/prometheus``; None: not served);
    ``ready``: the daemon's readiness (``/healthz`` and ``/readyz``; None: not served);
    ``authorize``: what every other path but the node reports needs (None: nothing)."""
    metrics = make_wsgi_app(registry)

    def reply(start: StartResponse, status: str, body: object) -> list[bytes]:
        data = json.dumps(body).encode()
        start(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
        return [data]

    def handle(environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if (
            authorize is not None
            and path not in PROBE_PATHS
            and path != PHASES_PATH  # (a node's own boot token, checked by ``report``)
            and not authorize(environ.get("HTTP_AUTHORIZATION", ""))
        ):
            data = json.dumps({"error": "missing or invalid bearer token"}).encode()
            start(
                "401 Unauthorized",
                [
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(data))),
                    ("WWW-Authenticate", "Bearer"),
                ],
            )
            return [data]
        if path == SD_PATH and sd is not None:
            return reply(start, "200 OK", sd())
        if path == HEALTHZ_PATH and ready is not None:
            return reply(start, "200 OK", {"alive": True})
        if path == READYZ_PATH and ready is not None:
            state = ready()
            code = "200 OK" if state.ready else "503 Service Unavailable"
            return reply(start, code, state.body())
        if path != PHASES_PATH:
            return metrics(environ, start)
        if environ.get("REQUEST_METHOD") != "POST":
            return reply(start, "405 Method Not Allowed", {"error": "POST only"})
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = -1
        if not 0 < size <= MAX_BODY:
            return reply(start, "400 Bad Request", {"error": f"a JSON body of 1-{MAX_BODY} bytes"})
        auth = environ.get("HTTP_AUTHORIZATION", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        try:
            body = json.loads(environ["wsgi.input"].read(size))
            if not isinstance(body, dict):
                raise ValueError("not an object")
            r = PhaseReport(
                node_id=str(body.get("node_id", "")),
                phase=str(body.get("phase", "")),
                at=float(body.get("at", 0)),
                token=token,
                detail=str(body.get("detail", "")),
            )
        except (ValueError, TypeError) as exc:
            return reply(start, "400 Bad Request", {"error": f"bad body: {exc}"})
        try:
            recorded = report(r)
        except InvalidArgumentError as exc:
            return reply(start, "400 Bad Request", {"error": str(exc), "field": exc.field})
        except UnauthenticatedError as exc:
            return reply(start, "401 Unauthorized", {"error": str(exc)})
        except PermissionDeniedError as exc:
            return reply(start, "403 Forbidden", {"error": str(exc)})
        return reply(start, "200 OK", {"recorded": recorded})

    return handle


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass


def serve(
    host: str,
    port: int,
    wsgi: WsgiApp,
    *,
    tls_cert: str | Path | None = None,
    tls_key: str | Path | None = None,
    authenticated: bool = False,
) -> tuple[ThreadingWSGIServer, threading.Thread]:
    """Serve ``wsgi`` on ``host:port``, over TLS with ``tls_cert``/``tls_key``. A non-loopback
    ``host`` needs both TLS and ``authenticated`` (an app built with ``authorize``), as the
    gRPC API does (:func:`controlplane.grpc.server.check_bind_allowed`)."""
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("TLS needs both a certificate and a key file")
    addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    check_bind_allowed(addr, tls=tls_cert is not None, token=authenticated)
    server = make_server(host, port, wsgi, ThreadingWSGIServer, handler_class=_Quiet)
    if tls_cert is not None and tls_key is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls_cert), str(tls_key))
        # The handshake happens on the first read, in the request's own thread: a client
        # that connects and says nothing cannot hold up the accept loop (and the probes).
        server.socket = ctx.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    thread = threading.Thread(target=server.serve_forever, name="gpucap-http", daemon=True)
    thread.start()
    return server, thread

"""Traffic per model read from Prometheus (the production :class:`MetricsSource`).

One instant query per metric (``/api/v1/query`` at the loop's ``now``) answers for every
model at once; each query returns one series per model, labelled ``customer`` and ``model``.
What this module owns is the meaning of silence:

- a model with no series for a required metric gets ``None`` (NoData: the autoscaler holds
  scale; a missing series is never read as zero load). The one exception is a model with
  no replica ready: no model server exists to report what runs or waits, so those gauges
  are zeros, and an arrivals series (a gateway's request counter) wakes it;
- a model whose newest sample is older than ``max_age_s`` gets ``None`` too;
- when Prometheus cannot answer (unreachable, HTTP error, a query error, a body that is not
  its JSON, or the whole collection overrunning ``timeout_s``), or refuses us (TLS failure,
  credentials rejected or unreadable), every model gets ``None``, one warning is logged and
  ``gpucap_metrics_source_errors_total{source,reason}`` counts it. ``collect`` never raises:
  a bad scrape must not kill the tick.

A Prometheus off loopback is reached over https (a CA bundle and a client certificate where
it asks for one) with a bearer token or basic auth, each secret read from its file at every
collection: a rotated token is picked up, and no secret is held in the config or logged.
"""

from __future__ import annotations

import base64
import json
import math
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path
from typing import Any

import structlog

from autoscaler.types import MetricsSample
from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.telemetry import Metrics
from schema.daemon_config import MetricsConfig, MetricsQueries

log = structlog.get_logger("gpucap.metrics.prometheus")

SOURCE = "prometheus"
CUSTOMER_LABEL = "customer"
MODEL_LABEL = "model"
# One series per model: even thousands of models stay far below this. A body larger than
# this is not an answer to our queries.
MAX_BODY_BYTES = 16 * 1024 * 1024

Series = dict[ModelKey, float]


class QueryFailed(Exception):
    """Prometheus gave no usable answer. ``reason`` is a short, bounded label value."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Credentials:
    """How queries authenticate: a bearer token or basic auth, by file reference."""

    token_file: str | None = None
    username: str | None = None
    password_file: str | None = None

    def authorization(self) -> str | None:
        """The Authorization header's value, read fresh (None: no credentials)."""
        if self.token_file is not None:
            return f"Bearer {_secret(self.token_file)}"
        if self.username is not None and self.password_file is not None:
            pair = f"{self.username}:{_secret(self.password_file)}".encode()
            return f"Basic {base64.b64encode(pair).decode()}"
        return None


def _secret(path: str) -> str:
    try:
        value = Path(path).read_text().strip()
    except OSError as exc:
        raise QueryFailed("credentials", f"cannot read {path}: {exc.strerror}") from None
    if not value:
        raise QueryFailed("credentials", f"{path} is empty")
    if any(c in value for c in "\r\n\0"):  # (it would not fit in a header; never echoed)
        raise QueryFailed("credentials", f"{path} holds more than one line")
    return value


def tls_context(ca: str | None, cert: str | None, key: str | None) -> ssl.SSLContext:
    """Verifies the server against ``ca`` (the system's CAs by default), and presents a
    client certificate where one is given. A file that cannot be loaded is a config error,
    named at start."""
    for field, path in (("tls_ca", ca), ("tls_cert", cert), ("tls_key", key)):
        if path is not None:
            try:
                Path(path).read_bytes()
            except OSError as exc:
                raise ValueError(f"metrics.{field}: cannot read {path}: {exc.strerror}") from None
    try:
        context = ssl.create_default_context(cafile=ca)
    except ssl.SSLError as exc:
        raise ValueError(f"metrics.tls_ca: {ca} is not a PEM CA bundle ({exc})") from None
    if cert is not None:
        try:
            context.load_cert_chain(cert, key)
        except ssl.SSLError as exc:
            raise ValueError(
                f"metrics.tls_cert/tls_key: {cert} and {key} are not a PEM certificate and "
                f"its key ({exc})"
            ) from None
    return context


@dataclass
class TlsFiles:
    """The TLS files of a source, loaded again whenever one changes on disk: a client
    certificate rotated in place (cert-manager, a renewal cron) is used without a restart.
    Loaded once at start, where a bad file is a config error; later, a bad file fails the
    collection (``reason="tls"``) until it is fixed."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    _stamp: tuple[bytes | None, ...] | None = None
    _context: ssl.SSLContext | None = None

    def load(self) -> ssl.SSLContext:
        """The context, loaded again if a file changed; ValueError naming a bad file."""
        stamp = tuple(_file_stamp(p) for p in (self.ca, self.cert, self.key))
        if self._context is None or stamp != self._stamp:
            self._context = tls_context(self.ca, self.cert, self.key)
            self._stamp = stamp
        return self._context

    def context(self) -> ssl.SSLContext:
        """:meth:`load` for a collection: a bad file fails it as ``reason="tls"``."""
        try:
            return self.load()
        except ValueError as exc:
            raise QueryFailed("tls", str(exc)) from None


def _file_stamp(path: str | None) -> bytes | None:
    """The file's bytes (a few KB): a rewrite within a file system's timestamp
    granularity, with the same size, is still seen. None where there is no file or it
    cannot be read (``tls_context`` then names it)."""
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


Combine = Callable[[float, float], float]


def _add(a: float, b: float) -> float:
    return a + b


@dataclass(frozen=True)
class _Access:
    """What every query of one collection sends: headers (with credentials) and TLS."""

    headers: dict[str, str]
    tls: ssl.SSLContext | None


@dataclass
class PrometheusSource:
    url: str  # base URL, e.g. http://127.0.0.1:9090 (a path prefix is kept)
    queries: MetricsQueries = MetricsQueries()
    timeout_s: float = 5.0
    max_age_s: float = 60.0
    telemetry: Metrics | None = None
    monotonic: Callable[[], float] = time.monotonic  # deadline bookkeeping only
    credentials: Credentials = Credentials()
    tls: TlsFiles | None = None  # None: the default verification for https

    @classmethod
    def from_config(
        cls, cfg: MetricsConfig, telemetry: Metrics | None, base: Path | None = None
    ) -> PrometheusSource:
        """``base``: the directory relative file paths are read from (the config file's)."""

        def path(p: str | None) -> str | None:
            return None if p is None else str((base or Path.cwd()) / p)

        basic = cfg.basic_auth
        tls = None
        if cfg.tls_ca is not None or cfg.tls_cert is not None:
            tls = TlsFiles(path(cfg.tls_ca), path(cfg.tls_cert), path(cfg.tls_key))
            tls.load()  # a bad file stops the daemon at start
        return cls(
            url=cfg.url,
            queries=cfg.queries,
            timeout_s=cfg.timeout_s,
            max_age_s=cfg.max_age_s,
            telemetry=telemetry,
            credentials=Credentials(
                token_file=path(cfg.token_file),
                username=basic.username if basic else None,
                password_file=path(basic.password_file) if basic else None,
            ),
            tls=tls,
        )

    # ------------------------------------------------------------------ MetricsSource
    def collect(
        self, now: float, capacity: Mapping[ModelKey, Capacity]
    ) -> dict[ModelKey, MetricsSample | None]:
        if not capacity:
            return {}
        deadline = self.monotonic() + self.timeout_s
        q = self.queries
        try:
            access = self._access()  # secrets and TLS files: read once per collection

            def query(promql: str, combine: Combine = _add) -> Series:
                return self.query(promql, now, deadline, access, combine=combine)

            arrivals = query(q.arrival_rate)
            in_flight = query(q.in_flight)
            queued = query(q.queue_depth)
            tokens = query(q.tokens_per_s) if q.tokens_per_s else {}
            done = query(q.completion_rate) if q.completion_rate else {}
            fresh = query(q.freshness, combine=max) if q.freshness else None
        except QueryFailed as exc:
            log.warning(
                "metrics.source_failed",
                source=SOURCE,
                url=_redact(self.url),
                reason=exc.reason,
                detail=exc.detail,
                models=len(capacity),
                note="every model reads as NoData; the autoscaler holds scale",
            )
            if self.telemetry is not None:
                self.telemetry.metrics_source_errors.labels(SOURCE, exc.reason).inc()
            return {key: None for key in capacity}

        out: dict[ModelKey, MetricsSample | None] = {}
        for key, cap in capacity.items():
            # With no replica ready there is no model server to report what runs or waits
            # on one: its missing gauges are zeros, and the arrivals (a gateway's counter)
            # alone can wake the model. With one, a missing gauge is missing data.
            serving = cap.ready_replicas > 0
            stale = fresh is not None and now - fresh.get(key, -math.inf) > self.max_age_s
            if serving and stale:
                out[key] = None  # no sample at all, or Prometheus stopped ingesting it
                continue
            absent = None if serving else 0.0
            flight, waiting = in_flight.get(key, absent), queued.get(key, absent)
            if key not in arrivals or flight is None or waiting is None:
                out[key] = None
                continue
            out[key] = MetricsSample(
                t=now,
                arrival_rate=arrivals[key],
                in_flight=flight,
                queue_depth=waiting,
                tokens_per_s=tokens.get(key, absent),
                completion_rate=done.get(key, absent),
            )
        return out

    # ------------------------------------------------------------------ one query
    def _access(self) -> _Access:
        """The request headers (credentials read fresh) and the TLS context (reloaded if a
        file changed); QueryFailed ``credentials`` / ``tls`` where they cannot be read."""
        headers = {"Accept": "application/json"}
        authorization = self.credentials.authorization()
        if authorization is not None:
            headers["Authorization"] = authorization
        return _Access(headers, self.tls.context() if self.tls else None)

    def query(
        self,
        promql: str,
        now: float,
        deadline: float,
        access: _Access,
        *,
        combine: Combine = _add,
    ) -> Series:
        """One instant query at ``now`` -> value per (customer, model). Several series for
        one model (a query without ``sum by``) are summed, or ``combine``d."""
        remaining = deadline - self.monotonic()
        if remaining <= 0:
            raise QueryFailed("timeout", f"collection exceeded {self.timeout_s:g}s")
        params = urllib.parse.urlencode(
            # Prometheus' own timeout stops the evaluation server-side as well.
            {"query": promql, "time": f"{now:.3f}", "timeout": f"{remaining:.3f}"}
        )
        url = f"{self.url.rstrip('/')}/api/v1/query?{params}"
        body = _fetch(url, remaining, access.headers, access.tls)
        return _parse_vector(body, now, self.max_age_s, combine)


def _fetch(
    url: str, timeout_s: float, headers: dict[str, str], tls: ssl.SSLContext | None
) -> bytes:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=tls) as resp:
            body: bytes = resp.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise _http_failure(exc) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise QueryFailed("timeout", f"no answer within {timeout_s:.2f}s") from None
        if isinstance(exc.reason, ssl.SSLError):
            raise QueryFailed("tls", str(exc.reason)) from None
        raise QueryFailed("unreachable", str(exc.reason)) from None
    except TimeoutError:
        raise QueryFailed("timeout", f"no answer within {timeout_s:.2f}s") from None
    except ssl.SSLError as exc:  # (a handshake that fails after connecting)
        raise QueryFailed("tls", f"{type(exc).__name__}: {exc}") from None
    except (OSError, HTTPException) as exc:
        raise QueryFailed("unreachable", f"{type(exc).__name__}: {exc}") from None
    if len(body) > MAX_BODY_BYTES:
        raise QueryFailed("bad_response", f"body larger than {MAX_BODY_BYTES} bytes")
    return body


def _http_failure(exc: urllib.error.HTTPError) -> QueryFailed:
    """Prometheus answers a bad or failed query with a JSON error body (400 bad_data, 422
    execution, 503 timeout); anything else (a proxy's 502, a 404 for a wrong path) is an
    HTTP error."""
    try:
        doc = json.loads(exc.read(64 * 1024))
    except (ValueError, OSError):
        doc = None
    if exc.code in (401, 403):  # (the body may echo nothing useful; never the credentials)
        return QueryFailed("unauthorized", f"HTTP {exc.code} {exc.reason}")
    if isinstance(doc, dict) and doc.get("status") == "error":
        kind = str(doc.get("errorType", ""))
        reason = "timeout" if kind == "timeout" else "query_error"
        return QueryFailed(reason, f"HTTP {exc.code} {kind}: {doc.get('error', '')}")
    return QueryFailed("http_error", f"HTTP {exc.code} {exc.reason}")


def _parse_vector(
    body: bytes, now: float, max_age_s: float, combine: Callable[[float, float], float]
) -> Series:
    try:
        doc: Any = json.loads(body)
        if not isinstance(doc, dict) or doc.get("status") != "success":
            raise QueryFailed("bad_response", "not a successful Prometheus query response")
        data = doc["data"]
        if data["resultType"] != "vector":
            raise QueryFailed("bad_response", f"expected a vector, got {data['resultType']}")
        out: Series = {}
        for item in data["result"]:
            labels = item["metric"]
            customer, model = labels.get(CUSTOMER_LABEL), labels.get(MODEL_LABEL)
            if not customer or not model:
                continue  # a series gpucap cannot attribute to a model
            ts, raw = float(item["value"][0]), float(item["value"][1])
            # NaN/Inf (e.g. a division by an idle rate) is not a measurement. A result
            # stamped far behind ``now`` (a lagging proxy or replica) is stale.
            if not math.isfinite(raw) or now - ts > max_age_s:
                continue
            key = (str(customer), str(model))
            out[key] = combine(out[key], raw) if key in out else raw
        return out
    except QueryFailed:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise QueryFailed("bad_response", f"{type(exc).__name__}: {exc}") from None


def _redact(url: str) -> str:
    """Drop credentials a URL might carry before logging it."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))

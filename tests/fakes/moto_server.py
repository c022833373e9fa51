"""moto in server mode behind a fault-injecting HTTP proxy, for the AWS adapter's tests.

moto keeps the state (instances, tags, AMIs, S3, STS and per-account isolation through
assumed roles; clouds.md §E.1) but never produces capacity, limit or throttling errors. The
proxy in front of it serves those as real EC2 XML error responses with the real HTTP status
(clouds.md §A.6), so the *real* botocore client parses them and applies its own retry rules
(a 500 ``InsufficientInstanceCapacity`` is retried by botocore unless the client turns
retries off, exactly as against AWS). It can also let a request through and then drop the
connection before the response, to simulate a crash after the cloud accepted a create.

No SDK internals are touched: clients are pointed at the proxy with ``endpoint_url``.
Both servers listen on 127.0.0.1 on ports chosen by the OS, and stop with the session.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import threading
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest

_ISSUED = re.compile(r"<(?:SecretAccessKey|SessionToken)>([^<]+)</")

# Hop-by-hop headers a proxy must not forward (RFC 9110 §7.6.1).
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}

# Fault -> (EC2 error code, HTTP status), from clouds.md §A.6.
HARNESS_FAULTS: dict[str, tuple[str, int]] = {
    "capacity": ("InsufficientInstanceCapacity", 500),
    "quota": ("VcpuLimitExceeded", 400),
    "throttle": ("RequestLimitExceeded", 503),
    "transient": ("InternalError", 500),
    "auth": ("AuthFailure", 401),
}


@dataclass
class FaultRule:
    action: str  # AWS query Action, e.g. "RunInstances"
    code: str = ""
    status: int = 500
    message: str = ""
    remaining: int = 1
    zone: str | None = None  # only requests naming this AZ
    drop_response: bool = False  # forward, then drop the connection instead of answering
    body: bytes | None = None  # a canned JSON answer (status ``status``) for what moto lacks


@dataclass
class FaultInjector:
    rules: list[FaultRule] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)  # requests per Action on the wire
    lock: threading.Lock = field(default_factory=threading.Lock)
    # moto's STS assumes any role with any ExternalId (clouds.md §E.1). The proxy plays the
    # customer's trust policy: role ARN -> the ExternalId its condition requires.
    trust: dict[str, str] = field(default_factory=dict)
    assume_role_calls: list[dict[str, str]] = field(default_factory=list)  # no secrets in it
    # The last request body per Action, for fields moto accepts but ignores (e.g. a
    # capacity reservation target). Query forms carry no credentials (those are headers).
    last_form: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # Secret values the emulator handed out (assumed-role keys and tokens), so the hygiene
    # tests can grep logs and the database for them.
    issued_secrets: list[str] = field(default_factory=list)

    def add(self, rule: FaultRule) -> None:
        with self.lock:
            self.rules.append(rule)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()
            self.seen.clear()
            self.trust.clear()
            self.assume_role_calls.clear()
            self.issued_secrets.clear()
            self.last_form.clear()

    def check_trust(self, form: dict[str, list[str]]) -> FaultRule | None:
        call = {k: form.get(k, [""])[0] for k in ("RoleArn", "RoleSessionName", "ExternalId")}
        with self.lock:
            self.assume_role_calls.append(call)
            wanted = self.trust.get(call["RoleArn"])
        if wanted is not None and call["ExternalId"] != wanted:
            return FaultRule(
                "AssumeRole",
                "AccessDenied",
                403,
                f"User is not authorized to perform: sts:AssumeRole on resource: {call['RoleArn']}",
            )
        return None

    def pending(self) -> int:
        with self.lock:
            return sum(r.remaining for r in self.rules)

    def take(self, action: str, zone: str | None) -> FaultRule | None:
        with self.lock:
            self.seen[action] += 1
            for rule in self.rules:
                if rule.action == action and (rule.zone is None or rule.zone == zone):
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self.rules.remove(rule)
                    return rule
            return None


def ec2_error_body(code: str, message: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        f"</Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()


def query_error_body(code: str, message: str, status: int) -> bytes:
    """STS / IAM (query protocol, non-EC2) error shape."""
    kind = "Sender" if status < 500 else "Receiver"
    return (
        f"<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code>"
        f"<Message>{message}</Message></Error><RequestId>{uuid.uuid4()}</RequestId>"
        "</ErrorResponse>"
    ).encode()


class _Proxy(ThreadingHTTPServer):
    daemon_threads = True
    upstream: tuple[str, int]
    faults: FaultInjector


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self) -> None:
        body = self._body()
        action, zone, form = "", None, {}
        ctype = self.headers.get("Content-Type", "")
        if self.command == "POST" and "x-www-form-urlencoded" in ctype:
            form = parse_qs(body.decode("utf-8", "replace"))
            action = form.get("Action", [""])[0]
            zone = form.get("Placement.AvailabilityZone", [None])[0]
            with self.server.faults.lock:
                self.server.faults.last_form[action] = form
        target = self.headers.get("X-Amz-Target", "")
        if not action and target:  # JSON-protocol services name the operation in a header
            action = target.rsplit(".", 1)[-1]
        rule = self.server.faults.take(action, zone) if action else None
        if rule is not None and rule.body is not None:
            self.send_response(rule.status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(rule.body)))
            self.end_headers()
            self.wfile.write(rule.body)
            return
        if rule is None and action == "AssumeRole":
            rule = self.server.faults.check_trust(form)
        if rule is not None and not rule.drop_response:
            self._reply_error(rule, action)
            return
        status, headers, payload = self._forward(body)
        if action == "AssumeRole" and status == 200:
            found = _ISSUED.findall(payload.decode("utf-8", "replace"))
            with self.server.faults.lock:
                self.server.faults.issued_secrets.extend(found)
        if rule is not None:  # the upstream did the work; the caller never hears about it
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in _HOP and k.lower() != "content-length":
                self.send_header(k, v)
        if self.command == "HEAD":
            length = next((v for k, v in headers if k.lower() == "content-length"), "0")
            self.send_header("Content-Length", length)
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _reply_error(self, rule: FaultRule, action: str) -> None:
        message = rule.message or f"injected {rule.code}"
        is_ec2 = "/sts" not in self.path and action not in ("AssumeRole", "GetCallerIdentity")
        payload = (
            ec2_error_body(rule.code, message)
            if is_ec2
            else query_error_body(rule.code, message, rule.status)
        )
        self.send_response(rule.status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        host, port = self.server.upstream
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
            return resp.status, resp.getheaders(), payload
        finally:
            conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle


@dataclass
class MotoEmulator:
    """A running moto server and the fault proxy in front of it."""

    endpoint_url: str  # through the proxy: what the adapter under test uses
    direct_url: str  # straight to moto: ground truth for the tests
    faults: FaultInjector

    def inject(
        self,
        code: str,
        status: int,
        *,
        action: str = "RunInstances",
        count: int = 1,
        zone: str | None = None,
        message: str = "",
    ) -> None:
        self.faults.add(FaultRule(action, code, status, message, count, zone))

    def respond(self, action: str, body: dict[str, Any], *, count: int = 1) -> None:
        """Answer the next ``count`` ``action`` calls (JSON protocol) with ``body``."""
        self.faults.add(
            FaultRule(action, status=200, remaining=count, body=json.dumps(body).encode())
        )

    def reset_state(self) -> None:
        """Forget every resource moto holds (``POST /moto-api/reset``), for tests that
        need an empty account."""
        req = urllib.request.Request(f"{self.direct_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - 127.0.0.1
            resp.read()

    def drop_next_response(self, action: str = "RunInstances") -> None:
        self.faults.add(FaultRule(action, drop_response=True))

    def reset_faults(self) -> None:
        self.faults.clear()


# Base credentials of gpucap's own (shared) account in the emulator. The values are made
# distinctive per session so the secret-hygiene tests can grep for them.
BASE_ACCESS_KEY = f"AKIAGPUCAPTEST{uuid.uuid4().hex[:6].upper()}"
BASE_SECRET_KEY = f"gpucapBaseSecret{uuid.uuid4().hex}"
DEFAULT_ACCOUNT_ID = "123456789012"  # moto's account for unknown access keys


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoEmulator]:
    from moto.server import ThreadedMotoServer

    env = {
        "AWS_ACCESS_KEY_ID": BASE_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": BASE_SECRET_KEY,
        "AWS_CONFIG_FILE": os.devnull,  # never read a developer's real AWS config
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
            mp.delenv(k, raising=False)
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        proxy = _Proxy(("127.0.0.1", 0), _Handler)
        proxy.upstream = (host, port)
        proxy.faults = FaultInjector()
        thread = threading.Thread(target=proxy.serve_forever, daemon=True)
        thread.start()
        try:
            yield MotoEmulator(
                endpoint_url=f"http://127.0.0.1:{proxy.server_address[1]}",
                direct_url=f"http://{host}:{port}",
                faults=proxy.faults,
            )
        finally:
            proxy.shutdown()
            proxy.server_close()
            thread.join(timeout=5)
            moto.stop()


@pytest.fixture
def moto(moto_server: MotoEmulator) -> Iterator[MotoEmulator]:
    """The session's emulator with no faults pending before and after the test."""
    moto_server.reset_faults()
    yield moto_server
    moto_server.reset_faults()

"""Client side of the API, for the admin CLI and deployment tooling written in Python: one
channel with the bearer token attached to every call, and decoding of the structured error
details the server sends (field violations, policy problems)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from schema.gen.gpucap.v1 import control_plane_pb2 as pb
from schema.gen.gpucap.v1 import control_plane_pb2_grpc as pb_grpc

DEFAULT_ADDR = "127.0.0.1:50051"  # where the daemon listens and the CLI dials by default
DEFAULT_TIMEOUT_S = 10.0


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: Any) -> Any:
        metadata = [*(details.metadata or ()), self._header]
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._with_token(details), request)


@dataclass(frozen=True)
class _CallDetails(grpc.ClientCallDetails):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


def open_channel(
    addr: str,
    *,
    token: str | None = None,
    ca_file: str | Path | None = None,
    cert_file: str | Path | None = None,
    key_file: str | Path | None = None,
) -> grpc.Channel:
    """A channel to the daemon: TLS when ``ca_file`` is given (the CA that signed the
    server's certificate), plaintext otherwise (the server only allows that on loopback);
    with ``cert_file`` and ``key_file``, a client certificate (mTLS) as the credential."""
    if (cert_file is None) != (key_file is None):
        raise ValueError("a client certificate needs both a certificate and a key file")
    if cert_file is not None and ca_file is None:
        raise ValueError("a client certificate needs TLS: give the server's CA too")
    if ca_file is not None:
        creds = grpc.ssl_channel_credentials(
            root_certificates=Path(ca_file).read_bytes(),
            private_key=None if key_file is None else Path(key_file).read_bytes(),
            certificate_chain=None if cert_file is None else Path(cert_file).read_bytes(),
        )
        channel = grpc.secure_channel(addr, creds)
    else:
        channel = grpc.insecure_channel(addr)
    if token:
        channel = grpc.intercept_channel(channel, _BearerToken(token))
    return channel


class ControlPlaneClient:
    """The generated stub with a default deadline; use as a context manager."""

    def __init__(
        self,
        addr: str,
        *,
        token: str | None = None,
        ca_file: str | Path | None = None,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.addr = addr
        self.timeout = timeout
        self.channel = open_channel(
            addr, token=token, ca_file=ca_file, cert_file=cert_file, key_file=key_file
        )
        self.stub = pb_grpc.ControlPlaneStub(self.channel)

    def __enter__(self) -> ControlPlaneClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def call(self, method: str, request: Any) -> Any:
        """Call a unary RPC by name with the default deadline."""
        return getattr(self.stub, method)(request, timeout=self.timeout)

    def stream_events(self, request: pb.StreamEventsRequest) -> Iterator[pb.Event]:
        """Events until the server ends the stream (no deadline: `--follow` runs forever)."""
        return iter(self.stub.StreamEvents(request))

    def watch_endpoints(self, request: pb.WatchEndpointsRequest) -> Iterator[pb.EndpointsSnapshot]:
        """Snapshots until the server ends the stream (no deadline: `--watch` runs forever).
        After a disconnect, call again with ``since_revision`` = the last one applied."""
        return iter(self.stub.WatchEndpoints(request))


@dataclass(frozen=True)
class ErrorDetails:
    field_violations: list[tuple[str, str]]
    policy_problems: list[pb.PolicyProblem]


def error_details(err: grpc.RpcError) -> ErrorDetails:
    """Structured details of a failed call (empty lists when the server sent none)."""
    violations: list[tuple[str, str]] = []
    problems: list[pb.PolicyProblem] = []
    status = rpc_status.from_call(err) if isinstance(err, grpc.Call) else None
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations += [(v.field, v.description) for v in bad.field_violations]
        elif detail.Is(pb.PolicyProblems.DESCRIPTOR):
            got = pb.PolicyProblems()
            detail.Unpack(got)
            problems += list(got.problems)
    return ErrorDetails(violations, problems)


def format_problem(p: pb.PolicyProblem) -> str:
    """``file:line:col: field.path: reason``, the same line ``policy validate`` prints."""
    where = p.file or "<policy>"
    if p.line:
        where += f":{p.line}"
        if p.column:
            where += f":{p.column}"
    return f"{where}: {p.field}: {p.reason}"

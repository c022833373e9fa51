"""What every daemon-talking CLI command shares: the connection options (``--addr``,
``--token``, ``--ca`` and their environment variables), ``--output table|json``, and turning
a failed call into a one-line error and a non-zero exit instead of a traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import grpc
import typer
from google.protobuf.message import Message
from rich.console import Console

from controlplane.cli.output import Output, print_data, to_data
from controlplane.cli.pages import all_pages
from controlplane.grpc.client import (
    DEFAULT_ADDR,
    ControlPlaneClient,
    error_details,
    format_problem,
)
from schema.gen.gpucap.v1 import control_plane_pb2 as pb

ADDR_ENV = "GPUCAP_ADDR"
TOKEN_ENV = "GPUCAP_TOKEN"
# A file holding the token (e.g. one `gpucap daemon --demo --auth` wrote), when no
# --token/$GPUCAP_TOKEN is given: a secret in a file stays out of shell history and `ps`.
TOKEN_FILE_ENV = "GPUCAP_TOKEN_FILE"
# A client certificate and its key (PEM files), for a daemon that maps certificates to roles.
CLIENT_CERT_ENV = "GPUCAP_CLIENT_CERT"
CLIENT_KEY_ENV = "GPUCAP_CLIENT_KEY"
CA_ENV = "GPUCAP_CA"

# Exit codes: 1 the daemon rejected the request, 2 usage (typer's), 3 daemon unreachable.
EXIT_REJECTED = 1
EXIT_UNREACHABLE = 3


AddrOption = Annotated[
    str,
    typer.Option("--addr", envvar=ADDR_ENV, help="Daemon gRPC address (host:port)."),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=TOKEN_ENV,
        show_default=False,
        help="API token, when the daemon requires one (sent as a bearer token; else "
        f"${TOKEN_FILE_ENV} names a file holding it).",
    ),
]
CaOption = Annotated[
    Path | None,
    typer.Option(
        "--ca",
        envvar=CA_ENV,
        show_default=False,
        exists=True,
        dir_okay=False,
        help="CA certificate (PEM) that signed the daemon's TLS certificate; enables TLS.",
    ),
]
OutputOption = Annotated[
    Output,
    typer.Option(
        "--output", "-o", help="Human table (wide: more columns), or JSON or YAML for machines."
    ),
]
TimeoutOption = Annotated[
    float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the daemon.")
]
DEFAULT_TIMEOUT_S = 10.0

__all__ = ["DEFAULT_ADDR"]


def console() -> Console:
    """A console on the current stdout; wide when not a terminal, so piped tables are not
    truncated."""
    return Console(width=None if sys.stdout.isatty() else 200)


def err_console() -> Console:
    return Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def fail(message: str, code: int = EXIT_REJECTED) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def token_from_file() -> str | None:
    """The token in ``$GPUCAP_TOKEN_FILE`` (None: the variable is unset)."""
    path = os.environ.get(TOKEN_FILE_ENV)
    if not path:
        return None
    try:
        return Path(path).expanduser().read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        fail(f"${TOKEN_FILE_ENV}: cannot read {path}: {exc.strerror or exc}", 2)


@contextmanager
def daemon(
    addr: str, token: str | None, ca: Path | None, timeout: float = DEFAULT_TIMEOUT_S
) -> Iterator[ControlPlaneClient]:
    """A connected client; any failed call exits with a clear message, never a traceback."""
    token = token or token_from_file()
    try:
        client = ControlPlaneClient(
            addr,
            token=token,
            ca_file=ca,
            cert_file=os.environ.get(CLIENT_CERT_ENV) or None,
            key_file=os.environ.get(CLIENT_KEY_ENV) or None,
            timeout=timeout,
        )
    except (OSError, ValueError) as exc:
        fail(f"cannot connect to {addr}: {exc}", EXIT_UNREACHABLE)
    try:
        yield client
    except grpc.RpcError as exc:
        explain(exc, addr)
    finally:
        client.close()


def explain(exc: grpc.RpcError, addr: str) -> NoReturn:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    detail = (exc.details() if isinstance(exc, grpc.Call) else None) or str(exc)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        fail(
            f"cannot reach the gpucap daemon at {addr} ({code.name.lower()}): is "
            f"`gpucap daemon` running? (set --addr or ${ADDR_ENV})",
            EXIT_UNREACHABLE,
        )
    if code == grpc.StatusCode.UNAUTHENTICATED:
        fail(
            f"the daemon at {addr} refused the token ({detail}): set --token, "
            f"${TOKEN_ENV} or ${TOKEN_FILE_ENV}"
        )
    details = error_details(exc)
    if details.policy_problems:
        for p in details.policy_problems:
            typer.echo(format_problem(p), err=True)
        n = len(details.policy_problems)
        fail(f"policy rejected by the daemon ({n} problem{'s' if n != 1 else ''})")
    if details.field_violations:
        for field, reason in details.field_violations:
            typer.echo(f"{field}: {reason}", err=True)
        fail("invalid request")
    fail(f"{code.name.lower().replace('_', ' ')}: {detail}")


to_dict = to_data


def print_json(message: Message | dict[str, Any] | list[Any]) -> None:
    print_data(message, Output.JSON)


ModelArgument = Annotated[str, typer.Argument(help="customer/model, or model if unambiguous.")]


def resolve_model(c: ControlPlaneClient, model: str) -> tuple[str, str]:
    """(customer, name) of ``customer/model``, or of ``model`` when one customer has it."""
    if "/" in model:
        customer, name = model.split("/", 1)
        return customer, name
    found = all_pages(c.stub.ListModels, pb.ListModelsRequest(), timeout=c.timeout).models
    owners = sorted({m.customer for m in found if m.name == model})
    if len(owners) == 1:
        return owners[0], model
    if not owners:
        fail(f"no model named {model!r}")
    fail(f"model {model!r} exists for several customers ({', '.join(owners)}): use customer/model")

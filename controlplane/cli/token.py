"""``gpucap token create|list|revoke``: the API tokens callers authenticate with
(``controlplane.api_tokens``; roles in ``controlplane.authz``).

These work on the database directly, like ``gpucap db``, not through the daemon: whoever
can reach the database already holds every credential it protects, the first admin token
needs no token to make, and a daemon need not be running. A running daemon sees a new token
at once and a revoked one within ``controlplane.api_tokens.CACHE_S`` seconds.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.table import Table

from controlplane import api_tokens
from controlplane.authz import parse_role
from controlplane.cli.db import _resolve, _run, _shown
from controlplane.cli.output import Output, print_data
from controlplane.cli.remote import OutputOption, console, fail
from controlplane.store import migrate
from controlplane.store.db import Store

token_app = typer.Typer(
    name="token",
    help="API tokens: create (the secret is shown once), list, revoke. Works on the database.",
    no_args_is_help=True,
)

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        "--url",
        help="Database URL. Default: $GPUCAP_DB_URL, else SQLite in the state directory.",
        show_default=False,
    ),
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_LIFETIME_S = 100 * 365 * 86400  # (a datetime ends at year 9999; no token needs more)
_DURATION = re.compile(r"^(\d{1,9})([smhdw]?)$")


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``15m``, ``12h``, ``30d``, ``2w``; ValueError otherwise."""
    m = _DURATION.match(text.strip())
    if m is None or int(m.group(1)) == 0:
        raise ValueError(f"{text!r}: expected a positive number with s, m, h, d or w (e.g. 30d)")
    seconds = int(m.group(1)) * _UNITS[m.group(2) or "s"]
    if seconds > MAX_LIFETIME_S:
        raise ValueError(f"{text!r}: longer than {MAX_LIFETIME_S // (365 * 86400)} years")
    return timedelta(seconds=seconds)


def register(app: typer.Typer) -> None:
    app.add_typer(token_app)


def _store(url: str | None) -> Store:
    resolved = _resolve(url)
    if not _run(resolved, lambda: migrate.is_at_head(resolved)):
        fail(f"{_shown(resolved)}: not at the newest schema; run gpucap db upgrade first")
    return Store.from_url(resolved)


def _when(at: datetime | None) -> str:
    return "-" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _as_dict(view: api_tokens.TokenView, now: datetime) -> dict[str, str | None]:
    return {
        "id": view.id,
        "role": view.role,
        "state": view.state(now),
        "description": view.description,
        "created_at": view.created_at.isoformat(),
        "expires_at": None if view.expires_at is None else view.expires_at.isoformat(),
        "revoked_at": None if view.revoked_at is None else view.revoked_at.isoformat(),
    }


@token_app.command("create")
def create(
    role: Annotated[
        str, typer.Option("--role", help="admin, or customer:NAME (one customer's scope).")
    ],
    description: Annotated[
        str, typer.Option("--description", help="Who or what holds it (shown by list).")
    ] = "",
    expires_in: Annotated[
        str | None,
        typer.Option("--expires-in", help="e.g. 30d, 12h (default: never).", show_default=False),
    ] = None,
    url: DatabaseUrlOption = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Create a token and print it once (stdout: the token alone, for scripts)."""
    try:
        parsed = parse_role(role)
    except ValueError as exc:
        fail(f"--role: {exc}", 2)
    try:
        lifetime = None if expires_in is None else parse_duration(expires_in)
    except ValueError as exc:
        fail(f"--expires-in: {exc}", 2)
    now = datetime.now(UTC)
    store = _store(url)
    try:
        made = _run(
            str(store.engine.url),
            lambda: api_tokens.create(
                store,
                parsed,
                now=now,
                description=description,
                expires_at=None if lifetime is None else now + lifetime,
            ),
        )
    except ValueError as exc:
        fail(f"--{exc}", 2)  # (it names the field: description)
    finally:
        store.close()
    if output in (Output.JSON, Output.YAML):
        print_data({**_as_dict(made.view, now), "token": made.token}, output)
        return
    typer.echo(
        f"created token {made.view.id} ({made.view.role}, expires "
        f"{_when(made.view.expires_at) if made.view.expires_at else 'never'}); "
        "it is shown only now:",
        err=True,
    )
    typer.echo(made.token)


@token_app.command("list")
def list_cmd(url: DatabaseUrlOption = None, output: OutputOption = Output.TABLE) -> None:
    """Every token: id, role, state, times and description (never a secret)."""
    now = datetime.now(UTC)
    store = _store(url)
    try:
        views = _run(str(store.engine.url), lambda: api_tokens.list_tokens(store))
    finally:
        store.close()
    if output in (Output.JSON, Output.YAML):
        print_data({"tokens": [_as_dict(v, now) for v in views]}, output)
        return
    table = Table("ID", "ROLE", "STATE", "CREATED", "EXPIRES", "REVOKED", "DESCRIPTION")
    for v in views:
        table.add_row(
            v.id,
            v.role,
            v.state(now),
            _when(v.created_at),
            _when(v.expires_at),
            _when(v.revoked_at),
            v.description,
        )
    console().print(table)


@token_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="The token's id (token list).")],
    url: DatabaseUrlOption = None,
) -> None:
    """Revoke a token: calls with it are refused (UNAUTHENTICATED) from now on."""
    store = _store(url)
    try:
        view, changed = _run(
            str(store.engine.url),
            lambda: api_tokens.revoke(store, token_id, now=datetime.now(UTC)),
        )
    except LookupError as exc:
        fail(str(exc))
    finally:
        store.close()
    if changed:
        typer.echo(f"revoked token {view.id} ({view.role})")
    else:
        typer.echo(f"token {view.id} ({view.role}) was already revoked at {_when(view.revoked_at)}")

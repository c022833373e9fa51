"""``gpucap db``: create, inspect and migrate the store's schema.

The database is ``--url``, else ``$GPUCAP_DB_URL``, else SQLite in the state directory
(``controlplane.settings``). Works offline: it talks to the database, not to the daemon.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, NoReturn, TypeVar

import typer
from alembic.util import CommandError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from controlplane import settings
from controlplane.store import migrate

T = TypeVar("T")

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Database URL. Default: $GPUCAP_DB_URL, else SQLite in the state directory "
        "($GPUCAP_STATE_DIR, default ~/.local/state/gpucap).",
        show_default=False,
    ),
]

db_app = typer.Typer(
    help="Create, inspect and migrate the gpucap database schema.", no_args_is_help=True
)


def _shown(url: str) -> str:
    """The URL as safe to print: any password is masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable URL>"


def _resolve(url: str | None) -> str:
    resolved = settings.database_url(url)
    try:
        make_url(resolved)
    except ArgumentError:
        source = "--url" if url else f"${settings.DB_URL_ENV}"
        _fail(
            f"{source}: not a database URL (expected e.g. sqlite:///path/gpucap.db or "
            "postgresql+psycopg://user@host/db)"
        )
    return resolved


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _run(url: str, action: Callable[[], T]) -> T:
    """Run a migration step, turning database and Alembic errors into one clear line."""
    try:
        return action()
    except CommandError as exc:  # unknown revision, ambiguous target...
        _fail(f"{_shown(url)}: {exc}")
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        _fail(f"{_shown(url)}: {type(exc).__name__}: {first}")


def _label(revision: str | None) -> str:
    return "none (empty database)" if revision is None else revision


@db_app.command("upgrade")
def upgrade_cmd(
    url: UrlOption = None,
    revision: Annotated[
        str, typer.Option("--revision", help="Target revision.", show_default=True)
    ] = "head",
) -> None:
    """Migrate the database schema forward (creating it if the database is empty)."""
    resolved = _resolve(url)
    before = _run(resolved, lambda: migrate.current(resolved))
    _run(resolved, lambda: migrate.upgrade(resolved, revision))
    after = _run(resolved, lambda: migrate.current(resolved))
    if before == after:
        typer.echo(f"{_shown(resolved)}: already at {_label(after)}")
    else:
        typer.echo(f"{_shown(resolved)}: upgraded {_label(before)} -> {_label(after)}")


@db_app.command("current")
def current_cmd(
    url: UrlOption = None,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 unless the database is at the newest revision.")
    ] = False,
) -> None:
    """Print the schema revision the database is at."""
    resolved = _resolve(url)
    revision = _run(resolved, lambda: migrate.current(resolved))
    newest = migrate.head()
    suffix = " (head)" if revision == newest else f" (head is {newest})"
    typer.echo(f"{_label(revision)}{suffix}")
    if check and revision != newest:
        raise typer.Exit(1)


@db_app.command("downgrade")
def downgrade_cmd(
    revision: Annotated[
        str, typer.Argument(help="Target revision; 'base' removes every gpucap table.")
    ],
    url: UrlOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Migrate the database schema back to REVISION. Dropped tables lose their rows."""
    resolved = _resolve(url)
    before = _run(resolved, lambda: migrate.current(resolved))
    if not yes:
        typer.confirm(
            f"Downgrade {_shown(resolved)} from {_label(before)} to {revision}? "
            "Tables and columns removed by the downgrade lose their data.",
            abort=True,
        )
    _run(resolved, lambda: migrate.downgrade(resolved, revision))
    after = _run(resolved, lambda: migrate.current(resolved))
    typer.echo(f"{_shown(resolved)}: downgraded {_label(before)} -> {_label(after)}")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")

"""Schema migrations: a programmatic front end to Alembic.

The Alembic environment and revisions ship inside the package
(``controlplane/store/migrations``), and the Alembic ``Config`` is built here in code, so
``gpucap db upgrade`` works from an installed wheel with no ``alembic.ini``. The URL travels
in ``Config.attributes`` rather than as an ini option, because ini values are
``%``-interpolated and PostgreSQL URLs carry ``%3D`` escapes.
"""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.pool import NullPool

from controlplane.store.db import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

# Alembic's ``context`` and ``op`` are process-wide proxies, so two threads running commands
# at once trample each other. Serialise within the process; across processes the database
# locks taken in env.py do the serialising.
_ALEMBIC_LOCK = threading.Lock()


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (and at ``url`` if given)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if url is not None:
        cfg.attributes["url"] = url
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` forward to ``revision`` (default: the newest)."""
    with _ALEMBIC_LOCK:
        command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Migrate the database at ``url`` back to ``revision`` (``base`` removes every table)."""
    with _ALEMBIC_LOCK:
        command.downgrade(alembic_config(url), revision)


def current(url: str) -> str | None:
    """The revision the database at ``url`` is at, or None if it was never migrated."""
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head() -> str:
    """The newest revision shipped with this copy of gpucap."""
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    if len(heads) != 1:  # two revisions with the same parent: a merge revision is missing
        raise RuntimeError(f"migrations have {len(heads)} heads, expected one: {heads}")
    return heads[0]


def is_at_head(url: str) -> bool:
    """True when the database at ``url`` has every shipped migration applied."""
    return current(url) == head()

"""Alembic environment for the gpucap store.

Run by ``controlplane.store.migrate`` (which sets the URL in ``config.attributes["url"]``)
and by the ``alembic`` command with the repository's ``alembic.ini`` (URL from
``sqlalchemy.url``, else ``controlplane.settings.database_url``). The engine comes from
``store.db.make_engine`` so migrations see the same driver and SQLite pragmas (WAL) as the
daemon.

PostgreSQL: the ``alembic_version`` table is created unqualified, so it lands in the first
schema of the connection's ``search_path`` (the test fixture and multi-tenant installs set
it with ``options=-csearch_path=...``). Concurrent upgrades of one schema are serialised by
a transaction-scoped advisory lock, so two daemons starting together cannot both run 0001.

SQLite: ``render_as_batch`` makes autogenerate emit batch (copy-and-move) operations, since
SQLite's ALTER TABLE cannot add or drop constraints. The upgrade runs in one explicit
``BEGIN IMMEDIATE`` transaction (see ``_run_sqlite``). Foreign keys are switched off while a
migration rebuilds tables and checked before commit, as SQLite's docs prescribe for table
rebuilds (https://www.sqlite.org/lang_altertable.html, "other kinds of table schema changes").
"""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any, Literal

from alembic import context
from sqlalchemy import Connection, text
from sqlalchemy.pool import NullPool

from controlplane.store.db import make_engine
from controlplane.store.models import Base
from controlplane.store.types import UTCDateTime

config = context.config
target_metadata = Base.metadata

# Only the developer's alembic.ini configures logging; gpucap's own callers keep theirs.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if url:
        return str(url)
    from controlplane.settings import database_url

    return database_url(None)


def _render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    """Autogenerate writes ``UTCDateTime`` as its stored type, so revisions never import
    application code (a revision must keep working after the code it was written for
    changes)."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        render_item=_render_item,
    )


def _run_sqlite(connection: Connection) -> None:
    """All pending revisions in one ``BEGIN IMMEDIATE`` transaction: SQLite's DDL is
    transactional, so a crash mid-upgrade leaves the old schema, and a second upgrader
    waits on the write lock (busy_timeout) and then finds nothing left to do."""
    # The driver's own implicit BEGIN handling is switched off so ours is the only one.
    connection = connection.execution_options(isolation_level="AUTOCOMMIT")
    # Outside the transaction: inside one, SQLite ignores this pragma.
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            _configure(connection)  # sees an open transaction, so Alembic adds none
            context.run_migrations()
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"migration left dangling foreign keys: {broken[:5]}")
        except BaseException:
            connection.exec_driver_sql("ROLLBACK")
            raise
        connection.exec_driver_sql("COMMIT")
    finally:
        connection.exec_driver_sql("PRAGMA foreign_keys=ON")


def _run_transactional(connection: Connection) -> None:
    """PostgreSQL (and any backend with transactional DDL): Alembic's own transaction,
    plus an advisory lock per schema so concurrent upgraders run one after the other."""
    _configure(connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(
                text(
                    "SELECT pg_advisory_xact_lock("
                    "hashtext('gpucap-migrate:' || coalesce(current_schema(), '')))"
                )
            )
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_url(), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                _run_sqlite(connection)
            else:
                _run_transactional(connection)
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    """``alembic upgrade --sql``: print the DDL instead of running it."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

"""Shared fixtures. ``store`` runs every test that uses it twice: on SQLite and on the
PostgreSQL at 127.0.0.1:5432 (database ``test``, trust auth). Each PostgreSQL test gets a
schema of its own, so parallel workers and concurrent runs never see each other's rows.
When CI=true and PostgreSQL is unreachable the suite fails instead of skipping."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from sqlalchemy import text

from controlplane.store.db import Store, make_engine
from controlplane.store.migrate import upgrade

# No per-example deadline for property tests: on a shared 2-core machine one example can
# take 300 ms for no reason of its own (a placement example did, under a bench run), and
# speed is the benchmarks' business (bench/), not the tests'.
settings.register_profile("gpucap", deadline=None)
settings.load_profile("gpucap")

PG_URL = os.environ.get("GPUCAP_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _pg_reachable() -> str | None:
    try:
        engine = make_engine(PG_URL, connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
        return None
    except Exception as exc:  # any failure means "not reachable"; the reason is reported
        return str(exc).splitlines()[0]


@pytest.fixture(scope="session")
def pg_available() -> bool:
    why = _pg_reachable()
    if why is None:
        return True
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL at {PG_URL} is unreachable under CI=true: {why}")
    pytest.skip(f"PostgreSQL unreachable: {why}")
    return False


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on each backend (no tables yet)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'gpucap.db'}"
        return
    request.getfixturevalue("pg_available")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A migrated store on each backend."""
    upgrade(db_url)
    s = Store.from_url(db_url)
    try:
        yield s
    finally:
        s.close()

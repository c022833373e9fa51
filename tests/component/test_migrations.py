"""Alembic migrations and ``gpucap db``, on SQLite and on the real PostgreSQL.

The schema the migrations build must equal ``Base.metadata``: the comparison test fails
when someone changes ``controlplane/store/models.py`` without writing a migration.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, String, inspect, select, text
from sqlalchemy.pool import NullPool
from typer.testing import CliRunner

from controlplane import settings
from controlplane.cli.main import app
from controlplane.store.db import Store, make_engine
from controlplane.store.migrate import (
    MIGRATIONS_DIR,
    alembic_config,
    current,
    downgrade,
    head,
    is_at_head,
    upgrade,
)
from controlplane.store.models import Base, Customer, Node
from tests.component.test_store import _insert_present, _node, _seed_parents

REPO = Path(__file__).resolve().parents[2]
MODEL_TABLES = set(Base.metadata.tables)


def _tables(url: str) -> set[str]:
    """Tables in the connection's default schema (on PostgreSQL: the first schema of the
    search_path, i.e. the test's own schema)."""
    engine = make_engine(url, poolclass=NullPool)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _diff(url: str, metadata: MetaData) -> list[Any]:
    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            return list(compare_metadata(ctx, metadata))
    finally:
        engine.dispose()


def _copy_of_models() -> MetaData:
    copy = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.sorted_tables:
        table.to_metadata(copy)
    return copy


def test_upgrade_from_empty_to_head_then_down_to_base_and_up_again(db_url: str) -> None:
    assert current(db_url) is None
    assert _tables(db_url) == set()

    upgrade(db_url)
    assert current(db_url) == head()
    assert is_at_head(db_url)
    assert _tables(db_url) == MODEL_TABLES | {"alembic_version"}

    downgrade(db_url, "base")
    assert current(db_url) is None
    assert not is_at_head(db_url)
    assert _tables(db_url) == {"alembic_version"}

    upgrade(db_url)
    assert current(db_url) == head()
    assert _tables(db_url) == MODEL_TABLES | {"alembic_version"}


def test_alembic_version_lives_in_the_connections_schema(db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(db_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                where = conn.execute(
                    text(
                        "SELECT table_schema FROM information_schema.tables "
                        "WHERE table_name = 'alembic_version' AND table_schema = current_schema()"
                    )
                ).scalar_one()
                assert where == conn.execute(text("SELECT current_schema()")).scalar_one()
                assert where.startswith("t_")  # the fixture's per-test schema, not public
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    finally:
        engine.dispose()
    assert version == head()


def test_upgrade_at_head_changes_nothing_and_keeps_rows(db_url: str) -> None:
    upgrade(db_url)
    store = Store.from_url(db_url)
    try:
        with store.session() as s:
            s.add(Customer(name="acme", created_at=datetime(2026, 1, 1, tzinfo=UTC)))
        upgrade(db_url)
        with store.session() as s:
            assert s.scalars(select(Customer.name)).all() == ["acme"]
    finally:
        store.close()
    assert current(db_url) == head()


def test_schema_built_by_migrations_equals_the_models(db_url: str) -> None:
    upgrade(db_url)
    diffs = _diff(db_url, Base.metadata)
    assert diffs == [], (
        "controlplane/store/models.py and the Alembic migrations disagree. Write a migration "
        "(see alembic.ini) for these differences:\n" + "\n".join(map(repr, diffs))
    )


def test_schema_comparison_sees_a_model_change_without_migration(db_url: str) -> None:
    """Guards the test above against passing vacuously on either backend."""
    upgrade(db_url)
    changed = _copy_of_models()
    changed.tables["nodes"].append_column(Column("spot_price", Integer, nullable=True))
    changed.tables["pools"].c.region.type = String(128)  # was 64

    diffs = _diff(db_url, changed)

    added = [d for d in diffs if isinstance(d, tuple) and d[0] == "add_column"]
    assert [(d[2], d[3].name) for d in added] == [("nodes", "spot_price")]
    retyped = [d[0] for d in diffs if isinstance(d, list) and d[0][0] == "modify_type"]
    assert [(d[2], d[3]) for d in retyped] == [("pools", "region")]
    assert len(diffs) == 2


FAILING_REVISION = """
import sqlalchemy as sa
from alembic import op

revision = "fails_halfway"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table("half_done", sa.Column("id", sa.Integer, primary_key=True))
    op.add_column("events", sa.Column("half_done_id", sa.Integer, nullable=True))
    raise RuntimeError("migration failed halfway")


def downgrade():
    pass
"""


def test_a_migration_that_fails_halfway_leaves_the_schema_as_it_was(
    db_url: str, tmp_path: Path
) -> None:
    """DDL runs in one transaction on both backends, so a failing (or killed) upgrade
    cannot leave a half-migrated database behind."""
    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "fails_halfway.py").write_text(FAILING_REVISION.format(head=head()))
    cfg = alembic_config(db_url)
    cfg.set_main_option("script_location", str(scripts))

    upgrade(db_url)
    with pytest.raises(RuntimeError, match="failed halfway"):
        command.upgrade(cfg, "fails_halfway")

    assert current(db_url) == head()
    assert _tables(db_url) == MODEL_TABLES | {"alembic_version"}
    assert _diff(db_url, Base.metadata) == []  # events has no half_done_id column


def test_0002_stamps_failed_at_on_nodes_the_provision_timeout_drained(db_url: str) -> None:
    """Nodes drained by the provision timeout before 0002 get ``draining_at`` as their
    failure; a node released while its create was retried after throttling, a node that
    was ready, and one already failed keep theirs. Downgrading takes the stamps back."""
    upgrade(db_url, "0001")
    drained, t_fail = (
        datetime(2026, 11, 30, 8, 0, tzinfo=UTC),
        datetime(2026, 11, 30, 7, 0, tzinfo=UTC),
    )
    nodes = {
        "timed-out": dict(state="terminated", error="not ready within provision timeout"),
        "throttled": dict(state="terminated", error="Throttled(RequestLimitExceeded): slow down"),
        "was-ready": dict(
            state="terminated", ready_at=drained, error="not ready within provision timeout"
        ),
        "failed": dict(state="failed", error="instance disappeared at the cloud", failed_at=t_fail),
    }
    store = Store.from_url(db_url)
    try:
        with store.session() as s:
            _seed_parents(s)
            for name, cols in nodes.items():
                row = _node(name, f"tok-{name}")
                row.draining_at = drained
                for column, value in cols.items():
                    setattr(row, column, value)
                _insert_present(s, [row])
    finally:
        store.close()

    def failed_at() -> dict[str, datetime | None]:
        store = Store.from_url(db_url)
        try:
            with store.session() as s:
                return {i: at for i, at in s.execute(select(Node.id, Node.failed_at))}
        finally:
            store.close()

    upgrade(db_url)
    assert failed_at() == {
        "timed-out": drained,
        "throttled": None,
        "was-ready": None,
        "failed": t_fail,
    }
    downgrade(db_url, "0001")
    assert failed_at() == {
        "timed-out": None,
        "throttled": None,
        "was-ready": None,
        "failed": t_fail,
    }


def test_concurrent_upgrades_of_one_database_all_succeed(db_url: str) -> None:
    """Two daemons (or a daemon and ``gpucap db upgrade``) starting together: one migrates,
    the others wait for its lock and find nothing to do."""
    code = "import sys; from controlplane.store.migrate import upgrade; upgrade(sys.argv[1])"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, db_url],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
    assert [rc for rc, _ in results] == [0, 0, 0], [err for _, err in results]
    assert current(db_url) == head()
    assert _diff(db_url, Base.metadata) == []


def test_sqlite_database_is_in_wal_mode(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gpucap.db'}"
    upgrade(url)
    store = Store.from_url(url)
    try:
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
    finally:
        store.close()


# --- gpucap db ---------------------------------------------------------------------------


def _gpucap(*args: str, env: dict[str, str | None] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def test_cli_upgrade_current_downgrade_with_url(db_url: str) -> None:
    r = _gpucap("db", "current", "--url", db_url)
    assert r.exit_code == 0, r.output
    assert r.output.startswith("none (empty database)")

    r = _gpucap("db", "current", "--url", db_url, "--check")
    assert r.exit_code == 1

    r = _gpucap("db", "upgrade", "--url", db_url)
    assert r.exit_code == 0, r.output
    assert f"none (empty database) -> {head()}" in r.output
    assert current(db_url) == head()

    r = _gpucap("db", "current", "--url", db_url, "--check")
    assert r.exit_code == 0
    assert r.output.strip() == f"{head()} (head)"

    r = _gpucap("db", "upgrade", "--url", db_url, "--revision", "head")
    assert r.exit_code == 0
    assert f"already at {head()}" in r.output

    r = _gpucap("db", "downgrade", "base", "--url", db_url, "--yes")
    assert r.exit_code == 0, r.output
    assert current(db_url) is None
    assert _tables(db_url) == {"alembic_version"}


def test_cli_downgrade_asks_first_and_keeps_data_when_refused(db_url: str) -> None:
    upgrade(db_url)
    r = CliRunner().invoke(app, ["db", "downgrade", "base", "--url", db_url], input="n\n")
    assert r.exit_code == 1
    assert "lose their data" in r.output
    assert current(db_url) == head()
    assert _tables(db_url) >= MODEL_TABLES


def test_cli_unknown_revision_is_a_clear_error(db_url: str) -> None:
    r = _gpucap("db", "upgrade", "--url", db_url, "--revision", "no-such-rev")
    assert r.exit_code == 1
    assert "no-such-rev" in r.output
    assert "Traceback" not in r.output
    assert current(db_url) is None


def test_cli_bad_or_unreachable_url_is_a_clear_error_without_password() -> None:
    r = _gpucap("db", "upgrade", "--url", "not a url")
    assert r.exit_code == 1
    assert "--url: not a database URL" in r.output

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _gpucap("db", "current", "--url", f"postgresql://gpucap:hunter2@127.0.0.1:{port}/x")
    assert r.exit_code == 1
    assert "OperationalError" in r.output
    assert "hunter2" not in r.output
    assert f"gpucap:***@127.0.0.1:{port}/x" in r.output


def test_cli_default_database_is_sqlite_in_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env: dict[str, str | None] = {"GPUCAP_STATE_DIR": str(state), "GPUCAP_DB_URL": None}
    r = _gpucap("db", "upgrade", env=env)
    assert r.exit_code == 0, r.output
    db_file = state / "gpucap.db"
    assert db_file.is_file()
    assert current(f"sqlite:///{db_file}") == head()
    assert (state.stat().st_mode & 0o777) == 0o700


def test_settings_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUCAP_DB_URL", raising=False)
    monkeypatch.delenv("GPUCAP_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert settings.state_dir() == tmp_path / "xdg" / "gpucap"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert settings.state_dir() == tmp_path / "home" / ".local" / "state" / "gpucap"

    monkeypatch.setenv("GPUCAP_STATE_DIR", str(tmp_path / "s"))
    assert settings.database_url(None) == f"sqlite:///{tmp_path / 's' / 'gpucap.db'}"
    monkeypatch.setenv("GPUCAP_DB_URL", "postgresql://db/gpucap")
    assert settings.database_url(None) == "postgresql://db/gpucap"
    assert settings.database_url("sqlite:///x.db") == "sqlite:///x.db"


# --- the fixture itself ------------------------------------------------------------------


def test_store_fixture_fails_instead_of_skipping_when_ci_and_postgres_unreachable(
    tmp_path: Path,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    # Copy the real conftest next to a tiny test, so this checks the fixture as shipped.
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tmp_path / "test_tiny.py").write_text(
        textwrap.dedent(
            """
            def test_uses_store(store):
                assert store.engine.dialect.name in ("sqlite", "postgresql")
            """
        )
    )
    # The outer run's PYTEST_* settings (xdist worker ids, addopts) must not leak inward.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        CI="true",
        GPUCAP_TEST_PG=f"postgresql+psycopg://postgres@127.0.0.1:{port}/test",
        PYTHONPATH=str(REPO),
    )

    def run(ci: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:xdist",
                "-rfEs",
                str(tmp_path),
            ],
            cwd=tmp_path,
            env={**env, "CI": ci},
            capture_output=True,
            text=True,
            timeout=120,
        )

    under_ci = run("true")
    assert under_ci.returncode == 1, under_ci.stdout + under_ci.stderr
    assert (
        f"PostgreSQL at postgresql+psycopg://postgres@127.0.0.1:{port}/test is unreachable "
        "under CI=true" in under_ci.stdout
    )
    assert "1 passed, 1 error" in under_ci.stdout  # SQLite ran; PostgreSQL errored

    locally = run("false")
    assert locally.returncode == 0, locally.stdout + locally.stderr
    assert "1 passed, 1 skipped" in locally.stdout

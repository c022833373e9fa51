"""Engine and session factory. SQLite gets WAL and a busy timeout so the daemon's jobs and
the gRPC server can share one file; PostgreSQL is used as-is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def default_url(state_dir: Path) -> str:
    return f"sqlite:///{state_dir / 'gpucap.db'}"


def make_engine(url: str, **kwargs: Any) -> Engine:
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if ":memory:" not in url and url not in ("sqlite://", "sqlite:///"):
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=5000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


class Store:
    """Owns the engine and hands out transactional sessions."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def from_url(cls, url: str) -> Store:
        return cls(make_engine(url))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in a transaction: committed on success, rolled back on error."""
        with self._sessions.begin() as s:
            yield s

    def on_write(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every flush of a session of this store that wrote (what
        an in-process reader uses to skip re-reading a store that has not changed)."""
        event.listen(self._sessions, "after_flush", lambda *_: callback())

    def close(self) -> None:
        self.engine.dispose()

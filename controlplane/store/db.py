"""Engine and session factory. SQLite gets WAL and a busy timeout so the daemon's jobs and
the gRPC server can share one file; PostgreSQL is used as-is.

A store can be *fenced* (:meth:`Store.fenced`): the control loop's acting jobs write through
such a view, and every transaction of it that wrote checks, just before COMMIT and inside
the same transaction, that this daemon still holds its leases with the tokens it acts
under (``store.leases.check_fence``); otherwise the transaction rolls back with ``Fenced``.
One place for the check, so no job can forget it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker

_WROTE = "gpucap.wrote"


class Fence(Protocol):
    """What a fenced store checks: who this daemon is and the tokens it acts under."""

    @property
    def holder(self) -> str: ...

    def claims(self) -> Mapping[int, int]:
        """shard -> token this daemon acts under now; raises ``store.leases.Fenced`` when it
        does not act (its lease lapsed on its own clock: no need to ask the database)."""
        ...


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

    def __init__(self, engine: Engine, fence: Fence | None = None) -> None:
        self.engine = engine
        self.fence = fence
        self._owns_engine = True
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        if fence is not None:
            event.listen(self._sessions, "after_flush", _mark_wrote)
            event.listen(self._sessions, "do_orm_execute", _mark_dml)
            event.listen(self._sessions, "before_commit", self._check_fence)

    def fenced(self, fence: Fence) -> Store:
        """A view of this store, on the same engine, whose writing transactions commit only
        while ``fence`` holds (closing the view leaves the engine to this store)."""
        view = Store(self.engine, fence)
        view._owns_engine = False
        return view

    def _check_fence(self, s: Session) -> None:
        from controlplane.store.leases import check_fence

        assert self.fence is not None
        s.flush()  # before_commit runs before the final flush: make the writes known now
        if s.info.get(_WROTE):
            # Claims first: a lapsed lease fails here without a round trip.
            claims = self.fence.claims()
            check_fence(s, self.fence.holder, claims)

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
        if self._owns_engine:
            self.engine.dispose()


def _mark_wrote(s: Session, _flush_context: Any) -> None:
    s.info[_WROTE] = True


def _mark_dml(state: ORMExecuteState) -> None:
    # Statements bypass the unit of work (no flush event): anything but a SELECT (bulk
    # UPDATE/DELETE/INSERT, text() whatever it says) counts as a write.
    if not state.is_select:
        state.session.info[_WROTE] = True

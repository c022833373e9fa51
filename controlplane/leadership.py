"""Which daemon acts: leases on the database (``store.leases``, decided by the pure
``lifecycle.lease``), renewed every TTL/3 from a thread of their own, and the one-daemon
lock of a SQLite file.

A daemon acts while it holds the lease of every shard and its own clock says the lease has
not lapsed (``lifecycle.lease.local_deadline``): a renewal that fails, hangs or is refused
stops it acting at once, without waiting for the database. Its acting writes are fenced
besides (``Store.fenced``): whatever a deposed leader still had in flight is rolled back.

Shards: customers hash onto ``shards`` leases (``lifecycle.lease.shard_of``). The jobs do
not yet scope their work to a shard's customers, so until they do a daemon acts only while
it holds *every* shard, and contends for shard k only while it holds shards 0..k-1: two
daemons never split the shards between them and leave both idle."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import structlog
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from controlplane.lifecycle.lease import decide, local_deadline
from controlplane.store import leases
from controlplane.store.db import make_engine
from controlplane.store.leases import Fenced

log = structlog.get_logger("gpucap.leadership")

Role = Literal["leader", "standby", "unknown"]


def new_holder_id() -> str:
    """Unique per process start (host, pid and a random part): a restarted daemon is a new
    holder, so it never mistakes its previous life's lease for a live one of its own."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseView:
    """What ``/readyz``, gRPC health and ``gpucap status`` read of the leases."""

    holder: str
    shards: int
    ttl_s: float
    acting: bool
    held: dict[int, int] = field(default_factory=dict)  # shard -> token
    following: dict[int, str] = field(default_factory=dict)  # shard -> its live holder
    answered_s_ago: float | None = None  # the lease table's last answer (None: never)
    error: str = ""  # the last round's failure, if it failed

    @property
    def role(self) -> Role:
        if self.acting:
            return "leader"
        return "standby" if self.following else "unknown"


class Leadership:
    """The leases of one daemon. ``step()`` runs one round (tests call it by hand); the
    thread of :meth:`start` runs a round every TTL/3."""

    def __init__(
        self,
        engine: Engine,
        *,
        shards: int = 1,
        ttl_s: float = 15.0,
        holder: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_round: Callable[[LeaseView], None] | None = None,
    ) -> None:
        if shards < 1 or ttl_s <= 0:
            raise ValueError("shards >= 1 and ttl_s > 0")
        self.engine = engine
        self.shards = shards
        self.ttl_s = ttl_s
        self.holder = holder or new_holder_id()
        self._clock = clock
        self._on_round = on_round
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}
        self._deadline = 0.0
        self._following: dict[int, str] = {}
        self._answered: float | None = None
        self._error = ""
        self._was_acting = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._became_leader: list[Callable[[], None]] = []

    @classmethod
    def from_url(cls, url: str, **kwargs: object) -> Leadership:
        """With an engine of its own: a renewal never waits behind the jobs for a pooled
        connection, and a database that does not answer fails it within seconds."""
        extra: dict[str, object] = {"pool_size": 1, "max_overflow": 1}
        if make_url(url).get_backend_name() == "postgresql":
            extra["connect_args"] = {"connect_timeout": 3}
        return cls(make_engine(url, **extra), **kwargs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ reading
    def acting(self) -> bool:
        with self._lock:
            return self._acting_locked()

    def _acting_locked(self) -> bool:
        return len(self._held) == self.shards and self._clock() < self._deadline

    def claims(self) -> Mapping[int, int]:
        """The tokens the acting path writes under (``store.db.Fence``)."""
        with self._lock:
            if not self._acting_locked():
                raise Fenced(f"{self.holder} does not hold its leases (lapsed or lost)")
            return dict(self._held)

    def view(self) -> LeaseView:
        with self._lock:
            return self._view_locked()

    def _view_locked(self) -> LeaseView:
        now = self._clock()
        return LeaseView(
            holder=self.holder,
            shards=self.shards,
            ttl_s=self.ttl_s,
            acting=self._acting_locked(),
            held=dict(self._held) if now < self._deadline else {},
            following=dict(self._following),
            answered_s_ago=None if self._answered is None else now - self._answered,
            error=self._error,
        )

    def when_elected(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from the lease thread) each time this daemon starts acting."""
        self._became_leader.append(callback)

    # ------------------------------------------------------------------ one round
    def step(self) -> LeaseView:
        sent = self._clock()  # before the first statement: the database stamps later
        held: dict[int, int] = {}
        following: dict[int, str] = {}
        try:
            with self.engine.begin() as conn:
                now, rows = leases.observe(conn, range(self.shards))
            contend = True
            for shard in range(self.shards):
                row = rows.get(shard)
                d = decide(row, now, self.holder)
                if d.kind == "follow":
                    following[shard] = d.holder
                    contend = False
                    continue
                if not contend:
                    # A lower shard is another's: let this one go to that daemon.
                    if d.kind == "renew":
                        with self.engine.begin() as conn:
                            leases.release(conn, shard, self.holder, d.token)
                    continue
                with self.engine.begin() as conn:
                    won = leases.apply(conn, shard, row, d, self.ttl_s)
                if won:
                    held[shard] = d.token
                    if d.kind != "renew":
                        log.info("lease.acquired", shard=shard, token=d.token, holder=self.holder)
                else:
                    contend = False  # another daemon moved first; look again next round
        except Exception as exc:  # the database is away: keep nothing new, lapse on time
            with self._lock:
                first = str(exc).splitlines()[0] if str(exc) else ""
                self._error = f"{type(exc).__name__}: {first}"
                result = self._view_and_transition_locked()
            log.warning("lease.round_failed", error=self._error)
            self._after_round(result)
            return result[0]
        with self._lock:
            self._held = held
            self._deadline = local_deadline(sent, self.ttl_s) if held else 0.0
            self._following = following
            self._answered = self._clock()
            self._error = ""
            result = self._view_and_transition_locked()
        self._after_round(result)
        return result[0]

    def _view_and_transition_locked(self) -> tuple[LeaseView, bool]:
        """The view after a round, and whether this round made this daemon start acting."""
        view = self._view_locked()
        elected = view.acting and not self._was_acting
        if self._was_acting and not view.acting:
            log.warning(
                "lease.lost", holder=self.holder, following=view.following, error=self._error
            )
        self._was_acting = view.acting
        return view, elected

    def _after_round(self, result: tuple[LeaseView, bool]) -> None:
        view, elected = result
        if elected:
            for callback in self._became_leader:
                callback()
        if self._on_round is not None:
            self._on_round(view)

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpucap-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            self.step()

    def stop(self, *, release: bool = True) -> None:
        """Stop renewing; with ``release``, let our leases lapse now so a standby takes over
        at its next look (a clean stop must not cost a TTL of no leader)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self._lock:
            held, self._held, self._deadline = dict(self._held), {}, 0.0
        if release and held:
            try:
                with self.engine.begin() as conn:
                    for shard, token in held.items():
                        leases.release(conn, shard, self.holder, token)
                log.info("lease.released", shards=sorted(held), holder=self.holder)
            except Exception as exc:  # it lapses by itself within the TTL
                log.warning("lease.release_failed", error=str(exc))

    def close(self) -> None:
        self.engine.dispose()


# ---------------------------------------------------------------------- SQLite
class DatabaseInUse(RuntimeError):
    """Another daemon already runs on this SQLite file."""


_held_files: dict[str, tuple[int, int]] = {}  # path -> (fd, references in this process)
_files_lock = threading.Lock()


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None: not SQLite, or in memory)."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return Path(u.database).resolve()


def hold_sqlite(url: str) -> Path | None:
    """Hold ``<db file>.lock`` exclusively for this process (references counted: the CLI
    takes it before the demo clears its files, the daemon again at start). SQLite has no
    server to arbitrate leases between machines, and two daemons on one file would both
    write it: the second refuses to start instead. Returns the lock file (None: no file)."""
    db = sqlite_path(url)
    if db is None:
        return None
    lock = Path(f"{db}.lock")
    key = str(lock)
    with _files_lock:
        if key in _held_files:
            fd, refs = _held_files[key]
            _held_files[key] = (fd, refs + 1)
            return lock
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            other = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DatabaseInUse(
                    f"another gpucap daemon (pid {other}) is running on {db} "
                    f"(it holds {lock}); a SQLite database serves one daemon: stop that one, "
                    "or use PostgreSQL to run several daemons for high availability"
                ) from exc
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        _held_files[key] = (fd, 1)
        return lock


def release_sqlite(lock: Path | None) -> None:
    if lock is None:
        return
    with _files_lock:
        fd, refs = _held_files.get(str(lock), (-1, 0))
        if refs > 1:
            _held_files[str(lock)] = (fd, refs - 1)
        elif refs == 1:
            del _held_files[str(lock)]
            os.close(fd)  # closing the descriptor releases the flock

"""Where the simulated cloud keeps its world: in memory (the default: tests and the
simulator's replays) or in a SQLite file that several processes share (``gpucap daemon
--demo --sim-state FILE``: restarts and several daemons see one cloud).

The world is a few tables of keyed values (:class:`Table`). :class:`providers.sim.cloud.
SimCloud` reads and writes them only inside :meth:`SimState.transaction`, so the cloud's
rules are written once and the two stores differ in nothing those rules see:

- :class:`MemoryState`: dicts under one re-entrant lock; a value read is the stored object
  itself, so the in-memory mode costs what it cost before this seam (the full-loop replay
  creates and describes instances millions of times). A table's indexes (``Table.indexes``)
  are kept by its dict as it is written, so :meth:`SimState.where` reads one bucket, not the
  table (a fleet of 50,000 instances is seeded in linear time).
- :class:`SqliteState`: one row per value (JSON) in a WAL-mode file with a busy timeout.
  The outermost transaction is ``BEGIN IMMEDIATE`` ... ``COMMIT``: it holds the file's
  write lock from its first read, so a find-or-create on an idempotency token in one
  process and the same in another serialize, and the second finds the first's instance
  (EC2's ClientToken). Within a transaction a value read once is the same object on every
  read (a cache the commit drops), which is what lets the cloud's code mutate an instance
  and ``put`` it back exactly as it does in memory.

A verb that refuses (a :class:`providers.errors.ProviderError`: a stockout, an injected
fault) still commits what it did before refusing, as the in-memory mode keeps it: an
injected fault is consumed when it is raised, whichever process raises it. Any other
exception rolls the transaction back.

An index is on fields a value never changes once stored (an instance's account, region,
type, zone, intent): the cloud's code mutates a stored value and puts it back, and tests
write the live dicts directly; neither moves a value between buckets.

Timestamps are the caller's clock (``SimCloud.clock``): every process on one file must read
the same clock (``providers.sim.cloud.open_shared`` uses wall time)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from providers.errors import ProviderError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _same(x: Any) -> Any:
    return x


@dataclass(frozen=True)
class Table(Generic[K, V]):
    """A named table of the world. ``encode``/``decode``: a value to and from JSON (used by
    the file store only). Keys are strings or tuples of strings."""

    name: str
    encode: Callable[[V], Any] = _same
    decode: Callable[[Any], V] = _same
    # (name, key of a value) pairs: ``SimState.where(table, name, key)`` is the values with
    # that key. A key reads only fields the value never changes once stored.
    indexes: tuple[tuple[str, Callable[[V], Hashable]], ...] = ()

    def index(self, name: str) -> Callable[[V], Hashable]:
        for n, fn in self.indexes:
            if n == name:
                return fn
        raise KeyError(f"table {self.name} has no index {name!r}")


class SimState(Protocol):
    def transaction(self) -> AbstractContextManager[Any]:
        """Re-entrant: nested calls join the outermost one."""
        ...

    def get(self, table: Table[K, V], key: K) -> V | None: ...

    def put(self, table: Table[K, V], key: K, value: V) -> None: ...

    def delete(self, table: Table[K, V], key: K) -> None: ...

    def values(self, table: Table[K, V]) -> list[V]: ...

    def where(self, table: Table[K, V], index: str, key: Hashable) -> list[V]:
        """The values whose ``index`` key is ``key``, in the order they were first stored."""
        ...

    def count(self, table: Table[K, V], index: str, key: Hashable) -> int:
        """``len(where(...))``."""
        ...

    def view(self, table: Table[K, V]) -> dict[K, V]:
        """The table as a dict: in memory the live one, from a file a copy (change the
        world through the cloud's verbs)."""
        ...

    def close(self) -> None: ...


_MISSING: Any = object()


class _IndexedDict(dict[Any, Any]):
    """A table's dict that keeps the table's indexes as it is written (through its own
    methods: the cloud's ``put``/``delete``, or a test writing the live dict). Per index,
    key -> {primary key: value}, in first-stored order."""

    def __init__(self, indexes: tuple[tuple[str, Callable[[Any], Hashable]], ...]) -> None:
        super().__init__()
        self._fns = dict(indexes)
        self._idx: dict[str, dict[Hashable, dict[Any, Any]]] = {n: {} for n in self._fns}

    def _add(self, k: Any, v: Any) -> None:
        for name, fn in self._fns.items():
            self._idx[name].setdefault(fn(v), {})[k] = v

    def _drop(self, k: Any, v: Any) -> None:
        for name, fn in self._fns.items():
            self._drop_one(name, fn(v), k)

    def __setitem__(self, k: Any, v: Any) -> None:
        old = dict.get(self, k, _MISSING)
        if old is _MISSING:
            self._add(k, v)
        else:
            for name, fn in self._fns.items():
                before, after = fn(old), fn(v)
                if before == after:
                    self._idx[name].setdefault(after, {})[k] = v  # (keeps its place)
                else:
                    self._drop_one(name, before, k)
                    self._idx[name].setdefault(after, {})[k] = v
        super().__setitem__(k, v)

    def _drop_one(self, name: str, ik: Hashable, k: Any) -> None:
        bucket = self._idx[name].get(ik)
        if bucket is not None:
            bucket.pop(k, None)
            if not bucket:
                del self._idx[name][ik]

    def __delitem__(self, k: Any) -> None:
        v = self[k]
        super().__delitem__(k)
        self._drop(k, v)

    def pop(self, k: Any, *default: Any) -> Any:
        if k in self:
            v = super().pop(k)
            self._drop(k, v)
            return v
        return super().pop(k, *default)

    def popitem(self) -> tuple[Any, Any]:
        k, v = super().popitem()
        self._drop(k, v)
        return k, v

    def clear(self) -> None:
        super().clear()
        for buckets in self._idx.values():
            buckets.clear()

    def setdefault(self, k: Any, default: Any = None) -> Any:
        if k not in self:
            self[k] = default
        return self[k]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def __ior__(self, other: Any) -> _IndexedDict:  # type: ignore[override,misc]
        self.update(other)
        return self

    def bucket(self, name: str, key: Hashable) -> dict[Any, Any]:
        return self._idx[name].get(key) or {}


class MemoryState:
    """The world in this process's memory. ``tables`` may pass dicts to use as tables (the
    cloud's ``capacity``, ``quota`` and ``zone_capacity`` fields, which callers set
    directly)."""

    def __init__(self, tables: dict[str, dict[Any, Any]] | None = None) -> None:
        self._lock = threading.RLock()
        self._tables: dict[str, dict[Any, Any]] = dict(tables or {})

    def transaction(self) -> threading.RLock:
        return self._lock

    def _table(self, table: Table[Any, Any]) -> dict[Any, Any]:
        try:
            return self._tables[table.name]
        except KeyError:
            fresh = _IndexedDict(table.indexes) if table.indexes else {}
            return self._tables.setdefault(table.name, fresh)

    def get(self, table: Table[K, V], key: K) -> V | None:
        return self._table(table).get(key)

    def put(self, table: Table[K, V], key: K, value: V) -> None:
        self._table(table)[key] = value

    def delete(self, table: Table[K, V], key: K) -> None:
        self._table(table).pop(key, None)

    def values(self, table: Table[K, V]) -> list[V]:
        return list(self._table(table).values())

    def _bucket(self, table: Table[K, V], index: str, key: Hashable) -> dict[K, V]:
        t = self._table(table)
        if isinstance(t, _IndexedDict):
            return t.bucket(index, key)
        fn = table.index(index)  # (a table passed in by the caller: no index kept)
        return {k: v for k, v in t.items() if fn(v) == key}

    def where(self, table: Table[K, V], index: str, key: Hashable) -> list[V]:
        return list(self._bucket(table, index, key).values())

    def count(self, table: Table[K, V], index: str, key: Hashable) -> int:
        return len(self._bucket(table, index, key))

    def view(self, table: Table[K, V]) -> dict[K, V]:
        return self._table(table)

    def close(self) -> None:
        pass


_SCHEMA = """CREATE TABLE IF NOT EXISTS sim_world (
    tbl TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (tbl, key)
) WITHOUT ROWID"""


def _key(key: Hashable) -> str:
    return json.dumps(key)


def _unkey(text: str) -> Any:
    key = json.loads(text)
    return tuple(key) if isinstance(key, list) else key


class SqliteState:
    """The world in a SQLite file. Thread-safe (one connection under a re-entrant lock:
    the daemon's jobs and its gRPC threads share it); process-safe through SQLite's own
    locking. ``busy_timeout_s``: how long a transaction waits for another process's."""

    def __init__(self, path: Path | str, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; ours are explicit BEGIN IMMEDIATE.
        self._conn = sqlite3.connect(
            self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")  # (WAL: durable at checkpoints)
        self._conn.execute(_SCHEMA)
        self._lock = threading.RLock()
        self._depth = 0
        # Values read or written in the open transaction, by table and encoded key (None:
        # known absent); ``_full``: tables read whole in it.
        self._cache: dict[str, dict[str, Any]] = {}
        self._full: set[str] = set()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except ProviderError:
                self._conn.execute("COMMIT")  # (a refusal keeps what it consumed)
                raise
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")
            finally:
                self._depth = 0
                self._cache.clear()
                self._full.clear()

    def get(self, table: Table[K, V], key: K) -> V | None:
        k = _key(key)
        with self.transaction():
            cache = self._cache.setdefault(table.name, {})
            if k in cache:
                return cache[k]  # type: ignore[no-any-return]
            value: V | None = None
            if table.name not in self._full:
                row = self._conn.execute(
                    "SELECT value FROM sim_world WHERE tbl = ? AND key = ?", (table.name, k)
                ).fetchone()
                if row is not None:
                    value = table.decode(json.loads(row[0]))
            cache[k] = value
            return value

    def put(self, table: Table[K, V], key: K, value: V) -> None:
        k = _key(key)
        with self.transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO sim_world (tbl, key, value) VALUES (?, ?, ?)",
                (table.name, k, json.dumps(table.encode(value))),
            )
            self._cache.setdefault(table.name, {})[k] = value

    def delete(self, table: Table[K, V], key: K) -> None:
        k = _key(key)
        with self.transaction():
            self._conn.execute("DELETE FROM sim_world WHERE tbl = ? AND key = ?", (table.name, k))
            self._cache.setdefault(table.name, {})[k] = None

    def _load(self, table: Table[K, V]) -> dict[str, Any]:
        cache = self._cache.setdefault(table.name, {})
        if table.name not in self._full:
            rows = self._conn.execute(
                "SELECT key, value FROM sim_world WHERE tbl = ?", (table.name,)
            ).fetchall()
            for k, text in rows:
                if k not in cache:  # (what this transaction wrote is newer)
                    cache[k] = table.decode(json.loads(text))
            self._full.add(table.name)
        return cache

    def values(self, table: Table[K, V]) -> list[V]:
        with self.transaction():
            return [v for v in self._load(table).values() if v is not None]

    def where(self, table: Table[K, V], index: str, key: Hashable) -> list[V]:
        fn = table.index(index)  # (no index kept in the file: a scan, as before indexes)
        return [v for v in self.values(table) if fn(v) == key]

    def count(self, table: Table[K, V], index: str, key: Hashable) -> int:
        return len(self.where(table, index, key))

    def view(self, table: Table[K, V]) -> dict[K, V]:
        with self.transaction():
            return {_unkey(k): v for k, v in self._load(table).items() if v is not None}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

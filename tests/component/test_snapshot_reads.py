"""The snapshot's reads that are kept between ticks (issue 26, fleet scale): the observed
times-to-ready are read again when a replica becomes ready, a node fails, or the oldest
launch ages out of the window, and equal a fresh read every tick; a model's stored spec is
read only when its row version changes. On SQLite and PostgreSQL (``store`` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, select

from controlplane.loop.snapshot import OBSERVED_FOR, SnapshotReader
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, Replica
from tests.component.test_decide_writes import _loop, _tick


def _fresh(store: Store, now: float) -> dict[int, list[tuple[str, float]]]:
    with store.session() as s:
        return SnapshotReader().read(s, now).observed


def _observed(reader: SnapshotReader, store: Store, now: float) -> Any:
    with store.session() as s:
        return reader.read(s, now).observed


def test_observed_times_follow_every_change_and_the_window(store: Store) -> None:
    loop, clock = _loop(store, {("demo", "llama-70b"): 40.0, ("demo", "chat-8b"): 5.0})
    for _ in range(40):
        _tick(loop, clock)
    reader = SnapshotReader()
    first = _observed(reader, store, clock.t)
    assert first and first == _fresh(store, clock.t)  # launches observed, as a fresh read

    # A replica ready later than any before: its launch is counted on the next read.
    with store.session() as s:
        r = s.scalars(select(Replica).where(Replica.ready_at.is_not(None))).first()
        assert r is not None
        r.ready_at = datetime.fromtimestamp(clock.t + 5, UTC)
        model_id = r.model_id
    later = _observed(reader, store, clock.t + 10)
    assert later == _fresh(store, clock.t + 10) and later != first
    assert max(t for _, t in later[model_id]) > max(t for _, t in first[model_id])

    # A node of a replica never ready fails: that launch counts from its failure.
    with store.session() as s:
        pending = s.scalars(select(Replica).where(Replica.ready_at.is_(None))).first()
        if pending is not None:
            node = s.scalars(select(Node).where(Node.replica_id == pending.id)).first()
            assert node is not None
            node.failed_at = datetime.fromtimestamp(clock.t + 20, UTC)
    assert _observed(reader, store, clock.t + 30) == _fresh(store, clock.t + 30)

    # A week on, every launch has aged out; nothing changed in the store since.
    aged = clock.t + OBSERVED_FOR.total_seconds() + 3600
    assert _observed(reader, store, aged) == _fresh(store, aged) == {}


def test_a_stored_spec_is_read_only_when_its_row_changes(store: Store) -> None:
    loop, clock = _loop(store, {("demo", "chat-8b"): 5.0})
    _tick(loop, clock)
    reader = SnapshotReader()
    spec_reads: list[str] = []

    def seen(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if statement.startswith("SELECT models.id, models.version, models.spec"):
            spec_reads.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        with store.session() as s:
            reader.read(s, clock.t)
        assert len(spec_reads) == 1  # first read: every spec
        with store.session() as s:
            reader.read(s, clock.t + 1)
        assert len(spec_reads) == 1  # unchanged rows: none
        with store.session() as s:
            row = s.scalars(select(ModelRow).where(ModelRow.name == "chat-8b")).one()
            row.spec = {**row.spec, "max_replicas": row.spec.get("max_replicas", 10) + 1}
            want = row.spec["max_replicas"]
        with store.session() as s:
            snap = reader.read(s, clock.t + 2)
        assert len(spec_reads) == 2 and "IN" in spec_reads[1]  # the changed row's alone
        chat = next(m for m in snap.models if m.name == "chat-8b")
        assert chat.spec.max_replicas == want
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)


def test_replicas_are_read_again_after_any_replica_or_node_write(store: Store) -> None:
    loop, clock = _loop(store, {("demo", "llama-70b"): 40.0, ("demo", "chat-8b"): 5.0})
    for _ in range(30):
        _tick(loop, clock)
    reader = SnapshotReader()
    reads: list[str] = []

    def seen(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if statement.startswith("SELECT replicas.id, replicas.model_id"):
            reads.append(statement)

    def replicas(now: float) -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
        with store.session() as s:
            snap = reader.read(s, now)
        with store.session() as s:  # what a reader with nothing kept sees
            fresh = SnapshotReader().read(s, now)
        assert snap.replicas == fresh.replicas
        return {r.id: (r.state, r.nodes) for rs in snap.replicas.values() for r in rs}

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        before = replicas(clock.t)
        kept = len(reads)
        assert replicas(clock.t + 1) == before and len(reads) == kept + 1  # (the fresh one)
        with store.session() as s:  # a node's state moves
            node = s.scalars(select(Node).where(Node.state == "ready")).first()
            assert node is not None
            node.state = "draining"
            moved = (node.replica_id, node.id)
        after = replicas(clock.t + 2)
        assert dict(after[moved[0]][1])[moved[1]] == "draining"
        with store.session() as s:  # a replica's
            r = s.get(Replica, moved[0])
            assert r is not None
            r.state = "draining"
        assert replicas(clock.t + 3)[moved[0]][0] == "draining"
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)

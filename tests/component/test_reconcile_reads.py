"""The reconcile job's reads kept between passes (issue 26, fleet scale): the live nodes are
read again only when a node, a replica or a ready report was written since, or a pool's
reservation changed; the replicas are settled again only after a node or replica write.
What a pass sees always equals a fresh read. On SQLite and PostgreSQL (``store`` fixture)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, select

from controlplane.loop.reconcile import Reconciler, _load
from controlplane.store.db import Store
from controlplane.store.models import Node, NodePhaseReport, Pool
from tests.component.test_decide_writes import _loop, _tick

LIVE_NODES = "SELECT nodes.id, nodes.version, nodes.state"
SETTLE = "SELECT replicas.id, replicas.state, nodes.state"


def test_passes_read_nodes_again_only_after_a_write(store: Store) -> None:
    loop, clock = _loop(store, {("demo", "llama-70b"): 40.0, ("demo", "chat-8b"): 5.0})
    for _ in range(30):
        _tick(loop, clock)
    job = Reconciler()
    reads: list[str] = []

    def seen(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if statement.startswith((LIVE_NODES, SETTLE)):
            reads.append(statement[:20])

    def kept() -> list[Any]:
        nodes, _ = job._load(loop.ctx)
        with store.session() as s:
            assert nodes == _load(s)  # as a fresh read
        return nodes

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        job.run(loop.ctx)
        job.run(loop.ctx)  # (settles once more after the first pass's writes, if any)
        reads.clear()
        job.run(loop.ctx)
        assert reads == []  # nothing written since: no node read, no settle
        kept()
        reads.clear()

        with store.session() as s:  # a ready report arrives
            node = s.scalars(select(Node).where(Node.state == "ready")).first()
            assert node is not None
            at = datetime.fromtimestamp(clock.t, UTC)
            s.add(NodePhaseReport(node_id=node.id, phase="ready", at=at, reported_at=at))
        assert len(kept()) > 0 and reads.count(LIVE_NODES[:20]) == 2  # (kept + fresh)
        reads.clear()

        with store.session() as s:  # a pool's reservation changes
            pool = s.get(Pool, node.pool_id)
            assert pool is not None
            pool.reservation = "cr-0123456789abcdef0"
        nodes = kept()
        assert {n.reservation for n in nodes if n.pool_id == node.pool_id} == {
            "cr-0123456789abcdef0"
        }
        reads.clear()

        with store.session() as s:  # a node's state moves: read again, settled again
            row = s.get(Node, node.id)
            assert row is not None
            row.state = "draining"
        job.run(loop.ctx)
        assert SETTLE[:20] in reads and LIVE_NODES[:20] in reads
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)

"""Read queries over the fleet's spec and state: models, nodes and pools."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from controlplane.api.errors import InvalidArgumentError, NotFoundError, require
from controlplane.api.paging import matching
from controlplane.api.rows import find_model, model_view, pool_views, replica_counts
from controlplane.api.views import BootPhaseView, ModelView, NodeView, PoolView
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, NodePhaseReport, Pool, Replica
from schema.types import TERMINAL_NODE_STATES, NodeState


class Reads:
    def __init__(self, store: Store) -> None:
        self._store = store

    def get_model(self, customer: str, name: str) -> ModelView:
        require("customer", customer)
        require("name", name)
        with self._store.session() as s:
            row = find_model(s, customer, name)
            if row is None:
                raise NotFoundError("model", f"{customer}/{name}")
            return model_view(s, row)

    def list_models(
        self, customer: str | None = None, *, include_deleted: bool = False
    ) -> list[ModelView]:
        with self._store.session() as s:
            q = select(ModelRow).order_by(ModelRow.customer, ModelRow.name)
            if customer:
                q = q.where(ModelRow.customer == customer)
            if not include_deleted:
                q = q.where(ModelRow.deleted_at.is_(None))
            rows = list(s.scalars(q))
            counts = replica_counts(s, [r.id for r in rows])
            return [ModelView(r, counts.get(r.id, {})) for r in rows]

    def list_nodes(
        self,
        customer: str | None = None,
        model: str | None = None,
        states: Iterable[str] = (),
        pool_id: str | None = None,
        *,
        include_terminal: bool = False,
    ) -> list[NodeView]:
        wanted = list(states)
        known = {s.value for s in NodeState}
        for i, st in enumerate(wanted):
            if st not in known:
                raise InvalidArgumentError(
                    f"states[{i}]", f"unknown node state {st!r} (one of: {', '.join(known)})"
                )
        with self._store.session() as s:
            q = (
                select(Node, ModelRow.name, Replica.retiring_at)
                .join(Replica, Node.replica_id == Replica.id, isouter=True)
                .join(ModelRow, Replica.model_id == ModelRow.id, isouter=True)
                .order_by(Node.customer, Node.pending_at, Node.id)
            )
            q = matching(
                q, (Node.customer, customer), (ModelRow.name, model), (Node.pool_id, pool_id)
            )
            if wanted:
                q = q.where(Node.state.in_(wanted))
            elif not include_terminal:
                q = q.where(Node.state.not_in([st.value for st in TERMINAL_NODE_STATES]))
            rows = s.execute(q).all()
            phases = _phases(s, [node.id for node, _, _ in rows])
            return [
                NodeView(node, name or "", phases.get(node.id, ()), retiring)
                for node, name, retiring in rows
            ]

    def list_pools(
        self,
        customer: str | None = None,
        cloud: str | None = None,
        *,
        include_inactive: bool = False,
    ) -> list[PoolView]:
        with self._store.session() as s:
            q = select(Pool).order_by(Pool.customer, Pool.tier, Pool.price_usd_per_hour, Pool.id)
            q = matching(q, (Pool.customer, customer), (Pool.cloud, cloud))
            if not include_inactive:
                q = q.where(Pool.active.is_(True))
            return pool_views(s, list(s.scalars(q)))


# Bound on the ids of one IN list (SQLite allows 32,766 parameters; PostgreSQL 65,535).
_IN_CHUNK = 5000


def _phases(s: Session, node_ids: list[str]) -> dict[str, tuple[BootPhaseView, ...]]:
    """Each node's reported boot phases, in the order they happened."""
    out: dict[str, list[BootPhaseView]] = defaultdict(list)
    for i in range(0, len(node_ids), _IN_CHUNK):
        q = (
            select(NodePhaseReport)
            .where(NodePhaseReport.node_id.in_(node_ids[i : i + _IN_CHUNK]))
            .order_by(NodePhaseReport.node_id, NodePhaseReport.at, NodePhaseReport.id)
        )
        for r in s.scalars(q):
            out[r.node_id].append(BootPhaseView(r.phase, r.at, r.detail))
    return {k: tuple(v) for k, v in out.items()}

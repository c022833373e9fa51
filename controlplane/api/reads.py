"""Read queries over the fleet's spec and state: models, nodes and pools."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, func, select, tuple_
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from controlplane.api.errors import InvalidArgumentError, NotFoundError, require
from controlplane.api.paging import Page, keyset, matching, page_request, take
from controlplane.api.rows import find_model, model_view, pool_views, replica_counts
from controlplane.api.views import BootPhaseView, ModelRecord, ModelView, NodeView, PoolView
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, NodePhaseReport, Pool, Replica
from schema.types import TERMINAL_NODE_STATES, NodeState

# What a page reads of each model row: its key, version, and what may change without the
# version moving (a bulk UPDATE). The rest (spec, timestamps) is read once per version.
_MODEL_COLUMNS = (
    ModelRow.id,
    ModelRow.version,
    ModelRow.customer,
    ModelRow.name,
    ModelRow.source,
    ModelRow.desired_replicas,
    ModelRow.desired_reason,
    ModelRow.pinned_replicas,
    ModelRow.paused,
)
_VERSIONED = (ModelRow.spec, ModelRow.created_at, ModelRow.updated_at, ModelRow.deleted_at)


class RowCache:
    """A model row's versioned fields (spec, timestamps) by (model id, row version): they
    change only with a write through the ORM, which moves the version, so a page reads
    them for the rows it has not seen at that version, in one statement (a spec is a row's
    largest column but the decider's state, which no page reads). Bounded: the oldest half
    is dropped when full."""

    def __init__(self, most: int = 50_000) -> None:
        self._most = most
        self._rows: dict[int, tuple[int, tuple[Any, ...]]] = {}

    def get(self, s: Connection, keys: list[tuple[int, int]]) -> dict[int, tuple[Any, ...]]:
        out: dict[int, tuple[Any, ...]] = {}
        missing = []
        for mid, version in keys:
            hit = self._rows.get(mid)
            if hit is not None and hit[0] == version:
                out[mid] = hit[1]
            else:
                missing.append(mid)
        if missing:
            if len(self._rows) + len(missing) > self._most:
                for mid in list(self._rows)[: len(self._rows) // 2]:
                    self._rows.pop(mid, None)
            q = select(ModelRow.id, ModelRow.version, *_VERSIONED).where(ModelRow.id.in_(missing))
            for mid, version, *rest in s.execute(q):
                self._rows[mid] = (version, tuple(rest))
                out[mid] = tuple(rest)
        return out


@functools.cache
def _models_statement(by_customer: bool, include_deleted: bool, after: bool) -> Select[Any]:
    """A models page's one statement (built once per shape; the values are parameters):
    the page's columns, keyset-ordered by (customer, name), each row joined to its live
    replicas' count per state (one row per state; one with state NULL for a model without
    replicas). Each page row joins its replicas by the model_id index: a nested loop
    over the page whatever the planner thinks of the tables' sizes (PostgreSQL, on
    estimates of one row, rescanned an aggregate of the page's replicas once per row)."""
    q = select(*_MODEL_COLUMNS)
    if by_customer:
        q = q.where(ModelRow.customer == bindparam("customer"))
    if not include_deleted:
        q = q.where(ModelRow.deleted_at.is_(None))
    if after:
        q = q.where(
            tuple_(ModelRow.customer, ModelRow.name)
            > tuple_(bindparam("after_customer"), bindparam("after_name"))
        )
    page = q.order_by(ModelRow.customer, ModelRow.name).limit(bindparam("limit")).subquery("page")
    live = and_(
        Replica.model_id == page.c.id,
        # (inequalities, not NOT IN: an IN list is expanded again on every execution)
        *(Replica.state != st.value for st in TERMINAL_NODE_STATES),
    )
    return (
        select(page, Replica.state, func.count(Replica.id))
        .select_from(page.outerjoin(Replica, live))
        .group_by(*page.c, Replica.state)
        # (a model's states in order: the same counts read twice make the same item)
        .order_by(page.c.customer, page.c.name, Replica.state)
    )


# One model of a page as read: its rows of the page's statement (its columns, then one
# (state, count) per state its live replicas are in, ordered by state) and its versioned
# fields (spec, timestamps). Equal items make equal views: the gRPC server keys each
# model's message by its item (plain tuples: a page builds a hundred of them per call).
ModelItem = tuple[tuple[tuple[Any, ...], ...], tuple[Any, ...]]


def model_item_view(item: ModelItem) -> ModelView:
    rows, versioned = item
    mid, version, customer, name, source, desired, reason, pinned, paused = rows[0][:-2]
    spec, created_at, updated_at, deleted_at = versioned
    record = ModelRecord(
        mid,
        version,
        customer,
        name,
        source,
        desired,
        reason,
        pinned,
        paused,
        created_at,
        updated_at,
        deleted_at,
        spec,
    )
    return ModelView(record, {r[-2]: r[-1] for r in rows if r[-2] is not None})


class Reads:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._rows = RowCache()

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

    def models_page(
        self,
        customer: str | None = None,
        *,
        include_deleted: bool = False,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[ModelView]:
        """One page of :meth:`list_models`, keyed by (customer, name)."""
        page = self.model_items_page(
            customer, include_deleted=include_deleted, page_size=page_size, page_token=page_token
        )
        return Page([model_item_view(i) for i in page.items], page.next_page_token)

    def model_items_page(
        self,
        customer: str | None = None,
        *,
        include_deleted: bool = False,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[ModelItem]:
        """:meth:`models_page` as read (:data:`ModelItem`, :func:`model_item_view`): the
        page's columns and its replica counts in one statement, each spec read and parsed
        once per row version (the decider's state, a row's largest column, is never read)."""
        req = page_request(
            page_size,
            page_token,
            {"list": "models", "customer": customer or "", "include_deleted": include_deleted},
        )
        stmt = _models_statement(bool(customer), include_deleted, req.after is not None)
        params: dict[str, Any] = {"customer": customer, "limit": req.size + 1}
        if req.after is not None:
            if not (len(req.after) == 2 and all(isinstance(v, str) for v in req.after)):
                raise InvalidArgumentError("page_token", "not a page token of this list")
            params["after_customer"], params["after_name"] = req.after
        groups: list[list[tuple[Any, ...]]] = []
        # A connection, not an ORM session: plain tuples, and no flush or fence to check.
        with self._store.engine.connect() as conn:
            last: int | None = None
            for r in conn.execute(stmt, params).all():
                if r[0] != last:
                    last = r[0]
                    groups.append([tuple(r)])
                else:  # (the model's replicas in another state)
                    groups[-1].append(tuple(r))
            page = take(groups, req, lambda g: (g[0][2], g[0][3]))
            versioned = self._rows.get(conn, [(g[0][0], g[0][1]) for g in page.items])
        return Page([(tuple(g), versioned[g[0][0]]) for g in page.items], page.next_page_token)

    def list_nodes(
        self,
        customer: str | None = None,
        model: str | None = None,
        states: Iterable[str] = (),
        pool_id: str | None = None,
        *,
        include_terminal: bool = False,
    ) -> list[NodeView]:
        q = _nodes_query(customer, model, states, pool_id, include_terminal)
        with self._store.session() as s:
            q = q.order_by(Node.customer, Node.pending_at, Node.id)
            return _node_views(s, s.execute(q).all())

    def nodes_page(
        self,
        customer: str | None = None,
        model: str | None = None,
        states: Iterable[str] = (),
        pool_id: str | None = None,
        *,
        include_terminal: bool = False,
        page_size: int = 0,
        page_token: str = "",
        node_id: str | None = None,
    ) -> Page[NodeView]:
        """One page of :meth:`list_nodes`, keyset on (customer, pending_at, id)."""
        wanted = list(states)
        filters = {
            "list": "nodes",
            "customer": customer or "",
            "model": model or "",
            "states": wanted,
            "pool_id": pool_id or "",
            "include_terminal": include_terminal,
        }
        if node_id:  # (only when set: a token issued before the filter existed stays good)
            filters["node_id"] = node_id
        req = page_request(page_size, page_token, filters)
        q = _nodes_query(customer, model, wanted, pool_id, include_terminal, node_id)
        with self._store.session() as s:
            rows = s.execute(keyset(q, req, Node.customer, Node.pending_at, Node.id)).all()
            page = take(rows, req, lambda r: (r[0].customer, r[0].pending_at, r[0].id))
            return Page(_node_views(s, page.items), page.next_page_token)

    def list_pools(
        self,
        customer: str | None = None,
        cloud: str | None = None,
        *,
        include_inactive: bool = False,
    ) -> list[PoolView]:
        with self._store.session() as s:
            q = _pools_query(customer, cloud, include_inactive).order_by(*_POOL_ORDER)
            return pool_views(s, list(s.scalars(q)))

    def pools_page(
        self,
        customer: str | None = None,
        cloud: str | None = None,
        *,
        include_inactive: bool = False,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[PoolView]:
        """One page of :meth:`list_pools`, keyset on (customer, tier, price, id)."""
        filters = {
            "list": "pools",
            "customer": customer or "",
            "cloud": cloud or "",
            "include_inactive": include_inactive,
        }
        req = page_request(page_size, page_token, filters)
        with self._store.session() as s:
            q = keyset(_pools_query(customer, cloud, include_inactive), req, *_POOL_ORDER)
            page = take(
                list(s.scalars(q)),
                req,
                lambda p: (p.customer, p.tier, p.price_usd_per_hour, p.id),
            )
            return Page(pool_views(s, page.items), page.next_page_token)


_POOL_ORDER = (Pool.customer, Pool.tier, Pool.price_usd_per_hour, Pool.id)


def _pools_query(customer: str | None, cloud: str | None, include_inactive: bool) -> Select[Pool]:
    q = matching(select(Pool), (Pool.customer, customer), (Pool.cloud, cloud))
    if not include_inactive:
        q = q.where(Pool.active.is_(True))
    return q


def _nodes_query(
    customer: str | None,
    model: str | None,
    states: Iterable[str],
    pool_id: str | None,
    include_terminal: bool,
    node_id: str | None = None,
) -> Select[Node, str, datetime | None]:
    wanted = list(states)
    known = {s.value for s in NodeState}
    for i, st in enumerate(wanted):
        if st not in known:
            raise InvalidArgumentError(
                f"states[{i}]", f"unknown node state {st!r} (one of: {', '.join(known)})"
            )
    q = (
        select(Node, ModelRow.name, Replica.retiring_at)
        .join(Replica, Node.replica_id == Replica.id, isouter=True)
        .join(ModelRow, Replica.model_id == ModelRow.id, isouter=True)
    )
    q = matching(
        q,
        (Node.customer, customer),
        (ModelRow.name, model),
        (Node.pool_id, pool_id),
        (Node.id, node_id),
    )
    if wanted:
        q = q.where(Node.state.in_(wanted))
    elif not include_terminal:
        q = q.where(Node.state.not_in([st.value for st in TERMINAL_NODE_STATES]))
    return q


def _node_views(s: Session, rows: Sequence[Any]) -> list[NodeView]:
    phases = _phases(s, [node.id for node, _, _ in rows])
    return [
        NodeView(node, name or "", phases.get(node.id, ()), retiring)
        for node, name, retiring in rows
    ]


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

"""The store's edge of usage metering (``controlplane.usage``): the node rows that may bill
within a range, read as :class:`~controlplane.usage.NodeUse` values, and the one write
that keeps a node's billing history whole (its earlier stops, before its row's stamps are
overwritten by the next one).

Usage is derived from these rows, never counted as it happens in a process: a restarted
daemon or a new leader reads the same history, so nothing is counted twice or lost. No job
deletes node rows (gc releases instances and placement groups, and marks rows; it never
deletes them), so the history is complete; a retention job that deleted them would have
to keep their usage first.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from sqlalchemy import ColumnElement, and_, case, func, or_, select
from sqlalchemy.orm import Session

from controlplane.store.models import Model, Node, NodeStop, Pool, Replica
from controlplane.usage import NodeUse, closed_stop, micros, row_stops
from schema.catalog import INSTANCE_TYPES_BY_NAME, parse_gpu_shape
from schema.types import TERMINAL_NODE_STATES

_TERMINAL = tuple(sorted(TERMINAL_NODE_STATES))
# Stamps a released node's row may carry: a terminal row without a release stamp (written
# by hand, or by an older version) is taken as released at the latest of them.
_STAMPS = (
    "pending_at",
    "provisioning_at",
    "running_at",
    "ready_at",
    "draining_at",
    "stopping_at",
    "stopped_at",
    "resuming_at",
    "terminating_at",
)


def _released() -> ColumnElement[datetime | None]:
    """When a node was released: terminated, else failed for good (a failed node still
    draining or terminating holds its instance until it is terminated)."""
    return case(
        (Node.terminated_at.is_not(None), Node.terminated_at),
        (Node.state.in_(_TERMINAL), Node.failed_at),
        else_=None,
    )


def _billing_within(customer: str | None, since: datetime, until: datetime) -> ColumnElement[bool]:
    """Nodes that may bill within [since, until): an instance was made, requested before
    ``until``, not released before ``since``."""
    cond = and_(
        Node.instance_id.is_not(None),
        Node.pending_at < until,
        or_(_released().is_(None), _released() > since),
    )
    return and_(cond, Node.customer == customer) if customer is not None else cond


def node_uses(
    s: Session, since: datetime, until: datetime, customer: str | None = None
) -> list[NodeUse]:
    """Every node that may bill within [since, until), of ``customer`` (None: all), with
    its model, GPUs, price and tier as of launch and the stops its rows record."""
    return _uses(s, _billing_within(customer, since, until))


def released_uses(s: Session, after: datetime, before: datetime) -> list[NodeUse]:
    """The nodes with an instance released within [after, before): their usage is final."""
    return _uses(s, and_(Node.instance_id.is_not(None), _released() >= after, _released() < before))


def unreleased_uses(s: Session, before: datetime) -> list[NodeUse]:
    """The nodes with an instance not released before ``before`` (held still, or released
    since): the complement of :func:`released_uses` up to ``before``."""
    return _uses(
        s,
        and_(Node.instance_id.is_not(None), or_(_released().is_(None), _released() >= before)),
    )


def _uses(s: Session, where: ColumnElement[bool]) -> list[NodeUse]:
    kept: dict[str, list[tuple[int, int | None]]] = defaultdict(list)
    for node_id, stopped, resumed in s.execute(
        select(NodeStop.node_id, NodeStop.stopped_at, NodeStop.resumed_at)
        .join(Node, NodeStop.node_id == Node.id)
        .where(where)
    ):
        kept[node_id].append((micros(stopped), micros(resumed)))
    rows = s.execute(
        select(
            Node.id,
            Node.customer,
            Model.name,
            func.coalesce(Node.tier, Pool.tier),
            Node.cloud,
            Node.instance_type,
            Pool.gpu_shape,
            func.coalesce(Node.price_usd_per_hour, Pool.price_usd_per_hour),
            Node.state,
            Node.pending_at,
            Node.terminated_at,
            Node.failed_at,
            Node.stopped_at,
            Node.resuming_at,
        )
        .join(Replica, Node.replica_id == Replica.id)
        .join(Model, Replica.model_id == Model.id)
        .join(Pool, Node.pool_id == Pool.id)
        .where(where)
        .order_by(Node.id)
    )
    out = []
    gpus: dict[tuple[str, str], int] = {}
    for (
        node_id,
        customer_,
        model,
        tier,
        cloud,
        instance_type,
        gpu_shape,
        price,
        state,
        pending,
        terminated,
        failed,
        stopped,
        resuming,
    ) in rows:
        released = terminated
        if released is None and state in TERMINAL_NODE_STATES:
            released = failed or _last_stamp(s, node_id)
        shape = (instance_type, gpu_shape)
        if shape not in gpus:
            gpus[shape] = _gpus(instance_type, gpu_shape)
        out.append(
            NodeUse(
                node_id=node_id,
                customer=customer_,
                model=model,
                tier=tier,
                cloud=cloud,
                gpus=gpus[shape],
                usd_per_hour=float(price),
                requested=micros(pending),
                released=_us(released),
                stops=(*kept.get(node_id, ()), *row_stops(_us(stopped), _us(resuming))),
            )
        )
    return out


def keep_stop(s: Session, row: Node) -> None:
    """Called before ``row``'s ``stopped_at`` is written again (it stops once more): the
    stop its stamps show as over is kept in ``node_stops``, in the same transaction."""
    if closed_stop(_us(row.stopped_at), _us(row.resuming_at)) is None:
        return
    assert row.stopped_at is not None and row.resuming_at is not None
    s.add(NodeStop(node_id=row.id, stopped_at=row.stopped_at, resumed_at=row.resuming_at))


def _us(at: datetime | None) -> int | None:
    return None if at is None else micros(at)


def _last_stamp(s: Session, node_id: str) -> datetime | None:
    n = s.get(Node, node_id)
    return None if n is None else max(t for t in (getattr(n, a) for a in _STAMPS) if t)


def _gpus(instance_type: str, gpu_shape: str) -> int:
    known = INSTANCE_TYPES_BY_NAME.get(instance_type)
    return known.gpus if known is not None else parse_gpu_shape(gpu_shape).gpus

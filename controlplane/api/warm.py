"""Models' warm pools (the place job keeps them, ``controlplane/loop/warm.py``): per model and
pool, the replicas waiting to be resumed instead of created, those still filling or
stopping, and those a launch just took (resuming), with what the waiting ones cost. The
cost is the place job's gauge figure (``lifecycle.warm.usd_per_hour``), computed here from
the store rather than read from the gauges, which only the daemon's process holds.
Read-only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from controlplane.api.errors import NotFoundError
from controlplane.api.paging import Page, PageRequest, keyset, page_request, take
from controlplane.lifecycle.warm import usd_per_hour
from controlplane.store.db import Store
from controlplane.store.models import Customer, Pool, Replica
from controlplane.store.models import Model as ModelRow
from schema.policy import BLOCK_USD_PER_GB_MONTH, WarmMode, WarmPool
from schema.types import TERMINAL_NODE_STATES, Cloud, NodeState

# What a warm replica is doing, as on-call reads it (``WarmReplicaView.state``).
FILLING = "filling"  # booting to be parked
STOPPING = "stopping"
STOPPED = "stopped"
RESUMING = "resuming"  # taken by a launch: no longer the warm pool's, starting
READY = "ready"  # ready mode: running with its engine loaded, idle

# Released warm replicas drain like any other and are no longer the pool's (the gauges
# skip them too); terminal ones are gone.
_GONE = (NodeState.DRAINING.value, *(s.value for s in TERMINAL_NODE_STATES))


@dataclass(frozen=True)
class WarmReplicaView:
    id: str
    state: str  # FILLING | STOPPING | STOPPED | RESUMING | READY
    replica_state: str
    nodes: int
    since: datetime | None
    usd_per_hour: float  # 0 once resuming: the model's capacity, no longer waiting


@dataclass(frozen=True)
class WarmPoolView:
    """One model's warm replicas in one pool (``pool`` None: the policy asks for a warm pool
    and none has been filled yet). ``policy`` None: the model's policy no longer has one
    (what is left is being let go)."""

    customer: str
    model: str
    policy: WarmPool | None
    pool: Pool | None
    replicas: tuple[WarmReplicaView, ...]
    node_usd_per_hour: float
    block_usd_per_gb_month: float

    @property
    def nodes(self) -> int:
        """Nodes in the warm pool (a resuming replica's are the model's already)."""
        return sum(r.nodes for r in self.replicas if r.state != RESUMING)

    @property
    def usd_per_hour(self) -> float:
        return sum(r.usd_per_hour for r in self.replicas)


@dataclass(frozen=True)
class WarmPoolsView:
    pools: tuple[WarmPoolView, ...]

    @property
    def nodes(self) -> int:
        return sum(p.nodes for p in self.pools)

    @property
    def usd_per_hour(self) -> float:
        return sum(p.usd_per_hour for p in self.pools)


class WarmPools:
    def __init__(self, store: Store) -> None:
        self._store = store

    def list(self, customer: str | None = None, model: str | None = None) -> WarmPoolsView:
        """Every live model's warm pools (of ``customer``, named ``model``); an unknown
        customer, or a model no live model of theirs is called, is NOT_FOUND."""
        with self._store.session() as s:
            return WarmPoolsView(tuple(_views(s, _models(s, customer, model))))

    def page(
        self,
        customer: str | None = None,
        model: str | None = None,
        *,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[WarmPoolView]:
        """One page of :meth:`list`: the warm pools of a page of models, keyset on
        (customer, name); a page's models may have no warm pool, so a page may be short."""
        req = page_request(
            page_size, page_token, {"list": "warm", "customer": customer or "", "model": model}
        )
        with self._store.session() as s:
            models = _models(s, customer, model, req)
            page = take(models, req, lambda m: (m.customer, m.name))
            return Page(_views(s, page.items), page.next_page_token)


def _views(s: Session, models: Sequence[ModelRow]) -> list[WarmPoolView]:
    replicas = _replicas(s, [m.id for m in models])
    pool_ids = {r.pool_id for r in replicas}
    pools = {p.id: p for p in s.scalars(select(Pool).where(Pool.id.in_(pool_ids)))}
    out = []
    for m in models:
        wp = _policy(m)
        mine = [r for r in replicas if r.model_id == m.id]
        if wp is None and not mine:
            continue
        if not mine:
            out.append(WarmPoolView(m.customer, m.name, wp, None, (), 0.0, 0.0))
        for pool_id in sorted({r.pool_id for r in mine}):
            here = [r for r in mine if r.pool_id == pool_id]
            out.append(_pool_view(m, wp, pools[pool_id], here))
    return out


def _models(
    s: Session, customer: str | None, model: str | None, req: PageRequest | None = None
) -> list[ModelRow]:
    if customer and s.get(Customer, customer) is None:
        raise NotFoundError("customer", customer)
    q = select(ModelRow).where(ModelRow.deleted_at.is_(None))
    if customer:
        q = q.where(ModelRow.customer == customer)
    if model:
        q = q.where(ModelRow.name == model)
    if req is not None:
        rows = list(s.scalars(keyset(q, req, ModelRow.customer, ModelRow.name)))
    else:
        rows = list(s.scalars(q.order_by(ModelRow.customer, ModelRow.name)))
    if model and not rows and (req is None or req.after is None):
        raise NotFoundError("model", f"{customer}/{model}" if customer else model)
    return rows


def _replicas(s: Session, model_ids: list[int]) -> list[Replica]:
    """The models' warm replicas, and the ones a launch took that are still starting."""
    if not model_ids:
        return []
    resuming = and_(Replica.state == NodeState.RESUMING.value, Replica.resumed_at.is_not(None))
    q = (
        select(Replica)
        .where(Replica.model_id.in_(model_ids), Replica.state.not_in(_GONE))
        .where(or_(Replica.warm.is_(True), resuming))
        .order_by(Replica.created_at, Replica.id)
    )
    return list(s.scalars(q))


def _policy(m: ModelRow) -> WarmPool | None:
    raw = (m.spec or {}).get("warm_pool")
    return WarmPool.model_validate(raw) if raw is not None else None


def _pool_view(
    m: ModelRow, wp: WarmPool | None, pool: Pool, replicas: Sequence[Replica]
) -> WarmPoolView:
    mode = wp.mode if wp is not None else WarmMode.STOPPED
    # As the place job's gauge prices them (``loop.warm._gauges``): a policy that no
    # longer has a warm pool leaves no disk size to price, so the least one.
    pricing = WarmPool(max_nodes=1000, mode=mode, disk_gb=wp.disk_gb if wp else 1)
    block = BLOCK_USD_PER_GB_MONTH[Cloud(pool.cloud)]
    views = []
    for r in replicas:
        state = _state(r, mode)
        nodes = len(r.nodes)
        cost = (
            0.0
            if state == RESUMING
            else usd_per_hour(
                pricing, nodes, pool.price_usd_per_hour, block, running=state != STOPPED
            )
        )
        views.append(WarmReplicaView(r.id, state, r.state, nodes, _since(r, state), cost))
    return WarmPoolView(m.customer, m.name, wp, pool, tuple(views), pool.price_usd_per_hour, block)


def _state(r: Replica, mode: WarmMode) -> str:
    if r.state == NodeState.STOPPED.value:
        return STOPPED
    if r.state == NodeState.STOPPING.value:
        return STOPPING
    if r.state == NodeState.RESUMING.value:
        return RESUMING
    if r.state == NodeState.READY.value and mode == WarmMode.READY:
        return READY
    return FILLING  # (ready in stopped mode: booted, its stop not asked yet)


def _since(r: Replica, state: str) -> datetime | None:
    """When the replica entered ``state``: for a gang, once its last node did (its first,
    for stopping: the stop began then)."""
    if state == STOPPED:
        return max((n.stopped_at for n in r.nodes if n.stopped_at), default=None)
    if state == STOPPING:
        return min((n.stopping_at for n in r.nodes if n.stopping_at), default=None)
    if state == RESUMING:
        return r.resumed_at
    if state == READY:
        return r.ready_at
    return r.created_at

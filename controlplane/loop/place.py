"""The place job: for every customer, one plan over all its models (``placement.plan``) on
the tick's snapshot, then the plan is applied: intent rows (replica + node rows with their
idempotency tokens) for every launch, drains for every replica leaving, and a placement
record whenever what a model's plan says changes."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime

from sqlalchemy.orm import Session

from coldstart import Learned
from controlplane.lifecycle.surge import Retiring, surge_drains
from controlplane.loop.coldstart import pool_estimate, weights_gb
from controlplane.loop.context import LoopContext
from controlplane.loop.snapshot import ModelFacts, PoolFacts, Snapshot, SnapshotReader
from controlplane.loop.views import pool_view, replica_view
from controlplane.loop.warm import keep_warm, waiting_pools
from controlplane.placement import (
    CustomerInput,
    Launch,
    ModelDemand,
    ModelView,
    Plan,
    capacity_units,
    live_units,
    plan,
)
from controlplane.placement.plan import UNIT_EPS
from controlplane.store.events import record_event
from controlplane.store.models import DecisionRecord, Node, Replica
from controlplane.store.transitions import drain_replica, retire_replica
from schema.types import CapacityTier, NodeState


class Placer:
    """The job, with what it remembers between ticks: the last plan detail per model, so a
    model whose plan says the same thing again is not recorded again."""

    def __init__(self) -> None:
        self._last_detail: dict[tuple[str, str], str] = {}

    def run(self, ctx: LoopContext, reader: SnapshotReader) -> None:
        now, now_dt = ctx.now(), ctx.now_dt()
        with ctx.store.session() as s:
            snap = reader.read(s, now, placement=True)
            estimates = Estimates(ctx, snap.learned)
            for customer in sorted(snap.overflow):
                inp = customer_input(ctx, snap, customer, estimates)
                if inp is None:
                    continue
                result = plan(inp)
                models = {m.name: m for m in snap.models_of(customer)}
                pools = {p.id: p for p in snap.pools.get(customer, [])}
                demands = {d.model.name: d for d in inp.models}
                for name, model_plan in result.plans.items():
                    m = models[name]
                    create_s = _CreateSeconds(estimates, m, snap.observed.get(m.id, []), pools)
                    resumed = keep_warm(
                        ctx, s, snap, m, pools, model_plan.launches, create_s, now_dt
                    )
                    self._apply(s, m, pools, model_plan, demands[name], now_dt, resumed)
                for m in models.values():
                    _finish_retiring(ctx, s, snap, m, demands.get(m.name), now, now_dt)

    def _apply(
        self,
        s: Session,
        m: ModelFacts,
        pools: dict[str, PoolFacts],
        p: Plan,
        demand: ModelDemand,
        now: datetime,
        resumed: list[str | None],
    ) -> None:
        for launch, warm in zip(p.launches, resumed, strict=True):
            if warm is None:  # (else a warm replica was resumed for it: controlplane/loop/warm)
                record_launch(s, m, pools[launch.pool_id], launch, now)
        for drain in p.drains:
            replica = s.get(Replica, drain.replica_id)
            assert replica is not None  # in this session's snapshot
            how = retire_replica(replica, now, drain.reason) if drain.surge else None
            if how is None:
                drain_replica(replica, now)
            verb = "retiring until its replacement is ready" if how == "retiring" else "draining"
            record_event(
                s,
                now,
                "replica.retiring" if how == "retiring" else "replica.drain",
                f"{m.name}: replica {replica.id} in {replica.pool_id} {verb}: {drain.reason}",
                customer=m.customer,
                model=m.name,
            )
        key = (m.customer, m.name)
        acted = p.launches or p.drains or p.unplaced
        if acted and self._last_detail.get(key) != p.detail:
            s.add(
                DecisionRecord(
                    at=now,
                    kind="placement",
                    customer=m.customer,
                    model=m.name,
                    desired=math.ceil(demand.desired - UNIT_EPS),
                    reason="unplaced" if p.unplaced else "placed",
                    detail=p.detail,
                    inputs={
                        "launches": [vars(x) for x in p.launches],
                        "drains": [vars(x) for x in p.drains],
                        "rejections": p.rejections,
                        "live": len(demand.replicas),
                    },
                )
            )
            if p.unplaced:
                record_event(
                    s,
                    now,
                    "placement.unplaced",
                    f"{p.unplaced} replica(s) of {m.name} found no pool "
                    f"(rejected: {p.rejections or 'none'})",
                    customer=m.customer,
                    model=m.name,
                    severity="warning",
                )
        self._last_detail[key] = p.detail if acted else ""


def _finish_retiring(
    ctx: LoopContext,
    s: Session,
    snap: Snapshot,
    m: ModelFacts,
    demand: ModelDemand | None,
    now: float,
    now_dt: datetime,
) -> None:
    """Drain the model's retiring replicas whose replacements are ready
    (``lifecycle.surge``)."""
    retiring = snap.retiring(m.id)
    if not retiring:
        return
    ready = tuple(v for v in (demand.replicas if demand else ()) if v.ready)
    leaving = [
        Retiring(
            r.id,
            r.state == NodeState.READY.value,
            capacity_units(m.spec, r.gpu_shape),
            r.retiring_since or now,
        )
        for r in retiring
    ]
    desired = demand.desired if demand is not None else 0.0
    timeout = ctx.tuning.surge_timeout_s
    for rid, why in surge_drains(leaving, live_units(m.spec, ready), desired, now, timeout):
        replica = s.get(Replica, rid)
        assert replica is not None  # in this session's snapshot
        drain_replica(replica, now_dt)
        record_event(
            s,
            now_dt,
            "replica.drain",
            f"{m.name}: retiring replica {rid} in {replica.pool_id} draining: {why}",
            customer=m.customer,
            model=m.name,
        )


class Estimates:
    """The tick's cold-start figures (``_pool_s``), each distinct one worked out once. A
    figure depends on the pool, the model's weights size, what waits or is baked there,
    what was learned of the model's engine and the model's own observed times-to-ready, not
    on the model as such: the models of a fleet that share a size and have nothing observed
    yet share one figure per pool (at 10,000 models x 10 pools, 100,000 estimates a tick
    were 40% of the place job's CPU)."""

    def __init__(self, ctx: LoopContext, learned: Learned) -> None:
        self._ctx = ctx
        self._learned = learned
        self._known: dict[tuple[object, ...], float] = {}

    def seconds(
        self,
        m: ModelFacts,
        seen: list[tuple[str, float]],
        p: PoolFacts,
        warm: bool = False,
        baked: bool = False,
    ) -> float:
        engine = self._learned.engine_s.get(m.id)
        key = (p.id, p.cloud, p.gpu_shape, weights_gb(m.spec), warm, baked, engine, *seen)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = _pool_s(self._ctx, self._learned, m, seen, p, warm, baked)
        return known


class _CreateSeconds(Mapping[str, float]):
    """Per pool, a create's expected time-to-ready of the model, each read when first
    asked for: ``keep_warm`` reads one pool's, and only for a model with a warm pool."""

    def __init__(
        self,
        estimates: Estimates,
        m: ModelFacts,
        seen: list[tuple[str, float]],
        pools: Mapping[str, PoolFacts],
    ) -> None:
        self._estimates = estimates
        self._model = m
        self._seen = seen
        self._pools = pools

    def __getitem__(self, pool_id: str) -> float:
        pool = self._pools[pool_id]  # (KeyError: not one of the customer's pools)
        return self._estimates.seconds(self._model, self._seen, pool)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pools)

    def __len__(self) -> int:
        return len(self._pools)


def _pool_s(
    ctx: LoopContext,
    learned: Learned,
    m: ModelFacts,
    seen: list[tuple[str, float]],
    p: PoolFacts,
    warm: bool = False,
    baked: bool = False,
) -> float:
    """The model's expected cold start in pool ``p`` (``coldstart.estimate``); ``warm``:
    a warm replica waits there, so the next launch there is a resume; ``baked``: a new
    node there boots a ready baked image."""
    scale = ctx.tuning.cold_start_scale
    est = pool_estimate(
        ctx.coldstart,
        scale,
        learned,
        m.id,
        m.spec,
        seen,
        p.id,
        p.cloud,
        p.gpu_shape,
        warm=warm,
        baked=baked,
    )
    return est.seconds


def customer_input(
    ctx: LoopContext, snap: Snapshot, customer: str, estimates: Estimates
) -> CustomerInput | None:
    """The pure planner's input for one customer, from the snapshot (None: nothing to
    plan). What a model is asked to hold: the autoscaler's count; a paused model's own live
    units exactly (a whole count could drain a replica smaller than the first shape); a
    deleted model's nothing."""
    pools = snap.pools.get(customer, [])
    by_id = {p.id: p for p in pools}
    demands: list[ModelDemand] = []
    shared_replicas, shared_usd = 0, 0.0
    for m in snap.models_of(customer):
        live = snap.live(m.id)
        for r in live:
            pool = by_id.get(r.pool_id)
            if pool is not None and pool.tier == CapacityTier.SHARED:
                shared_replicas += 1
                shared_usd += pool.price_usd_per_hour * len(r.nodes)
        if m.deleted and not live:
            continue
        views = tuple(replica_view(r) for r in live)
        desired: float = m.desired
        if m.deleted:
            desired = 0
        elif m.paused and m.pinned is None:
            desired = live_units(m.spec, views)
        seen = snap.observed.get(m.id, [])
        waiting = waiting_pools(snap, m)
        demands.append(
            ModelDemand(
                ModelView(m.customer, m.name, m.spec),
                desired,
                views,
                {
                    p.id: estimates.seconds(m, seen, p, p.id in waiting, snap.baked_for(m, p))
                    for p in pools
                },
            )
        )
    if not demands:
        return None
    return CustomerInput(
        customer=customer,
        models=tuple(demands),
        pools=tuple(pool_view(p, snap.nodes_in_use[p.id], 0.0) for p in pools),
        overflow=snap.overflow[customer],
        shared_replicas_in_use=shared_replicas,
        shared_usd_per_hour_in_use=shared_usd,
        now=snap.now,
    )


def record_launch(
    s: Session, m: ModelFacts, pool: PoolFacts, launch: Launch, now: datetime, warm: bool = False
) -> None:
    """Record the intent (replica + node rows with idempotency tokens) before any provider
    call: the reconciler acts on these rows, never on a plan in memory. ``warm``: created
    for the model's warm pool (``controlplane/loop/warm.py``), not as its capacity."""
    replica = Replica(
        warm=warm,
        id=f"r-{uuid.uuid4().hex[:16]}",
        model_id=m.id,
        pool_id=pool.id,
        gpu_shape=launch.gpu_shape,
        state=NodeState.PENDING.value,
        created_at=now,
    )
    s.add(replica)
    for _ in range(launch.nodes):
        node_id = f"n-{uuid.uuid4().hex[:16]}"
        s.add(
            Node(
                id=node_id,
                replica_id=replica.id,
                pool_id=pool.id,
                customer=m.customer,
                account=pool.account,
                cloud=pool.cloud,
                region=pool.region,
                zone=launch.zone,
                instance_type=pool.instance_type,
                idempotency_token=node_id,
                state=NodeState.PENDING.value,
                pending_at=now,
                price_usd_per_hour=pool.price_usd_per_hour,
                tier=pool.tier,
            )
        )
    record_event(
        s,
        now,
        "replica.launch",
        f"{m.name}: new {launch.gpu_shape} {'warm-pool ' if warm else ''}replica in {pool.id} "
        f"({pool.tier})",
        customer=m.customer,
        model=m.name,
    )

"""The place job's warm-pool step, per model: the pure decision (``lifecycle.warm``) on the
tick's snapshot, applied. A launch that a parked warm replica can take resumes it (its rows
move to ``resuming`` before the reconciler calls the cloud's start); the warm pool is filled
with replicas created to be parked (``warm``: booted to ready, then stopped), and what is
over the bound or no longer wanted drains. Its size and cost are set on the telemetry
gauges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from controlplane.lifecycle.warm import (
    WarmReplica,
    decide,
    growth,
    home_pool,
    usd_per_hour,
    wanted,
)
from controlplane.loop.context import LoopContext
from controlplane.loop.snapshot import ModelFacts, PoolFacts, ReplicaFacts, Snapshot
from controlplane.node_tokens import TOKEN_TTL_S
from controlplane.placement import Launch
from controlplane.store.events import record_event
from controlplane.store.models import Replica
from controlplane.store.transitions import drain_replica
from schema.catalog import parse_gpu_shape
from schema.policy import BLOCK_USD_PER_GB_MONTH, WarmMode, WarmPool
from schema.types import Cloud, NodeState

_WAITING = (NodeState.STOPPED.value,)


def warm_of(snap: Snapshot, model_id: int) -> list[ReplicaFacts]:
    return [r for r in snap.replicas.get(model_id, []) if r.warm]


def parked(r: ReplicaFacts, mode: WarmMode) -> bool:
    """Resumable now: stopped, or ready in ``ready`` mode."""
    waiting = (NodeState.READY.value,) if mode == WarmMode.READY else _WAITING
    return r.state in waiting


def waiting_pools(snap: Snapshot, m: ModelFacts) -> set[str]:
    """The pools where a warm replica of the model waits to be resumed: a launch there is
    a resume (placement's horizon and ``gpucap explain`` read the same)."""
    mode = m.spec.warm_pool.mode if m.spec.warm_pool else WarmMode.STOPPED
    return {r.pool_id for r in warm_of(snap, m.id) if parked(r, mode)}


def shape_for(m: ModelFacts, pool: PoolFacts) -> str | None:
    """The model's replica shape whose nodes the pool provides (None: none)."""
    node = parse_gpu_shape(pool.gpu_shape)
    for opt in m.spec.shapes:
        sh = parse_gpu_shape(opt.shape)
        if (sh.gpu, sh.gpus) == (node.gpu, node.gpus):
            return opt.shape
    return None


def keep_warm(
    ctx: LoopContext,
    s: Session,
    snap: Snapshot,
    m: ModelFacts,
    pools: Mapping[str, PoolFacts],
    launches: Sequence[Launch],
    create_s: Mapping[str, float],
    now: datetime,
) -> list[str | None]:
    """Apply the warm decision for one model; returns, per launch, the warm replica it
    resumed (None: the caller records a create). ``create_s``: a create's expected
    time-to-ready per pool (the horizon the warm pool covers)."""
    wp = m.spec.warm_pool
    mine = warm_of(snap, m.id)
    if wp is None and not mine:
        return [None] * len(launches)
    mode = wp.mode if wp is not None else WarmMode.STOPPED
    views = [
        WarmReplica(
            r.id,
            r.pool_id,
            r.gpu_shape,
            len(r.nodes),
            parked(r, mode),
            r.created_at,
        )
        for r in mine
        if r.state != NodeState.DRAINING.value
    ]
    allowed = [
        p.id
        for p in pools.values()
        if not p.cordoned and p.blocked_until is None and shape_for(m, p) is not None
        if (not m.spec.clouds or Cloud(p.cloud) in m.spec.clouds)
        and (not m.spec.regions or p.region in m.spec.regions)
    ]
    live = [r.pool_id for r in sorted(snap.live(m.id), key=lambda r: r.created_at)]
    home = home_pool(live, allowed) if wp is not None and not m.deleted else None
    keep = 0
    if home is not None and wp is not None:
        shape = shape_for(m, pools[home])
        per = parse_gpu_shape(shape).nodes if shape else 1
        grow = growth(m.autoscaler_state, create_s.get(home, 0.0))
        keep = wanted(wp, m.desired, grow, per)
    d = decide([(x.pool_id, x.gpu_shape) for x in launches], views, home, keep)
    for rid in d.resume:
        if rid is not None:
            _resume(s, m, rid, now)
    for rid in d.release:
        replica = s.get(Replica, rid)
        if replica is not None:
            drain_replica(replica, now)
            record_event(
                s,
                now,
                "warm.release",
                f"{m.name}: warm replica {rid} in {replica.pool_id} let go",
                customer=m.customer,
                model=m.name,
            )
    if d.fill_pool is not None:
        from controlplane.loop.place import record_launch  # (place imports this module)

        pool = pools[d.fill_pool]
        shape = shape_for(m, pool)
        assert shape is not None  # (allowed pools have one)
        for _ in range(d.fill):
            nodes = parse_gpu_shape(shape).nodes
            price = pool.price_usd_per_hour * nodes
            launch = Launch(pool.id, shape, nodes, price, "warm pool", zone=pool.zone)
            record_launch(s, m, pool, launch, now, warm=True)
    _gauges(ctx, snap, m, pools, mode, wp.disk_gb if wp else 0, d.resume)
    return list(d.resume)


def _resume(s: Session, m: ModelFacts, rid: str, now: datetime) -> None:
    """Record the resume before any provider call: the replica is the model's again, its
    nodes ``resuming`` (the reconciler starts them); ready mode's running nodes stay."""
    replica = s.get(Replica, rid)
    assert replica is not None  # in this session's snapshot
    replica.warm, replica.resumed_at = False, now
    if replica.state == NodeState.STOPPED.value:
        replica.state = NodeState.RESUMING.value
        for n in replica.nodes:
            n.state, n.resuming_at = NodeState.RESUMING.value, now
            n.token_expires_at = now + timedelta(seconds=TOKEN_TTL_S)  # (it boots again)
    record_event(
        s,
        now,
        "warm.resume",
        f"{m.name}: warm replica {rid} in {replica.pool_id} resumed instead of a create",
        customer=m.customer,
        model=m.name,
    )


def _gauges(
    ctx: LoopContext,
    snap: Snapshot,
    m: ModelFacts,
    pools: Mapping[str, PoolFacts],
    mode: WarmMode,
    disk_gb: int,
    resumed: Sequence[str | None],
) -> None:
    """Warm nodes per pool and what they cost while they wait (USD per hour)."""
    taken = {r for r in resumed if r}
    by_pool: dict[str, int] = {}
    running: dict[str, int] = {}  # of those, the ones not stopped yet (billed as running)
    for r in warm_of(snap, m.id):
        if r.id not in taken and r.state != NodeState.DRAINING.value:
            by_pool[r.pool_id] = by_pool.get(r.pool_id, 0) + len(r.nodes)
            if r.state != NodeState.STOPPED.value:
                running[r.pool_id] = running.get(r.pool_id, 0) + len(r.nodes)
    policy = WarmPool(max_nodes=1000, mode=mode, disk_gb=max(1, disk_gb))
    for pid, pool in pools.items():
        nodes, up = by_pool.get(pid, 0), running.get(pid, 0)
        price = BLOCK_USD_PER_GB_MONTH[Cloud(pool.cloud)]
        cost = usd_per_hour(policy, nodes - up, pool.price_usd_per_hour, price) + usd_per_hour(
            policy, up, pool.price_usd_per_hour, price, running=True
        )
        ctx.telemetry.warm_nodes.labels(m.customer, m.name, pid).set(nodes)
        ctx.telemetry.warm_usd_per_hour.labels(m.customer, m.name, pid).set(cost)

"""The placement pipeline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from schema.catalog import parse_gpu_shape
from schema.policy import Model, Overflow, ShapeOption
from schema.types import CapacityTier

# Placement prefers capacity that is already paid for, then the customer's own on-demand,
# then shared overflow (BRIEF.md "Capacity is a market").
TIER_RANK = {CapacityTier.COMMITTED: 0, CapacityTier.ON_DEMAND: 1, CapacityTier.SHARED: 2}


@dataclass(frozen=True)
class PoolView:
    id: str
    cloud: str
    account: str
    region: str
    instance_type: str
    gpu_shape: str  # node shape this pool provides, e.g. "8xH100"
    tier: CapacityTier
    price_usd_per_hour: float
    committed: int = 0
    cordoned: bool = False
    unavailable_until: float | None = None  # blocked after a stockout/quota error, until
    capacity_hint: int | None = None  # nodes we may still add, when known
    nodes_in_use: int = 0  # our live nodes in this pool (all models of the customer)
    cold_start_s: float = 0.0


@dataclass(frozen=True)
class ReplicaView:
    id: str
    pool_id: str
    gpu_shape: str
    ready: bool
    created_at: float


@dataclass(frozen=True)
class ModelView:
    customer: str
    name: str
    spec: Model


@dataclass(frozen=True)
class PlacementInput:
    model: ModelView
    desired: int
    replicas: tuple[ReplicaView, ...]  # live replicas (not draining or gone)
    pools: tuple[PoolView, ...]
    overflow: Overflow
    shared_replicas_in_use: int = 0  # the customer's replicas on shared pools, all models
    shared_usd_per_hour_in_use: float = 0.0
    now: float = 0.0


@dataclass(frozen=True)
class Launch:
    pool_id: str
    gpu_shape: str  # the replica's shape, e.g. "2x8xH100"
    nodes: int
    price_usd_per_hour: float
    reason: str


@dataclass(frozen=True)
class Drain:
    replica_id: str
    reason: str


@dataclass(frozen=True)
class Plan:
    launches: tuple[Launch, ...] = ()
    drains: tuple[Drain, ...] = ()
    unplaced: int = 0  # replicas wanted that no pool could take now
    rejections: dict[str, int] = field(default_factory=dict)  # filter name -> pools rejected
    detail: str = ""


# ---- filters: (input, pool) -> ok. Order matters only for the explanation: the first
# failing filter is the one counted, so policy filters come before transient ones. -------

Filter = Callable[[PlacementInput, PoolView], bool]


def cloud_allowed(inp: PlacementInput, pool: PoolView) -> bool:
    clouds = inp.model.spec.clouds
    return not clouds or pool.cloud in clouds


def region_allowed(inp: PlacementInput, pool: PoolView) -> bool:
    regions = inp.model.spec.regions
    return not regions or pool.region in regions


def shape_accepted(inp: PlacementInput, pool: PoolView) -> bool:
    return _option_for(inp.model.spec, pool) is not None


def overflow_allowed(inp: PlacementInput, pool: PoolView) -> bool:
    if pool.tier != CapacityTier.SHARED:
        return True
    o = inp.overflow
    return o.enabled and (not o.models or inp.model.name in o.models)


def not_cordoned(inp: PlacementInput, pool: PoolView) -> bool:
    return not pool.cordoned


def available(inp: PlacementInput, pool: PoolView) -> bool:
    return pool.unavailable_until is None or pool.unavailable_until <= inp.now


FILTERS: tuple[tuple[str, Filter], ...] = (
    ("cloud_not_allowed", cloud_allowed),
    ("region_not_allowed", region_allowed),
    ("shape_not_accepted", shape_accepted),
    ("overflow_not_allowed", overflow_allowed),
    ("cordoned", not_cordoned),
    ("unavailable", available),
)


def _option_for(model: Model, pool: PoolView) -> ShapeOption | None:
    """The first accepted shape whose node is the pool's node shape (policy order wins)."""
    node = parse_gpu_shape(pool.gpu_shape)
    for opt in model.shapes:
        s = parse_gpu_shape(opt.shape)
        if (s.gpu, s.gpus) == (node.gpu, node.gpus):
            return opt
    return None


def _effective_tier(pool: PoolView, nodes_in_use: int) -> CapacityTier:
    """A committed pool past its commitment is billed on demand."""
    if pool.tier == CapacityTier.COMMITTED and nodes_in_use >= pool.committed:
        return CapacityTier.ON_DEMAND
    return pool.tier


# Filters that express what the policy allows (as opposed to a pool's passing condition).
# A live replica in a pool that fails one of them must move: invariant 2 of BRIEF.md.
POLICY_FILTERS = FILTERS[:4]


def place(inp: PlacementInput) -> Plan:
    """Launch or drain replicas so the model has ``inp.desired`` live replicas, all in pools
    its policy allows. A replica in a pool the policy no longer allows (or that is gone
    from the policy) is drained and replaced."""
    pools = {p.id: p for p in inp.pools}
    misplaced = [
        r
        for r in inp.replicas
        if (pool := pools.get(r.pool_id)) is None
        or not all(ok(inp, pool) for _, ok in POLICY_FILTERS)
    ]
    moved = tuple(Drain(r.id, "pool no longer allowed by the policy") for r in misplaced)
    if moved:
        gone = {r.id for r in misplaced}
        inp = replace(inp, replicas=tuple(r for r in inp.replicas if r.id not in gone))
    live = len(inp.replicas)
    if inp.desired < live:
        plan = _drain(inp, live - inp.desired)
    elif inp.desired == live:
        plan = Plan(detail=f"{live} live replicas match desired")
    else:
        plan = _launch(inp, inp.desired - live)
    if not moved:
        return plan
    return replace(
        plan,
        drains=moved + plan.drains,
        detail=f"{plan.detail}; move {len(moved)} replica(s) out of disallowed pools",
    )


def _launch(inp: PlacementInput, wanted: int) -> Plan:
    rejections: Counter[str] = Counter()
    candidates: list[PoolView] = []
    for pool in inp.pools:
        failed = next((name for name, ok in FILTERS if not ok(inp, pool)), None)
        if failed:
            rejections[failed] += 1
        else:
            candidates.append(pool)

    in_use = {p.id: p.nodes_in_use for p in candidates}
    shared_replicas = inp.shared_replicas_in_use
    shared_usd = inp.shared_usd_per_hour_in_use
    launches: list[Launch] = []
    for _ in range(wanted):
        best: tuple[tuple[float, ...], PoolView, ShapeOption] | None = None
        for pool in candidates:
            opt = _option_for(inp.model.spec, pool)
            assert opt is not None  # shape_accepted passed
            nodes = parse_gpu_shape(opt.shape).nodes
            if pool.capacity_hint is not None and in_use[pool.id] - pool.nodes_in_use + nodes > (
                pool.capacity_hint
            ):
                continue
            cost = pool.price_usd_per_hour * nodes
            if pool.tier == CapacityTier.SHARED and not _overflow_has_room(
                inp.overflow, shared_replicas, shared_usd, cost
            ):
                continue
            tier = _effective_tier(pool, in_use[pool.id])
            # Score: tier first, then price per unit of serving capacity (a shape that costs
            # more but serves more can win), then expected cold start, then id for determinism.
            score = (
                float(TIER_RANK[tier]),
                cost / opt.max_concurrency,
                pool.cold_start_s,
            )
            if best is None or (score, pool.id) < (best[0], best[1].id):
                best = (score, pool, opt)
        if best is None:
            break
        _, pool, opt = best
        nodes = parse_gpu_shape(opt.shape).nodes
        tier = _effective_tier(pool, in_use[pool.id])
        in_use[pool.id] += nodes
        if pool.tier == CapacityTier.SHARED:
            shared_replicas += 1
            shared_usd += pool.price_usd_per_hour * nodes
        launches.append(
            Launch(
                pool_id=pool.id,
                gpu_shape=opt.shape,
                nodes=nodes,
                price_usd_per_hour=pool.price_usd_per_hour * nodes,
                reason=f"{tier.value} capacity, ${pool.price_usd_per_hour * nodes:.2f}/h",
            )
        )
    unplaced = wanted - len(launches)
    detail = f"launch {len(launches)} of {wanted} wanted"
    if unplaced:
        detail += f"; {unplaced} unplaced ({len(candidates)} eligible pools)"
    return Plan(
        launches=tuple(launches), unplaced=unplaced, rejections=dict(rejections), detail=detail
    )


def _overflow_has_room(o: Overflow, replicas: int, usd: float, cost: float) -> bool:
    if replicas + 1 > o.max_replicas:
        return False
    return o.max_usd_per_hour is None or usd + cost <= o.max_usd_per_hour


def _drain(inp: PlacementInput, count: int) -> Plan:
    pools = {p.id: p for p in inp.pools}

    def order(r: ReplicaView) -> tuple[float, ...]:
        # Leave shared overflow first, then on-demand, keep commits (already paid for);
        # cancel replicas that are not serving yet before ready ones; dearest first; newest
        # first; id last for determinism.
        pool = pools.get(r.pool_id)
        tier = TIER_RANK[pool.tier] if pool else 3
        price = pool.price_usd_per_hour if pool else 0.0
        return (-tier, 1.0 if r.ready else 0.0, -price, -r.created_at)

    chosen = sorted(inp.replicas, key=lambda r: (order(r), r.id))[:count]
    return Plan(
        drains=tuple(Drain(r.id, "scale down") for r in chosen),
        detail=f"drain {len(chosen)} of {len(inp.replicas)} live replicas",
    )

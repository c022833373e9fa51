"""The placement pipeline."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from controlplane.placement import repair
from schema.catalog import parse_gpu_shape
from schema.policy import Model, Overflow, ShapeOption
from schema.types import CapacityTier

# Placement prefers capacity that is already paid for, then the customer's own on-demand,
# then shared overflow (BRIEF.md "Capacity is a market").
TIER_RANK = {CapacityTier.COMMITTED: 0, CapacityTier.ON_DEMAND: 1, CapacityTier.SHARED: 2}

# The most launches one plan makes for one model, and for one customer's models together;
# what is still wanted waits for the next tick (the place job's default interval is 15 s,
# schema/daemon_config.py). A tick's work then stays bounded whatever a model asks for:
# a model of min_replicas 2^32-1 once kept the place job in one tick for good, and every
# customer's placement with it (issue 26). gpucap's own bound, not a cloud's: 100 per model
# per tick is a scale-up of 400 replicas a minute, past any burst docs/benchmarks.md
# measures, and more than EC2 sustains anyway (RunInstances' resource token bucket refills
# 2 instances a second per account and region, "Request throttling for the Amazon EC2 API").
MAX_LAUNCHES_PER_MODEL = 100
MAX_LAUNCHES_PER_CUSTOMER = 1000


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
    # Where a launch goes: an open zone while some of the pool's zones are blocked
    # (``controlplane.availability``); None lets the cloud pick.
    zone: str | None = None


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
    # In capacity units (see capacity_units): the autoscaler's whole replicas of the first
    # shape, or a paused model's own live units (fractional with mixed shapes), which hold
    # its scale exactly: only replicas moved out of disallowed pools are replaced.
    desired: float
    replicas: tuple[ReplicaView, ...]  # live replicas (not draining or gone)
    pools: tuple[PoolView, ...]
    overflow: Overflow
    shared_replicas_in_use: int = 0  # the customer's replicas on shared pools, all models
    shared_usd_per_hour_in_use: float = 0.0
    now: float = 0.0
    # At most this many launches in this plan (the rest next tick; see MAX_LAUNCHES_PER_MODEL)
    max_launches: int = MAX_LAUNCHES_PER_MODEL


@dataclass(frozen=True)
class Launch:
    pool_id: str
    gpu_shape: str  # the replica's shape, e.g. "2x8xH100"
    nodes: int
    price_usd_per_hour: float
    reason: str
    zone: str | None = None


@dataclass(frozen=True)
class Drain:
    replica_id: str
    reason: str
    surge: bool = False  # a move: it serves on until its replacement is ready


@dataclass(frozen=True)
class Plan:
    launches: tuple[Launch, ...] = ()
    drains: tuple[Drain, ...] = ()
    unplaced: int = 0  # replicas wanted that no pool could take now
    deferred: int = 0  # replicas wanted past this tick's launch bound: next tick's
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
    return option_for(inp.model.spec, pool.gpu_shape) is not None


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


def option_for(model: Model, node_shape: str) -> ShapeOption | None:
    """The first accepted shape whose node is ``node_shape`` (a pool's; policy order wins)."""
    node = parse_gpu_shape(node_shape)
    for opt in model.shapes:
        s = parse_gpu_shape(opt.shape)
        if (s.gpu, s.gpus) == (node.gpu, node.gpus):
            return opt
    return None


# Slack on sums of capacity units (ratios such as 96 / 64 add up inexactly).
UNIT_EPS = 1e-9


def capacity_units(model: Model, shape: str) -> float:
    """What one replica on ``shape`` serves, in replicas of the model's first (preferred)
    shape: the unit the autoscaler's counts and desired replicas are in. Its slots over the
    first shape's (tokens/s for a tokens/s target, where both shapes declare it), so an
    8xH200 replica with 96 slots is 1.5 units next to a 64-slot 8xH100, and overflow onto a
    smaller shape launches enough of it. A shape the policy no longer lists counts as 1."""
    first = model.shapes[0]
    opt = next((o for o in model.shapes if o.shape == shape), None)
    if opt is None:
        try:
            node = parse_gpu_shape(shape)
        except ValueError:
            return 1.0
        opt = next((o for o in model.shapes if parse_gpu_shape(o.shape) == node), None)
    if opt is None:
        return 1.0
    tokens = model.target.metric.value == "tokens_per_s"
    if tokens and opt.tokens_per_s is not None and first.tokens_per_s is not None:
        return opt.tokens_per_s / first.tokens_per_s
    return opt.max_concurrency / first.max_concurrency


def live_units(model: Model, replicas: tuple[ReplicaView, ...]) -> float:
    return sum(capacity_units(model, r.gpu_shape) for r in replicas)


def _effective_tier(pool: PoolView, nodes_in_use: int) -> CapacityTier:
    """A committed pool past its commitment is billed on demand."""
    if pool.tier == CapacityTier.COMMITTED and nodes_in_use >= pool.committed:
        return CapacityTier.ON_DEMAND
    return pool.tier


# Filters that express what the policy allows (as opposed to a pool's passing condition).
# A live replica in a pool that fails one of them must move: invariant 2 of BRIEF.md.
POLICY_FILTERS = FILTERS[:4]


def place(inp: PlacementInput) -> Plan:
    """Launch or drain replicas so the model's live replicas add up to ``inp.desired``
    capacity units (:func:`capacity_units`; one per replica for a model of one shape), all
    in pools its policy allows: launches until they are covered, drains only what leaves
    them covered. A replica in a pool the policy no longer allows (or that is gone from the
    policy) is replaced, surge-first: it leaves once its replacement is ready."""
    misplaced = _misplaced(inp)
    moved = tuple(
        Drain(r.id, "pool no longer allowed by the policy", surge=True) for r in misplaced
    )
    if moved:
        gone = {r.id for r in misplaced}
        inp = replace(inp, replicas=tuple(r for r in inp.replicas if r.id not in gone))
    units = live_units(inp.model.spec, inp.replicas)
    short = units < inp.desired - UNIT_EPS
    plan = _launch(inp, units) if short else _drain(inp, units)
    if not moved:
        return plan
    return replace(
        plan,
        drains=moved + plan.drains,
        detail=f"{plan.detail}; move {len(moved)} replica(s) out of disallowed pools",
    )


def _misplaced(inp: PlacementInput) -> list[ReplicaView]:
    """Live replicas in pools the policy no longer allows (or that are gone)."""
    pools = {p.id: p for p in inp.pools}
    return [
        r
        for r in inp.replicas
        if (pool := pools.get(r.pool_id)) is None
        or not all(ok(inp, pool) for _, ok in POLICY_FILTERS)
    ]


def _launch_detail(launches: int, wanted: str, unplaced: int, eligible: int) -> str:
    detail = f"launch {launches} for {wanted} wanted"
    return detail + (f"; {unplaced} unplaced ({eligible} eligible pools)" if unplaced else "")


def _launch(inp: PlacementInput, units: float) -> Plan:
    """Launch the best replica for the model, again, until ``units`` cover desired."""
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
    model = inp.model.spec
    wanted = _units_label(inp.desired - units)
    # max_replicas also bounds the replicas run: with a much smaller overflow shape, the
    # units it takes would otherwise launch without limit.
    room = max(0, model.max_replicas - len(inp.replicas))
    budget = min(room, max(0, inp.max_launches))
    while units < inp.desired - UNIT_EPS and len(launches) < budget:
        best: tuple[tuple[float, ...], PoolView, ShapeOption] | None = None
        for pool in candidates:
            opt = option_for(inp.model.spec, pool.gpu_shape)
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
                zone=pool.zone,
            )
        )
        units += capacity_units(model, opt.shape)
    # What no pool could take, in replicas of the first shape.
    unplaced = max(0, math.ceil(inp.desired - units - UNIT_EPS))
    detail = f"launch {len(launches)} for {wanted} wanted"
    if unplaced and len(launches) == budget < room:
        # (stopped by this tick's bound, not by the pools: the rest is next tick's)
        detail += f"; {unplaced} more next tick (at most {budget} launches this tick)"
        return Plan(
            launches=tuple(launches),
            deferred=unplaced,
            rejections=dict(rejections),
            detail=detail,
        )
    if unplaced and len(launches) == room:
        detail += f"; {unplaced} unplaced (max_replicas {model.max_replicas} reached)"
    elif unplaced:
        detail = _launch_detail(len(launches), wanted, unplaced, len(candidates))
    return Plan(
        launches=tuple(launches), unplaced=unplaced, rejections=dict(rejections), detail=detail
    )


def _overflow_has_room(o: Overflow, replicas: int, usd: float, cost: float) -> bool:
    if replicas + 1 > o.max_replicas:
        return False
    return o.max_usd_per_hour is None or usd + cost <= o.max_usd_per_hour


def _drain(inp: PlacementInput, units: float) -> Plan:
    """Drain, in order, every replica whose capacity the others still cover desired
    without (a large replica that cannot go is passed over for smaller ones after it)."""
    pools = {p.id: p for p in inp.pools}

    def order(r: ReplicaView) -> tuple[float, ...]:
        # Leave shared overflow first, then on-demand, keep commits (already paid for);
        # cancel replicas that are not serving yet before ready ones; dearest first; newest
        # first; id last for determinism.
        pool = pools.get(r.pool_id)
        tier = TIER_RANK[pool.tier] if pool else 3
        price = pool.price_usd_per_hour if pool else 0.0
        return (-tier, 1.0 if r.ready else 0.0, -price, -r.created_at)

    chosen: list[ReplicaView] = []
    for r in sorted(inp.replicas, key=lambda r: (order(r), r.id)):
        w = capacity_units(inp.model.spec, r.gpu_shape)
        if units - w >= inp.desired - UNIT_EPS:
            chosen.append(r)
            units -= w
    if not chosen:
        return Plan(detail=f"{len(inp.replicas)} live replicas cover desired")
    return Plan(
        drains=tuple(Drain(r.id, "scale down") for r in chosen),
        detail=f"drain {len(chosen)} of {len(inp.replicas)} live replicas",
    )


def _units_label(units: float) -> str:
    """A count of capacity units for details: ``3``, or ``2.5 units``."""
    return f"{units:g}" if abs(units - round(units)) < 1e-6 else f"{units:.2f} units"


# ---- a whole customer at once ---------------------------------------------------------


@dataclass(frozen=True)
class ModelDemand:
    """One model of a customer, as the customer's plan sees it."""

    model: ModelView
    desired: float  # capacity units, as PlacementInput.desired
    replicas: tuple[ReplicaView, ...]  # live replicas
    # This model's expected cold start in each pool (by pool id), for scoring.
    cold_start_s: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CustomerInput:
    customer: str
    models: tuple[ModelDemand, ...]
    pools: tuple[PoolView, ...]  # nodes_in_use: before this plan
    overflow: Overflow
    shared_replicas_in_use: int = 0
    shared_usd_per_hour_in_use: float = 0.0
    now: float = 0.0


@dataclass(frozen=True)
class CustomerPlan:
    plans: dict[str, Plan]  # by model name, in the order they were planned


def _pool_as_now(
    p: PoolView, in_use: int, cold_start_s: float, seen: dict[tuple[str, int, float], PoolView]
) -> PoolView:
    key = (p.id, in_use, cold_start_s)
    view = seen.get(key)
    if view is None:
        view = seen[key] = replace(
            p,
            nodes_in_use=in_use,
            # (a hint counts nodes still to add: what earlier models took is gone)
            capacity_hint=None
            if p.capacity_hint is None
            else max(0, p.capacity_hint - (in_use - p.nodes_in_use)),
            cold_start_s=cold_start_s,
        )
    return view


def plan(inp: CustomerInput) -> CustomerPlan:
    """Every model of one customer, highest priority first (then by name): each model's
    launches count against the pools' nodes and the overflow budget before the next model is
    planned, so the caps hold for the customer as a whole (Karpenter's ``Solve``: one
    simulation over all pending work, then the result is applied). Each model launches at
    most :data:`MAX_LAUNCHES_PER_MODEL`, and all together :data:`MAX_LAUNCHES_PER_CUSTOMER`
    (in the same order: the rest of a lower-priority model waits for a later tick)."""
    launches_left = MAX_LAUNCHES_PER_CUSTOMER
    order = sorted(inp.models, key=lambda d: (-d.model.spec.priority, d.model.name))
    in_use = {p.id: p.nodes_in_use for p in inp.pools}
    shared_replicas = inp.shared_replicas_in_use
    shared_usd = inp.shared_usd_per_hour_in_use
    pools = {p.id: p for p in inp.pools}
    plans: dict[str, Plan] = {}
    # A pool as one model sees it, by (pool, its nodes in use, the model's cold start
    # there): models alike share it instead of each building its own.
    seen: dict[tuple[str, int, float], PoolView] = {}
    for demand in order:
        views = tuple(
            _pool_as_now(p, in_use[p.id], demand.cold_start_s.get(p.id, p.cold_start_s), seen)
            for p in inp.pools
        )
        result = place(
            PlacementInput(
                model=demand.model,
                desired=demand.desired,
                replicas=demand.replicas,
                pools=views,
                overflow=inp.overflow,
                shared_replicas_in_use=shared_replicas,
                shared_usd_per_hour_in_use=shared_usd,
                now=inp.now,
                max_launches=min(MAX_LAUNCHES_PER_MODEL, launches_left),
            )
        )
        launches_left -= len(result.launches)
        for launch in result.launches:
            in_use[launch.pool_id] += launch.nodes
            if pools[launch.pool_id].tier == CapacityTier.SHARED:
                shared_replicas += 1
                shared_usd += launch.price_usd_per_hour
        plans[demand.model.name] = result
    return CustomerPlan(_repaired(inp, order, plans, launches_left))


def _repaired(
    inp: CustomerInput, order: list[ModelDemand], plans: dict[str, Plan], launches_left: int
) -> dict[str, Plan]:
    """The greedy's plans, repaired where pool caps bind (:mod:`.repair`): replicas it left
    unplaced placed by moving other models' launches aside, and capped pools given to the
    models whose alternatives cost most."""
    if not any(p.capacity_hint is not None for p in inp.pools):
        return plans  # (no caps: each model's own best is the customer's best)
    pools = {p.id: p for p in inp.pools}
    models: list[repair.Model] = []
    slots: list[repair.Slot] = []
    wanted: list[str] = []
    for i, demand in enumerate(order):
        spec, result = demand.model.spec, plans[demand.model.name]
        pin = PlacementInput(
            demand.model, demand.desired, demand.replicas, inp.pools, inp.overflow, now=inp.now
        )
        options: dict[str, repair.Option] = {}
        for pool in inp.pools:
            if all(ok(pin, pool) for _, ok in FILTERS):
                opt = option_for(spec, pool.gpu_shape)
                assert opt is not None  # shape_accepted passed
                nodes = parse_gpu_shape(opt.shape).nodes
                units = capacity_units(spec, opt.shape)
                options[pool.id] = repair.Option(
                    opt.shape, nodes, units, pool.price_usd_per_hour * nodes
                )
        gone = {r.id for r in _misplaced(pin)}
        kept = live_units(spec, tuple(r for r in demand.replicas if r.id not in gone))
        launched = sum(options[x.pool_id].units for x in result.launches)
        wanted.append(_units_label(demand.desired - kept))
        room = max(0, spec.max_replicas - (len(demand.replicas) - len(gone)))
        bound = min(room, MAX_LAUNCHES_PER_MODEL) - len(result.launches)
        models.append(
            repair.Model(
                options=options,
                can_add=bound if not result.deferred else 0,
                unplaced=result.unplaced,
                desired=demand.desired,
                units=kept + launched,
                priority=spec.priority,
            )
        )
        slots.extend(repair.Slot(i, x.pool_id) for x in result.launches)
    shared = [
        x
        for p in plans.values()
        for x in p.launches
        if pools[x.pool_id].tier == CapacityTier.SHARED
    ]
    state = repair.State(
        pools={
            p.id: repair.PoolCap(p.id, p.tier, p.committed, p.nodes_in_use, p.capacity_hint)
            for p in inp.pools
        },
        models=models,
        slots=slots,
        overflow=inp.overflow,
        shared_replicas=inp.shared_replicas_in_use + len(shared),
        shared_usd=inp.shared_usd_per_hour_in_use + sum(x.price_usd_per_hour for x in shared),
        customer_left=launches_left,
    )
    if not repair.repair(state):
        return plans
    out = dict(plans)
    for i, demand in enumerate(order):
        name, old = demand.model.name, plans[demand.model.name]
        where = repair.pools_of(state.slots, i)
        if where == [x.pool_id for x in old.launches] and models[i].unplaced == old.unplaced:
            continue
        launches = []
        for pool_id in where:
            pool, chosen = pools[pool_id], models[i].options[pool_id]
            launches.append(
                Launch(
                    pool_id=pool_id,
                    gpu_shape=chosen.shape,
                    nodes=chosen.nodes,
                    price_usd_per_hour=chosen.usd_per_hour,
                    reason=f"{pool.tier.value} capacity, ${chosen.usd_per_hour:.2f}/h",
                    zone=pool.zone,
                )
            )
        eligible = len(models[i].options)
        detail = _launch_detail(len(launches), wanted[i], models[i].unplaced, eligible)
        moved = sum(1 for d in old.drains if d.surge)
        if moved:
            detail += f"; move {moved} replica(s) out of disallowed pools"
        out[name] = replace(
            old, launches=tuple(launches), unplaced=models[i].unplaced, detail=detail
        )
    return out

"""Repair of a customer's greedy plan where pool capacity caps bind. Pure.

The greedy (``plan``) gives each model, highest priority first, its best pools. Where a
pool has a cap (``PoolView.capacity_hint``), that order can strand replicas: a model takes
the last nodes of a capped pool that a later model could not do without, although an
uncapped pool would have served the first one. Measured against an exact MILP on random
instances (``tests/unit/placement/test_plan_vs_milp.py``), 29 of 300 came out with more
unplaced or dearer than the optimum.

Two local moves over this plan's own launches (live replicas never move: that would be a
drain and a relaunch):

- *insert*: an unplaced replica goes into an eligible pool, moving at most
  :data:`MAX_CHAIN` of this plan's launches of other models out of its way, each to a pool
  of the same capacity for that model (a replica moved serves as much where it lands), or,
  only for a model of lower priority, back to unplaced (the greedy's own order: a higher
  priority is placed first);
- *re-place*: a launch is taken out and inserted again the cheapest way, kept when that
  costs less (a capped cheap pool goes to the model whose alternative is dearest).

Each move keeps every cap (pool nodes, the overflow's replicas and dollars), and no model
loses a replica to one of the same or a lower priority: a higher-priority model may be
moved to a pool that costs it more so that a lower one is placed at all (unplaced replicas
count before dollars). The work is
bounded (:data:`MAX_STEPS` candidate paths per plan), and the search order is fixed (pool
ids, model order), so a plan stays deterministic."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from schema.policy import Overflow
from schema.types import CapacityTier

# The longest chain of launches moved to make room for one replica.
MAX_CHAIN = 4
# Candidate paths looked at in one repair, whatever the customer's size: a plan's work stays
# bounded (issue 26); what is not improved within it stays as the greedy left it.
MAX_STEPS = 50_000
# A tier outranks any price difference (as in the greedy's score: tier first).
_TIER_WEIGHT = 1e6
_TIER_RANK = {CapacityTier.COMMITTED: 0, CapacityTier.ON_DEMAND: 1, CapacityTier.SHARED: 2}
_EPS = 1e-9


@dataclass(frozen=True)
class Option:
    """What one replica of a model is in one pool."""

    shape: str
    nodes: int
    units: float
    usd_per_hour: float  # price of all its nodes


@dataclass(frozen=True)
class PoolCap:
    id: str
    tier: CapacityTier
    committed: int
    nodes_in_use: int  # before this plan
    room: int | None  # nodes this plan may add (None: no cap known)


@dataclass
class Slot:
    """One launch of this plan: model index, pool id."""

    model: int
    pool: str


@dataclass
class Model:
    options: dict[str, Option]  # eligible pools (every filter passed) -> the replica there
    can_add: int  # launches it may still get (its bounds, max_replicas)
    unplaced: int
    desired: float
    units: float  # live + launched
    priority: int


@dataclass
class State:
    pools: dict[str, PoolCap]
    models: list[Model]  # in the plan's order: highest priority first
    slots: list[Slot]
    overflow: Overflow
    shared_replicas: int  # in use, this plan's launches included
    shared_usd: float
    customer_left: int  # launches the customer's bound still allows
    steps: int = 0
    used: dict[str, int] = field(default_factory=dict)  # nodes this plan adds, by pool
    # this plan's launches by pool and model
    count: dict[str, dict[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for s in self.slots:
            self._count(s.model, s.pool, +1)

    def _count(self, model: int, pool: str, sign: int) -> None:
        opt = self.models[model].options[pool]
        self.used[pool] = self.used.get(pool, 0) + sign * opt.nodes
        by_model = self.count.setdefault(pool, {})
        by_model[model] = by_model.get(model, 0) + sign


def repair(st: State) -> bool:
    """Improve ``st`` in place; whether anything changed."""
    if not any(p.room is not None for p in st.pools.values()):
        return False  # no caps: the greedy's per-model best is the customer's best
    changed = False
    # Unplaced replicas first, highest priority first (the models' order).
    for i, m in enumerate(st.models):
        while m.unplaced > 0 and m.can_add > 0 and st.customer_left > 0:
            best = _cheapest_insert(st, i, bump=True)
            if best is None:
                break
            _apply(st, best[1])
            changed = True
    # Then cost: each launch re-placed the cheapest way, until none gains.
    improved = True
    while improved and st.steps < MAX_STEPS:
        improved = False
        for k in range(len(st.slots)):
            slot = st.slots[k]
            here = _weight(st, slot.model, slot.pool, leaving=True)
            _take(st, k)
            found = _cheapest_insert(st, slot.model, bump=False)
            if found is not None and found[0] < here - _EPS:
                _apply(st, found[1], at=k, placed=False)
                improved = changed = True
            else:
                _put(st, slot, k)
    return changed


# A path: (model, from pool, to pool) steps. The first places the model's new replica (from
# None); each next one moves one of this plan's launches of its model (to None: unplaced).
Step = tuple[int, str | None, str | None]
Path = tuple[Step, ...]
# What un-placing a replica weighs: more than any price or tier (a bump is a last resort).
_BUMP = 1e9


def _cheapest_insert(st: State, model: int, bump: bool) -> tuple[float, Path] | None:
    """The cheapest feasible path that adds one replica of ``model``, and what it weighs."""
    best: tuple[float, Path] | None = None
    for pool in sorted(st.models[model].options):
        cost = _weight(st, model, pool)
        found = _extend(st, ((model, None, pool),), cost, best[0] if best else math.inf, bump)
        if found is not None:
            best = found
    return best


def _extend(
    st: State, path: Path, cost: float, bound: float, bump: bool
) -> tuple[float, Path] | None:
    st.steps += 1
    if st.steps > MAX_STEPS or cost >= bound - _EPS:
        return None
    nodes, shared, usd = _moves(st, path)
    over = [
        p
        for p, n in sorted(nodes.items())
        if n > 0 and (room := st.pools[p].room) is not None and st.used.get(p, 0) + n > room
    ]
    o = st.overflow
    overflow_over = shared > 0 and (
        st.shared_replicas + shared > o.max_replicas
        or (o.max_usd_per_hour is not None and st.shared_usd + usd > o.max_usd_per_hour)
    )
    if not over and not overflow_over:
        return cost, path
    if len(path) - 1 >= MAX_CHAIN:
        return None
    # Which launches may move: from the first pool over its cap, else (the overflow budget
    # is what binds) from any shared pool.
    sources = over[:1] or sorted(p for p in st.count if st.pools[p].tier == CapacityTier.SHARED)
    first = path[0][0]
    prio = st.models[first].priority
    best: tuple[float, Path] | None = None
    for src in sources:
        left = _left(st, path, src)
        for j in sorted(left):
            if j == first or left[j] <= 0:
                continue
            mj = st.models[j]
            units = mj.options[src].units
            here = _weight(st, j, src)
            dsts: list[str | None] = [
                d
                for d in sorted(mj.options)
                if d != src and abs(mj.options[d].units - units) <= _EPS
            ]
            if bump and mj.priority < prio:
                dsts.append(None)
            for dst in dsts:
                step = (_weight(st, j, dst) if dst is not None else _BUMP) - here
                found = _extend(st, (*path, (j, src, dst)), cost + step, bound, bump)
                if found is not None and found[0] < bound - _EPS:
                    best, bound = found, found[0]
    return best


def _left(st: State, path: Path, pool: str) -> dict[int, int]:
    """This plan's launches in ``pool`` by model, less those ``path`` already moves."""
    left = dict(st.count.get(pool, {}))
    for mi, src, _ in path[1:]:
        if src == pool:
            left[mi] -= 1
    return left


def _moves(st: State, path: Path) -> tuple[dict[str, int], int, float]:
    """What ``path`` changes: nodes by pool, shared replicas, shared dollars."""
    nodes: dict[str, int] = {}
    shared, usd = 0, 0.0
    for mi, src, dst in path:
        for pool, sign in ((dst, 1), (src, -1)):
            if pool is None:
                continue
            opt = st.models[mi].options[pool]
            nodes[pool] = nodes.get(pool, 0) + sign * opt.nodes
            if st.pools[pool].tier == CapacityTier.SHARED:
                shared += sign
                usd += sign * opt.usd_per_hour
    return nodes, shared, usd


def _weight(st: State, model: int, pool: str, leaving: bool = False) -> float:
    """A replica's weight in a pool: its tier (a committed pool past its commitment is on
    demand), then its price."""
    p = st.pools[pool]
    opt = st.models[model].options[pool]
    tier = p.tier
    if tier == CapacityTier.COMMITTED:
        used = p.nodes_in_use + st.used.get(pool, 0) - (opt.nodes if leaving else 0)
        if used >= p.committed:
            tier = CapacityTier.ON_DEMAND
    return _TIER_RANK[tier] * _TIER_WEIGHT + opt.usd_per_hour


def _shared(st: State, model: int, pool: str, sign: int) -> None:
    if st.pools[pool].tier == CapacityTier.SHARED:
        st.shared_replicas += sign
        st.shared_usd += sign * st.models[model].options[pool].usd_per_hour


def _take(st: State, k: int) -> Slot:
    """Take launch ``k`` out (its model's count is the caller's)."""
    slot = st.slots.pop(k)
    st._count(slot.model, slot.pool, -1)
    _shared(st, slot.model, slot.pool, -1)
    return slot


def _put(st: State, slot: Slot, at: int | None = None) -> None:
    st.slots.insert(len(st.slots) if at is None else at, slot)
    st._count(slot.model, slot.pool, +1)
    _shared(st, slot.model, slot.pool, +1)


def _placed(st: State, model: int, pool: str, sign: int) -> None:
    """A model's replica placed (+1) or un-placed (-1): its units, unplaced and bounds."""
    m = st.models[model]
    m.units += sign * m.options[pool].units
    m.unplaced = max(0, math.ceil(m.desired - m.units - _EPS))
    m.can_add -= sign
    st.customer_left -= sign


def _apply(st: State, path: Path, at: int | None = None, placed: bool = True) -> None:
    """Move each launch the path names, then add its new replica (at index ``at`` of the
    slots, else last). ``placed``: a replica more for the model (else one re-placed)."""
    for mi, src, dst in path[1:]:
        assert src is not None
        k = next(k for k, s in enumerate(st.slots) if s.model == mi and s.pool == src)
        _take(st, k)
        if dst is None:
            _placed(st, mi, src, -1)
        else:
            _put(st, Slot(mi, dst), k)
    model, _, pool = path[0]
    assert pool is not None
    _put(st, Slot(model, pool), at)
    if placed:
        _placed(st, model, pool, +1)


def pools_of(slots: Sequence[Slot], model: int) -> list[str]:
    return [s.pool for s in slots if s.model == model]

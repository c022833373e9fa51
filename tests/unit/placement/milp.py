"""Random small placement instances with pool capacity caps, and the exact optimum of each
(a MILP solved by HiGHS, a dev dependency) to hold ``placement.plan`` against: fewest
replicas unplaced first, then the lowest hourly cost. Shared by the property test
(``test_plan_vs_milp.py``) and ``bench/placement_milp.py``."""

from __future__ import annotations

import random
from dataclasses import dataclass

from controlplane.placement import CustomerInput, ModelDemand, ModelView, PoolView, plan
from controlplane.placement.plan import FILTERS, PlacementInput, capacity_units, option_for
from schema.catalog import parse_gpu_shape
from schema.policy import Model, Overflow, ShapeOption
from schema.types import CapacityTier

REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
# Each model's accepted shapes. Where a model accepts two node shapes, both serve the same
# (max_concurrency equal): a replica is one capacity unit wherever it runs, so the only
# thing that can make the plan worse than the optimum is who gets the capped pools
# (covering a fractional demand with mixed-size replicas is a knapsack question the greedy
# does not claim to answer exactly).
SHAPE_SETS: tuple[tuple[str, ...], ...] = (
    ("8xH100",),
    ("8xH200",),
    ("8xH100", "8xH200"),
    ("8xH200", "8xH100"),
    ("2x8xH100",),
)


def instance(seed: int, distinct_priorities: bool = False) -> CustomerInput:
    """A customer of 2-4 models and 2-5 pools, some of them capped, some shared overflow
    (dearer than the customer's own, as gpucap's overflow is). ``distinct_priorities``:
    no two models share a priority, so the plan's priority order decides every trade
    between them (with equal priorities the optimum may drop one model's 2-node replica
    for two of another's, or give the overflow to the cheaper one: the plan keeps what the
    greedy's name order gave)."""
    rng = random.Random(seed)
    priorities = rng.sample((100, 200, 300, 500), 4) if distinct_priorities else []
    pools = []
    for i in range(rng.randint(2, 5)):
        shared = rng.random() < 0.2
        pools.append(
            PoolView(
                id=f"p{i}",
                cloud="aws",
                account="gpucap-aws" if shared else "acme-aws",
                region=rng.choice(REGIONS),
                instance_type="p5.48xlarge",
                gpu_shape=rng.choice(("8xH100", "8xH200")),
                tier=CapacityTier.SHARED if shared else CapacityTier.ON_DEMAND,
                price_usd_per_hour=float(rng.randint(60, 90) if shared else rng.randint(20, 59)),
                capacity_hint=rng.choice((None, 0, 1, 2, 3, 4, 6)),
            )
        )
    models = []
    for j in range(rng.randint(2, 4)):
        shapes = [ShapeOption(shape=s, max_concurrency=64) for s in rng.choice(SHAPE_SETS)]
        regions = [r for r in REGIONS if rng.random() < 0.5]
        spec = Model(
            name=f"m{j}",
            shapes=shapes,
            regions=regions,
            max_replicas=50,
            priority=priorities[j] if distinct_priorities else rng.choice((100, 200, 500)),
        )
        models.append(ModelDemand(ModelView("acme", spec.name, spec), rng.randint(1, 6), ()))
    return CustomerInput(
        customer="acme",
        models=tuple(models),
        pools=tuple(pools),
        overflow=Overflow(enabled=True, max_replicas=rng.randint(0, 4)),
        now=0.0,
    )


@dataclass(frozen=True)
class Outcome:
    unplaced: tuple[int, ...]  # by priority, highest first
    cost: float  # USD per hour of what is launched

    @property
    def total_unplaced(self) -> int:
        return sum(self.unplaced)


def _levels(inp: CustomerInput) -> list[int]:
    return sorted({d.model.spec.priority for d in inp.models}, reverse=True)


def planned(inp: CustomerInput) -> Outcome:
    result = plan(inp)
    levels = _levels(inp)
    unplaced = [0] * len(levels)
    for d in inp.models:
        unplaced[levels.index(d.model.spec.priority)] += result.plans[d.model.name].unplaced
    return Outcome(
        tuple(unplaced),
        sum(x.price_usd_per_hour for p in result.plans.values() for x in p.launches),
    )


def optimum(inp: CustomerInput) -> Outcome:
    """The exact optimum of the same instance: integer replicas per (model, pool) the
    model's filters allow, within each pool's cap (nodes), the overflow's replica cap and
    each model's max_replicas. Fewest unplaced first, priority by priority (what the plan
    promises: a higher-priority model's replicas are placed before a lower one's), each
    level's weight above all below it and any cost; then the lowest cost."""
    import highspy
    import numpy as np

    cols: list[tuple[int, PoolView, int, float, float]] = []  # model, pool, nodes, units, cost
    for i, d in enumerate(inp.models):
        pi = PlacementInput(d.model, d.desired, d.replicas, inp.pools, inp.overflow, now=inp.now)
        for p in inp.pools:
            if all(ok(pi, p) for _, ok in FILTERS):
                opt = option_for(d.model.spec, p.gpu_shape)
                assert opt is not None
                nodes = parse_gpu_shape(opt.shape).nodes
                units = capacity_units(d.model.spec, opt.shape)
                cols.append((i, p, nodes, units, p.price_usd_per_hour * nodes))
    n_x, n_m = len(cols), len(inp.models)
    levels = _levels(inp)
    weight = [
        1e6 * 100.0 ** (len(levels) - 1 - levels.index(d.model.spec.priority)) for d in inp.models
    ]
    cost = np.array([c[4] for c in cols] + weight)
    rows: list[tuple[dict[int, float], float, float]] = []
    for i, d in enumerate(inp.models):
        cover = {k: c[3] for k, c in enumerate(cols) if c[0] == i}
        cover[n_x + i] = 1.0  # unplaced replicas of the model's first shape
        rows.append((cover, d.desired, highspy.kHighsInf))
        count = {k: 1.0 for k, c in enumerate(cols) if c[0] == i}
        if count:
            rows.append((count, -highspy.kHighsInf, float(d.model.spec.max_replicas)))
    for p in inp.pools:
        if p.capacity_hint is not None:
            use = {k: float(c[2]) for k, c in enumerate(cols) if c[1].id == p.id}
            if use:
                rows.append((use, -highspy.kHighsInf, float(p.capacity_hint)))
    shared = {k: 1.0 for k, c in enumerate(cols) if c[1].tier == CapacityTier.SHARED}
    if shared:
        room = inp.overflow.max_replicas - inp.shared_replicas_in_use
        rows.append((shared, -highspy.kHighsInf, float(max(0, room))))

    lp = highspy.HighsLp()
    lp.num_col_ = n_x + n_m
    lp.num_row_ = len(rows)
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(n_x + n_m)
    lp.col_upper_ = np.full(n_x + n_m, highspy.kHighsInf)
    lp.row_lower_ = np.array([r[1] for r in rows])
    lp.row_upper_ = np.array([r[2] for r in rows])
    starts, index, value = [0], [], []
    for k in range(n_x + n_m):
        for r, (coefs, _, _) in enumerate(rows):
            if k in coefs:
                index.append(r)
                value.append(coefs[k])
        starts.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * (n_x + n_m)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    assert status == highspy.HighsModelStatus.kOptimal, h.modelStatusToString(status)
    x = np.round(np.asarray(h.getSolution().col_value)).astype(int)
    unplaced = [0] * len(levels)
    for i, d in enumerate(inp.models):
        unplaced[levels.index(d.model.spec.priority)] += int(x[n_x + i])
    return Outcome(tuple(unplaced), float(sum(x[k] * cols[k][4] for k in range(n_x))))


def matches(got: Outcome, best: Outcome, tolerance: float = 0.02) -> bool:
    """No more unplaced than the optimum at any priority (compared highest first), and, as
    many placed, within ``tolerance`` of its cost."""
    if got.unplaced != best.unplaced:
        return False  # (fewer than the exact optimum cannot be: counted as a miss all the same)
    return got.cost <= best.cost * (1 + tolerance) + 1e-9

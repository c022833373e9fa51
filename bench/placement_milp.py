"""Placement against the exact optimum, and its GPU-shape parses per plan (issue 26 item 5).

    .venv/bin/python bench/placement_milp.py [--instances 300] [--models 2000]

Part 1: random small instances with pool capacity caps (``tests/unit/placement/milp.py``),
``placement.plan`` against a MILP (HiGHS): how many match (no more unplaced at any priority,
within 2 % of the cost), with the greedy alone (the repair switched off) and with it.
Part 2: one customer of ``--models`` models over 24 pools: ``parse_gpu_shape`` calls made
by one plan, and the parses actually done (the cache's misses), and the plan's CPU time."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controlplane.placement import CustomerInput, ModelDemand, ModelView, PoolView, plan  # noqa: E402
from schema import catalog  # noqa: E402
from schema.policy import Model, Overflow, ShapeOption  # noqa: E402
from schema.types import CapacityTier  # noqa: E402
from tests.unit.placement.milp import instance, matches, optimum, planned  # noqa: E402

plan_module: Any = importlib.import_module("controlplane.placement.plan")


def versus_milp(n: int) -> None:
    best = {(seed, d): optimum(instance(seed, d)) for seed in range(n) for d in (False, True)}
    repaired = plan_module._repaired
    for label, greedy_only in (("greedy alone", True), ("greedy + repair", False)):
        if greedy_only:
            plan_module._repaired = lambda inp, order, plans, left: plans
        for distinct in (False, True):
            ok = sum(matches(planned(instance(s, distinct)), best[(s, distinct)]) for s in range(n))
            kind = "distinct priorities" if distinct else "any priorities"
            print(f"{label:16} {kind:20} {ok}/{n} match the MILP")
        plan_module._repaired = repaired


def parses(models: int) -> None:
    regions = ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1")
    pools = tuple(
        PoolView(
            id=f"p{r}-{shape}-{k}",
            cloud="aws",
            account=f"acct{k}",
            region=region,
            instance_type="p5.48xlarge",
            gpu_shape=shape,
            tier=CapacityTier.ON_DEMAND,
            price_usd_per_hour=30.0 + k,
        )
        for r, region in enumerate(regions)
        for shape in ("8xH100", "8xH200")
        for k in range(3)
    )
    demands = tuple(
        ModelDemand(
            ModelView(
                "acme",
                f"m{i}",
                spec := Model(
                    name=f"m{i}",
                    shapes=[
                        ShapeOption(shape="8xH100", max_concurrency=64),
                        ShapeOption(shape="8xH200", max_concurrency=96),
                    ],
                    max_replicas=50,
                ),
            ),
            2.0,
            (),
        )
        for i in range(models)
    )
    del spec
    inp = CustomerInput("acme", demands, pools, Overflow(), now=0.0)
    calls = 0
    real = catalog.parse_gpu_shape

    def counted(text: str) -> catalog.GpuShape:
        nonlocal calls
        calls += 1
        return real(text)

    plan_module.parse_gpu_shape = counted
    clear = getattr(real, "cache_clear", None)
    if clear:
        clear()
    started = time.process_time()
    plan(inp)
    took = time.process_time() - started
    plan_module.parse_gpu_shape = real
    info = getattr(real, "cache_info", None)
    done = info().misses if info else calls
    print(
        f"{models} models x {len(pools)} pools: {calls} parse_gpu_shape calls in plan.py, "
        f"{done} parsed, plan {took:.2f} CPU-s"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=300)
    ap.add_argument("--models", type=int, default=2000)
    a = ap.parse_args()
    parses(a.models)
    versus_milp(a.instances)

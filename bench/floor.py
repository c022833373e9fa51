"""A floor under a GPU-hour budget: the fewest requests that *any* replay of a scenario must
leave late to spend no more than the budget -- whatever decides, a clairvoyant included.

    .venv/bin/python bench/floor.py [--only azure-conv ...] [--ratio 0.75] [--traces DIR]

The budget is ``--ratio`` times the best peer's GPU-hours at the SLO target in
``bench/results.json`` (issue 3's target); ``--budget`` gives GPU-hours instead. Only the
bench's one- and two-model scenarios of a few replicas are practical (the ServeGen ones need
hundreds, where this bound says nothing). Not part of ``make test``; prints Markdown.

The bound, per model (its measured span ``T``, cold start ``C``, ``n`` replicas):
``n`` is the fewest constant replicas whose own misses fit the scenario's allowance. A replay
within budget must run fewer than ``n`` ready replicas of some model, in windows that together
save ``sum(n * gpus) * T - budget`` GPU-seconds (GPU time is charged from a node's request to
its release, ``engine.py``; outside the windows at least ``n`` are charged). Ready replicas
only come back as new ones, each charged while it starts: from its request, or from the
span's opening if asked for before it -- so for a whole cold start, or from the opening to
its return. A window that ends with replicas coming back (``k`` of them, ``n - k`` or more
ready in it) thus saves at most ``k`` times its length less a cold start (or less the time
from the opening): nothing unless it is longer than ``C``.
One that lasts to the span's end saves at most ``n`` times its length. Misses in a window are
at least those of first-come-first-served over ``n - 1`` replicas' slots started empty at
its opening and freed at its close, counting the requests that arrive in it: more slots,
free sooner, only start each request sooner. Windows are rounded inward to a grid of
``STEP_S``, which only lowers the count. So if a window longer than ``C`` anywhere already
leaves more misses than allowed, and so does every end window that saves enough, no replay
within the budget meets the target.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import simulate_bench as bench  # noqa: E402

STEP_S = 10.0
NEVER = 1 << 62  # misses of a window that cannot exist
DEFAULT_SCENARIOS = ("azure-code", "azure-conv", "azure-both")


@dataclass(frozen=True)
class Load:
    """One model's measured requests, on a clock where the measured span is [0, span_s)."""

    name: str
    arrivals: np.ndarray
    service_s: np.ndarray
    slots: int
    slo_s: float
    gpus: int
    cold_start_s: float
    span_s: float


def fcfs_misses(load: Load, replicas: int, start: float, end: float) -> int:
    """Late requests among those arriving in [start, end), served first come first served by
    ``replicas`` replicas' slots that are all free at ``start``; whoever still waits at ``end``
    starts then (the window closes and capacity comes back)."""
    a, s = load.arrivals, load.service_s
    lo, hi = np.searchsorted(a, [start, end])
    if replicas <= 0:
        return int(np.count_nonzero(end - a[lo:hi] > load.slo_s + 1e-9))
    free = [start] * (replicas * load.slots)
    late = 0
    slo = load.slo_s + 1e-9
    for arrival, service in zip(a[lo:hi].tolist(), s[lo:hi].tolist(), strict=True):
        began = max(arrival, free[0])
        late += min(began, end) - arrival > slo
        heapq.heapreplace(free, began + service)
    return late


def fewest_replicas(load: Load, allowed: int) -> int:
    """The fewest constant replicas whose own misses over the span fit ``allowed``."""
    n = 1
    while fcfs_misses(load, n, 0.0, load.span_s) > allowed:
        n += 1
    return n


@dataclass(frozen=True)
class ModelFloor:
    """What saving GPU time below ``n`` replicas of one model costs in misses, at least."""

    load: Load
    n: int
    middle: int  # the fewest misses of any window, not at the end, that saves anything
    ends: list[tuple[float, int]]  # end windows: (most GPU-seconds saved, fewest misses)


def model_floor(load: Load, n: int) -> ModelFloor:
    """Misses against savings for windows below ``n`` replicas (see the module docstring)."""
    grid = np.arange(0.0, load.span_s + STEP_S, STEP_S)
    inner = max(0.0, load.cold_start_s - STEP_S)  # every window longer than C holds one
    middle = min(
        (fcfs_misses(load, n - 1, t, t + inner) for t in grid if t + inner <= load.span_s),
        default=NEVER,  # the span is shorter than a cold start: no such window
    )
    trail = [fcfs_misses(load, n - 1, load.span_s - float(w), load.span_s) for w in grid]
    front: list[tuple[float, int]] = []
    for w, misses in sorted(zip(grid, trail, strict=True), key=lambda p: -p[0]):
        # (The true window may be up to a step longer than its grid floor.)
        saved = n * load.gpus * min(load.span_s, float(w) + STEP_S)
        if not front or misses < front[-1][1]:  # keep what saves more with fewer misses
            front.append((saved, misses))
    return ModelFloor(load, n, middle, front)


@dataclass(frozen=True)
class Floor:
    deficit_gpu_s: float  # what a replay within budget must save below the n's
    allowed: int
    least_misses: int  # the fewest misses of any replay within the budget, at least
    models: list[ModelFloor]

    @property
    def rules_out(self) -> bool:
        return self.least_misses > self.allowed


def floor(loads: Sequence[Load], budget_gpu_h: float, target: float) -> Floor:
    total = sum(int(ld.arrivals.size) for ld in loads)
    allowed = total - math.ceil(target * total - 1e-9)
    models = [model_floor(ld, fewest_replicas(ld, allowed)) for ld in loads]
    base = sum(m.n * m.load.gpus * m.load.span_s for m in models)
    deficit = base - budget_gpu_h * 3600.0
    if deficit <= 0:
        return Floor(deficit, allowed, 0, models)
    # Each model saves nothing, or through an end window, or through any schedule with a
    # window elsewhere (at least its ``middle`` misses, savings unbounded); split the saving.
    options = [[(0.0, 0), *m.ends, (math.inf, m.middle)] for m in models]
    least = min(
        sum(misses for _, misses in choice)
        for choice in itertools.product(*options)
        if sum(saved for saved, _ in choice) >= deficit
    )
    return Floor(deficit, allowed, least, models)


def loads_of(sim: bench.Simulation) -> list[Load]:
    """Each model's measured requests, on the measured span's clock."""
    loads = []
    for run in sim.runs:
        first = run.measured_from
        loads.append(
            Load(
                run.name,
                run.arrivals[first:] - sim.warmup_s,
                run.service_s[first:],
                run.slots,
                run.slo_s,
                run.gpus_per_replica,
                sim.cold_start_s[run.name],
                sim.end_s - sim.warmup_s,
            )
        )
    return loads


def row(name: str, sim: bench.Simulation, budget_gpu_h: float, source: str) -> dict[str, Any]:
    """One scenario's bound at a budget (``source``: where the budget comes from), as the
    bench saves it in ``results.json``."""
    f = floor(loads_of(sim), budget_gpu_h, bench.SLO_TARGET)
    return {
        "scenario": name,
        "budget_gpu_hours": budget_gpu_h,
        "budget_source": source,
        "replicas": {m.load.name: m.n for m in f.models},
        "to_save_gpu_hours": max(0.0, f.deficit_gpu_s) / 3600,
        "least_misses": min(f.least_misses, NEVER),
        "allowed": f.allowed,
        "rules_out": f.rules_out,
    }


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """:func:`row` results as a Markdown table."""
    out = [
        "| trace | budget GPU-h | replicas n | to save below n, GPU-h | fewest misses within "
        f"budget | misses allowed at {bench.SLO_TARGET} | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ns = ", ".join(f"{m} {n}" for m, n in r["replicas"].items())
        least = r["least_misses"]
        shown = f"{least:,}" if least < NEVER else "no replay saves that much"
        verdict = "**cannot be met**" if r["rules_out"] else "not ruled out by this bound"
        out.append(
            f"| {r['scenario']} | {r['budget_gpu_hours']:.1f} ({r['budget_source']}) | {ns} "
            f"| {r['to_save_gpu_hours']:.1f} | {shown} | {r['allowed']:,} | {verdict} |"
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", nargs="*", default=list(DEFAULT_SCENARIOS))
    ap.add_argument("--ratio", type=float, default=0.75, help="of the best peer's GPU-hours")
    ap.add_argument("--budget", type=float, default=None, help="GPU-hours (instead of --ratio)")
    ap.add_argument("--results", default=str(bench.ROOT / "bench" / "results.json"))
    ap.add_argument("--traces", default=str(bench.TRACES), help="the shared traces folder")
    args = ap.parse_args()
    bench._traces_dir = Path(args.traces)
    saved = json.loads(Path(args.results).read_text()) if args.budget is None else {}
    by_result = {res["scenario"]: res for res in saved.get("results", [])}
    by_name = {s.name: s for s in bench.SCENARIOS}
    unknown = [name for name in args.only if name not in by_name]
    if unknown:
        raise SystemExit(f"unknown scenario {unknown[0]!r} (scenarios: {', '.join(by_name)})")
    out = table([])
    for name in args.only:
        if args.budget is not None:
            budget, source = args.budget, "given"
        else:
            peer = bench.best_peer(by_result[name]) if name in by_result else None
            if peer is None:
                out.append(f"| {name} | no peer reaches the target in {args.results} | | | | | |")
                continue
            budget, source = args.ratio * peer[1], f"{args.ratio:g} x {peer[0]} {peer[1]:.1f}"
        out += table([row(name, bench.simulation(by_name[name]), budget, source)])[2:]
    print(f"SLO attainment >= {bench.SLO_TARGET}; cold starts and fleets as the bench's.\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()

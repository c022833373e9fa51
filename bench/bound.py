"""A true lower bound on GPU-hours: the least any replay of a scenario can spend while meeting
an SLO-attainment target -- whatever decides, a clairvoyant included (issue 23).

    .venv/bin/python bench/bound.py [--only azure-code ...] [--target 0.99] [--write]

Prints each scenario's bound; ``--write`` stores them as ``bounds`` in ``bench/results.json``
(nothing else in it changes), for ``simulate_bench.py --render-only`` to show. No replay is
run: the bound needs only the scenario's requests, cold starts and fleet.

The oracle (``controlplane/simulator/oracle.py``) is no bound below an attainment of 1: a
replay may leave a burst's requests late and save the replicas it would need. This is one:
a mixed-integer program (HiGHS) whose every feasible point is implied by any replay, so its
optimum -- and the solver's proven dual bound, which is what is reported -- is at most the
replay's GPU-hours. On the measured span [0, T) (the warm-up before it is not measured), per
model with ``S`` slots, ``G`` GPUs per replica and cold start ``C``, cut into cells of width
``g``, and with the requests grouped by the cell they arrive in:

1. Capacity. ``h(t)``: the model's replicas that can hold a request at t (ready or draining).
   ``r(t)``: those charged at t (GPU time runs from a node's request to its release,
   ``engine.py``), ``h(t) <= r(t)``, and a replay's GPU-hours are ``G * integral of r``.
   Per cell j: ``M_j`` is the most ``h`` reaches in it (an integer) and ``E_j`` its mean
   (``E_j <= M_j``).
2. Cold starts. A replica that can serve at tau was asked for at least ``C`` before (or was
   already up when the span opened, having been started in the warm-up) and is charged
   without a break until it goes, so ``r(t) >= h(tau)`` on ``[max(0, tau - C), tau]``.
   Wherever in cell j the most ``M_j`` is reached, that interval holds every cell wholly
   between ``C`` before the cell's end and its start: the ``w - 1`` cells before it, for
   ``w = floor(C / g)``. So the cost of cell i is at least its length times the largest
   ``M_j`` over the next ``w - 1`` cells, and at least its length times ``E_i``
   (``r >= h``); the bound takes the larger (``integral of r >= either``). Both only
   lower it: partly covered cells get nothing, and the peak may sit anywhere in its cell.
3. Requests on time. A request that meets its SLO starts at some sigma in ``[a, a + slo]``
   and holds one slot for its service time s, so (a) at any t in ``[a + slo, a + s)`` it is
   in service whatever sigma is ("depth"), and (b) it spends at least
   ``min over sigma of |[sigma, sigma + s) & cell|`` slot-seconds in each cell (the minimum
   is at an end of the range: the overlap is concave in sigma where positive) ("energy").
   So per cell, ``S * M_j >= ``the on-time requests in service at one chosen instant t_j
   (the cell's highest depth over all requests), and ``S * len_j * E_j >=`` the on-time
   requests' least slot-seconds in the cell. Late requests are taken to hold no slot at all
   (they do hold one, from their late start), and slots held by the warm-up's requests are
   ignored: both only lower the bound.
4. Misses. ``d_k``: how many of the requests arriving in cell k are late, real-valued,
   ``sum over every model and cell <= allowed`` (the target pools every request of the
   scenario, so the program chooses where the misses go). Requests of group k lift a
   cell's depth or energy by their contributions there; dropping ``d_k`` of them lowers it
   by at most the sum of the ``d_k`` largest, a concave function of ``d_k`` that each of
   its tangent lines (at ``q`` = 0, 1, 2, 4, ...) bounds from above, and by at most the
   group's whole contribution. Each late request is counted once, however many cells and
   instants it touches; a replay's own misses, placed in their arrival cells, satisfy
   every one of these.

So a replay gives a feasible point (its ``M``, ``E``, misses, and costs from its ``r``),
and the program's least cost is at most the replay's GPU-hours. The ``d_k`` being
real-valued, and the solver reporting its dual bound (<= the optimum, whether or not it
closed the gap within ``TIME_LIMIT_S``) only lower it further; the dual bound is shaved by
``SAFETY`` for the solver's tolerances. Not modelled, and so favourable to the replay:
FCFS order, slots freed by a request's end only, ``min_replicas``/``max_replicas``, the
autoscaler's tick.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import floor  # noqa: E402
import simulate_bench as bench  # noqa: E402
from floor import Load  # noqa: E402

CELLS_PER_COLD_START = 24  # g = C / 24: the cold-start rule loses at most 1/24 of each rise
MIN_CELL_S = 5.0
SLO_SLACK_S = 1e-6  # the engine's own tolerance is 1e-9: a wider SLO only lowers the bound
TIME_LIMIT_S = 30.0
SAFETY = 1e-6  # relative, off the solver's dual bound
CHUNK_REQUESTS = 400_000
HIGHS_OPTIONS: dict[str, Any] = {}  # requests turned into contributions at once (memory)


@dataclass(frozen=True)
class ModelBound:
    name: str
    cell_s: float
    cells: int
    gpu_hours: float  # this model's share of the solver's best schedule (not itself a bound)
    misses: float  # the misses the solver's schedule places in this model


@dataclass(frozen=True)
class Bound:
    gpu_hours: float  # the lower bound
    target: float
    allowed: int
    requests: int
    solved: bool  # the solver closed its gap (else the dual bound at the time limit)
    solve_s: float
    models: list[ModelBound] = field(default_factory=list)


class _Program:
    """A sparse program built row by row: minimise ``cost . x`` s.t. rows within bounds."""

    def __init__(self) -> None:
        self.cost: list[np.ndarray] = []
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.integer: list[np.ndarray] = []
        self.n = 0
        self.rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (row, col, value)
        self.row_lo: list[np.ndarray] = []
        self.row_hi: list[np.ndarray] = []
        self.m = 0

    def columns(
        self,
        count: int,
        cost: float | np.ndarray = 0.0,
        lo: float | np.ndarray = 0.0,
        hi: float | np.ndarray = math.inf,
        integer: bool = False,
    ) -> np.ndarray:
        first = self.n
        self.n += count
        self.cost.append(np.broadcast_to(np.asarray(cost, dtype=float), (count,)).copy())
        self.lower.append(np.broadcast_to(np.asarray(lo, dtype=float), (count,)).copy())
        self.upper.append(np.broadcast_to(np.asarray(hi, dtype=float), (count,)).copy())
        self.integer.append(np.full(count, integer))
        return np.arange(first, self.n)

    def new_rows(self, count: int, lo: float | np.ndarray, hi: float | np.ndarray) -> np.ndarray:
        """``count`` rows ``lo <= . <= hi``, empty: :meth:`coef` fills them."""
        self.row_lo.append(np.broadcast_to(np.asarray(lo, dtype=float), (count,)).copy())
        self.row_hi.append(np.broadcast_to(np.asarray(hi, dtype=float), (count,)).copy())
        self.m += count
        return np.arange(self.m - count, self.m)

    def coef(self, rows: np.ndarray, cols: np.ndarray, value: float | np.ndarray) -> None:
        v = np.broadcast_to(np.asarray(value, dtype=float), (rows.size,))
        self.rows.append((rows, np.asarray(cols), v))

    def constrain(
        self,
        terms: Sequence[tuple[np.ndarray, float | np.ndarray]],
        lo: float | np.ndarray,
        hi: float | np.ndarray,
    ) -> None:
        """One row per entry of the terms' columns: row r is
        ``lo[r] <= sum over terms of value[r] * x[cols[r]] <= hi[r]``."""
        rows = self.new_rows(terms[0][0].size, lo, hi)
        for cols, value in terms:
            self.coef(rows, cols, value)

    def solve(self, time_limit_s: float) -> tuple[float, np.ndarray, bool]:
        """(the proven lower bound on the optimum, the best point found, closed the gap):
        the LP relaxation's optimum, raised by branch and bound within ``time_limit_s``."""
        import highspy

        started = time.perf_counter()
        row = np.concatenate([r for r, _, _ in self.rows])
        col = np.concatenate([c for _, c, _ in self.rows])
        val = np.concatenate([v for _, _, v in self.rows])
        keep = val != 0
        row, col, val = row[keep], col[keep], val[keep]
        order = np.lexsort((row, col))
        row, col, val = row[order], col[order], val[order]
        starts = np.searchsorted(col, np.arange(self.n + 1))
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.n, self.m
        lp.col_cost_ = np.concatenate(self.cost)
        lp.col_lower_ = np.concatenate(self.lower)
        lp.col_upper_ = np.concatenate(self.upper)
        lp.row_lower_ = np.concatenate(self.row_lo)
        lp.row_upper_ = np.concatenate(self.row_hi)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = starts.astype(np.int32)
        lp.a_matrix_.index_ = row.astype(np.int32)
        lp.a_matrix_.value_ = val
        integer = np.concatenate(self.integer)
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        for option, value in HIGHS_OPTIONS.items():
            h.setOptionValue(option, value)
        # The relaxation first: it is a bound on its own, proven whatever the time limit.
        h.passModel(lp)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            status = h.modelStatusToString(h.getModelStatus())
            raise RuntimeError(f"the bound's LP did not solve: {status}")
        lower = float(h.getInfo().objective_function_value)
        x = np.asarray(h.getSolution().col_value)
        spent = time.perf_counter() - started
        if not integer.any() or spent >= time_limit_s:
            return lower, x, not integer.any()
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
            for i in integer
        ]
        h.setOptionValue("time_limit", float(time_limit_s - spent))
        h.setOptionValue("mip_rel_gap", 1e-4)
        h.passModel(lp)
        h.run()
        dual = float(h.getInfo().mip_dual_bound)
        if math.isfinite(dual) and dual > lower:
            lower = dual  # the branch and bound's proven bound: at least the relaxation's
        optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
        if optimal:  # (else the relaxation's point: an early incumbent can be far off)
            x = np.asarray(h.getSolution().col_value)
        return lower, x, optimal


@dataclass(frozen=True)
class _Pairs:
    """Per (cell j, arrival group k) of one model: the total contribution and its tangent
    lines ``e <= intercept + slope * d_k``."""

    j: np.ndarray
    k: np.ndarray
    total: np.ndarray
    line_pair: np.ndarray  # index into the pairs
    slope: np.ndarray
    intercept: np.ndarray


def _tangents(j: np.ndarray, k: np.ndarray, v: np.ndarray, cells: int, cap: int) -> _Pairs:
    """Group contributions ``v`` by (j, k); per group the tangent lines of "the sum of the d
    largest" at q = 0, 1, 2, 4, ... (q <= min(group size, cap))."""
    key = j.astype(np.int64) * cells + k
    order = np.lexsort((-v, key))
    key, v = key[order], v[order]
    heads = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]]))
    sizes = np.diff(np.append(heads, key.size))
    csum = np.concatenate([[0.0], np.cumsum(v)])
    total = csum[heads + sizes] - csum[heads]
    pair_idx, slopes, icepts = [], [], []
    q = 0
    while True:
        has = sizes > q
        if q > cap or not has.any():
            break
        g = np.flatnonzero(has)
        prefix = csum[heads[g] + q] - csum[heads[g]]
        slope = v[heads[g] + q]  # the (q+1)-th largest
        pair_idx.append(g)
        slopes.append(slope)
        icepts.append(prefix - slope * q)
        q = 1 if q == 0 else 2 * q
    return _Pairs(
        key[heads] // cells,
        key[heads] % cells,
        total,
        np.concatenate(pair_idx) if pair_idx else np.zeros(0, np.int64),
        np.concatenate(slopes) if slopes else np.zeros(0),
        np.concatenate(icepts) if icepts else np.zeros(0),
    )


def _merge(parts: list[_Pairs]) -> _Pairs:
    offsets = np.cumsum([0] + [p.j.size for p in parts[:-1]])
    return _Pairs(
        np.concatenate([p.j for p in parts]),
        np.concatenate([p.k for p in parts]),
        np.concatenate([p.total for p in parts]),
        np.concatenate([p.line_pair + o for p, o in zip(parts, offsets, strict=True)]),
        np.concatenate([p.slope for p in parts]),
        np.concatenate([p.intercept for p in parts]),
    )


def _expand(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each i, the integers first[i]..last[i]: (owner i, value) pairs."""
    count = np.maximum(last - first + 1, 0)
    owner = np.repeat(np.arange(first.size), count)
    offset = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    return owner, first[owner] + offset


def depth_instants(load: Load, edges: np.ndarray) -> np.ndarray:
    """Per cell, an instant of its highest depth: the most requests certainly in service at
    once, over every request (``[a + slo, a + s)``)."""
    slo = load.slo_s + SLO_SLACK_S
    a, s = load.arrivals, load.service_s
    core = s > slo
    starts = np.sort(a[core] + slo)
    ends = np.sort(a[core] + s[core])
    cells = edges.size - 1
    # Candidates: each cell's opening and every core start inside the span.
    cand = np.concatenate([edges[:-1], starts[(starts >= edges[0]) & (starts < edges[-1])]])
    depth = np.searchsorted(starts, cand, "right") - np.searchsorted(ends, cand, "right")
    cell = np.clip(np.searchsorted(edges, cand, "right") - 1, 0, cells - 1)
    order = np.lexsort((-depth, cell))
    first = np.flatnonzero(np.concatenate([[True], cell[order][1:] != cell[order][:-1]]))
    out = np.empty(cells)
    out[cell[order][first]] = cand[order][first]
    return out


def model_pairs(load: Load, edges: np.ndarray, cap: int) -> tuple[_Pairs, _Pairs]:
    """(energy, depth) contributions of one model's requests, grouped by (cell, arrival cell)."""
    slo = load.slo_s + SLO_SLACK_S
    cells = edges.size - 1
    instants = depth_instants(load, edges)
    group = np.clip(np.searchsorted(edges, load.arrivals, "right") - 1, 0, cells - 1)
    bounds = np.searchsorted(group, np.arange(0, cells + 1), "left")
    energy: list[_Pairs] = []
    depth: list[_Pairs] = []
    lo = 0
    while lo < load.arrivals.size:
        # A chunk ends at a group's boundary: a group's contributions sort together.
        hi = int(bounds[min(cells, int(np.searchsorted(bounds, lo + CHUNK_REQUESTS)))])
        hi = max(hi, int(bounds[group[lo] + 1]))
        a, s, k = load.arrivals[lo:hi], load.service_s[lo:hi], group[lo:hi]
        # Energy: every cell the request's possible service touches.
        last = np.clip(np.searchsorted(edges, a + slo + s, "left") - 1, 0, cells - 1)
        owner, j = _expand(k, last)
        u, v = edges[j], edges[j + 1]
        ai, si = a[owner], s[owner]
        early = np.minimum(ai + si, v) - np.maximum(ai, u)
        late = np.minimum(ai + slo + si, v) - np.maximum(ai + slo, u)
        least = np.maximum(0.0, np.minimum(early, late))
        keep = least > 0
        energy.append(_tangents(j[keep], k[owner[keep]], least[keep], cells, cap))
        # Depth: the instants in the request's certain service.
        first = np.searchsorted(instants, a + slo, "left")
        stop = np.searchsorted(instants, a + s, "left") - 1
        owner, j = _expand(first, stop)
        depth.append(_tangents(j, k[owner], np.ones(j.size), cells, 1))
        lo = hi
    return _merge(energy), _merge(depth)


def _grid(load: Load, cell_s: float | None) -> tuple[float, np.ndarray]:
    g = cell_s or max(MIN_CELL_S, load.cold_start_s / CELLS_PER_COLD_START)
    cells = max(1, math.ceil(load.span_s / g - 1e-9))
    edges = np.minimum(np.arange(cells + 1) * g, load.span_s)
    edges[-1] = load.span_s
    return g, edges


def lower_bound(
    loads: Sequence[Load],
    target: float,
    cell_s: float | None = None,
    time_limit_s: float = TIME_LIMIT_S,
    integer: bool = True,
) -> Bound:
    """The least GPU-hours any replay of ``loads`` (on the measured span's clock, as
    :func:`floor.loads_of` gives them) can spend with SLO attainment >= ``target``, pooled
    over every request. ``integer=False`` drops the integrality of the replica counts (a
    weaker bound, solved as an LP)."""
    started = time.perf_counter()
    total = sum(int(ld.arrivals.size) for ld in loads)
    allowed = total - math.ceil(target * total - 1e-9)
    p = _Program()
    miss_cols: list[np.ndarray] = []
    per_model: list[tuple[Load, float, np.ndarray, np.ndarray, np.ndarray]] = []
    for ld in loads:
        g, edges = _grid(ld, cell_s)
        n = edges.size - 1
        length = np.diff(edges)
        w = int(math.floor(ld.cold_start_s / g + 1e-9))
        peak = p.columns(n, integer=integer)  # M_j
        mean = p.columns(n)  # E_j
        cost = p.columns(n, cost=ld.gpus * length / 3600.0)  # r over cell i, as a level
        sizes = np.bincount(
            np.clip(np.searchsorted(edges, ld.arrivals, "right") - 1, 0, n - 1), minlength=n
        )
        misses = p.columns(n, hi=sizes.astype(float))  # d_k
        miss_cols.append(misses)
        p.constrain([(mean, 1.0), (peak, -1.0)], -math.inf, 0.0)  # E_j <= M_j
        p.constrain([(cost, 1.0), (mean, -1.0)], 0.0, math.inf)  # r >= h
        _cold_start_cover(p, peak, cost, w)
        energy, depth = model_pairs(ld, edges, allowed)
        for pairs, scale, capacity in (
            (energy, ld.slots * length, mean),
            (depth, float(ld.slots), peak),
        ):
            _capacity_rows(p, pairs, capacity, scale, misses, n)
        per_model.append((ld, g, cost, misses, length))
    everything = np.concatenate(miss_cols)
    pooled = p.new_rows(1, -math.inf, float(allowed))
    p.coef(np.repeat(pooled, everything.size), everything, 1.0)
    lower, x, solved = p.solve(time_limit_s)
    models = []
    for ld, g, cost, misses, length in per_model:
        hours = float(np.sum(x[cost] * ld.gpus * length) / 3600.0) if x.size else math.nan
        models.append(
            ModelBound(ld.name, g, cost.size, hours, float(x[misses].sum()) if x.size else 0.0)
        )
    return Bound(
        max(0.0, lower * (1 - SAFETY)),
        target,
        allowed,
        total,
        solved,
        time.perf_counter() - started,
        models,
    )


def _cold_start_cover(p: _Program, peak: np.ndarray, cost: np.ndarray, w: int) -> None:
    """cost_i >= M_j for j in [i + 1, i + w - 1]: through a sparse table of window maxima
    (level l holds, as a lower bound, the most over 2**l consecutive cells)."""
    n = peak.size
    span = w - 1
    if span < 1 or n < 2:
        return
    levels = [peak]
    width = 1
    while 2 * width <= span:
        below = levels[-1]
        top = p.columns(n)
        p.constrain([(top, 1.0), (below, -1.0)], 0.0, math.inf)
        shifted = np.arange(n) + width
        ok = shifted < n
        p.constrain([(top[ok], 1.0), (below[shifted[ok]], -1.0)], 0.0, math.inf)
        levels.append(top)
        width *= 2
    i = np.arange(n - 1)
    lo, hi = i + 1, np.minimum(i + span, n - 1)
    size = hi - lo + 1
    level = np.floor(np.log2(size)).astype(np.int64)
    for lvl in np.unique(level).tolist():
        sel = level == lvl
        table = levels[lvl]
        for start in (lo[sel], hi[sel] - (1 << lvl) + 1):
            p.constrain([(cost[i[sel]], 1.0), (table[start], -1.0)], 0.0, math.inf)


def _capacity_rows(
    p: _Program,
    pairs: _Pairs,
    capacity: np.ndarray,
    scale: float | np.ndarray,
    misses: np.ndarray,
    n: int,
) -> None:
    """Per cell j: ``scale_j * capacity_j + sum_k e_jk >= sum_k total_jk``, with each
    ``e_jk`` (what group k's misses take off) under its tangent lines in ``d_k``."""
    if pairs.j.size == 0:
        return
    take = p.columns(pairs.j.size, hi=pairs.total)
    need = np.bincount(pairs.j, weights=pairs.total, minlength=n)
    scales = np.broadcast_to(np.asarray(scale, dtype=float), (n,))
    rows = p.new_rows(n, need, math.inf)
    p.coef(rows, capacity, scales)
    p.coef(rows[pairs.j], take, 1.0)
    lp = pairs.line_pair
    p.constrain(
        [(take[lp], 1.0), (misses[pairs.k[lp]], -pairs.slope)],
        -math.inf,
        pairs.intercept,
    )


def bound_of(sim: bench.Simulation, target: float = bench.SLO_TARGET, **kw: Any) -> Bound:
    return lower_bound(floor.loads_of(sim), target, **kw)


def row(name: str, sim: bench.Simulation, target: float = bench.SLO_TARGET) -> dict[str, Any]:
    """One scenario's bound as ``results.json`` keeps it (under ``bounds``)."""
    b = bound_of(sim, target)
    return {
        "scenario": name,
        "target": target,
        "gpu_hours": b.gpu_hours,
        "allowed": b.allowed,
        "requests": b.requests,
        "solved": b.solved,
        "solve_s": b.solve_s,
        "cell_s": {m.name: m.cell_s for m in b.models},
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--target", type=float, default=bench.SLO_TARGET)
    ap.add_argument("--results", default=str(bench.ROOT / "bench" / "results.json"))
    ap.add_argument("--traces", default=str(bench.TRACES), help="the shared traces folder")
    ap.add_argument("--write", action="store_true", help="store the bounds in --results")
    args = ap.parse_args()
    bench._traces_dir = Path(args.traces)
    by_name = {s.name: s for s in bench.SCENARIOS}
    names = args.only or list(by_name)
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise SystemExit(f"unknown scenario {unknown[0]!r} (scenarios: {', '.join(by_name)})")
    rows = []
    print(f"| scenario | bound GPU-h at {args.target} | misses allowed | cell s | solved | s |")
    print("|---|---|---|---|---|---|")
    for name in names:
        r = row(name, bench.simulation(by_name[name]), args.target)
        rows.append(r)
        cells = ", ".join(f"{m} {g:.1f}" for m, g in r["cell_s"].items())
        print(
            f"| {name} | {r['gpu_hours']:,.1f} | {r['allowed']:,} | {cells} | "
            f"{'yes' if r['solved'] else 'dual bound at the time limit'} | {r['solve_s']:.1f} |",
            flush=True,
        )
    if args.write:
        path = Path(args.results)
        saved = json.loads(path.read_text())
        kept = [b for b in saved.get("bounds", []) if b["scenario"] not in names]
        order = {n: i for i, n in enumerate(by_name)}
        saved["bounds"] = sorted(kept + rows, key=lambda b: order.get(b["scenario"], 1 << 30))
        path.write_text(json.dumps(saved, indent=1, default=float) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""The clairvoyant oracle: an autoscaler that knows every future arrival, every service time
and the exact cold start, the lower bound on GPU-hours the others are measured against.

From the trace it computes, per second, the concurrency each model would have if every
request started the moment it arrived, and the replicas that needs:
``need(t) = ceil(headroom * concurrency(t) / slots)``. At time t it asks for the most it will
need before a replica requested now could be ready, ``max need over [t, t + cold start +
tick]``: capacity is requested exactly one cold start ahead, and a dip shorter than a cold
start is held through (restarting would cost a cold start of GPU time, more than the dip).
``headroom`` is its knob: above 1 it covers waits that the FCFS pool can still have with
exactly ``need`` replicas (slots freeing up on a replica being drained); below 1 it accepts
some waits at the peaks, which is cheaper when the SLO-attainment target is under 1. With
several models the headroom can differ per model (``cheapest_mix``): the attainment target
is over all requests pooled, so the cheapest plan spends the miss budget where a miss saves
the most GPU time (often a small model's bursts), as a metrics-driven peer can by chance.

It implements the same :class:`autoscaler.types.Autoscaler` protocol and runs in the same
engine under the same rules; it just ignores the metrics. It alone knows the true cold
start: the others meet launches whose capacity wait is drawn around the phase model (and
are told only what past launches showed), while in its replay every launch takes the phase
model's time, the one it plans with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from autoscaler.types import AutoscalerInput, Decision, State
from controlplane.simulator.engine import ModelRun

RESOLUTION_S = 1.0
ORACLE_TICK_S = 1.0
# Below 1 the oracle runs short of zero-wait capacity at its peaks, trading a few waits for
# GPU-hours: at an SLO-attainment target under 1 the cheapest clairvoyant plan may do that.
HEADROOM_SWEEP = (0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2, 1.35, 1.5)


# Busy runs of a model closer than this are kept as one dense run: an hour of zeros costs
# 28 KB, while each run costs a few numpy calls (a trace of isolated requests has one each).
MERGE_GAP_S = 3600.0


@dataclass(frozen=True)
class Series:
    """A per-``RESOLUTION_S`` series over ``nbins`` bins that equals ``default`` outside its
    runs: ``first[i]`` is the first bin of run i, ``runs[i]`` its values. A model asleep for
    days costs nothing here (the oracle's plan is this too)."""

    nbins: int
    default: float
    first: np.ndarray  # int64, increasing; runs never overlap nor touch
    runs: tuple[np.ndarray, ...]

    def at(self, k: int) -> float:
        i = int(np.searchsorted(self.first, k, "right")) - 1
        if i >= 0 and k - int(self.first[i]) < self.runs[i].size:
            return float(self.runs[i][k - int(self.first[i])])
        return self.default

    def dense(self) -> np.ndarray:
        out = np.full(self.nbins, self.default)
        for a, run in zip(self.first.tolist(), self.runs, strict=True):
            out[a : a + run.size] = run
        return out


def _merged(first: np.ndarray, last: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs [first, last] (sorted, inclusive) joined where fewer than ``gap`` bins lie between."""
    if first.size == 0:
        return first, last
    new = np.concatenate([[True], first[1:] - last[:-1] - 1 >= gap])
    heads = np.flatnonzero(new)
    return first[heads], np.maximum.reduceat(last, heads)


def zero_wait_concurrency(
    arrivals: np.ndarray, service_s: np.ndarray, end_s: float, res: float = RESOLUTION_S
) -> Series:
    """Peak in-service count per ``res`` bin if every request started on arrival (0 outside
    the runs; events after the last bin count in it)."""
    nbins = int(math.ceil(max(end_s, 0.0) / res)) + 2
    empty = np.zeros(0, dtype=np.int64)
    if arrivals.size == 0:
        return Series(nbins, 0.0, empty, ())
    times = np.concatenate([arrivals, arrivals + service_s])
    delta = np.concatenate([np.ones(arrivals.size), -np.ones(arrivals.size)])
    order = np.lexsort((delta, times))  # at equal times an end frees its slot first
    times, level = times[order], np.cumsum(delta[order])
    bins = np.minimum((times / res).astype(np.int64), nbins - 1)
    # Busy from an event that lifts the level off 0 to the next that brings it back.
    down = np.flatnonzero(level == 0)
    up = np.concatenate([[0], down[:-1] + 1])
    first, last = _merged(bins[up], bins[down], max(1, int(MERGE_GAP_S / res)))
    runs = []
    for a, b in zip(first.tolist(), last.tolist(), strict=True):
        lo, hi = np.searchsorted(bins, [a, b + 1], "left")
        peak = np.zeros(b - a + 1)
        np.maximum.at(peak, bins[lo:hi] - a, level[lo:hi])
        edges = np.arange(a, b + 1) * res
        j = np.searchsorted(times, edges, "right")  # level carried into each bin
        carried = np.where(j > 0, level[np.maximum(j - 1, 0)], 0.0)
        runs.append(np.maximum(peak, carried))
    return Series(nbins, 0.0, first, tuple(runs))


def forward_max(values: np.ndarray, width: int) -> np.ndarray:
    """out[k] = max(values[k : k + width]) (shorter at the end), by doubling."""
    out = values.copy()
    span = 1
    while span < width:
        step = min(span, width - span)
        shifted = np.full(out.size, -np.inf)  # (a width past the end reads nothing there)
        shifted[: max(0, out.size - step)] = out[step:]
        out = np.maximum(out, shifted)
        span += step
    return out


def replica_plan(conc: Series, slots: int, headroom: float, lo: int, hi: int, width: int) -> Series:
    """Replicas to ask for at each bin: the most needed over the next ``width`` bins, each
    bin needing ``ceil(headroom * concurrency / slots)`` within [lo, hi]. Outside the busy
    runs (and the ``width`` bins before each) that is the need of no load."""

    def need(c: np.ndarray) -> np.ndarray:
        return np.clip(np.ceil(headroom * c / slots - 1e-9), lo, hi)

    idle = float(need(np.zeros(1))[0])
    # Each run's plan starts width - 1 bins early; runs whose plans meet become one.
    starts = np.maximum(conc.first - (width - 1), 0)
    ends = conc.first + np.array([r.size for r in conc.runs], dtype=np.int64) - 1
    first, last = _merged(starts, ends, 1)
    runs = []
    for a, b in zip(first.tolist(), last.tolist(), strict=True):
        top = min(b + width - 1, conc.nbins - 1)  # the window reads on past b
        values = np.full(top - a + 1, idle)
        i0, i1 = np.searchsorted(conc.first, [a, b + 1], "left")
        for f, run in zip(conc.first[i0:i1].tolist(), conc.runs[i0:i1], strict=True):
            values[f - a : f - a + run.size] = need(run)
        runs.append(forward_max(values, width)[: b - a + 1].astype(np.int64))
    return Series(conc.nbins, idle, first, tuple(runs))


@dataclass
class OracleAutoscaler:
    """Built per replay from the models' runs; ``decide`` is a table lookup."""

    plans: dict[str, Series]
    headroom: float | Mapping[str, float]
    name: str = "oracle"

    @staticmethod
    def plan(
        runs: list[ModelRun],
        end_s: float,
        cold_start_s: dict[str, float],
        headroom: float | Mapping[str, float],
        concurrency: Mapping[str, Series] | None = None,
        tick_s: float = ORACLE_TICK_S,
    ) -> OracleAutoscaler:
        """``headroom``: one for every model, or one per model (each model named).
        ``concurrency``: each model's :func:`zero_wait_concurrency` over ``end_s`` where the
        caller already has it (a sweep replans the same trace at every headroom)."""
        plans: dict[str, Series] = {}
        for r in runs:
            h = headroom if isinstance(headroom, int | float) else headroom[r.name]
            if concurrency is not None:
                conc = concurrency[r.name]
            else:
                conc = zero_wait_concurrency(r.arrivals, r.service_s, end_s)
            width = int(math.ceil((cold_start_s[r.name] + tick_s) / RESOLUTION_S)) + 1
            plans[r.name] = replica_plan(
                conc, r.slots, h, r.spec.min_replicas, r.spec.max_replicas, width
            )
        return OracleAutoscaler(plans, headroom)

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        plan = self.plans[inp.model]
        want = int(plan.at(min(int(inp.now / RESOLUTION_S), plan.nbins - 1)))
        return Decision(want, "oracle", f"needs {want} within one cold start"), state


@dataclass(frozen=True)
class ModelPoint:
    """One model's outcome at one headroom (models are replayed independently)."""

    headroom: float
    met_slo: int
    gpu_hours: float


def cheapest_mix(
    points: Mapping[str, Sequence[ModelPoint]], requests: int, target: float
) -> dict[str, float] | None:
    """The per-model headrooms with the least total GPU-hours whose pooled SLO attainment
    (requests met over ``requests``) reaches ``target``; None if no mix does.

    Exact: the Pareto front of (GPU-hours, requests met) is extended one model at a time,
    dropping every mix that costs more and meets no more requests than another."""
    front: list[tuple[float, int, dict[str, float]]] = [(0.0, 0, {})]
    for model, options in points.items():
        grown = [
            (g + p.gpu_hours, met + p.met_slo, {**mix, model: p.headroom})
            for g, met, mix in front
            for p in options
        ]
        grown.sort(key=lambda e: (e[0], -e[1]))
        front = []
        for entry in grown:
            if not front or entry[1] > front[-1][1]:
                front.append(entry)
    ok = [e for e in front if requests and e[1] / requests >= target]
    return min(ok, key=lambda e: e[0])[2] if ok else None

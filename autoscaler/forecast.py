"""Short-horizon load model for gpucap's autoscaler, kept in a small JSON-able state.

What it learns from the samples it has not seen yet (each sample is folded in once):
- the arrival-rate level and trend (Holt's linear smoothing over 30 s buckets) and the
  spread of the rate around that level (EWMA of squared one-step residuals), and a slow
  baseline of the rate (EWMA with 6 h memory; the plain mean until that much history
  exists) that gpucap's burst reserve is sized on;
- the per-request cost of the scaling metric (seconds of service for concurrency, tokens
  for tokens/s), learned only while requests are not queueing, so saturation does not teach
  it that requests got cheaper (the plain mean of the first buckets, then an EWMA); for
  concurrency each bucket's in-service count is paired with the arrivals of the last
  service time (a short arrival history is kept for that), and the buckets within one
  service time of a cold origin (traffic starting from nothing) do not teach it;
- a daily profile of the rate in 5-minute slots (288 numbers), used for seasonality once
  the history spans more than a day.

Nothing here reads a clock: time comes from the samples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from autoscaler.types import MetricsSample
from autoscaler.window import in_service

BUCKET_S = 30.0  # aggregation of rate samples before smoothing (Poisson noise averages out)
ALPHA = 0.3  # level smoothing per bucket (~100 s memory)
BETA = 0.1  # trend smoothing per bucket
RESIDUAL_ALPHA = 0.05  # spread memory, ~10 min of buckets
COST_ALPHA = 0.1  # per-request cost memory, ~5 min of buckets
DAY_S = 86400.0
SLOT_S = 300.0  # daily profile resolution
SLOTS = int(DAY_S / SLOT_S)
SEASON_ALPHA = 0.3  # weight of the newest day in a daily slot
QUEUE_FREE = 0.5  # mean waiting requests below which a bucket can teach the cost
# After a queue empties, requests that waited still fill the slots: all of them for one
# mean service time, and with spread-out service times (LLM outputs) about 5 % of them
# after three (exponential tail). Until then in-service counts are not offered load.
AFTER_QUEUE_SERVICE_TIMES = 3.0
# Memory of the slow rate baseline the burst reserve is sized on: hours, so that a surge
# lasting less than a few hours does not raise the typical level it is measured against.
BASELINE_S = 6 * 3600.0
HISTORY_BUCKETS = 40  # arrivals kept to pair with in-service counts: 20 min of buckets


@dataclass(frozen=True)
class LoadModel:
    """A read-only view of the learned load model (built from the state dict)."""

    level: float | None  # requests/s
    baseline: float | None  # slow mean of the rate (memory BASELINE_S), requests/s
    trend: float  # requests/s per second
    spread: float  # std of the 30 s rate around the level, requests/s
    cost: float | None  # metric units per (request/s): service seconds, or tokens/request
    season: tuple[float | None, ...] | None  # daily profile when the history covers > 1 day

    def season_ratio(self, now: float, ahead: float) -> float | None:
        """Profile(now + ahead) / profile(now), both smoothed over neighbouring slots."""
        if self.season is None:
            return None
        a, b = _slot_mean(self.season, now), _slot_mean(self.season, now + ahead)
        if a is None or b is None or a <= 0:
            return None
        return b / a

    def season_peak_ratio(self, now: float, horizon: float) -> float | None:
        """The largest profile ratio over ``[now, now + horizon]`` (slot steps)."""
        if self.season is None:
            return None
        best: float | None = None
        steps = max(1, math.ceil(horizon / SLOT_S))
        for i in range(steps + 1):
            r = self.season_ratio(now, min(horizon, i * SLOT_S))
            if r is not None:
                best = r if best is None else max(best, r)
        return best


def _slot(t: float) -> int:
    return int((t % DAY_S) // SLOT_S)


def _slot_mean(season: Sequence[float | None], t: float) -> float | None:
    i = _slot(t)
    vals = [season[(i + d) % SLOTS] for d in (-1, 0, 1)]
    known = [v for v in vals if v is not None]
    return sum(known) / len(known) if known else None


def view(state: dict[str, Any]) -> LoadModel:
    first, last = state.get("first_t"), state.get("seen_t")
    season = state.get("season")
    covers_day = first is not None and last is not None and last - first > DAY_S
    return LoadModel(
        level=state.get("level"),
        baseline=state.get("baseline"),
        trend=float(state.get("trend", 0.0)),
        spread=math.sqrt(float(state.get("resid2", 0.0))),
        cost=state.get("cost"),
        season=tuple(season) if (season is not None and covers_day) else None,
    )


def fold(state: dict[str, Any], samples: Sequence[MetricsSample], metric: str, step: float) -> None:
    """Fold the samples newer than ``state['seen_t']`` into ``state`` (a fresh dict the
    caller owns; nested lists are replaced, never mutated, so older states stay intact)."""
    seen = state.get("seen_t")
    fresh = [s for s in samples if seen is None or s.t > seen]
    if not fresh:
        return
    if state.get("first_t") is None:
        first = fresh[0]
        state["first_t"] = first.t
        # A cold origin: nothing in flight at the first sample beyond what arrived during
        # it, so the in-service count is still filling from zero for one service time.
        # (Mid-traffic, after a daemon restart, it is already at its level.)
        if metric == "concurrency" and first.in_flight <= first.arrival_rate * step:
            state["origin_t"] = first.t - step
    prev_t = seen
    for s in fresh:
        dt = step if prev_t is None else min(s.t - prev_t, 4 * step)
        prev_t = s.t
        _accumulate(state, s, dt, metric)
    state["seen_t"] = fresh[-1].t


def _accumulate(state: dict[str, Any], s: MetricsSample, dt: float, metric: str) -> None:
    # The 30 s bucket: [start, seconds, requests, metric_seconds, queue_seconds]
    b = state.get("bucket")
    if b is None or s.t - b[0] > BUCKET_S:
        if b is not None and b[1] > 0:
            _close_bucket(state, b, metric == "concurrency")
        b = [s.t - dt, 0.0, 0.0, 0.0, 0.0]
    used = in_service(s, metric)
    b = [b[0], b[1] + dt, b[2] + s.arrival_rate * dt, b[3] + used * dt, b[4]]
    b[4] += s.queue_depth * dt
    state["bucket"] = b
    if s.queue_depth >= QUEUE_FREE:
        state["queued_t"] = s.t  # the newest sample where requests waited
    # The 5-minute daily slot: [slot start, seconds, requests]
    d = state.get("slot_acc")
    start = s.t - (s.t % SLOT_S)
    if d is None or d[0] != start:
        if d is not None and d[1] >= SLOT_S / 2:
            _close_slot(state, d)
        d = [start, 0.0, 0.0]
    state["slot_acc"] = [d[0], d[1] + dt, d[2] + s.arrival_rate * dt]


def _close_bucket(state: dict[str, Any], b: list[float], concurrency: bool) -> None:
    start, secs, reqs, metric_secs, queue_secs = b
    rate = reqs / secs
    level, trend = state.get("level"), float(state.get("trend", 0.0))
    if level is None:
        state["level"], state["trend"], state["resid2"] = rate, 0.0, 0.0
    else:
        gap = max(BUCKET_S, start + secs - float(state.get("level_t", start)))
        steps = gap / BUCKET_S
        predicted = max(0.0, level + trend * gap)
        resid = rate - predicted
        new_level = ALPHA * rate + (1 - ALPHA) * predicted
        state["trend"] = BETA * (new_level - level) / gap + (1 - BETA) * trend / max(1.0, steps)
        state["level"] = new_level
        r2 = float(state.get("resid2", 0.0))
        state["resid2"] = RESIDUAL_ALPHA * resid * resid + (1 - RESIDUAL_ALPHA) * r2
    state["level_t"] = start + secs
    # The slow baseline: a bias-corrected EWMA (the plain mean of the history until it spans
    # BASELINE_S), so the first bucket after a start does not stand in for hours of level.
    old_base = state.get("baseline")
    spanned = float(state.get("baseline_s", 0.0 if old_base is None else BASELINE_S)) + secs
    state["baseline_s"] = min(spanned, BASELINE_S)
    weight = max(secs / BASELINE_S, secs / spanned)
    state["baseline"] = rate if old_base is None else old_base + weight * (rate - old_base)
    # Per-request cost, only from buckets where requests did not queue.
    old = state.get("cost")
    history = _arrival_history(state, start, secs, reqs, old) if concurrency else []
    if reqs >= 1.0 and queue_secs / secs < QUEUE_FREE:  # at least one whole request
        cost = metric_secs / reqs
        origin = state.get("origin_t")
        if concurrency and origin is not None and start < origin + cost:
            # Still filling after a cold origin: what is in service reflects only the
            # arrivals since then, and would read as cheaper requests. Skipped rather than
            # down-weighted: the 1/n average below would keep a 25 % low start-up bucket
            # for minutes, long enough for the burst reserve to cross a replica boundary
            # twice (a constant load flapping 1 -> 2 -> 1 -> 2). This bucket's own cost is
            # a lower bound of the true one while filling, so the skip never runs long.
            return
        queued = state.get("queued_t")
        settled = None if queued is None else queued + AFTER_QUEUE_SERVICE_TIMES * (old or cost)
        if concurrency and settled is not None and start < settled:
            # Just after a queue: the slots still hold requests that waited, and would
            # read as costlier ones.
            return
        if concurrency and old is not None:
            # Little's law pairs what is in service with the arrivals that put it there:
            # those of the last service time, not of this bucket alone. Unpaired, a rate
            # step up reads as cheaper requests exactly when capacity is being sized for
            # it (and a step down as costlier ones), by up to (service / bucket) x the step.
            lagged = _in_service_rate(history, start, start + secs, old)
            if lagged > 0:
                cost = metric_secs / secs / lagged
        # Bias-corrected like the baseline: a start-up bucket (in-flight still filling
        # after a restart) weighs 1/n, not for the next ten minutes.
        n = int(state.get("cost_n", 0 if old is None else 1 / COST_ALPHA)) + 1
        state["cost_n"] = min(n, round(1 / COST_ALPHA))
        weight = max(COST_ALPHA, 1.0 / n)
        state["cost"] = cost if old is None else weight * cost + (1 - weight) * old


def _arrival_history(
    state: dict[str, Any], start: float, secs: float, reqs: float, cost: float | None
) -> list[list[float]]:
    """The buckets' [start, seconds, requests] back over one service time (the learned
    cost, at most ``HISTORY_BUCKETS``), this one included."""
    reach = start - (cost or 0.0) - BUCKET_S
    hist = [h for h in state.get("arrivals", []) if h[0] + h[1] > reach]
    hist = [*hist[-(HISTORY_BUCKETS - 1) :], [start, secs, reqs]]
    state["arrivals"] = hist
    return hist


def _in_service_rate(history: Sequence[Sequence[float]], a: float, b: float, s: float) -> float:
    """The arrival rate that the mean in-service count over [a, b] reflects when each
    request is served for ``s`` seconds: arrivals at u are in service over [u, u + s], so
    each bucket's rate weighs by how long its requests overlap [a, b] (Little's law over a
    window, exact for a rate constant within each bucket). Weighted over what the history
    covers."""
    weighted = mass = 0.0
    for h0, secs, reqs in history:  # closed buckets only, so secs > 0
        w = _overlap_integral(h0, h0 + secs, a, b, s)
        weighted += reqs / secs * w
        mass += w
    return weighted / mass if mass > 0 else 0.0


def _overlap_integral(u0: float, u1: float, a: float, b: float, s: float) -> float:
    """Integral over u in [u0, u1] of |[u, u + s] and [a, b]|, a piecewise-linear function
    of u (kinks at a - s, b - s, a, b), so the trapezoid rule between kinks is exact."""

    def overlap(u: float) -> float:
        return max(0.0, min(b, u + s) - max(a, u))

    cuts = sorted({u0, u1, *(k for k in (a - s, b - s, a, b) if u0 < k < u1)})
    return sum((y - x) * (overlap(x) + overlap(y)) / 2 for x, y in pairwise(cuts))


def _close_slot(state: dict[str, Any], d: list[float]) -> None:
    start, secs, reqs = d
    rate = reqs / secs
    season = list(state.get("season") or [None] * SLOTS)
    i = _slot(start)
    old = season[i]
    season[i] = rate if old is None else SEASON_ALPHA * rate + (1 - SEASON_ALPHA) * old
    state["season"] = season

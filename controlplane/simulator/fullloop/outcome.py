"""A full-loop replay's results, read from what it left: the store's node, replica and
decision rows, and the data plane's start times.

The same summary as the engine's (``engine.RunOutcome.summary()``), plus, per model, that
row's numbers; by capacity tier (committed, on-demand, shared = overflow), replica-hours and
cost; and per stockout window, how long each model took to have its desired capacity ready
again. Only the measured window counts (after the warm-up): GPU time of each node from its
request (``pending_at``) to its release (``terminated_at``, or ``failed_at`` for an
instance lost), less the time it waited stopped in a warm pool, clipped to the window; a
node whose create never made an instance costs nothing."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import select

from controlplane.loop.context import epoch
from controlplane.simulator.engine import ModelOutcome, RunOutcome
from controlplane.simulator.fullloop.run import EPOCH0, Replayed
from controlplane.store.models import DecisionRecord, Model, Pool, Replica
from controlplane.store.usage import node_uses
from controlplane.usage import US_PER_HOUR, billed_micros, micros
from schema.types import CapacityTier


@dataclass
class TierUse:
    replica_hours: float = 0.0
    node_hours: float = 0.0
    gpu_hours: float = 0.0
    cost_usd: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "replica_hours": self.replica_hours,
            "node_hours": self.node_hours,
            "gpu_hours": self.gpu_hours,
            "cost_usd": self.cost_usd,
        }


@dataclass
class FullLoopOutcome:
    run: RunOutcome
    tiers: dict[str, TierUse] = field(default_factory=dict)
    stockouts: list[dict[str, Any]] = field(default_factory=list)
    ticks: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` result of one decider: the summary's keys, then ``models`` (the
        same keys per model), ``tiers``, and with a clouds file ``stockouts``."""
        out: dict[str, Any] = self.run.summary().as_dict()
        out["models"] = {name: m.as_dict() for name, m in sorted(self.run.models.items())}
        out["tiers"] = {t: u.as_dict() for t, u in self.tiers.items()}
        out["stockouts"] = self.stockouts
        return out


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def outcome(done: Replayed) -> FullLoopOutcome:
    sc = done.scenario
    t0, end = EPOCH0 + sc.warmup_s, EPOCH0 + sc.end_s

    def clipped_h(start: float | None, stop: float | None) -> float:
        if start is None:
            return 0.0
        lo, hi = max(start, t0), min(stop if stop is not None else end, end)
        return max(0.0, hi - lo) / 3600.0

    gpu_h: dict[str, float] = defaultdict(float)
    usd: dict[str, float] = defaultdict(float)
    launches: dict[str, int] = defaultdict(int)
    scale_events: dict[str, int] = defaultdict(int)
    tiers: dict[str, TierUse] = {t.value: TierUse() for t in CapacityTier}
    with done.store.session() as s:
        names = {m.id: m.name for m in s.scalars(select(Model))}
        pools = {p.id: p for p in s.scalars(select(Pool))}

        # Each node as usage metering bills it (``controlplane.usage``: request to
        # release, less its warm-pool stops, at its price as of its launch).
        lo, hi = _at(t0), _at(end)
        used = sorted(  # (in an order of the values, not of the random intent ids)
            (
                billed_micros(u, micros(lo), micros(hi)) / US_PER_HOUR,
                u.model,
                u.tier,
                u.gpus,
                u.usd_per_hour,
            )
            for u in node_uses(s, lo, hi)
        )
        for hours, name, tier, gpus, price in used:
            gpu_h[name] += hours * gpus
            usd[name] += hours * price
            use = tiers[tier]
            use.node_hours += hours
            use.gpu_hours += hours * gpus
            use.cost_usd += hours * price
        held = []
        for r in s.scalars(select(Replica)):
            created = epoch(r.created_at)
            if created is not None and created >= t0:
                launches[names[r.model_id]] += 1
            held.append((clipped_h(created, epoch(r.ended_at)), pools[r.pool_id].tier))
        for hours, tier in sorted(held):
            tiers[tier].replica_hours += hours
        last: dict[str, int | None] = {}
        for d in s.scalars(
            select(DecisionRecord)
            .where(DecisionRecord.kind == "autoscale")
            .order_by(DecisionRecord.at, DecisionRecord.id)
        ):
            if d.desired != last.get(d.model, d.desired) and (epoch(d.at) or 0.0) >= t0:
                scale_events[d.model] += 1
            last[d.model] = d.desired
    models = {}
    for load in sc.loads:
        if load.arrivals.size == 0 and load.name not in gpu_h:
            continue  # a policy model the trace does not use, never launched
        models[load.name] = _served(done, load.name, gpu_h, usd, launches, scale_events)
    run = RunOutcome(done.autoscaler, None, sc.end_s - sc.warmup_s, models, done.wall_s)
    return FullLoopOutcome(run, tiers, _recoveries(done), done.ticks)


def _served(
    done: Replayed,
    name: str,
    gpu_h: dict[str, float],
    usd: dict[str, float],
    launches: dict[str, int],
    scale_events: dict[str, int],
) -> ModelOutcome:
    """One model's row (the waits as the engine's ``_finish`` counts them)."""
    sc = done.scenario
    load = next(m for m in sc.loads if m.name == name)
    arrivals = load.arrivals
    n = arrivals.size
    started = np.asarray(done.plane.starts(name), dtype=np.float64)
    served = started.size
    waits = np.empty(n)
    waits[:served] = started - arrivals[:served]
    waits[served:] = np.maximum(sc.end_s - arrivals[served:], 0.0)
    first = min(sc.measured_from.get(name, 0), n)
    met = int(np.count_nonzero(waits[first:served] <= sc.slo_s[name] + 1e-9))
    return ModelOutcome(
        model=name,
        requests=n - first,
        met_slo=met,
        unserved=n - max(served, first),
        waits=waits[first:],
        gpu_hours=gpu_h[name],
        cost_usd=usd[name],
        cold_starts=launches[name],
        scale_events=scale_events[name],
        timeline=done.timelines.get(name, []),
    )


def _recoveries(done: Replayed) -> list[dict[str, Any]]:
    """Per stockout window: per model, the longest stretch short of its desired capacity
    that was open during the window, from the window's start or its own if later (0: never
    short; None: still short at the end)."""
    out = []
    for w in done.scenario.clouds.stockouts:
        per: dict[str, float | None] = {m.name: 0.0 for m in done.scenario.loads}
        for d in done.deficits:
            if d.start >= w.end_s or (d.end is not None and d.end <= w.start_s):
                continue
            took = None if d.end is None else d.end - max(d.start, w.start_s)
            prev = per.get(d.model, 0.0)
            per[d.model] = None if took is None or prev is None else max(prev, took)
        took_s = [v for v in per.values() if v is not None]
        worst = None if len(took_s) < len(per) else max(took_s, default=0.0)
        out.append(
            {
                "pool": w.pool,
                "start_s": w.start_s,
                "end_s": w.end_s,
                "capacity": w.capacity,
                "recovery_s": worst,
                "models": per,
            }
        )
    return out

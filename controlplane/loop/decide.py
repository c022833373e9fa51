"""The decide job: for every model, the autoscaling step (``controlplane.scaling``) on the
tick's snapshot; the decision, its reason and the decider's state are written back, and a
changed decision is recorded with the inputs that replay it (``autoscaler.codec``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import structlog
from sqlalchemy.orm import Session

from autoscaler import codec
from autoscaler.types import AutoscalerInput
from controlplane.decider_code import decider_code
from controlplane.lifecycle.warm import covers
from controlplane.loop.coldstart import expected_s, warm_s
from controlplane.loop.context import LoopContext
from controlplane.loop.snapshot import ModelFacts, Snapshot, SnapshotReader
from controlplane.loop.views import replica_counts, scaling_spec
from controlplane.loop.warm import parked, warm_of
from controlplane.scaling import Overrides, Step, changed, scale
from controlplane.store.models import DecisionRecord, Model

log = structlog.get_logger("gpucap.loop")


def decide(ctx: LoopContext, reader: SnapshotReader) -> None:
    now, now_dt = ctx.now(), ctx.now_dt()
    with ctx.store.session() as s:
        snap = reader.read(s, now)
        for m in snap.models:
            if m.deleted:
                continue
            inp = AutoscalerInput(
                model=m.name,
                now=now,
                metrics=ctx.window.window((m.customer, m.name), now),
                replicas=replica_counts(
                    [r for r in snap.replicas.get(m.id, []) if not r.warm], m.spec
                ),
                spec=scaling_spec(m.spec, ctx.tuning),
                cold_start_s=expected_s(ctx, m.spec, snap.observed.get(m.id, [])),
            )
            inp, step = _step(ctx, snap, m, inp)
            _apply(ctx, s, m, inp, step, now_dt)


def _step(
    ctx: LoopContext, snap: Snapshot, m: ModelFacts, inp: AutoscalerInput
) -> tuple[AutoscalerInput, Step]:
    """The step over a create's look-ahead, or over a resume's while warm replicas wait and
    they cover what the longer look-ahead would launch early (``lifecycle.warm.covers``):
    a pool of one warm node does not make a burst of five a resume away. The input the
    step came from is what gets recorded, so a replay gives the same."""
    overrides = Overrides(m.pinned, m.paused)
    step = scale(ctx.autoscaler, inp, m.autoscaler_state, overrides)
    wp = m.spec.warm_pool
    waiting = sum(1 for r in warm_of(snap, m.id) if parked(r, wp.mode)) if wp else 0
    fast_s = warm_s(ctx, m.spec)
    if not waiting or fast_s >= inp.cold_start_s:
        return inp, step
    fast = replace(inp, cold_start_s=fast_s)
    fast_step = scale(ctx.autoscaler, fast, m.autoscaler_state, overrides)
    if covers(waiting, step.decision.desired, fast_step.decision.desired):
        return fast, fast_step
    return inp, step


def _apply(
    ctx: LoopContext, s: Session, m: ModelFacts, inp: AutoscalerInput, step: Step, at: datetime
) -> None:
    d = step.decision
    if changed(d, m.desired, m.reason):
        decider = {"name": ctx.autoscaler.name, "code": decider_code()}
        s.add(
            DecisionRecord(
                at=at,
                kind="autoscale",
                customer=m.customer,
                model=m.name,
                desired=d.desired,
                reason=d.reason,
                detail=d.detail,
                inputs=codec.encode(inp, m.autoscaler_state, decider),
            )
        )
        log.info(
            "autoscale",
            customer=m.customer,
            model=m.name,
            desired=d.desired,
            reason=d.reason,
            detail=d.detail,
        )
    row = s.get(Model, m.id)
    assert row is not None  # loaded by this session's snapshot
    row.desired_replicas = d.desired
    row.desired_reason = d.reason
    row.autoscaler_state = dict(step.state)
    row.updated_at = at
    ctx.telemetry.desired_replicas.labels(m.customer, m.name).set(d.desired)

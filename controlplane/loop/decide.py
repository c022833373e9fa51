"""The decide job: for every model, the autoscaling step (``controlplane.scaling``) on the
tick's snapshot; a changed decision is written back with its reason and the decider's
state, and recorded with the inputs that replay it (``autoscaler.codec``).

Only what changed is written. The decider's state changes every tick (gpucap's forecast
folds in each sample), so the reader holds the newest in memory and the row gets it with
a changed decision, else once per ``Tuning.decider_state_persist_s`` (spread over the ticks
by model id): a restart resumes from a state that old at most. Each write is one UPDATE of
the decide job's own columns, guarded by the row version the snapshot read and leaving it
as it was: a pin, a pause or a spec change committed since the read wins (this tick's step
for that model is dropped; the next decides on the new row), and an API write never fails
on a version the decide job bumped."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

import structlog
from sqlalchemy import Table, update
from sqlalchemy.orm import Session

from autoscaler import codec
from autoscaler.types import AutoscalerInput
from controlplane.decider_code import decider_code
from controlplane.lifecycle.warm import covers
from controlplane.loop.coldstart import expected_s, warm_s
from controlplane.loop.context import LoopContext, Tuning
from controlplane.loop.snapshot import ModelFacts, Snapshot, SnapshotReader
from controlplane.loop.views import replica_counts, scaling_spec
from controlplane.loop.warm import parked, warm_of
from controlplane.scaling import Overrides, Step, changed, scale
from controlplane.store.models import DecisionRecord, Model

log = structlog.get_logger("gpucap.loop")


def decide(ctx: LoopContext, reader: SnapshotReader) -> None:
    now, now_dt = ctx.now(), ctx.now_dt()
    held: list[tuple[int, dict[str, Any], bool]] = []  # (model, newest state, written)
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
            due = _state_due(m.id, reader.state_stored_at(m.id), now, ctx.tuning)
            written = _apply(ctx, s, m, inp, step, now_dt, due)
            if written is not False:
                held.append((m.id, dict(step.state), bool(written)))
    # (after the commit: a tick that failed to commit leaves memory as the store is)
    for model_id, state, written in held:
        reader.hold_state(model_id, state, now if written else None)


def _state_due(model_id: int, stored_at: float | None, now: float, tuning: Tuning) -> bool:
    """Whether the decider's state is to be written this tick though the decision stands:
    once per period, each model in its own phase of it (so a fleet's writes spread over
    the ticks instead of landing on one)."""
    every = tuning.decider_state_persist_s
    if stored_at is None or every <= 0:
        return True
    phase = (model_id % 16) / 16 * every
    return math.floor((now + phase) / every) != math.floor((stored_at + phase) / every)


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
    ctx: LoopContext,
    s: Session,
    m: ModelFacts,
    inp: AutoscalerInput,
    step: Step,
    at: datetime,
    state_due: bool,
) -> bool | None:
    """Write what changed: True (written), None (nothing to write: the state is held in
    memory) or False (the row changed since the snapshot: nothing written, the step is
    dropped)."""
    d = step.decision
    gauge = ctx.telemetry.desired_replicas.labels(m.customer, m.name)
    decided = changed(d, m.desired, m.reason)
    if not decided and not state_due:
        gauge.set(d.desired)  # (unchanged: the stored one)
        return None
    values: dict[str, Any] = {"autoscaler_state": dict(step.state)}
    if decided:
        values |= {"desired_replicas": d.desired, "desired_reason": d.reason}
    guarded = _UPDATE.where(_MODELS.c.id == m.id, _MODELS.c.version == m.version).values(values)
    if s.execute(guarded).rowcount != 1:  # type: ignore[attr-defined]
        log.info("decide.skipped", customer=m.customer, model=m.name, why="row changed")
        gauge.set(m.desired)
        return False
    gauge.set(d.desired)
    if decided:
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
    return True


# The decide job's own columns, by id and the version read; the version is left as it is
# (a Core UPDATE: the ORM's version counter would bump it), so the API's optimistic writes
# of spec and overrides never conflict with it.
_MODELS = cast(Table, Model.__table__)
_UPDATE = update(_MODELS)

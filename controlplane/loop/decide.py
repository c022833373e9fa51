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
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

import structlog
from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from autoscaler import codec
from autoscaler.types import AutoscalerInput, ReplicaCounts, ScalingSpec
from controlplane.decider_code import decider_code
from controlplane.lifecycle.warm import covers
from controlplane.loop.coldstart import expected_s, warm_s
from controlplane.loop.context import LoopContext, Tuning
from controlplane.loop.memo import TickMemo
from controlplane.loop.snapshot import ModelFacts, ReplicaFacts, Snapshot, SnapshotReader
from controlplane.loop.views import replica_counts, scaling_spec
from controlplane.loop.warm import parked, warm_of
from controlplane.scaling import Overrides, Step, changed, scale
from controlplane.store.models import DecisionRecord, Model

log = structlog.get_logger("gpucap.loop")


def decide(ctx: LoopContext, reader: SnapshotReader, memo: TickMemo | None = None) -> None:
    now, now_dt = ctx.now(), ctx.now_dt()
    memo = memo or TickMemo()
    memo.new_tick()
    held: list[tuple[int, dict[str, Any], bool]] = []  # (model, newest state, written)
    with ctx.store.session() as s:
        snap = reader.read(s, now)
        writes: list[_Write] = []
        for m in snap.models:
            if m.deleted:
                continue
            inp = AutoscalerInput(
                model=m.name,
                now=now,
                metrics=ctx.window.window((m.customer, m.name), now),
                replicas=_counts(memo, m, snap.replicas.get(m.id, _NONE)),
                spec=_scaling(ctx, memo, m),
                cold_start_s=_cold_start_s(ctx, memo, m, snap.observed.get(m.id, _NONE)),
            )
            inp, step = _step(ctx, snap, m, inp)
            due = _state_due(m.id, reader.state_stored_at(m.id), now, ctx.tuning)
            decided = changed(step.decision, m.desired, m.reason)
            if decided or due:
                writes.append(_Write(m, inp, step, decided))
            else:
                ctx.telemetry.desired_replicas.labels(m.customer, m.name).set(m.desired)
                held.append((m.id, dict(step.state), False))
        written = _write(s, writes)
        for w in writes:
            _written(ctx, s, w, w.model.id in written, now_dt)
            if w.model.id in written:
                held.append((w.model.id, dict(w.step.state), True))
    # (after the commit: a tick that failed to commit leaves memory as the store is)
    for model_id, state, stored in held:
        reader.hold_state(model_id, state, now if stored else None)


_NONE: list[Any] = []  # (one object: a model with nothing is the same input every tick)


def _counts(memo: TickMemo, m: ModelFacts, replicas: list[ReplicaFacts]) -> ReplicaCounts:
    def count() -> ReplicaCounts:
        return replica_counts([r for r in replicas if not r.warm], m.spec)

    return memo.get(("counts", m.id), (replicas, m.spec), count)


def _scaling(ctx: LoopContext, memo: TickMemo, m: ModelFacts) -> ScalingSpec:
    return memo.get(("spec", m.id), (m.spec,), lambda: scaling_spec(m.spec, ctx.tuning))


def _cold_start_s(
    ctx: LoopContext, memo: TickMemo, m: ModelFacts, observed: list[tuple[str, float]]
) -> float:
    return memo.get(("cold", m.id), (m.spec, observed), lambda: expected_s(ctx, m.spec, observed))


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


@dataclass(frozen=True)
class _Write:
    """A model's row to write this tick: the decider's state, and the decision if it
    changed."""

    model: ModelFacts
    inp: AutoscalerInput
    step: Step
    decided: bool


def _write(s: Session, writes: list[_Write]) -> set[int]:
    """Write the rows, each guarded by the version the snapshot read, in two batches (the
    state alone; the state with a decision) instead of a statement per model; the ids of
    the rows written. A batch's count says only how many matched; when some did not, the
    versions are read back in the same transaction, which holds the written rows' locks
    (PostgreSQL) or the database's (SQLite): a row written still has the version read, a row
    changed under us has a later one."""
    by_id = {w.model.id: w for w in writes}
    out: set[int] = set()
    for decided in (False, True):
        batch = [w for w in writes if w.decided == decided]
        if not batch:
            continue
        rows = [_values(w) for w in batch]
        stmt = _STATE_AND_DECISION if decided else _STATE
        if s.execute(stmt, rows).rowcount == len(rows):  # type: ignore[attr-defined]
            out.update(w.model.id for w in batch)
            continue
        ids = [w.model.id for w in batch]
        for model_id, version in s.execute(_VERSIONS.where(_MODELS.c.id.in_(ids))):
            if version == by_id[model_id].model.version:
                out.add(model_id)
    return out


def _values(w: _Write) -> dict[str, Any]:
    d = w.step.decision
    return {
        "m_id": w.model.id,
        "m_version": w.model.version,
        "autoscaler_state": dict(w.step.state),
        "desired_replicas": d.desired,
        "desired_reason": d.reason,
    }


def _written(ctx: LoopContext, s: Session, w: _Write, written: bool, at: datetime) -> None:
    """What follows a row's write: the gauge, and a changed decision recorded with the
    inputs that replay it. A row changed since the snapshot (a pin, a pause, a spec
    change) was not written: this tick's step for it is dropped."""
    m, d = w.model, w.step.decision
    gauge = ctx.telemetry.desired_replicas.labels(m.customer, m.name)
    if not written:
        log.info("decide.skipped", customer=m.customer, model=m.name, why="row changed")
        gauge.set(m.desired)
        return
    gauge.set(d.desired)
    if not w.decided:
        return
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
            inputs=codec.encode(w.inp, m.autoscaler_state, decider),
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


# The decide job's own columns, by id and the version read; the version is left as it is
# (a Core UPDATE: the ORM's version counter would bump it), so the API's optimistic writes
# of spec and overrides never conflict with it.
_MODELS = cast(Table, Model.__table__)
_GUARD = (_MODELS.c.id == bindparam("m_id"), _MODELS.c.version == bindparam("m_version"))
_STATE = update(_MODELS).where(*_GUARD).values(autoscaler_state=bindparam("autoscaler_state"))
_STATE_AND_DECISION = (
    update(_MODELS)
    .where(*_GUARD)
    .values(
        autoscaler_state=bindparam("autoscaler_state"),
        desired_replicas=bindparam("desired_replicas"),
        desired_reason=bindparam("desired_reason"),
    )
)
_VERSIONS = select(_MODELS.c.id, _MODELS.c.version)

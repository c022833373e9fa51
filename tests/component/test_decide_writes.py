"""The decide job writes only what changed, and never races an on-call write (issue 26:
at 10,000 models it rewrote every model row every tick, so on-call pins and pauses lost
to stale-version errors). On SQLite and PostgreSQL (``store`` fixture)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext
from controlplane.loop.decide import decide
from controlplane.loop.snapshot import Snapshot, SnapshotReader
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import DecisionRecord
from controlplane.store.models import Model as ModelRow
from controlplane.telemetry import Metrics
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimTimings
from tests.component.test_control_loop import POLICY, TUNING, Clock, ScriptedLoad


def _loop(store: Store, load: dict[tuple[str, str], float | None]) -> tuple[ControlLoop, Clock]:
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
    ControlPlaneService(store).apply_policy(POLICY, source="demo", applied_by="test")
    ctx = LoopContext(
        store=store,
        providers=SimResolver(sim, retry=NO_RETRY),
        metrics_source=ScriptedLoad(dict(load)),
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=TUNING,
        clock=clock,
    )
    return ControlLoop(ctx), clock


def _tick(loop: ControlLoop, clock: Clock) -> None:
    loop.collect_metrics()
    loop.decide()
    loop.place()
    loop.reconcile()
    clock.t += 1


def test_a_steady_fleet_writes_its_rows_only_when_a_decision_changes(store: Store) -> None:
    loop, clock = _loop(store, {("demo", "llama-70b"): 40.0, ("demo", "chat-8b"): 5.0})
    for _ in range(30):
        _tick(loop, clock)
    updates: list[str] = []

    def seen(_conn: Any, _cur: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE MODELS"):
            updates.append(statement)

    with store.session() as s:
        records_before = len(s.scalars(select(DecisionRecord)).all())
        models = len(s.scalars(select(ModelRow)).all())
    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        for _ in range(40):  # 40 decide ticks, fewer than the 60 s state period
            loop.collect_metrics()
            loop.decide()
            clock.t += 1
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    with store.session() as s:
        decided = len(s.scalars(select(DecisionRecord)).all()) - records_before
    # Was one per model and tick (120). Now: a changed decision, or a model's state once
    # in its phase of the period.
    assert len(updates) <= decided + models, (len(updates), decided, models)
    assert len(updates) < 40 * models / 4


class PinningReader(SnapshotReader):
    """Pins a model through the API right after the decide job's snapshot was read: an
    on-call write committed between the job's read and its write."""

    def __init__(self, inner: SnapshotReader, service: ControlPlaneService) -> None:
        super().__init__()
        self.__dict__.update(inner.__dict__)
        self.service = service
        self.armed = False

    def read(self, s: Session, now: float, *, placement: bool = False) -> Snapshot:
        snap = super().read(s, now, placement=placement)
        if self.armed:
            self.armed = False
            self.service.pin_model("demo", "chat-8b", 2)
        return snap


def test_an_on_call_pin_between_the_decide_read_and_write_is_kept(store: Store) -> None:
    loop, clock = _loop(store, {("demo", "llama-70b"): 40.0, ("demo", "chat-8b"): 5.0})
    reader = PinningReader(loop.reader, ControlPlaneService(store))
    reader.armed = True
    # The first tick decides every model anew (each has a decision to write). Before, the
    # job's write of chat-8b failed on the version the pin bumped, and the whole tick
    # with it.
    loop.collect_metrics()
    decide(loop.ctx, reader)
    with store.session() as s:
        rows = {m.name: m for m in s.scalars(select(ModelRow))}
        assert rows["chat-8b"].pinned_replicas == 2  # the pin stands
        recorded = {r.model for r in s.scalars(select(DecisionRecord))}
    # The other models' decisions were written; chat-8b's (made before the pin) was not.
    assert {"llama-70b"} <= recorded and "chat-8b" not in recorded
    assert rows["llama-70b"].desired_reason != ""
    clock.t += 1
    loop.collect_metrics()
    decide(loop.ctx, reader)
    with store.session() as s:
        chat = s.scalar(select(ModelRow).where(ModelRow.name == "chat-8b"))
        assert chat is not None and (chat.desired_replicas, chat.pinned_replicas) == (2, 2)

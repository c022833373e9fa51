"""The control loop as the daemon (and its tests) drive it: one object holding what the
jobs keep between ticks (the parsed specs, the last plan per model, when gc last ran), with
one method per job. Each method only loads a snapshot, calls pure code and applies the
result; the job modules say how."""

from __future__ import annotations

from controlplane.loop.collect import collect
from controlplane.loop.context import LoopContext
from controlplane.loop.decide import decide
from controlplane.loop.gc import collect_garbage, collect_orphan_images, release_placement_groups
from controlplane.loop.images import Baker
from controlplane.loop.memo import TickMemo
from controlplane.loop.offerings import refresh_offerings
from controlplane.loop.place import Placer
from controlplane.loop.reconcile import Reconciler
from controlplane.loop.snapshot import SnapshotReader
from controlplane.loop.staging import Stager


class ControlLoop:
    def __init__(self, ctx: LoopContext) -> None:
        self.ctx = ctx
        self.reader = SnapshotReader(ctx.specs)
        self._placer = Placer()
        self._stager = Stager()
        self._baker = Baker()
        self._reconciler = Reconciler()
        self._decided = TickMemo()
        self._last_gc: float | None = None

    def collect_metrics(self) -> None:
        collect(self.ctx, self.reader)

    def decide(self) -> None:
        decide(self.ctx, self.reader, self._decided)

    def place(self) -> None:
        self._placer.run(self.ctx, self.reader)

    def reconcile(self) -> None:
        """Every node's lifecycle step (with the node gauges), then gc when it is due."""
        self._reconciler.run(self.ctx)
        now = self.ctx.now()
        if self._last_gc is None or now - self._last_gc >= self.ctx.tuning.gc_every_s:
            self._last_gc = now
            self.collect_garbage()

    def collect_garbage(self) -> int:
        """Orphaned instances terminated (and orphaned images deleted, gangs' placement
        objects released)."""
        release_placement_groups(self.ctx)
        collect_orphan_images(self.ctx)
        return collect_garbage(self.ctx)

    def stage_weights(self) -> None:
        """Weight copies planned, advanced, verified and evicted (``loop/staging.py``)."""
        self._stager.run(self.ctx, self.reader)

    def bake_images(self) -> None:
        """Baked machine images built, timed out and garbage-collected (``loop/images.py``)."""
        self._baker.run(self.ctx)

    def refresh_offerings(self) -> int:
        return refresh_offerings(self.ctx)

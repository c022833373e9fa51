"""Why a model's next replica would start where, and how long it would take: every pool its
policy allows, with the expected time-to-ready phase by phase and where each figure comes
from, and what keeps a pool from taking a launch now (a cordon, a block after a stockout).
The figures are placement's own (``controlplane.loop.coldstart.pool_estimate`` over the
same snapshot the place job reads)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from coldstart import ColdStartModel
from controlplane import placement
from controlplane.api.errors import NotFoundError, require
from controlplane.api.views import ExplainView, PoolEstimateView
from controlplane.loop.coldstart import pool_estimate
from controlplane.loop.snapshot import SnapshotReader
from controlplane.loop.views import pool_view
from controlplane.loop.warm import waiting_pools
from controlplane.placement.plan import POLICY_FILTERS
from controlplane.store.db import Store
from schema.policy import Overflow


class Explain:
    def __init__(
        self,
        store: Store,
        clock: Callable[[], datetime],
        coldstart: ColdStartModel,
        cold_start_scale: float,
    ) -> None:
        self._store = store
        self._clock = clock
        self._coldstart = coldstart
        self._scale = cold_start_scale
        self._reader = SnapshotReader()

    def explain(self, customer: str, name: str) -> ExplainView:
        require("customer", customer)
        require("model", name)
        now = self._clock().astimezone(UTC).timestamp()
        with self._store.session() as s:
            snap = self._reader.read(s, now, placement=True)
        found = [m for m in snap.models if (m.customer, m.name) == (customer, name)]
        if not found or found[0].deleted:
            raise NotFoundError("model", f"{customer}/{name}")
        m = found[0]
        pools = snap.pools.get(customer, [])
        inp = placement.PlacementInput(
            model=placement.ModelView(customer, name, m.spec),
            desired=0.0,
            replicas=(),
            pools=tuple(pool_view(p, snap.nodes_in_use[p.id], 0.0) for p in pools),
            overflow=snap.overflow.get(customer) or Overflow(),
        )
        seen = snap.observed.get(m.id, [])
        waiting = waiting_pools(snap, m)
        out, excluded = [], []
        for p, view in zip(pools, inp.pools, strict=True):
            failed = next((name for name, ok in POLICY_FILTERS if not ok(inp, view)), None)
            if failed is not None:
                excluded.append((p.id, failed))
                continue
            est = pool_estimate(
                self._coldstart,
                self._scale,
                snap.learned,
                m.id,
                m.spec,
                seen,
                p.id,
                p.cloud,
                p.gpu_shape,
                warm=p.id in waiting,
                baked=snap.baked_for(m, p),
            )
            blocked = p.blocked_until if p.blocked_until and p.blocked_until > now else None
            out.append(PoolEstimateView(p, est, blocked, snap.nodes_in_use[p.id]))
        out.sort(key=lambda v: (v.estimate.seconds, v.pool.id))
        return ExplainView(customer, name, m.desired, tuple(out), tuple(excluded))

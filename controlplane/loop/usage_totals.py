"""Usage metering's totals since the first node, per customer, capacity tier and cloud, for
the daemon's counters (``telemetry.UsageCounters``), read from the store on each reconcile
tick without reading the whole node history every time.

A node released more than :data:`SETTLE` ago bills nothing more: its sum is kept here and
its rows are not read again. Each tick reads only the nodes released since then (once,
as they settle) and those held or released within the last :data:`SETTLE`. What is kept
here is a cache of sums of rows that no longer change, rebuilt from the store by a new
process (its first tick reads the settled history once): a restart or a new leader counts
from the same rows, never from what another process had counted."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from controlplane.store.usage import released_uses, unreleased_uses
from controlplane.usage import EPOCH, NodeUse, micros, usage

# How long after a node's release its rows are still read each tick: far longer than any
# transaction that stamps a release takes to commit, so none lands behind the mark.
SETTLE = timedelta(hours=1)
_KEYS = ("tier", "cloud")

Key = tuple[str, str, str]  # (customer, tier, cloud)
Totals = dict[Key, tuple[float, float, float]]  # GPU-seconds, node-seconds, USD


class UsageTotals:
    def __init__(self) -> None:
        self._settled_before = EPOCH
        self._settled: dict[Key, tuple[int, int, float]] = {}  # GPU-us, node-us, USD

    def totals(self, s: Session, now: datetime) -> Totals:
        """Usage within [epoch, now) per (customer, tier, cloud)."""
        mark = now - SETTLE
        until = micros(now)
        if mark > self._settled_before:
            done = released_uses(s, self._settled_before, mark)
            self._add(self._settled, done, until)
            self._settled_before = mark
        out = dict(self._settled)
        self._add(out, unreleased_uses(s, self._settled_before), until)
        return {k: (g / 1e6, n / 1e6, usd) for k, (g, n, usd) in out.items()}

    @staticmethod
    def _add(into: dict[Key, tuple[int, int, float]], uses: list[NodeUse], until: int) -> None:
        for r in usage(uses, 0, until, _KEYS):
            g, n, usd = into.get((r.customer, r.tier, r.cloud), (0, 0, 0.0))
            into[(r.customer, r.tier, r.cloud)] = (
                g + r.gpu_micros,
                n + r.node_micros,
                usd + r.cost_usd,
            )

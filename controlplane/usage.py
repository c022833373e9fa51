"""Usage metering's arithmetic: what each node bills over a time range, summed per customer
and per model, capacity tier or cloud. Pure (no clock, no I/O): the store's edge
(``controlplane.store.usage``) reads the node rows into :class:`NodeUse` values, and both
the API (``GetUsage``) and the daemon's counters call :func:`usage` on them.

A node bills from its request (``pending_at``) to its release (``terminated_at``; for a
node failed for good, ``failed_at``), less the time it waited stopped in a warm pool; the
simulator's full-loop replay bills its nodes with this too. A node whose create never made
an instance bills nothing. Times are integer microseconds since the Unix epoch, so the seconds of
[a, b) and [b, c) add up to those of [a, c) exactly, whatever the ranges cut.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# What usage can be grouped by besides the customer (every row is one customer's: a model
# name means something only within its customer).
GROUP_KEYS = ("model", "tier", "cloud")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
US_PER_HOUR = 3_600_000_000


def micros(at: datetime) -> int:
    """``at`` (aware, or naive UTC) as integer microseconds since the Unix epoch."""
    return ((at if at.tzinfo is not None else at.replace(tzinfo=UTC)) - EPOCH) // _US


@dataclass(frozen=True)
class NodeUse:
    """One node's billing facts, as its rows say. ``stops`` are the intervals it waited
    stopped, in any order (end None: stopped still)."""

    node_id: str
    customer: str
    model: str
    tier: str
    cloud: str
    gpus: int
    usd_per_hour: float  # its price as of its launch
    requested: int  # microseconds, as every time here
    released: int | None  # None: still held
    stops: tuple[tuple[int, int | None], ...] = ()


def closed_stop(stopped: int | None, resumed: int | None) -> tuple[int, int] | None:
    """The stop a node row's latest ``stopped_at`` and ``resuming_at`` show as over (it was
    resumed after it stopped), else None: still stopped, or never."""
    if stopped is None or resumed is None or resumed < stopped:
        return None
    return stopped, resumed


def row_stops(stopped: int | None, resumed: int | None) -> tuple[tuple[int, int | None], ...]:
    """The stop a node row's latest stamps show: closed, open (no resume since), or none."""
    if stopped is None:
        return ()
    closed = closed_stop(stopped, resumed)
    return (closed,) if closed is not None else ((stopped, None),)


def billed_intervals(u: NodeUse) -> list[tuple[int, int | None]]:
    """The node's life less its stops, in order (end None: billing still)."""
    end = u.released
    out: list[tuple[int, int | None]] = []
    cursor: int | None = u.requested
    for a, b in sorted(u.stops, key=lambda s: s[0]):
        if cursor is None or (end is not None and cursor >= end):
            break
        if a > cursor:
            out.append((cursor, a if end is None else min(a, end)))
        cursor = None if b is None else max(cursor, b)
    if cursor is not None and (end is None or cursor < end):
        out.append((cursor, end))
    return out


def billed_micros(u: NodeUse, since: int, until: int) -> int:
    """Microseconds the node bills within [since, until)."""
    total = 0
    for a, b in billed_intervals(u):
        lo, hi = max(a, since), until if b is None else min(b, until)
        total += max(0, hi - lo)
    return total


@dataclass(frozen=True)
class UsageRow:
    """One group's usage: its keys (empty when not grouped by it), the nodes that billed
    within the range, and their time and cost."""

    customer: str
    model: str
    tier: str
    cloud: str
    nodes: int
    node_micros: int
    gpu_micros: int
    cost_usd: float

    @property
    def node_hours(self) -> float:
        return self.node_micros / US_PER_HOUR

    @property
    def gpu_hours(self) -> float:
        return self.gpu_micros / US_PER_HOUR


_Key = tuple[str, str, str, str]  # (customer, model, tier, cloud)


def usage(
    uses: Iterable[NodeUse], since: int, until: int, group_by: Sequence[str] = ()
) -> list[UsageRow]:
    """Usage within [since, until) per customer and the ``group_by`` keys (of
    :data:`GROUP_KEYS`), sorted by its keys; a group with nothing billed has no row.
    Costs are summed exactly rounded (``math.fsum``), so the order of ``uses`` does not
    change them."""
    unknown = set(group_by) - set(GROUP_KEYS)
    if unknown:
        raise ValueError(f"unknown group keys {sorted(unknown)}")
    nodes: dict[_Key, int] = defaultdict(int)
    node_us: dict[_Key, int] = defaultdict(int)
    gpu_us: dict[_Key, int] = defaultdict(int)
    costs: dict[_Key, list[float]] = defaultdict(list)
    for u in uses:
        us = billed_micros(u, since, until)
        if us <= 0:
            continue
        key = (
            u.customer,
            u.model if "model" in group_by else "",
            u.tier if "tier" in group_by else "",
            u.cloud if "cloud" in group_by else "",
        )
        nodes[key] += 1
        node_us[key] += us
        gpu_us[key] += us * u.gpus
        costs[key].append(us * u.usd_per_hour / US_PER_HOUR)
    return [
        UsageRow(*key, nodes[key], node_us[key], gpu_us[key], math.fsum(costs[key]))
        for key in sorted(nodes)
    ]

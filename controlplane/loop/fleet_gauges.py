"""The fleet's gauges, set on each reconcile tick (the daemon runs this after the job):
what the live nodes cost per hour by customer and capacity tier, each customer's overflow
cap, which active pools take no launch, the weight copies' progress, the cold starts of
the nodes that became ready since the last tick, and usage metering's totals. One read of
the store; the gauges' label sets this tick did not write (a pool gone, a customer whose
overflow cap was dropped, a copy done) leave /metrics at the end of the tick
(``telemetry.SweptGauge``)."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from controlplane.availability import PoolKey, availability
from controlplane.loop.context import LoopContext, epoch
from controlplane.loop.snapshot import LIVE_VALUES, unavailable_entries
from controlplane.loop.usage_totals import UsageTotals
from controlplane.store.models import Customer, Node, PolicyVersion, Pool, WeightCopy
from schema.policy import Overflow
from schema.policy_file import parse_policy

# Live nodes (NodeState.is_live: the capacity a model has or is getting) per pool.
_LIVE_PER_POOL = (
    select(Node.pool_id, func.count(Node.id))
    .where(Node.state.in_(LIVE_VALUES))
    .group_by(Node.pool_id)
)
_POOLS = select(Pool).order_by(Pool.id)
_READY = select(
    Node.customer, Node.cloud, Pool.tier, Node.pending_at, Node.resuming_at, Node.ready_at
).join(Pool, Node.pool_id == Pool.id)
_COPIES = select(WeightCopy)
_UNDER_WAY = ("pending", "copying")  # (WeightCopy.state)


class FleetGauges:
    """Keeps each customer's parsed overflow rule between ticks (parsed again only when
    the active policy changes)."""

    def __init__(self) -> None:
        self._overflow: dict[str, tuple[str, Overflow]] = {}
        self._ready_since: datetime | None = None  # cold starts up to here were observed
        self._usage_totals = UsageTotals()

    def run(self, ctx: LoopContext) -> None:
        now = ctx.now()
        t = ctx.telemetry
        with ctx.store.session() as s:
            live: dict[str, int] = {p: int(n) for p, n in s.execute(_LIVE_PER_POOL)}
            entries = unavailable_entries(s, now)
            usd: dict[tuple[str, str], float] = defaultdict(float)
            for p in s.scalars(_POOLS):
                if p.active or live.get(p.id):  # (a dropped pool bills for what it has left)
                    usd[(p.customer, p.tier)] += p.price_usd_per_hour * live.get(p.id, 0)
                if not p.active:
                    continue
                zones = tuple((p.zones or {}).get("zones", ()))
                key = PoolKey(p.id, p.account, p.region, p.instance_type, zones)
                avail = availability(
                    key, entries.get(p.customer, ()), now, epoch(p.unavailable_until)
                )
                blocked = avail.blocked_until is not None and avail.blocked_until > now
                t.pool_blocked.labels(p.customer, p.id, p.cloud, p.region, p.tier).set(
                    1 if blocked else 0
                )
            for (customer, tier), v in usd.items():
                t.usd_per_hour.labels(customer, tier).set(v)
            for cust in s.scalars(select(Customer)):
                o = self._overflow_of(s, cust)
                if o.enabled and o.max_usd_per_hour is not None:
                    t.overflow_max_usd_per_hour.labels(cust.name).set(o.max_usd_per_hour)
            self._copies(ctx, s)
            self._cold_starts(ctx, s)
            self._usage(ctx, s)

    def _copies(self, ctx: LoopContext, s: Session) -> None:
        t = ctx.telemetry
        states: Counter[tuple[str, str]] = Counter()
        for c in s.scalars(_COPIES):
            states[(c.customer, c.state)] += 1
            if c.state in _UNDER_WAY:
                done = c.bytes_done / c.bytes_total if c.bytes_total else 0.0
                t.staging_progress.labels(c.customer, c.model, c.account, c.region).set(done)
        for (customer, state), n in states.items():
            t.staging_copies.labels(customer, state).set(n)

    def _cold_starts(self, ctx: LoopContext, s: Session) -> None:
        """Each node that became ready since the last call, once (the first call only
        marks where to start: what became ready before this daemon started is not its)."""
        since = self._ready_since
        if since is None:
            self._ready_since = ctx.now_dt()
            return
        newest = since.timestamp()
        for customer, cloud, tier, pending, resuming, ready in s.execute(
            _READY.where(Node.ready_at > since)
        ):
            start, end = epoch(resuming or pending), epoch(ready)
            if start is None or end is None:
                continue
            if end >= start:
                ctx.telemetry.time_to_ready.labels(customer, cloud, tier).observe(end - start)
            newest = max(newest, end)
        self._ready_since = datetime.fromtimestamp(newest, UTC)

    def _usage(self, ctx: LoopContext, s: Session) -> None:
        """Usage metering's totals since the first node, from the rows (why totals:
        ``telemetry.UsageCounters``)."""
        ctx.telemetry.usage.update(self._usage_totals.totals(s, ctx.now_dt()))

    def _overflow_of(self, s: Session, cust: Customer) -> Overflow:
        pv = s.get(PolicyVersion, cust.active_policy_id) if cust.active_policy_id else None
        if pv is None:
            return Overflow()
        cached = self._overflow.get(cust.name)
        if cached is None or cached[0] != pv.sha256:
            overflow = parse_policy(pv.raw_yaml, pv.source or cust.name).policy.overflow
            cached = self._overflow[cust.name] = (pv.sha256, overflow)
        return cached[1]

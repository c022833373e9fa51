"""Writes of the lifecycle's pure transitions onto store rows, for every writer alike (the
loop's jobs and the API's on-call drain), and the one read back of what they wrote."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from controlplane.availability import PoolKey, Unavailable
from controlplane.lifecycle.drain import nodes_to_drain
from controlplane.store.models import Pool, Replica, UnavailableOffering
from schema.types import NodeState


def drain_replica(replica: Replica, now: datetime) -> list[str]:
    """Drain ``replica`` and those of its nodes still serving or on their way (the one
    drain transition, ``lifecycle.drain``); returns the ids of the nodes that moved."""
    moving = set(nodes_to_drain((n.id, n.state) for n in replica.nodes))
    for n in replica.nodes:
        if n.id in moving:
            n.state, n.draining_at = NodeState.DRAINING.value, now
    replica.state = NodeState.DRAINING.value
    return sorted(moving)


def retire_replica(replica: Replica, now: datetime, reason: str) -> str | None:
    """Leave surge-first (``lifecycle.surge``): a ready replica is marked retiring and
    serves on until its replacement is ready; one that does not serve yet drains now
    (nothing to keep). Returns ``"retiring"``, ``"draining"``, or None when it was already
    leaving."""
    state = NodeState(replica.state)
    if replica.retiring_at is not None or not state.is_live:
        return None
    if state != NodeState.READY:
        drain_replica(replica, now)
        return "draining"
    replica.retiring_at, replica.retire_reason = now, reason[:200]
    return "retiring"


def unavailable_entry(row: UnavailableOffering) -> Unavailable:
    """A cache row as the value ``record_unavailable`` wrote."""
    until = row.until if row.until.tzinfo else row.until.replace(tzinfo=UTC)  # SQLite: naive
    return Unavailable(
        account=row.account,
        until=until.timestamp(),
        reason=row.reason,
        source=row.source,
        region=row.region,
        zone=row.zone,
        instance_type=row.instance_type,
        pool_id=row.pool_id,
    )


def record_unavailable(s: Session, customer: str, e: Unavailable) -> int:
    """Record ``e`` in the unavailable-offerings cache; a block that covers whole pools is
    also stamped on their rows (what ``gpucap pools`` shows). Returns the pools covered
    whole."""
    until = datetime.fromtimestamp(e.until, UTC)
    s.add(
        UnavailableOffering(
            customer=customer,
            account=e.account,
            region=e.region,
            zone=e.zone,
            instance_type=e.instance_type,
            pool_id=e.pool_id,
            until=until,
            reason=e.reason,
            source=e.source,
        )
    )
    if e.zone is not None:
        return 0
    pools = s.scalars(select(Pool).where(Pool.customer == customer, Pool.account == e.account))
    covered = 0
    for p in pools:
        if e.applies_to(PoolKey(p.id, p.account, p.region, p.instance_type)):
            p.unavailable_until = until
            p.unavailable_reason = e.reason
            covered += 1
    return covered

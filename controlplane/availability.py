"""Availability as data: the offerings known to be unavailable now, keyed down to the zone
(Karpenter's unavailable-offerings cache, HOUSE-STYLE principle 7). Two sources fill it:
the clouds' own answers (``Provider.list_offerings``, refreshed by the loop's offerings job)
and typed create errors (``lifecycle.blocking``). Placement reads it through the pools'
views: a pool whose every known zone is blocked, or that is blocked as a whole, takes no
launch; a pool with some zones blocked launches into one that is open.

Pure: the store rows are loaded into :class:`Unavailable` values by the snapshot reader."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controlplane.lifecycle.blocking import Block

FROM_ERROR = "error"
FROM_CLOUD = "cloud"


@dataclass(frozen=True)
class Unavailable:
    """Offerings of one account that are unavailable until ``until``; None matches all."""

    account: str
    until: float
    reason: str
    source: str = FROM_ERROR
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    pool_id: str | None = None

    @classmethod
    def from_block(cls, account: str, block: Block, now: float, reason: str) -> Unavailable:
        return cls(
            account=account,
            until=now + block.ttl_s,
            reason=reason,
            region=block.region,
            zone=block.zone,
            instance_type=block.instance_type,
            pool_id=block.pool_id,
        )

    def applies_to(self, pool: PoolKey) -> bool:
        """Does this entry cover the pool, in some zone or in all of them?"""
        return (
            self.account == pool.account
            and self.region in (None, pool.region)
            and self.instance_type in (None, pool.instance_type)
            and self.pool_id in (None, pool.id)
        )


@dataclass(frozen=True)
class PoolAvailability:
    blocked_until: float | None  # the whole pool takes no launch until then
    zone: str | None  # where the next launch goes; None: wherever the cloud picks
    open_zones: tuple[str, ...]


@dataclass(frozen=True)
class PoolKey:
    id: str
    account: str
    region: str
    instance_type: str
    zones: tuple[str, ...] = ()  # the zones that offer the pool's type, when known


def availability(
    pool: PoolKey, entries: Iterable[Unavailable], now: float, stamped_until: float | None = None
) -> PoolAvailability:
    """What placement may do with ``pool`` now. ``stamped_until``: a block recorded on the
    pool row itself."""
    live = [e for e in entries if e.until > now and e.applies_to(pool)]
    whole = [e for e in live if e.zone is None]
    zone_until: dict[str, float] = {}
    for e in live:
        if e.zone is not None:
            zone_until[e.zone] = max(e.until, zone_until.get(e.zone, 0.0))
    open_zones = tuple(z for z in pool.zones if z not in zone_until)
    closed = [e.until for e in whole]
    if stamped_until is not None and stamped_until > now:
        closed.append(stamped_until)
    if pool.zones and not open_zones:
        # Every zone known to offer the type is blocked: the pool reopens with the first.
        closed.append(min(zone_until[z] for z in pool.zones))
    if closed:
        return PoolAvailability(max(closed), None, open_zones)
    # Steer clear of blocked zones: the first open one; with the zones not yet known, the
    # cloud picks (it may pick the blocked zone again, and its error blocks it again).
    zone = open_zones[0] if zone_until and open_zones else None
    return PoolAvailability(None, zone, open_zones)


def offerings_to_entries(
    account: str,
    offered: Sequence[tuple[str, str, str, bool, str]],
    now: float,
    ttl_s: float,
) -> list[Unavailable]:
    """The cloud's own "not available" answers, (region, zone, type, available, reason),
    as entries that last until the next refresh is due."""
    return [
        Unavailable(
            account=account,
            until=now + ttl_s,
            reason=f"cloud: {reason or 'not available'}",
            source=FROM_CLOUD,
            region=region,
            zone=zone,
            instance_type=itype,
        )
        for region, zone, itype, ok, reason in offered
        if not ok
    ]

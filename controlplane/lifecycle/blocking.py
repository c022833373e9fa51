"""What a failed create means: retry it in place, or fail the intent and block the offerings
the error covers for a while, at the error's own scope (HOUSE-STYLE principle 7; SkyPilot's
scoped blocklist). A zone stockout blocks that zone only, so the pool's other zones stay
open; a region-wide one blocks the instance type in the region; a quota blocks the account
in the region (or everywhere, for an account-wide quota); expired credentials block the
whole account. Throttling and 5xx are retried in place with backoff, never blocked: they say
nothing about capacity."""

from __future__ import annotations

from dataclasses import dataclass

from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)


@dataclass(frozen=True)
class BlockTTLs:
    """How long each kind of error blocks what it covers (seconds)."""

    capacity_s: float
    quota_s: float
    auth_s: float
    invalid_s: float


@dataclass(frozen=True)
class Block:
    """Offerings of one account made unavailable: every field that is None matches all.
    ``pool_id`` narrows the block to one pool (an error whose scope is unknown)."""

    ttl_s: float
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    pool_id: str | None = None

    @property
    def scope(self) -> str:
        if self.pool_id is not None:
            return "pool"
        if self.region is None:
            return "account"
        if self.instance_type is None:
            return "account_region"
        return "zone" if self.zone is not None else "region"


@dataclass(frozen=True)
class Retry:
    """Leave the intent pending; the reconciler tries again after its backoff."""


@dataclass(frozen=True)
class Fail:
    block: Block


def on_create_error(
    err: ProviderError,
    *,
    attempts: int,
    max_attempts: int,
    region: str,
    zone: str | None,
    instance_type: str,
    pool_id: str,
    ttls: BlockTTLs,
) -> Retry | Fail:
    """``attempts``: create calls made for this intent before this one failed. ``zone``: the
    zone the create asked for (None: the cloud picked; the error's own zone wins)."""
    if isinstance(err, Throttled | TransientError) and attempts + 1 < max_attempts:
        return Retry()
    return Fail(block_for(err, region, zone, instance_type, pool_id, ttls))


def block_for(
    err: ProviderError,
    region: str,
    zone: str | None,
    instance_type: str,
    pool_id: str,
    ttls: BlockTTLs,
) -> Block:
    match err:
        case CapacityUnavailable():
            where = err.zone or zone
            if err.scope == Scope.ZONE and where:
                return Block(ttls.capacity_s, region, where, instance_type)
            return Block(ttls.capacity_s, region, None, instance_type)
        case QuotaExceeded():
            if err.scope == Scope.ACCOUNT:
                return Block(ttls.quota_s)
            return Block(ttls.quota_s, region)
        case AuthFailed():
            return Block(ttls.auth_s)
        case InvalidRequest():
            return Block(ttls.invalid_s, region, None, instance_type)
        case _:
            # Retries spent on throttling or 5xx, or an error of unknown meaning: rest this
            # pool for a while and let placement try the next.
            return Block(ttls.capacity_s, pool_id=pool_id)

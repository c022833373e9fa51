"""A failed create: retry in place, or fail and block at the error's own scope."""

from __future__ import annotations

import pytest

from controlplane.lifecycle.blocking import Block, BlockTTLs, Fail, Retry, on_create_error
from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InvalidRequest,
    NotFound,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)

TTL = BlockTTLs(capacity_s=180, quota_s=900, auth_s=901, invalid_s=3600)


def verdict(err: ProviderError, attempts: int = 0, zone: str | None = None) -> Retry | Fail:
    return on_create_error(
        err,
        attempts=attempts,
        max_attempts=8,
        region="us-east-1",
        zone=zone,
        instance_type="p5.48xlarge",
        pool_id="pool-1",
        ttls=TTL,
    )


@pytest.mark.parametrize(
    ("err", "zone", "want", "scope"),
    [
        (
            CapacityUnavailable("ICE", scope=Scope.ZONE, zone="us-east-1a"),
            None,
            Block(180, "us-east-1", "us-east-1a", "p5.48xlarge"),
            "zone",
        ),
        (  # the zone the create asked for, when the error names none
            CapacityUnavailable("ICE", scope=Scope.ZONE),
            "us-east-1b",
            Block(180, "us-east-1", "us-east-1b", "p5.48xlarge"),
            "zone",
        ),
        (  # a zone stockout with no zone known: the type in the region
            CapacityUnavailable("ICE", scope=Scope.ZONE),
            None,
            Block(180, "us-east-1", None, "p5.48xlarge"),
            "region",
        ),
        (
            CapacityUnavailable("ICE", scope=Scope.REGION, zone="us-east-1a"),
            None,
            Block(180, "us-east-1", None, "p5.48xlarge"),
            "region",
        ),
        (
            QuotaExceeded("q", scope=Scope.ACCOUNT_REGION),
            None,
            Block(900, "us-east-1"),
            "account_region",
        ),
        (QuotaExceeded("q", scope=Scope.ACCOUNT), None, Block(900), "account"),
        (AuthFailed("expired", scope=Scope.ACCOUNT), None, Block(901), "account"),
        (InvalidRequest("bad"), None, Block(3600, "us-east-1", None, "p5.48xlarge"), "region"),
        (NotFound("?"), None, Block(180, pool_id="pool-1"), "pool"),
    ],
)
def test_errors_block_at_their_scope(err, zone, want: Block, scope: str) -> None:
    got = verdict(err, zone=zone)
    assert got == Fail(want)
    assert want.scope == scope


@pytest.mark.parametrize("err", [Throttled("slow down"), TransientError("503")])
def test_throttling_and_5xx_retry_in_place_until_the_attempts_are_spent(err) -> None:
    assert verdict(err, attempts=0) == Retry()
    assert verdict(err, attempts=6) == Retry()  # the 7th call failed; one more is allowed
    assert verdict(err, attempts=7) == Fail(Block(180, pool_id="pool-1"))

"""The unavailable-offerings cache as placement reads it: zone blocks close zones, a pool
closes when it is blocked whole or every zone it has is blocked."""

from __future__ import annotations

from controlplane.availability import (
    FROM_CLOUD,
    PoolKey,
    Unavailable,
    availability,
    offerings_to_entries,
)
from controlplane.lifecycle.blocking import Block

POOL = PoolKey("p1", "acct", "us-east-1", "p5.48xlarge", ("us-east-1a", "us-east-1b"))


def entry(until: float = 100.0, **where: str) -> Unavailable:
    return Unavailable(account="acct", until=until, reason="ICE", **where)  # type: ignore[arg-type]


def test_nothing_blocked_lets_the_cloud_pick() -> None:
    a = availability(POOL, [], now=0.0)
    assert (a.blocked_until, a.zone, a.open_zones) == (None, None, POOL.zones)


def test_a_zone_stockout_closes_that_zone_only() -> None:
    a = availability(POOL, [entry(region="us-east-1", zone="us-east-1a")], now=0.0)
    assert a.blocked_until is None
    assert a.zone == "us-east-1b" and a.open_zones == ("us-east-1b",)


def test_every_zone_blocked_closes_the_pool_until_the_first_reopens() -> None:
    es = [
        entry(150.0, region="us-east-1", zone="us-east-1a"),
        entry(120.0, region="us-east-1", zone="us-east-1b"),
    ]
    a = availability(POOL, es, now=0.0)
    assert a.blocked_until == 120.0 and a.zone is None
    assert availability(POOL, es, now=120.0).zone == "us-east-1b"  # its block expired


def test_region_account_and_pool_blocks_close_the_pool() -> None:
    for e in (
        entry(region="us-east-1", instance_type="p5.48xlarge"),
        entry(region="us-east-1"),  # quota: every type of the account in the region
        entry(),  # auth: the whole account
        entry(pool_id="p1"),
    ):
        assert availability(POOL, [e], now=0.0).blocked_until == 100.0, e


def test_blocks_elsewhere_do_not_touch_the_pool() -> None:
    for e in (
        entry(region="us-west-2"),
        entry(region="us-east-1", instance_type="p4d.24xlarge"),
        Unavailable(account="other", until=100.0, reason="x"),
        entry(pool_id="p2"),
        entry(until=5.0, region="us-east-1"),  # expired
    ):
        assert availability(POOL, [e], now=10.0).blocked_until is None, e


def test_a_block_stamped_on_the_pool_row_still_counts() -> None:
    assert availability(POOL, [], now=0.0, stamped_until=30.0).blocked_until == 30.0
    assert availability(POOL, [], now=40.0, stamped_until=30.0).blocked_until is None


def test_zones_unknown_a_zone_block_leaves_the_pool_open() -> None:
    bare = PoolKey("p1", "acct", "us-east-1", "p5.48xlarge")
    a = availability(bare, [entry(region="us-east-1", zone="us-east-1a")], now=0.0)
    assert a.blocked_until is None and a.zone is None


def test_the_clouds_answers_become_entries_for_what_is_unavailable() -> None:
    rows = [
        ("us-east-1", "us-east-1a", "p5.48xlarge", False, "capacity exhausted"),
        ("us-east-1", "us-east-1b", "p5.48xlarge", True, ""),
    ]
    (e,) = offerings_to_entries("acct", rows, now=10.0, ttl_s=600.0)
    assert (e.zone, e.until, e.source) == ("us-east-1a", 610.0, FROM_CLOUD)
    assert "capacity exhausted" in e.reason


def test_an_entry_from_a_block_lasts_its_ttl() -> None:
    e = Unavailable.from_block("acct", Block(180.0, "us-east-1", "us-east-1a", "p5"), 10.0, "r")
    assert (e.until, e.region, e.zone, e.instance_type) == (190.0, "us-east-1", "us-east-1a", "p5")

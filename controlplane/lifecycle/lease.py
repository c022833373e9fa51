"""Leadership, the pure part: what a daemon does with one shard's lease row, given the
database's clock (never its own: daemons' clocks may disagree, the database's is one).

A lease row holds the holder's id, its expiry (epoch seconds on the database's clock) and a
fencing token that only grows: it moves to ``token + 1`` whenever the lease changes hands
(or is taken again after it lapsed), and stays put while its holder renews it. Every write
of the acting path commits only while its token is still the row's (``store.leases``), so a
deposed leader's late writes are rejected.

Customers map onto shards by a stable hash; with one shard (the default) one daemon acts for
every customer."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class LeaseRow:
    shard: int
    holder: str
    token: int
    expires_at: float  # epoch seconds, the database's clock


@dataclass(frozen=True)
class Decision:
    """``acquire``: no row yet, insert token 1. ``renew``: ours and live, extend it with the
    same token. ``take_over``: lapsed (whoever held it, us included), take it with
    ``token + 1``. ``follow``: another holder's live lease; do not act on this shard."""

    kind: Literal["acquire", "renew", "take_over", "follow"]
    token: int  # the token we would hold (acquire/renew/take_over); the holder's (follow)
    holder: str = ""


def decide(row: LeaseRow | None, now: float, me: str) -> Decision:
    """What ``me`` does with a shard's lease row, observed at ``now`` (the database's time).
    The store applies the decision as one compare-and-set on the token and the expiry, so
    two daemons deciding ``take_over`` from the same row cannot both win."""
    if row is None:
        return Decision("acquire", 1, me)
    if row.expires_at > now:
        if row.holder == me:
            return Decision("renew", row.token, me)
        return Decision("follow", row.token, row.holder)
    # Lapsed: a new term, even for its last holder, which stopped acting when it lapsed.
    return Decision("take_over", row.token + 1, me)


def shard_of(customer: str, shards: int) -> int:
    """The shard a customer belongs to: stable across processes and Python versions (CRC-32,
    not ``hash()``, which is salted per process)."""
    if shards < 1:
        raise ValueError("shards must be at least 1")
    return zlib.crc32(customer.encode()) % shards


def local_deadline(sent_at: float, ttl_s: float) -> float:
    """Until when (on the daemon's monotonic clock) a lease it just acquired or renewed lets
    it act: ``ttl_s`` after the statement was *sent*. The database stamped the expiry at or
    after that moment, so the daemon stops before the database would let anyone take over,
    whatever the two clocks read (only their rates must agree, to well under TTL/3)."""
    return sent_at + ttl_s

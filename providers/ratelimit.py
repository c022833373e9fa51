"""Client-side rate limits for cloud API calls: one token bucket per (cloud, account, region,
kind of call), sized from each cloud's documented limits, shared by every caller in the
process (every job and the API reach the clouds through ``controlplane.resolvers``, which
wraps each provider in :class:`providers.metered.MeteredProvider`).

Why client-side: the clouds throttle per account and region (EC2: "for each AWS account on a
per-Region basis") and answer ``RequestLimitExceeded`` / ``rateLimitExceeded`` /
``TooManyRequests`` once the budget is spent (``reference/clouds.md`` §A.6); staying inside
the budget keeps those rare, and keeps the daemon from starving other tools of the same
account.

Waiting for a token never holds a lock while it sleeps (each bucket has its own lock, taken
only for the arithmetic), so a caller waiting on one (account, region) never delays callers
of another. A wait longer than ``max_wait_s`` is not slept at all: the call fails at once
with :class:`RateLimited` (a ``Throttled``), so a sequential pass moves on to its other
(account, region) pairs and the throttled work is retried on the next pass, as a throttle
from the cloud would be.

The bucket itself is pure (the clock is a parameter), so it is tested with a fake clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from providers.errors import Throttled
from schema.types import Cloud


class CallKind(StrEnum):
    """The clouds budget reads and writes apart (EC2 "non-mutating" and "mutating"
    actions; Compute Engine's read/list and write quota groups)."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True)
class BucketSize:
    """``capacity`` tokens at most (the burst), refilled at ``refill_per_s``."""

    capacity: float
    refill_per_s: float

    def __post_init__(self) -> None:
        if self.capacity < 1 or self.refill_per_s <= 0:
            raise ValueError("a bucket needs capacity >= 1 and refill_per_s > 0")


# Per (account, region) and kind of call. Sources:
# - AWS: EC2 throttles "for each AWS account on a per-Region basis" with a token bucket per
#   API; non-mutating (Describe*) actions: bucket 100, refill 20/s; mutating actions: bucket
#   200, refill 5/s (docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html,
#   "Request token bucket sizes and refill rates"). One bucket per kind here covers every
#   API of that kind, so gpucap spends at most one API's budget per kind: conservative.
#   (RunInstances also draws on a resource bucket of 1000 instances refilled at 2/s, which
#   one node per create never approaches before the request bucket.)
# - GCP: Compute Engine rate quotas are per project per minute: 1,500 read and 1,500 list
#   requests per minute, 1,500 per minute for mutations (cloud.google.com/compute/api-quota;
#   exceeding one is a 403 rateLimitExceeded, clouds.md §A.6). Its window is a fixed minute,
#   so the bucket is sized to spend at most the minute's quota in any 60 s:
#   capacity + 60 * refill = 300 + 60 * 20 = 1,500.
# - OCI publishes no numbers (a 429 TooManyRequests, "Too many requests for the user",
#   clouds.md §A.6): a conservative 10/s reads and 5/s writes, with short bursts.
LIMITS: Mapping[Cloud, Mapping[CallKind, BucketSize]] = {
    Cloud.AWS: {CallKind.READ: BucketSize(100, 20.0), CallKind.WRITE: BucketSize(200, 5.0)},
    Cloud.GCP: {CallKind.READ: BucketSize(300, 20.0), CallKind.WRITE: BucketSize(300, 20.0)},
    Cloud.OCI: {CallKind.READ: BucketSize(20, 10.0), CallKind.WRITE: BucketSize(10, 5.0)},
}

# Longest a call sleeps for a token before it is refused with RateLimited instead: long
# enough to pace a burst at the slowest documented refill (EC2 mutating, 5/s: a token every
# 0.2 s), short enough that a pass never stalls on one (account, region).
MAX_WAIT_S = 0.25


class RateLimited(Throttled):
    """Refused by gpucap's own budget for the (account, region), before reaching the cloud
    (``code`` "ClientRateLimit"). A ``Throttled``: retried on a later pass, blocks nothing."""


@dataclass
class TokenBucket:
    """A token bucket on a caller's clock (pure: ``now`` is always a parameter).

    Tokens may go negative: a caller that reserves a token it must wait for takes it on
    credit, so later callers queue behind it (first come, first served) instead of racing
    for the next refill."""

    size: BucketSize
    tokens: float
    updated_at: float

    @classmethod
    def full(cls, size: BucketSize, now: float) -> TokenBucket:
        return cls(size, float(size.capacity), now)

    def _refill(self, now: float) -> None:
        if now > self.updated_at:
            gained = (now - self.updated_at) * self.size.refill_per_s
            self.tokens = min(float(self.size.capacity), self.tokens + gained)
            self.updated_at = now

    def wait_for(self, now: float, n: float = 1.0) -> float:
        """Seconds until ``n`` tokens are there (0: now); takes nothing."""
        self._refill(now)
        return max(0.0, (n - self.tokens) / self.size.refill_per_s)

    def reserve(self, now: float, max_wait_s: float, n: float = 1.0) -> float | None:
        """Take ``n`` tokens, to be used after the returned wait (0: at once); None, taking
        nothing, when that wait would exceed ``max_wait_s``."""
        wait = self.wait_for(now, n)
        if wait > max_wait_s:
            return None
        self.tokens -= n
        return wait


Key = tuple[str, str, str, CallKind]  # (cloud, account, region, kind)


class RateLimiter:
    """Every bucket of the process, made on first use from :data:`LIMITS` (a cloud with no
    entry, e.g. the simulator, is not limited). ``clock`` and ``sleep`` are injectable for
    tests; production uses the monotonic clock."""

    def __init__(
        self,
        limits: Mapping[Cloud, Mapping[CallKind, BucketSize]] = LIMITS,
        *,
        max_wait_s: float = MAX_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limits = limits
        self.max_wait_s = max_wait_s
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[Key, tuple[threading.Lock, TokenBucket]] = {}
        self._lock = threading.Lock()  # guards the dict only, never held while waiting

    def _bucket(self, key: Key) -> tuple[threading.Lock, TokenBucket] | None:
        size = self.limits.get(Cloud(key[0]), {}).get(key[3]) if key[0] in _CLOUDS else None
        if size is None:
            return None
        with self._lock:
            found = self._buckets.get(key)
            if found is None:
                found = (threading.Lock(), TokenBucket.full(size, self._clock()))
                self._buckets[key] = found
            return found

    def acquire(self, cloud: str, account: str, region: str, kind: CallKind) -> float:
        """Take a token for one call, sleeping for it when that takes at most
        ``max_wait_s``; returns the seconds slept. Raises :class:`RateLimited` (taking
        nothing) when the wait would be longer."""
        found = self._bucket((cloud, account, region, kind))
        if found is None:
            return 0.0
        lock, bucket = found
        with lock:
            wait = bucket.reserve(self._clock(), self.max_wait_s)
            if wait is None:
                behind = bucket.wait_for(self._clock())
        if wait is None:
            err = RateLimited(
                f"client-side budget for {cloud} {kind.value} calls spent; "
                f"a token in {behind:.2f} s",
                code="ClientRateLimit",
                region=region or None,
            )
            err.retry_after_s = behind
            raise err
        if wait > 0:
            self._sleep(wait)  # (no lock held: other callers go on)
        return wait


_CLOUDS = {c.value for c in Cloud}

# The process's limiter: every resolver shares it, so two jobs (or two resolvers) calling
# one (account, region) share its budget, as the cloud counts them.
LIMITER = RateLimiter()

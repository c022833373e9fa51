"""providers.ratelimit: the token bucket on a fake clock, the per-(cloud, account, region)
limiter, and the documented sizes it starts from."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from providers.errors import Throttled
from providers.ratelimit import (
    LIMITS,
    BucketSize,
    CallKind,
    RateLimited,
    RateLimiter,
    TokenBucket,
)
from schema.types import Cloud


@dataclass
class FakeTime:
    """A clock that only moves when the code under test sleeps (or the test says so)."""

    t: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


def test_a_full_bucket_serves_its_burst_then_paces_at_the_refill_rate() -> None:
    b = TokenBucket.full(BucketSize(100, 20.0), now=0.0)
    assert [b.reserve(0.0, max_wait_s=0.0) for _ in range(100)] == [0.0] * 100
    assert b.reserve(0.0, max_wait_s=0.0) is None  # the 101st in the same instant
    assert b.tokens == 0.0  # a refused reservation takes nothing
    assert b.reserve(0.0, max_wait_s=1.0) == pytest.approx(0.05)  # 1 / 20 per s
    assert b.reserve(0.0, max_wait_s=1.0) == pytest.approx(0.10)  # queued behind it
    # After 5 s of quiet the bucket is full again, never fuller.
    assert b.wait_for(10.0, n=100) == 0.0
    assert b.tokens == 100.0


def test_partial_refill_is_proportional_to_elapsed_time() -> None:
    b = TokenBucket.full(BucketSize(10, 2.0), now=0.0)
    for _ in range(10):
        assert b.reserve(0.0, 0.0) == 0.0
    assert b.wait_for(1.0) == 0.0 and b.tokens == pytest.approx(2.0)
    assert b.wait_for(1.0, n=3) == pytest.approx(0.5)
    # A clock that steps back (a caller's stale reading) adds nothing.
    assert b.wait_for(0.5) == 0.0 and b.tokens == pytest.approx(2.0)


def test_over_any_window_a_bucket_spends_at_most_capacity_plus_refill_times_window() -> None:
    size = LIMITS[Cloud.GCP][CallKind.READ]
    b = TokenBucket.full(size, now=0.0)
    served, t = 0, 0.0
    while t < 60.0:  # a caller as greedy as it can be, for one minute
        if b.reserve(t, max_wait_s=0.0) is not None:
            served += 1
        else:
            t += 0.01
    # Compute Engine's per-minute read quota (cloud.google.com/compute/api-quota): 1,500.
    assert served <= 1500
    assert served >= 1490


def test_documented_sizes() -> None:
    # EC2 (docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html).
    assert LIMITS[Cloud.AWS][CallKind.READ] == BucketSize(100, 20.0)
    assert LIMITS[Cloud.AWS][CallKind.WRITE] == BucketSize(200, 5.0)
    for cloud in Cloud:
        for kind in CallKind:
            size = LIMITS[cloud][kind]
            assert size.capacity >= 1 and size.refill_per_s > 0


def test_limiter_sleeps_short_waits_and_refuses_long_ones_without_taking_a_token() -> None:
    clock = FakeTime()
    limits = {Cloud.AWS: {CallKind.WRITE: BucketSize(2, 5.0)}}
    lim = RateLimiter(limits, max_wait_s=0.25, clock=clock, sleep=clock.sleep)
    assert lim.acquire("aws", "acct", "us-east-1", CallKind.WRITE) == 0.0
    assert lim.acquire("aws", "acct", "us-east-1", CallKind.WRITE) == 0.0
    assert lim.acquire("aws", "acct", "us-east-1", CallKind.WRITE) == pytest.approx(0.2)
    assert clock.slept == [pytest.approx(0.2)]
    # Two more in the same instant: the first waits 0.2 s; the next would wait 0.4 s.
    assert lim.acquire("aws", "acct", "us-east-1", CallKind.WRITE) == pytest.approx(0.2)
    clock.t -= 0.2  # (as if another thread took that token without this one sleeping)
    with pytest.raises(RateLimited) as refused:
        lim.acquire("aws", "acct", "us-east-1", CallKind.WRITE)
    assert isinstance(refused.value, Throttled)  # retried later, never a block
    assert refused.value.code == "ClientRateLimit"
    assert refused.value.retry_after_s == pytest.approx(0.4)


def test_each_account_region_and_kind_has_its_own_budget_and_unknown_clouds_none() -> None:
    clock = FakeTime()
    limits = {Cloud.AWS: {CallKind.READ: BucketSize(1, 1.0), CallKind.WRITE: BucketSize(1, 1.0)}}
    lim = RateLimiter(limits, max_wait_s=0.0, clock=clock, sleep=clock.sleep)
    lim.acquire("aws", "a", "us-east-1", CallKind.READ)
    with pytest.raises(RateLimited):
        lim.acquire("aws", "a", "us-east-1", CallKind.READ)
    # Another region, another account, another kind: untouched.
    lim.acquire("aws", "a", "us-west-2", CallKind.READ)
    lim.acquire("aws", "b", "us-east-1", CallKind.READ)
    lim.acquire("aws", "a", "us-east-1", CallKind.WRITE)
    # No size for it (GCP is absent from these limits; "sim" is no cloud): never limited.
    for _ in range(100):
        lim.acquire("gcp", "a", "us-central1", CallKind.READ)
        lim.acquire("sim", "a", "r", CallKind.READ)
    assert clock.slept == []


def test_a_caller_waiting_on_one_pair_does_not_hold_up_another_pair() -> None:
    """One thread sleeps for a token of (a, us-east-1); a thread on (a, eu-west-1) gets its
    token while the first still sleeps."""
    started, release = threading.Event(), threading.Event()

    def sleep(_: float) -> None:
        started.set()
        assert release.wait(5.0)

    limits = {Cloud.AWS: {CallKind.READ: BucketSize(1, 1.0)}}
    lim = RateLimiter(limits, max_wait_s=10.0, sleep=sleep)
    lim.acquire("aws", "a", "us-east-1", CallKind.READ)  # the burst
    waiter = threading.Thread(
        target=lim.acquire, args=("aws", "a", "us-east-1", CallKind.READ), daemon=True
    )
    waiter.start()
    assert started.wait(5.0)
    done = threading.Event()

    def other_pair() -> None:
        lim.acquire("aws", "a", "eu-west-1", CallKind.READ)
        done.set()

    other = threading.Thread(target=other_pair, daemon=True)
    other.start()
    assert done.wait(5.0), "the other pair's caller was blocked by the waiting one"
    release.set()
    waiter.join(5.0)
    assert not waiter.is_alive()


def test_bucket_sizes_are_validated() -> None:
    with pytest.raises(ValueError):
        BucketSize(0, 1.0)
    with pytest.raises(ValueError):
        BucketSize(10, 0.0)

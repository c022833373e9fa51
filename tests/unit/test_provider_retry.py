"""providers.retry: which errors are retried, how often, and how long it waits."""

from __future__ import annotations

import random

import pytest

from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    Throttled,
    TransientError,
)
from providers.retry import RetryPolicy, call_with_retry

FAST = RetryPolicy(max_attempts=4, base_delay_s=0.5, max_delay_s=8.0, max_total_s=1000)


class Flaky:
    """Raises the given errors in order, then returns "ok"."""

    def __init__(self, *errors: ProviderError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def _run(fn: Flaky, policy: RetryPolicy = FAST) -> tuple[str, list[float]]:
    slept: list[float] = []
    out = call_with_retry(fn, policy, sleep=slept.append, rng=random.Random(7))
    return out, slept


@pytest.mark.parametrize("err", [Throttled("slow down"), TransientError("503")])
def test_retryable_errors_are_retried_until_success(err: ProviderError) -> None:
    fn = Flaky(err, err, err)
    out, slept = _run(fn)
    assert out == "ok"
    assert fn.calls == 4
    assert len(slept) == 3


@pytest.mark.parametrize(
    "err",
    [
        CapacityUnavailable("ice"),
        QuotaExceeded("quota"),
        AuthFailed("auth"),
        InvalidRequest("bad"),
    ],
)
def test_placement_errors_are_never_retried(err: ProviderError) -> None:
    fn = Flaky(err)
    with pytest.raises(type(err)):
        _run(fn)
    assert fn.calls == 1


def test_budget_is_bounded_and_the_last_error_is_reraised_unchanged() -> None:
    last = Throttled("fourth", code="RequestLimitExceeded")
    fn = Flaky(Throttled("1"), Throttled("2"), Throttled("3"), last, Throttled("5"))
    with pytest.raises(Throttled) as info:
        _run(fn)
    assert info.value is last
    assert fn.calls == 4


def test_backoff_is_jittered_and_capped() -> None:
    policy = RetryPolicy(max_attempts=8, base_delay_s=1.0, max_delay_s=4.0, max_total_s=1000)
    fn = Flaky(*[TransientError("x") for _ in range(7)])
    _, slept = _run(fn, policy)
    assert len(slept) == 7
    assert all(0 <= s <= 4.0 for s in slept)
    assert len(set(slept)) == 7  # jitter: no two waits alike
    caps = [min(4.0, 2**i) for i in range(7)]
    assert all(s <= c for s, c in zip(slept, caps, strict=True))


def test_retry_after_is_a_floor_but_capped_by_max_delay() -> None:
    soon = Throttled("wait 3s")
    soon.retry_after_s = 3.0
    huge = Throttled("wait an hour")
    huge.retry_after_s = 3600.0
    fn = Flaky(soon, huge)
    _, slept = _run(fn)
    assert slept[0] >= 3.0
    assert slept[1] == FAST.max_delay_s


def test_total_time_budget_stops_retries() -> None:
    policy = RetryPolicy(max_attempts=100, base_delay_s=0.0, max_delay_s=0.0, max_total_s=0.0)
    fn = Flaky(*[TransientError("x") for _ in range(50)])
    with pytest.raises(TransientError):
        _run(fn, policy)
    assert fn.calls == 1


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)

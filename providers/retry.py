"""Bounded, jittered retries for provider calls, shared by every adapter.

Only :class:`~providers.errors.Throttled` and :class:`~providers.errors.TransientError` are
retried. Capacity, quota, auth and invalid-request errors return at once: they are
information for placement (try another zone, region or cloud), and retrying them in place
is the hot loop BRIEF.md invariant 5 forbids (clouds.md §D.4 point 4).

Backoff is "full jitter" (a uniform draw up to an exponentially growing cap), so many
workers throttled at once do not retry in lock-step. A ``Throttled`` error's
``retry_after_s`` (when the cloud says how long to wait) is honoured as a floor, capped at
``max_delay_s`` so one reply can never stall a caller without bound.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

import structlog
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity import stop_after_delay as _stop_after_delay

from providers.errors import Throttled, TransientError

T = TypeVar("T")

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry. ``max_attempts`` counts the first call (1 means never retry)."""

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_total_s: float = 30.0  # stop starting new attempts after this long

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or self.max_total_s < 0:
            raise ValueError("delays must be >= 0")

    def delay(self, attempt: int, exc: BaseException | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        wait = rng.uniform(0, cap)
        if isinstance(exc, Throttled) and exc.retry_after_s > 0:
            wait = max(wait, min(exc.retry_after_s, self.max_delay_s))
        return wait


DEFAULT_POLICY = RetryPolicy()
NO_RETRY = RetryPolicy(max_attempts=1)

# Set by ``providers.metered`` around one call of a verb, which it budgeted and counted as
# one request: each attempt after the first is another request on the wire, so it takes
# its own token (and is counted) through this hook. A hook that refuses (``RateLimited``, a
# ``Throttled``) is retried like a throttle from the cloud.
ATTEMPT_HOOK: ContextVar[Callable[[], None] | None] = ContextVar(
    "gpucap_retry_attempt_hook", default=None
)


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, Throttled | TransientError)


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy = DEFAULT_POLICY,
    *,
    what: str = "provider call",
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> T:
    """Call ``fn`` until it returns, raises a non-retryable error, or the policy is spent;
    then the last error is re-raised unchanged (so callers still branch on its type)."""
    draw = rng or random.Random()
    hook = ATTEMPT_HOOK.get()
    attempts = 0

    def attempt() -> T:
        nonlocal attempts
        attempts += 1
        if attempts > 1 and hook is not None:
            hook()
        return fn()

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        seconds = policy.delay(state.attempt_number, exc, draw)
        log.info(
            "provider.retry",
            what=what,
            attempt=state.attempt_number,
            error=type(exc).__name__ if exc else None,
            code=getattr(exc, "code", None),
            sleep_s=round(seconds, 3),
        )
        return seconds

    retrying = Retrying(
        stop=stop_after_attempt(policy.max_attempts) | _stop_after_delay(policy.max_total_s),
        wait=wait,
        retry=retry_if_exception(is_retryable),
        reraise=True,
        sleep=sleep,
    )
    return retrying(attempt)

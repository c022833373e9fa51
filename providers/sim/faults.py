"""Faults the simulated cloud raises on request, as a real cloud's API does under stress.

A fault is queued per (cloud, account) with :meth:`providers.sim.cloud.SimCloud.inject` and
taken by that account's next creates (a start meets the refusing kinds only). With a shared
state file another process (a test, ``bench/chaos.py``) injects and the daemon meets it: the
fault is at the cloud, never inside the daemon. Kinds:

- ``capacity``: a stockout (zone scope), ``quota``: the account's quota (account and region);
- ``throttle``: rate limiting, ``transient``: a 5xx, both retryable; ``auth``: refused;
- ``crash_after_create``: the create stands, its answer is lost (a connection reset);
- ``latency``: the create stands, its answer comes ``delay_s`` later (a slow API; a caller
  killed meanwhile never learns the instance id), waited in ``SimCloud.answer`` once the
  create's transaction committed.

``skip`` lets that many creates through first: with a gang's members created one after the
other, ``skip=1`` fails the second member only (a partial gang failure)."""

from __future__ import annotations

from dataclasses import dataclass

from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)

ERRORS = ("capacity", "quota", "throttle", "transient", "auth")  # raised instead of a create
KINDS = (*ERRORS, "crash_after_create", "latency")  # the other two: the create stands


@dataclass
class Fault:
    kind: str
    remaining: int  # creates it still applies to
    zone: str | None = None  # capacity: the zone reported out of stock (None: the create's)
    delay_s: float = 0.0  # latency: how long the answer takes
    skip: int = 0  # creates to let through before it applies


def take(queue: list[Fault]) -> Fault | None:
    """The fault the next create meets, consuming one of its uses (None: no fault); the
    caller stores ``queue`` back."""
    if not queue:
        return None
    fault = queue[0]
    if fault.skip > 0:
        fault.skip -= 1
        return None
    fault.remaining -= 1
    if fault.remaining <= 0:
        queue.pop(0)
    return fault


def error_for(fault: Fault, zone: str | None, region: str, instance_type: str) -> ProviderError:
    """The typed error of an ``ERRORS`` fault, as the adapters map a real cloud's."""
    match fault.kind:
        case "capacity":
            return CapacityUnavailable(
                "injected stockout",
                code="SimStockout",
                scope=Scope.ZONE,
                zone=fault.zone or zone,
                region=region,
                instance_type=instance_type,
            )
        case "quota":
            return QuotaExceeded(
                "injected quota",
                code="SimQuota",
                scope=Scope.ACCOUNT_REGION,
                region=region,
                instance_type=instance_type,
            )
        case "throttle":
            return Throttled("injected throttle", code="SimThrottle", retryable=True)
        case "transient":
            return TransientError("injected 503", code="SimUnavailable", retryable=True)
        case _:
            return AuthFailed("injected auth failure", code="SimAuth", scope=Scope.ACCOUNT)

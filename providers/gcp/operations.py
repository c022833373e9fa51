"""Waiting for Compute Engine operations with gpucap's own operations clients.

``zoneOperations.wait`` / ``globalOperations.wait`` are best effort: they return after about
two minutes even when the operation is not DONE (clouds.md §A.4), so they are called in a
loop until DONE or our own deadline, the way SkyPilot's ``wait_for_operation`` does. The
caller then *always* inspects ``error`` on the finished operation (``errors.operation_failed``):
a stockout exists only there (§A.4, §E.2 pitfall 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from providers.gcp.session import GcpSession

CALL_TIMEOUT_S = 30.0  # per HTTP call; the loop below bounds the whole wait


def _done(op: Any) -> bool:
    from google.cloud import compute_v1

    return bool(op.status == compute_v1.Operation.Status.DONE)


def wait_zone_operation(
    session: GcpSession,
    zone: str,
    op: Any,
    *,
    deadline_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Any | None:
    """The finished operation, or None when it is still running at the deadline."""
    client = session.client("ZoneOperationsClient")
    return _loop(
        op,
        lambda name: client.wait(
            project=session.project, zone=zone, operation=name, retry=None, timeout=CALL_TIMEOUT_S
        ),
        deadline_s,
        sleep,
    )


def wait_global_operation(
    session: GcpSession,
    op: Any,
    *,
    deadline_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> Any | None:
    client = session.client("GlobalOperationsClient")
    return _loop(
        op,
        lambda name: client.wait(
            project=session.project, operation=name, retry=None, timeout=CALL_TIMEOUT_S
        ),
        deadline_s,
        sleep,
    )


def _loop(
    op: Any, wait: Callable[[str], Any], deadline_s: float, sleep: Callable[[float], None]
) -> Any | None:
    end = time.monotonic() + deadline_s
    pause = 0.05
    while not _done(op):
        if time.monotonic() >= end:
            return None
        op = wait(op.name)
        if not _done(op):
            # wait() returned early (best effort); do not spin on a server that answers fast.
            sleep(pause)
            pause = min(pause * 2, 2.0)
    return op

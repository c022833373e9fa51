"""Health for the whole life of a node, as pure rules: what one probe of its engine says,
how consecutive failures count, and how long a drain waits for the requests it holds.
The prober (``controlplane.probes``) takes the probes; nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass

from schema.policy import Health


@dataclass(frozen=True)
class Probe:
    """One look at a node's engine: its health endpoint answered 2xx (``serving``), and the
    requests it holds (running + waiting, from its own metrics; None when unread)."""

    serving: bool
    in_flight: int | None = None


def failures_after(previous: int, probe: Probe | None) -> int:
    """Consecutive failed probes once this one is counted (None: not probed this pass, so
    nothing is learnt)."""
    if probe is None:
        return previous
    return 0 if probe.serving else previous + 1


def unhealthy(failures: int, health: Health) -> str | None:
    """Why a ready node is failed (None: it is not), after ``failures`` probes in a row."""
    if failures < health.failure_threshold:
        return None
    return f"engine failed {failures} health checks in a row"


def drain_done(
    probe: Probe | None, draining_for_s: float, health: Health, served: bool, failed: bool
) -> bool:
    """Whether a draining node may be terminated now. A node that never served, or is
    drained because it failed, holds nothing worth waiting for. One that served waits until
    its engine holds no request (it no longer gets new ones: it left the endpoints) or stops
    answering, up to the policy's drain timeout; a probe not taken this pass, or metrics
    that could not be read, mean waiting on."""
    if not served or failed or draining_for_s >= health.drain_timeout_s:
        return True
    if probe is None:
        return False
    if not probe.serving:
        return True  # nothing answers there: nothing is in flight
    return probe.in_flight == 0

"""Is this daemon ready, and why not: the checks behind ``/readyz`` and gRPC health, as a
pure function of what the daemon observed (its leases, its jobs' beats, a store ping).

Ready means it can do its part: it holds the leases or follows a live leader (the lease
table answered within the TTL), every job fired within ``ready_intervals`` of its interval
(a hung tick stops its job's beats: the scheduler skips a job still running), and the store
answers. A standby is ready: it serves reads and stands by to take over."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controlplane.leadership import LeaseView


@dataclass(frozen=True)
class Readiness:
    ready: bool
    role: str
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        failed = [name for name, c in self.checks.items() if not c["ok"]]
        return {"ready": self.ready, "role": self.role, "failed": failed, "checks": self.checks}


def readiness(
    lease: LeaseView,
    beats: Mapping[str, float],
    intervals: Mapping[str, float],
    ready_intervals: int,
    started_at: float,
    now: float,
    store_error: str | None,
) -> Readiness:
    """``beats`` and ``started_at``/``now`` on one monotonic clock; a job that has not fired
    yet counts from the daemon's start."""
    checks: dict[str, dict[str, Any]] = {}

    answered = lease.answered_s_ago
    if answered is None or answered > lease.ttl_s:
        why = "never answered" if answered is None else f"no answer for {answered:.1f} s"
        checks["lease"] = {"ok": False, "detail": f"lease table: {why}; {lease.error}".strip()}
    elif lease.acting:
        tokens = ", ".join(f"{s}: token {t}" for s, t in sorted(lease.held.items()))
        checks["lease"] = {"ok": True, "detail": f"leader of shards {{{tokens}}}"}
    elif lease.following:
        holders = sorted(set(lease.following.values()))
        checks["lease"] = {"ok": True, "detail": f"standby following {', '.join(holders)}"}
    else:
        checks["lease"] = {"ok": False, "detail": "no live leader and none of its leases held"}

    stalled = {}
    for job, every in sorted(intervals.items()):
        since = now - beats.get(job, started_at)
        if since > ready_intervals * every:
            stalled[job] = round(since, 1)
    checks["jobs"] = {
        "ok": not stalled,
        "detail": (
            f"no tick within {ready_intervals} intervals: "
            + ", ".join(f"{j} ({s} s ago)" for j, s in stalled.items())
            if stalled
            else f"every job ticked within {ready_intervals} intervals"
        ),
    }
    checks["store"] = {"ok": store_error is None, "detail": store_error or "answers"}
    ready = all(c["ok"] for c in checks.values())
    return Readiness(ready=ready, role=lease.role, checks=checks)

"""Observed times-to-ready from a model's launches, failed ones included.

A launch that fails before it is ready (a stockout, a node that never boots) is replaced on
the next placement pass, often in another pool. The capacity asked for then arrives only
when the replacement is ready, so that whole time is what the next cold start should be
expected from: counting only the replicas that became ready would leave every failed
attempt out, and a stockout that fails every other launch would not lengthen the horizon
at all. Pure: the daemon reads the launches from the store (``controlplane/loop/jobs.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

# A ready replica asked for within this long of a failed launch of the same model is taken
# as its replacement. Placement relaunches on its next pass (seconds, or a backoff of a
# minute or two after a capacity error); a failure with no replacement by then (the load
# fell away) proves nothing about how long capacity takes.
REPLACED_WITHIN_S = 600.0


@dataclass(frozen=True)
class Launch:
    """One replica asked for: when, where, and when it was ready or first failed."""

    model: int
    pool: str
    created: float  # epoch seconds
    ready: float | None  # None: never ready
    failed: float | None = None  # a node failed (or timed out) before the replica was ready


def times_to_ready(
    launches: Iterable[Launch], replaced_within_s: float = REPLACED_WITHIN_S
) -> dict[int, list[tuple[str, float]]]:
    """Per model, (pool, seconds from a launch to capacity), in the order they were ready.
    A ready replica counts its own time; each failed launch it replaced counts from that
    launch to this replica being ready, for the failed launch's pool. Failures not (yet)
    replaced count nothing; launches neither ready nor failed (released while starting)
    neither."""
    by_model: dict[int, list[Launch]] = defaultdict(list)
    for launch in launches:
        if launch.ready is not None or launch.failed is not None:
            by_model[launch.model].append(launch)
    out: dict[int, list[tuple[str, float]]] = {}
    for model, rows in by_model.items():
        rows.sort(key=lambda r: (_event_t(r), r.created))
        pending: list[Launch] = []  # failed launches awaiting a replacement
        seen: list[tuple[str, float]] = []
        for r in rows:
            if r.ready is None:
                pending.append(r)
                continue
            replaced = [f for f in pending if _replaces(r, f, replaced_within_s)]
            seen += [(f.pool, r.ready - f.created) for f in replaced]
            seen.append((r.pool, r.ready - r.created))
            # Failures replaced, or too old for a later replica to be theirs, are done.
            pending = [
                f
                for f in pending
                if f not in replaced and r.created <= _failed_t(f) + replaced_within_s
            ]
        if seen:
            out[model] = seen
    return out


def _event_t(r: Launch) -> float:
    return r.ready if r.ready is not None else _failed_t(r)


def _failed_t(r: Launch) -> float:
    assert r.failed is not None
    return r.failed


def _replaces(r: Launch, f: Launch, within: float) -> bool:
    return _failed_t(f) <= r.created <= _failed_t(f) + within

"""Surge-first leaving: a replica that must go but still serves (moved out of a pool the
policy no longer allows, or drained by on-call) retires first. It serves on, no longer
counted as the model's, so placement launches its replacement; it drains once the ready
replicas cover the model's desired capacity without it. One that is not serving, or whose
replacement has not come within the surge timeout, drains at once. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controlplane.placement.plan import UNIT_EPS


@dataclass(frozen=True)
class Retiring:
    replica_id: str
    serving: bool  # it is ready
    units: float  # its capacity, in the model's units (``placement.capacity_units``)
    since: float  # when it started retiring


def surge_drains(
    retiring: Sequence[Retiring],
    ready_units: float,
    desired: float,
    now: float,
    timeout_s: float,
) -> list[tuple[str, str]]:
    """The retiring replicas that drain now, oldest first, each with why. ``ready_units``:
    the model's ready replicas that are not retiring; ``desired``: the capacity units the
    model is asked to hold."""
    serving = ready_units + sum(r.units for r in retiring if r.serving)
    out = []
    for r in sorted(retiring, key=lambda r: (r.since, r.replica_id)):
        if not r.serving:
            out.append((r.replica_id, "it no longer serves"))
        elif serving - r.units >= desired - UNIT_EPS:
            out.append((r.replica_id, "its replacement is ready"))
            serving -= r.units
        elif now - r.since >= timeout_s:
            out.append((r.replica_id, f"no replacement ready within {timeout_s:.0f} s"))
            serving -= r.units
    return out

"""The seam between the simulator and whoever supplies nodes.

The engine never computes a cold start itself: it asks a :class:`Capacity` for the nodes of
one replica and gets back when they run and when the replica is ready (or a refusal, e.g. a
stockout), and it tells the capacity when it lets them go. Today
:class:`ColdStartCapacity` answers from the fleet's cold-start phases with unlimited stock;
the placement, reconciler and simulated provider of later issues plug in here instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from schema.fleet import ColdStartPhases


@dataclass(frozen=True)
class Grant:
    """Nodes handed to one replica. GPU time is charged from ``requested_at`` to release."""

    grant_id: int
    requested_at: float
    running_at: float  # node(s) up: the replica leaves `provisioning` for `starting`
    ready_at: float  # model loaded and warm: the replica serves


class Capacity(Protocol):
    def acquire(self, model: str, now: float) -> Grant | None:
        """Nodes for one new replica of ``model``, or None when none can be had now."""
        ...

    def release(self, grant: Grant, now: float) -> None:
        """The replica is gone; its nodes return. Idempotent per grant."""
        ...

    def expected_cold_start_s(self, model: str) -> float:
        """What an autoscaler is told to expect for a new replica (AutoscalerInput)."""
        ...


class ColdStartCapacity:
    """Unlimited nodes, each ready after the model's cold-start phases (coldstart.md §0)."""

    def __init__(self, phases: dict[str, ColdStartPhases]) -> None:
        self._phases = phases
        self._next_id = 0
        self.in_use: dict[int, Grant] = {}

    def acquire(self, model: str, now: float) -> Grant | None:
        p = self._phases[model]
        self._next_id += 1
        grant = Grant(self._next_id, now, now + p.node_s, now + p.total_s)
        self.in_use[grant.grant_id] = grant
        return grant

    def release(self, grant: Grant, now: float) -> None:
        self.in_use.pop(grant.grant_id, None)

    def expected_cold_start_s(self, model: str) -> float:
        return self._phases[model].total_s

"""The seam between the simulator and whoever supplies nodes.

The engine never computes a cold start itself: it asks a :class:`Capacity` for the nodes of
one replica and gets back when they run and when the replica is ready (or a refusal, e.g. a
stockout), and it tells the capacity when it lets them go. Today
:class:`ColdStartCapacity` answers from the fleet's cold-start phases with unlimited stock
(each launch's capacity wait drawn from the phases' spread, seeded);
the placement, reconciler and simulated provider of later issues plug in here instead.
"""

from __future__ import annotations

import heapq
import math
import zlib
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from coldstart.model import expected_ready_from
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

    def expected_cold_start_s(self, model: str, now: float | None = None) -> float:
        """What an autoscaler is told to expect for a new replica (AutoscalerInput) at
        ``now``: never the truth of a launch to come, only what was learned by then (None:
        before any launch)."""
        ...


@runtime_checkable
class WarmPools(Protocol):
    """A capacity that keeps warm nodes (``techniques.TechniquesCapacity``). The engine
    treats it as the daemon does: the decider looks ahead a resume's time only while the
    waiting warm nodes cover what a create's look-ahead would launch early
    (``lifecycle.warm.covers``), and after each decision the pool is sized as the place job
    sizes it (``lifecycle.warm.wanted``)."""

    def warm_waiting(self, model: str, now: float) -> tuple[int, float]:
        """(warm nodes a launch could resume now, a resume's expected time-to-ready)."""
        ...

    def warm_bound(self, model: str) -> int:
        """The policy's ``max_nodes`` for the model's pool (0: no warm pool)."""
        ...

    def keep_warm(self, model: str, now: float, keep: int) -> None:
        """Fill the pool to ``keep`` warm nodes (boots charged as idle) or let the extra go."""
        ...


@dataclass
class _Pool:
    phases: ColdStartPhases
    rng: np.random.Generator
    # Launches not yet ready, a heap of (ready at, seconds, grant id), and the
    # time-to-ready of those that became ready, in the order they did.
    pending: list[tuple[float, float, int]] = field(default_factory=list)
    observed: list[float] = field(default_factory=list)


class ColdStartCapacity:
    """Unlimited nodes, each ready after the model's cold-start phases (coldstart.md §0).

    ``draws``: each launch's T_capacity+T_vm is drawn from a lognormal around the phases'
    ``capacity_vm_s`` (its median) with their ``capacity_vm_spread``; the other phases are
    fixed. Seeded per model by its name and drawn in launch order, so the k-th launch of a
    model takes the same time under every autoscaler of a run. Without, every launch takes
    the phase model's time. What a decider is told (``expected_cold_start_s``) is what the
    daemon would know: the median of the last launches that became ready by then
    (``coldstart.expected_ready_from``), else the phase model's time."""

    def __init__(self, phases: dict[str, ColdStartPhases], draws: bool = False) -> None:
        self._pools = {
            m: _Pool(p, np.random.default_rng(zlib.crc32(m.encode()))) for m, p in phases.items()
        }
        self._draws = draws
        self._next_id = 0
        self._cancelled: set[int] = set()
        self.in_use: dict[int, Grant] = {}

    def acquire(self, model: str, now: float) -> Grant | None:
        pool = self._pools[model]
        p = pool.phases
        node_s = p.node_s
        if self._draws and p.capacity_vm_spread > 0:
            node_s *= math.exp(p.capacity_vm_spread * float(pool.rng.standard_normal()))
        self._next_id += 1
        total = node_s + (p.total_s - p.node_s)
        grant = Grant(self._next_id, now, now + node_s, now + total)
        self.in_use[grant.grant_id] = grant
        heapq.heappush(pool.pending, (grant.ready_at, total, grant.grant_id))
        return grant

    def release(self, grant: Grant, now: float) -> None:
        self.in_use.pop(grant.grant_id, None)
        if now < grant.ready_at:
            self._cancelled.add(grant.grant_id)  # never became ready: never observed

    def expected_cold_start_s(self, model: str, now: float | None = None) -> float:
        pool = self._pools[model]
        if now is not None:
            while pool.pending and pool.pending[0][0] <= now:
                _, took, gid = heapq.heappop(pool.pending)
                if gid not in self._cancelled:
                    pool.observed.append(took)
        return expected_ready_from(pool.observed, pool.phases.total_s)

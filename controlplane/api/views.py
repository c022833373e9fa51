"""What the API returns: detached store rows plus what was aggregated for them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from coldstart.estimate import Estimate
from controlplane.decider_code import UNKNOWN
from controlplane.jobticks import JobTick
from controlplane.leadership import LeaseView
from controlplane.loop.snapshot import PoolFacts
from controlplane.policy_diff import PolicyDiff
from controlplane.replay import Replayed
from controlplane.store.models import DecisionRecord, Node, PolicyVersion, Pool
from controlplane.store.models import Model as ModelRow
from schema.types import NodeState


@dataclass(frozen=True)
class AppliedPolicy:
    version: PolicyVersion
    changed: bool  # False: no new version was written
    diff: PolicyDiff = PolicyDiff(())  # what the apply changed
    # Why a reload of an unchanged file kept a newer version applied through the API.
    kept: str = ""
    warnings: tuple[str, ...] = ()  # (e.g. a file without apiVersion and kind)


@dataclass(frozen=True)
class PolicyView:
    version: PolicyVersion
    active: bool


@dataclass(frozen=True, slots=True)
class ModelRecord:
    """A model row's fields a view shows, read as plain columns (a list reads thousands:
    no ORM instance, and the spec parsed once per row version, ``api.reads``)."""

    id: int
    version: int
    customer: str
    name: str
    source: str
    desired_replicas: int
    desired_reason: str
    pinned_replicas: int | None
    paused: bool
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class ModelView:
    row: ModelRow | ModelRecord
    replicas_by_state: Mapping[str, int]

    def _count(self, *states: NodeState) -> int:
        return sum(self.replicas_by_state.get(s.value, 0) for s in states)

    @property
    def ready(self) -> int:
        return self._count(NodeState.READY)

    @property
    def starting(self) -> int:
        return self._count(NodeState.RUNNING)

    @property
    def provisioning(self) -> int:
        return self._count(NodeState.PENDING, NodeState.PROVISIONING)

    @property
    def draining(self) -> int:
        return self._count(NodeState.DRAINING, NodeState.TERMINATING)


@dataclass(frozen=True)
class BootPhaseView:
    phase: str
    at: datetime
    detail: str


@dataclass(frozen=True)
class NodeView:
    row: Node
    model: str
    phases: tuple[BootPhaseView, ...] = ()  # what its bootstrap reported, in order
    retiring_at: datetime | None = None  # its replica's (surge-first leaving)


@dataclass(frozen=True)
class ZoneBlockView:
    zone: str
    until: datetime
    reason: str
    source: str


@dataclass(frozen=True)
class PoolView:
    row: Pool
    nodes_by_state: Mapping[str, int]
    zone_blocks: tuple[ZoneBlockView, ...] = ()

    @property
    def zones(self) -> tuple[str, ...]:
        return tuple((self.row.zones or {}).get("zones", ()))


@dataclass(frozen=True)
class StatusView:
    version: str
    started_at: datetime
    uptime_s: float
    customers: int
    models: int
    pools: int
    nodes_by_state: Mapping[str, int]
    jobs: list[JobTick] = field(default_factory=list)
    last_event_id: int = 0
    lease: LeaseView | None = None  # None: this process runs no leases


@dataclass(frozen=True)
class CordonResult:
    changed: list[PoolView]  # pools whose state this call changed
    matched: int  # pools the selector matched (changed or already in that state)


@dataclass(frozen=True)
class DrainResult:
    node: NodeView
    changed: bool  # False: already draining or terminal
    message: str
    drained: list[str]  # node ids this call marked draining (the node's whole gang)


@dataclass(frozen=True)
class ReplayView:
    record: DecisionRecord
    autoscaler: str
    result: Replayed
    running_code: str  # the replaying decider's code fingerprint (controlplane.decider_code)
    recorded_decider: str | None = None  # name and code in the record (None: predates them)
    recorded_code: str | None = None

    @property
    def same_code(self) -> bool | None:
        """Whether the record was made by this very decider code; None where unknown."""
        if self.recorded_code is None or UNKNOWN in (self.recorded_code, self.running_code):
            return None
        return self.recorded_code == self.running_code and self.recorded_decider in (
            None,
            self.autoscaler,
        )


@dataclass(frozen=True)
class PoolEstimateView:
    pool: PoolFacts
    estimate: Estimate
    blocked_until: float | None  # epoch; a block that keeps the pool from launching now
    nodes_in_use: int


@dataclass(frozen=True)
class ExplainView:
    customer: str
    model: str
    desired: int
    pools: tuple[PoolEstimateView, ...]  # the policy's allowed pools, fastest first
    # The others: (pool id, the first policy filter it fails), in the pools' order.
    excluded: tuple[tuple[str, str], ...] = ()

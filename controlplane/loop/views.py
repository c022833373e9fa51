"""Conversions from the snapshot's facts to the pure decision inputs. No I/O here."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from autoscaler.types import ReplicaCounts, ScalingSpec
from controlplane.loop.context import Tuning
from controlplane.loop.snapshot import PoolFacts, ReplicaFacts
from controlplane.placement import PoolView, ReplicaView, capacity_units
from controlplane.placement.plan import UNIT_EPS
from schema.policy import Model as ModelSpec
from schema.types import CapacityTier, NodeState


class _Shaped(Protocol):
    @property
    def gpu_shape(self) -> str: ...

    @property
    def state(self) -> str: ...


def replica_counts(replicas: Iterable[_Shaped], spec: ModelSpec) -> ReplicaCounts:
    """Replicas by state in capacity units of the model's first shape (placement's
    ``capacity_units``: a 96-slot replica is 1.5 next to a 64-slot first shape), rounded
    down cumulatively -- ready, then ready + starting, then all live -- so capacity is never
    over-counted and a model of one shape counts its replicas."""
    units: dict[str, float] = defaultdict(float)
    for r in replicas:
        units[r.state] += capacity_units(spec, r.gpu_shape)
    ready = units[NodeState.READY]
    starting = ready + units[NodeState.RUNNING]
    live = (
        starting
        + units[NodeState.PENDING]
        + units[NodeState.RESUMING]
        + units[NodeState.PROVISIONING]
    )
    n_ready, n_starting, n_live = (math.floor(u + UNIT_EPS) for u in (ready, starting, live))
    draining = units[NodeState.DRAINING] + units[NodeState.TERMINATING]
    return ReplicaCounts(
        ready=n_ready,
        starting=n_starting - n_ready,
        provisioning=n_live - n_starting,
        draining=math.floor(draining + UNIT_EPS),
    )


def scaling_spec(spec: ModelSpec, tuning: Tuning) -> ScalingSpec:
    """The autoscaler's view of a model. Replica counts are in units of the model's first
    (preferred) shape (see :func:`replica_counts`); its capacity sets the target per
    replica."""
    primary = spec.shapes[0]
    if spec.target.metric == "tokens_per_s" and primary.tokens_per_s is not None:
        target = primary.tokens_per_s * spec.target.utilization
    else:
        target = primary.max_concurrency * spec.target.utilization
    return ScalingSpec(
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        target_per_replica=max(target, 1e-6),
        metric=spec.target.metric.value,
        max_concurrency_per_replica=float(primary.max_concurrency),
        latency_slo_s=spec.latency_slo_ms / 1000.0,
        scale_to_zero_grace_s=spec.scale_to_zero_grace_s,
        stable_window_s=tuning.stable_window_s,
        burst_window_s=tuning.burst_window_s,
        **spec.scaling.limits(tuning.scale_down_delay_s),
    )


def pool_view(pool: PoolFacts, nodes_in_use: int, cold_start_s: float) -> PoolView:
    return PoolView(
        id=pool.id,
        cloud=pool.cloud,
        account=pool.account,
        region=pool.region,
        instance_type=pool.instance_type,
        gpu_shape=pool.gpu_shape,
        tier=CapacityTier(pool.tier),
        price_usd_per_hour=pool.price_usd_per_hour,
        committed=pool.committed,
        cordoned=pool.cordoned,
        unavailable_until=pool.blocked_until,
        nodes_in_use=nodes_in_use,
        cold_start_s=cold_start_s,
        zone=pool.zone,
    )


def replica_view(r: ReplicaFacts) -> ReplicaView:
    return ReplicaView(
        id=r.id,
        pool_id=r.pool_id,
        gpu_shape=r.gpu_shape,
        ready=r.state == NodeState.READY,
        created_at=r.created_at,
    )

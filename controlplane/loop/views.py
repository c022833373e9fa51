"""Conversions between store rows and the pure decision inputs. No I/O here: callers pass
rows they loaded."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from autoscaler.types import ReplicaCounts, ScalingSpec
from controlplane.loop.context import Tuning, epoch
from controlplane.placement import PoolView, ReplicaView
from controlplane.store.models import Node, Pool, Replica
from schema.policy import Model as ModelSpec
from schema.types import CapacityTier, NodeState

LIVE = (NodeState.PENDING, NodeState.PROVISIONING, NodeState.RUNNING, NodeState.READY)
LIVE_VALUES = tuple(s.value for s in LIVE)


def replica_counts(replicas: Iterable[Replica]) -> ReplicaCounts:
    c = Counter(r.state for r in replicas)
    return ReplicaCounts(
        ready=c[NodeState.READY],
        starting=c[NodeState.RUNNING],
        provisioning=c[NodeState.PENDING] + c[NodeState.PROVISIONING],
        draining=c[NodeState.DRAINING] + c[NodeState.TERMINATING],
    )


def scaling_spec(spec: ModelSpec, tuning: Tuning) -> ScalingSpec:
    """The autoscaler's view of a model. Replica counts are in units of the model's first
    (preferred) shape; its capacity sets the target per replica."""
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


def pool_view(pool: Pool, nodes_in_use: int, cold_start_s: float) -> PoolView:
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
        unavailable_until=epoch(pool.unavailable_until),
        nodes_in_use=nodes_in_use,
        cold_start_s=cold_start_s,
    )


def replica_view(r: Replica) -> ReplicaView:
    return ReplicaView(
        id=r.id,
        pool_id=r.pool_id,
        gpu_shape=r.gpu_shape,
        ready=r.state == NodeState.READY,
        created_at=epoch(r.created_at) or 0.0,
    )


def replica_state(nodes: list[Node], current: str) -> str:
    """A replica is as far along as its slowest node; one failed node fails the gang."""
    states = [NodeState(n.state) for n in nodes]
    if not states:
        return current
    if current in (NodeState.DRAINING, NodeState.TERMINATING) or any(
        s in (NodeState.DRAINING, NodeState.TERMINATING) for s in states
    ):
        if all(s.is_terminal for s in states):
            return NodeState.TERMINATED.value
        return NodeState.DRAINING.value
    if any(s == NodeState.FAILED for s in states):
        return NodeState.FAILED.value
    if all(s == NodeState.TERMINATED for s in states):
        return NodeState.TERMINATED.value
    order = [NodeState.PENDING, NodeState.PROVISIONING, NodeState.RUNNING, NodeState.READY]
    return min(states, key=lambda s: order.index(s) if s in order else 0).value

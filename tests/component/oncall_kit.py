"""Shared by the on-call tests of the service, the gRPC API and the CLI: decision records
written by the real control loop (demo policy, simulated cloud, hand-driven clock), and
replica/node rows as the reconciler writes them."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, Pool, Replica
from controlplane.telemetry import Metrics
from providers.sim import SimCloud, SimTimings
from tests.component.test_control_loop import POLICY, TUNING, Clock, ScriptedLoad, run

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record_demo_decisions(store: Store, service: ControlPlaneService) -> None:
    """Apply the demo policy, pin chat-8b (an on-call override) and run the loop for 12 s
    with load on llama-70b: the store then holds autoscale (scale-up), override (pinned)
    and placement records."""
    clock = Clock()
    sim = SimCloud(timings=SimTimings(boot_s=3, serve_s=4, terminate_s=1), clock=clock)
    service.apply_policy(POLICY, source="demo", applied_by="test")
    service.pin_model("demo", "chat-8b", 2)
    ctx = LoopContext(
        store=store,
        providers=SimResolver(sim),
        metrics_source=ScriptedLoad({("demo", "llama-70b"): 200.0}),
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=TUNING,
        clock=clock,
    )
    run(ControlLoop(ctx), clock, 12)


def add_replica(
    store: Store,
    model: str,
    pool_id: str,
    state: str,
    nodes: list[str],
    rid: str | None = None,
    private_ip: str | None = None,
) -> str:
    """A replica and its nodes (``<replica>-n0``, ...) as the reconciler writes them, the
    first (a gang's leader) at ``private_ip``; returns the replica id."""
    rid = rid or f"r-{model}-{len(nodes)}-{state}"
    with store.session() as s:
        model_row = s.scalar(select(ModelRow).where(ModelRow.name == model))
        pool = s.get(Pool, pool_id)
        assert model_row is not None and pool is not None
        s.add(
            Replica(
                id=rid,
                model_id=model_row.id,
                pool_id=pool_id,
                gpu_shape=pool.gpu_shape,
                state=state,
                created_at=T0,
            )
        )
        s.flush()
        for i, node_state in enumerate(nodes):
            s.add(
                Node(
                    id=f"{rid}-n{i}",
                    replica_id=rid,
                    pool_id=pool_id,
                    customer=pool.customer,
                    account=pool.account,
                    cloud=pool.cloud,
                    region=pool.region,
                    zone=f"{pool.region}a",
                    instance_type=pool.instance_type,
                    idempotency_token=f"tok-{rid}-{i}",
                    instance_id=f"i-{rid}{i}",
                    state=node_state,
                    pending_at=T0,
                    private_ip=private_ip if i == 0 else None,
                )
            )
    return rid

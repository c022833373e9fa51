"""Where each model is served: every ready replica's address and port, for routers and
gateways (``ListEndpoints``) and as Prometheus HTTP service discovery (``/sd/prometheus``),
so a Prometheus with ``http_sd_configs`` scrapes every engine gpucap starts. A gang is
reached at its leader (rank 0, the node with the least id), the one that serves."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from controlplane.api.paging import matching
from controlplane.store.db import Store
from controlplane.store.models import Model as ModelRow
from controlplane.store.models import Node, Replica
from runtimes import ENGINES, port
from schema.policy import Model as ModelSpec
from schema.types import NodeState


@dataclass(frozen=True)
class Endpoint:
    customer: str
    model: str
    replica_id: str
    node_id: str
    pool_id: str
    address: str
    port: int
    engine: str
    metrics_path: str

    @property
    def target(self) -> str:
        return f"{self.address}:{self.port}"


class Endpoints:
    def __init__(self, store: Store) -> None:
        self._store = store

    def ready(self, customer: str | None = None, model: str | None = None) -> list[Endpoint]:
        """Ready replicas with a known address, by customer, model and replica."""
        with self._store.session() as s:
            q = (
                select(Replica.id, Replica.pool_id, ModelRow.customer, ModelRow.name, ModelRow.spec)
                .join(ModelRow, Replica.model_id == ModelRow.id)
                .where(Replica.state == NodeState.READY.value, ModelRow.deleted_at.is_(None))
                .order_by(ModelRow.customer, ModelRow.name, Replica.id)
            )
            q = matching(q, (ModelRow.customer, customer), (ModelRow.name, model))
            replicas = s.execute(q).all()
            leaders: dict[str, tuple[str, str | None]] = {}
            ids = [r[0] for r in replicas]
            for rid, node_id, address in s.execute(
                select(Node.replica_id, Node.id, Node.private_ip)
                .where(Node.replica_id.in_(ids))
                .order_by(Node.replica_id, Node.id)
            ):
                leaders.setdefault(rid, (node_id, address))
        out = []
        specs: dict[tuple[str, str], ModelSpec] = {}
        for rid, pool_id, cust, name, raw in replicas:
            node_id, address = leaders.get(rid, ("", None))
            if not address:
                continue  # (the cloud has not told its address yet)
            if (cust, name) not in specs:
                specs[(cust, name)] = ModelSpec.model_validate(raw)
            runtime = specs[(cust, name)].runtime
            out.append(
                Endpoint(
                    customer=cust,
                    model=name,
                    replica_id=rid,
                    node_id=node_id,
                    pool_id=pool_id,
                    address=address,
                    port=port(runtime),
                    engine=runtime.engine.value,
                    metrics_path=ENGINES[runtime.engine].metrics.path,
                )
            )
        return out

    def prometheus_sd(self) -> list[dict[str, Any]]:
        """Prometheus HTTP SD: one target group per (customer, model), labelled with both
        (the labels the default PromQL sums by) and the engine's metrics path."""
        groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
        for e in self.ready():
            groups[(e.customer, e.model, e.engine, e.metrics_path)].append(e.target)
        return [
            {
                "targets": targets,
                "labels": {
                    "customer": cust,
                    "model": model,
                    "engine": engine,
                    "__metrics_path__": path,
                },
            }
            for (cust, model, engine, path), targets in sorted(groups.items())
        ]

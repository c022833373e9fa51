"""The collect job: read every model's load from the metrics source into the window the
decider reads, with each model's ready capacity (the source needs it to tell load from
saturation)."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select

from controlplane.loop.context import LoopContext
from controlplane.loop.snapshot import SnapshotReader, read_specs
from controlplane.metrics_sources import Capacity, ModelKey
from controlplane.placement import capacity_units
from controlplane.store.models import Model, Replica
from schema.types import NodeState

# Built once (building a statement costs about as much as running it).
_MODELS = select(Model.id, Model.version, Model.customer, Model.name).where(
    Model.deleted_at.is_(None)
)
_READY_SHAPES = select(Replica.model_id, Replica.gpu_shape).where(
    Replica.state == NodeState.READY.value
)


def collect(ctx: LoopContext, reader: SnapshotReader) -> None:
    now = ctx.now()
    with ctx.store.session() as s:
        models = s.execute(_MODELS).all()
        specs = read_specs(s, reader.specs, {mid: version for mid, version, *_ in models})
        ready: dict[int, list[str]] = defaultdict(list)  # model id -> ready shapes
        for model_id, shape in s.execute(_READY_SHAPES):
            ready[model_id].append(shape)
        capacity: dict[ModelKey, Capacity] = {}
        for mid, _, customer, name in models:
            spec = specs[mid]
            shapes = ready[mid]
            slots = float(spec.shapes[0].max_concurrency)
            if shapes:  # (the mean over the ready replicas' shapes)
                slots *= sum(capacity_units(spec, x) for x in shapes) / len(shapes)
            capacity[(customer, name)] = Capacity(len(shapes), slots)
            ctx.telemetry.ready_replicas.labels(customer, name).set(len(shapes))
    samples = ctx.metrics_source.collect(now, capacity)
    for key, sample in samples.items():
        if sample is not None:
            ctx.window.add(key, sample)
    ctx.window.forget(set(capacity))

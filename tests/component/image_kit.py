"""The image job's test kit against a cloud's fake: a loop whose clock the test moves, the
builds as the store holds them, and one build from start to ready with the builder's
"baked" report sent as node.sh sends it (the fakes run no user data)."""

from __future__ import annotations

import time
from dataclasses import replace

from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from coldstart.images import ImageTimings
from controlplane.api import ControlPlaneService
from controlplane.api.node_phases import PhaseReport
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.context import BootConfig, ProviderResolver
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth
from controlplane.store.db import Store
from controlplane.store.models import MachineImage
from controlplane.telemetry import Metrics
from providers.sim import SimCloud
from tests.component.test_node_phases import TOKENS

TIMINGS = ImageTimings(build_s=600.0, retry_s=600.0, grace_s=0.0, max_age_s=100.0)


class Clock:
    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def image_loop(store: Store, providers: ProviderResolver, clock: Clock) -> ControlLoop:
    ctx = LoopContext(
        store=store,
        providers=providers,
        metrics_source=SyntheticTraffic({}),
        health=SimHealth(SimCloud()),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=replace(Tuning(), images=TIMINGS),
        clock=clock,
        boot=BootConfig(TOKENS, "http://127.0.0.1:9/v1/node-phases"),
    )
    return ControlLoop(ctx)


def builds(store: Store) -> list[MachineImage]:
    with store.session() as s:
        return list(s.scalars(select(MachineImage).order_by(MachineImage.image_version)))


def bake(
    loop: ControlLoop, svc: ControlPlaneService, store: Store, digest: str = "vllm@sha256:ab"
) -> MachineImage:
    """One build from start to ready, the builder's report sent as node.sh sends it."""
    loop.bake_images()
    b = next(b for b in builds(store) if b.state == "building")
    report = PhaseReport(b.id, "baked", time.time(), TOKENS.for_node(b.id), digest)
    assert svc.report_node_phase(report)
    assert not svc.report_node_phase(report)  # a retry changes nothing
    for _ in range(10):
        loop.bake_images()
        b = next(x for x in builds(store) if x.id == b.id)
        if b.state == "ready" and b.builder_terminated_at is not None:
            return b
    raise AssertionError(f"{b.id} is {b.state}: {b.error}")

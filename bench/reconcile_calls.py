"""Cloud calls per steady reconcile pass, for N ready nodes in one (account, region), on the
simulated cloud and SQLite (a hand-driven clock): ``python -m bench.reconcile_calls 10 100
1000``. Counts with the reconcile job's own ``gpucap_provider_calls_total{cloud,call}``
(present before and after the listing change, so the same script measures both)."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.migrate import upgrade
from controlplane.store.models import Node
from controlplane.telemetry import Metrics
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimTimings

POLICY = """
customer: fleet
accounts:
  - name: fleet-aws
    cloud: aws
    owner: customer
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::111122223333:role/gpucap-fleet
models:
  - name: chat-8b
    shapes:
      - shape: 1xH100
        max_concurrency: 32
    min_replicas: {n}
    max_replicas: {n}
    latency_slo_ms: 500
    clouds: [aws]
"""


class Clock:
    t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


class NoLoad:
    def collect(self, now: float, capacity: dict) -> dict:  # type: ignore[type-arg]
        return dict.fromkeys(capacity)


def measure(n: int, passes: int = 3) -> tuple[float, float, int]:
    """(cloud calls per steady pass, wall seconds per pass, nodes ready)."""
    clock = Clock()
    timings = SimTimings(boot_s=3, serve_s=4, terminate_s=1)
    sim = SimCloud(timings=timings, clock=clock, default_capacity=n)
    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{Path(d) / 'bench.db'}"
        upgrade(url)
        store = Store.from_url(url)
        svc = ControlPlaneService(store, clock=lambda: datetime.fromtimestamp(clock.t, UTC))
        svc.apply_policy(POLICY.format(n=n), source="bench", applied_by="bench")
        telemetry = Metrics()
        ctx = LoopContext(
            store=store,
            providers=SimResolver(sim, retry=NO_RETRY),
            metrics_source=NoLoad(),  # type: ignore[arg-type]
            health=SimHealth(sim),
            autoscaler=GpucapAutoscaler(),
            telemetry=telemetry,
            tuning=replace(Tuning(), cold_start_scale=0.001, gc_every_s=3600.0),
            clock=clock,
        )
        loop = ControlLoop(ctx)
        for _ in range(15):
            loop.collect_metrics()
            loop.decide()
            loop.place()
            loop.reconcile()
            clock.t += 1

        def calls() -> float:
            total = 0.0
            for metric in telemetry.registry.collect():
                for s in metric.samples:
                    if s.name == "gpucap_provider_calls_total":
                        total += s.value
            return total

        before, started = calls(), time.perf_counter()
        for _ in range(passes):
            loop.reconcile()
            clock.t += 1
        wall = (time.perf_counter() - started) / passes
        with store.session() as s:
            ready = s.scalar(select(func.count(Node.id)).where(Node.state == "ready")) or 0
        store.close()
        return (calls() - before) / passes, wall, ready


def main(argv: list[str]) -> None:
    for n in [int(a) for a in argv] or [10, 100]:
        per_pass, wall, ready = measure(n)
        print(
            f"nodes={n} ready={ready} cloud_calls_per_pass={per_pass:g} wall_s_per_pass={wall:.3f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])

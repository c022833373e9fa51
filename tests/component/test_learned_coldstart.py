"""The loop learns cold-start phases from the boot reports in the store (both backends):
the snapshot carries them, reads them again only once a node has reported since, and a
pool's cold-start horizon for a model with no launch of its own there follows what other
nodes' boots took in that pool."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import select

from autoscaler.gpucap import GpucapAutoscaler
from coldstart import ColdStartModel
from coldstart.estimate import Estimate
from coldstart.model import GIB
from controlplane.api import ControlPlaneService
from controlplane.loop.coldstart import pool_estimate
from controlplane.loop.context import LoopContext, epoch
from controlplane.loop.snapshot import SnapshotReader
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Model, NodePhaseReport
from controlplane.telemetry import Metrics
from providers.sim import SimCloud
from schema.types import NodePhase
from tests.component.oncall_kit import T0, add_replica
from tests.policy_texts import example_policy

POOL = "acme/acme-aws/us-east-1/p5.48xlarge"
OTHER_POOL = "acme/acme-aws/us-west-2/p5.48xlarge"
# created at minute 0, then: booted 2 min, driver 1, image 3, weights 1, started 1, ready 2.
STEPS = [(NodePhase.BOOTED, 2), (NodePhase.DRIVER_OK, 3), (NodePhase.IMAGE_PULLED, 6)]
STEPS += [(NodePhase.WEIGHTS_FETCHED, 7), (NodePhase.ENGINE_STARTED, 8), (NodePhase.READY, 10)]


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _report(store: Store, node_id: str, steps: list[tuple[NodePhase, int]]) -> None:
    with store.session() as s:
        for phase, minutes in steps:
            at = _at(minutes)
            s.add(NodePhaseReport(node_id=node_id, phase=phase.value, at=at, reported_at=at))


def _ctx(store: Store) -> LoopContext:
    sim = SimCloud()
    return LoopContext(
        store=store,
        providers=SimResolver(sim),
        metrics_source=SyntheticTraffic({}),
        health=SimHealth(sim),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
    )


def test_boot_reports_teach_the_pools_cold_start(store: Store) -> None:
    ControlPlaneService(store).apply_policy(example_policy(), "a.yaml", "alice")
    booted = add_replica(store, "llama-70b", POOL, "ready", ["ready"])
    booting = add_replica(store, "llama-70b", POOL, "provisioning", ["provisioning"])
    _report(store, f"{booted}-n0", STEPS)
    _report(store, f"{booting}-n0", [(NodePhase.BOOTED, 5)])  # not ready: teaches nothing yet
    with store.session() as s:
        model_id = s.scalars(select(Model.id).where(Model.name == "llama-70b")).one()

    reader, now = SnapshotReader(), epoch(_at(11))
    assert now is not None
    with store.session() as s:
        snap = reader.read(s, now, placement=True)
    learned = snap.learned
    assert {k: v.value for k, v in learned.by_pool[POOL].items()} == {
        "capacity_vm": 120,
        "bootstrap": 60,
        "image": 180,
    }
    assert learned.fetch_gib_per_s[POOL].value == pytest.approx(141e9 / GIB / 60)
    assert learned.engine_s[model_id].value == 180
    spec = snap.models[0].spec

    def est(pool: str, cloud: str, seen: list[tuple[str, float]]) -> Estimate:
        return pool_estimate(
            ColdStartModel(), 1.0, learned, model_id, spec, seen, pool, cloud, "8xH100"
        )

    # A new launch in POOL: ten minutes, as its boot took, against the textbook's 25.
    here = est(POOL, "aws", [])
    assert (here.source, here.seconds) == ("phases", pytest.approx(600))
    assert ColdStartModel().expected_ready_s(141.0) > 2 * here.seconds
    # A pool no node reported from: this model's engine time, the defaults for the rest.
    there = est(OTHER_POOL, "aws", [])
    assert [p.source for p in there.phases] == ["default"] * 4 + ["learned"]
    # The model's own launches in the pool come first.
    assert est(POOL, "aws", [(POOL, 42.0)]).seconds == 42

    # The second node becomes ready, its bootstrap 8 min: the next read learns from both.
    _report(store, f"{booting}-n0", [(p, m + 10) for p, m in STEPS if p != NodePhase.BOOTED])
    with store.session() as s:
        again = reader.read(s, now + 600, placement=True).learned
    assert again.by_pool[POOL]["capacity_vm"].value == pytest.approx(120 + 0.9 * (300 - 120))
    assert again.by_pool[POOL]["bootstrap"].samples == 2
    with store.session() as s:
        # No new report: not read again.
        assert reader.read(s, now + 600, placement=True).learned is again

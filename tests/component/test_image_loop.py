"""The image job (controlplane/loop/images.py) through the control loop on the simulated
cloud with local nodes: the builder is a real local process booting the bake-mode user data,
reporting to the daemon's HTTP port; the image is made from it, the builder terminated, and
the next node of that model boots from the image. A builder that never reports times out
with an event, and nodes keep the base image; a changed runtime image builds anew and the
old image is deleted after the grace. On SQLite and PostgreSQL."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from coldstart.images import ImageTimings
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.context import BootConfig
from controlplane.loop.images import BUILDER_ROLE, TAG_ROLE
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Event, MachineImage
from controlplane.telemetry import Metrics
from providers.base import InstanceStatus
from providers.sim import SimCloud, SimTimings
from providers.sim.local import LocalNodes
from tests.component.oncall_kit import add_replica
from tests.component.test_node_phases import TOKENS, phases_endpoint

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux routes 127/8 to lo")

POLICY = """\
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    runtime:
      image: {image}
    baked_image: {{}}
"""
POOL = "acme/acme-aws/us-east-1/p5.48xlarge"
TIMINGS = ImageTimings(build_s=600.0, retry_s=600.0, grace_s=120.0, max_age_s=86400.0)


class Clock:
    """Starts at the real time: the builder's report is checked on the API's real clock."""

    def __init__(self) -> None:
        self.t = time.time()

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def world(
    store: Store, tmp_path: Path
) -> Iterator[tuple[ControlLoop, Clock, SimCloud, ControlPlaneService]]:
    svc = ControlPlaneService(store)
    svc.apply_policy(POLICY.format(image="vllm/vllm-openai:v1"), source="a.yaml", applied_by="t")
    nodes = LocalNodes(tmp_path / "nodes", network=f"127.{random.randint(1, 254)}.7.0/24")
    cloud = SimCloud(timings=SimTimings(boot_s=0.0, serve_s=0.0), local_nodes=nodes)
    clock = Clock()
    with phases_endpoint(svc) as url:
        ctx = LoopContext(
            store=store,
            providers=SimResolver(cloud),
            metrics_source=SyntheticTraffic({}),
            health=SimHealth(cloud),
            autoscaler=GpucapAutoscaler(),
            telemetry=Metrics(),
            tuning=replace(Tuning(), images=TIMINGS),
            clock=clock,
            boot=BootConfig(TOKENS, url),
        )
        try:
            yield ControlLoop(ctx), clock, cloud, svc
        finally:
            nodes.close()


def builds(store: Store) -> list[MachineImage]:
    with store.session() as s:
        return list(s.scalars(select(MachineImage).order_by(MachineImage.created_at)))


def events(store: Store, kind: str) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(Event.message).where(Event.kind == kind)))


def until_state(
    loop: ControlLoop, store: Store, bid: str, state: str, timeout_s: float = 30
) -> None:
    """Run the job (the builder boots on the real clock meanwhile) until the build is there."""
    deadline = time.monotonic() + timeout_s
    while True:
        loop.bake_images()
        row = next(b for b in builds(store) if b.id == bid)
        if row.state == state:
            return
        assert time.monotonic() < deadline, f"{bid} is {row.state}, not {state}: {row.error}"
        time.sleep(0.1)


def builders(cloud: SimCloud) -> list[str]:
    with cloud.lock:
        return [
            i.instance_id
            for i in cloud.instances.values()
            if i.tags.get(TAG_ROLE) == BUILDER_ROLE
            and cloud.status(i) != InstanceStatus.TERMINATED
            and i.terminate_requested_at is None
        ]


def test_a_build_bakes_on_a_local_builder_and_new_nodes_boot_from_it(
    world: tuple[ControlLoop, Clock, SimCloud, ControlPlaneService], store: Store
) -> None:
    loop, clock, cloud, _ = world
    loop.bake_images()
    (b,) = builds(store)
    # Recorded, then its builder created in the same pass.
    assert (b.state, b.runtime_image, b.region, b.instance_type) == (
        "building",
        "vllm/vllm-openai:v1",
        "us-east-1",
        "p5.48xlarge",
    )
    until_state(loop, store, b.id, "ready")
    (b,) = builds(store)
    assert b.image_id in cloud.images
    assert b.source_digest and b.source_digest.startswith("vllm/vllm-openai@sha256:")
    assert b.image_version == 1 and b.baked_at is not None
    loop.bake_images()  # the builder goes once the image is made
    assert builders(cloud) == []
    assert builds(store)[0].builder_terminated_at is not None
    # A new node of the model boots from the image; its own bootstrap still runs.
    add_replica(store, "chat", POOL, "pending", ["pending"])
    loop.reconcile()
    with cloud.lock:
        (node,) = [i for i in cloud.instances.values() if i.tags.get(TAG_ROLE) != BUILDER_ROLE]
    assert node.image == b.image_id
    assert events(store, "image.ready")


def test_a_builder_that_never_reports_times_out_and_nodes_keep_the_base_image(
    world: tuple[ControlLoop, Clock, SimCloud, ControlPlaneService], store: Store
) -> None:
    loop, clock, cloud, _ = world
    cloud.local_nodes = None  # (the builder boots nowhere: it never reports)
    loop.bake_images()
    (b,) = builds(store)
    assert b.state == "building" and builders(cloud) == [b.builder_instance_id]
    add_replica(store, "chat", POOL, "pending", ["pending"])
    loop.reconcile()  # scaling never waits for an image
    clock.t += TIMINGS.build_s + 1
    loop.bake_images()
    (b,) = builds(store)
    assert b.state == "failed" and "no image within 600 s" in (b.error or "")
    (msg,) = events(store, "image.build_timed_out")
    assert "boot the base image with the full bootstrap" in msg
    loop.bake_images()
    assert builders(cloud) == []
    clock.t += 60
    loop.bake_images()
    assert len(builds(store)) == 1  # not retried before retry_s
    with cloud.lock:
        (node,) = [i for i in cloud.instances.values() if i.tags.get(TAG_ROLE) != BUILDER_ROLE]
    assert node.image is None


def test_a_changed_runtime_image_rebuilds_and_the_old_image_goes_after_the_grace(
    world: tuple[ControlLoop, Clock, SimCloud, ControlPlaneService], store: Store
) -> None:
    loop, clock, cloud, svc = world
    loop.bake_images()
    first = builds(store)[0]
    until_state(loop, store, first.id, "ready")
    old_image = builds(store)[0].image_id
    svc.apply_policy(POLICY.format(image="vllm/vllm-openai:v2"), source="a.yaml", applied_by="t")
    clock.t += 10
    loop.bake_images()
    second = builds(store)[1]
    assert second.runtime_image == "vllm/vllm-openai:v2"
    until_state(loop, store, second.id, "ready")
    assert old_image in cloud.images  # kept for the grace period
    clock.t += TIMINGS.grace_s + 1
    loop.bake_images()
    states = {b.id: b.state for b in builds(store)}
    assert states == {first.id: "deleted", second.id: "ready"}
    assert old_image not in cloud.images

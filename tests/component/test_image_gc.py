"""The gc job deletes orphan baked images by tag (controlplane/loop/gc.py), on SQLite and
PostgreSQL: on the simulated cloud, images tagged gpucap-managed with no build row (one
whose row was lost, a forgotten customer's in a shared account, one whose row says deleted)
go once older than the grace, with an event; a young one, one a build row knows, one
without gpucap's tag, another customer's in a customer's own account and one in an account
the store does not hold stay. On moto's EC2 through boto3: a lost build's AMI is
deregistered with its snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from sqlalchemy import select

from autoscaler import GpucapAutoscaler
from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.gc import collect_orphan_images
from controlplane.metrics_sources import SyntheticTraffic
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.store.db import Store
from controlplane.store.models import Event, MachineImage
from controlplane.telemetry import Metrics
from providers.base import MANAGED_VALUE, TAG_CUSTOMER, TAG_INTENT, TAG_MANAGED
from providers.sim import SimCloud
from tests.component.image_kit import TIMINGS, Clock, image_loop
from tests.component.test_image_loop_aws import POLICY as AWS_POLICY
from tests.component.test_image_loop_aws import AwsWithBaseImage
from tests.contract.harness_aws import base_ami
from tests.fakes.moto_server import MotoEmulator, moto, moto_server

__all__ = ["moto", "moto_server"]

POLICY = """\
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap
  - name: gpucap-oci
    cloud: oci
    owner: shared
    regions: [us-ashburn-1]
    credentials:
      tenancy: ocid1.tenancy.oc1..aaaagpucap
      compartment_id: ocid1.compartment.oc1..aaaagpucap
      profile: GPUCAP_SHARED
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
"""
GRACE_S = 600.0
T0 = 1_000_000.0


def managed(customer: str, intent: str) -> dict[str, str]:
    return {TAG_MANAGED: MANAGED_VALUE, TAG_CUSTOMER: customer, TAG_INTENT: intent}


@pytest.fixture
def sim_world(store: Store) -> Iterator[tuple[LoopContext, SimCloud, Clock]]:
    ControlPlaneService(store).apply_policy(POLICY, source="a.yaml", applied_by="t")
    clock = Clock()
    clock.t = T0
    cloud = SimCloud(clock=clock)
    ctx = LoopContext(
        store=store,
        providers=SimResolver(cloud),
        metrics_source=SyntheticTraffic({}),
        health=SimHealth(cloud),
        autoscaler=GpucapAutoscaler(),
        telemetry=Metrics(),
        tuning=replace(Tuning(), images=replace(TIMINGS, orphan_grace_s=GRACE_S)),
        clock=clock,
    )
    yield ctx, cloud, clock


def events(store: Store) -> list[str]:
    with store.session() as s:
        q = select(Event.message).where(Event.kind == "image.orphan_deleted")
        return list(s.scalars(q.order_by(Event.id)))


def test_orphan_images_go_after_the_grace_and_nothing_else_does(
    sim_world: tuple[LoopContext, SimCloud, Clock], store: Store
) -> None:
    ctx, cloud, clock = sim_world
    own, shared = "acme/acme-aws", "gpucap-oci"  # (the sim's account keys)
    east, ash = "us-east-1", "us-ashburn-1"
    lost = cloud.new_image(east, "gpucap-bake-lost", account=own, tags=managed("acme", "b-lost"))
    known = cloud.new_image(east, "gpucap-bake-known", account=own, tags=managed("acme", "b-ok"))
    gone = cloud.new_image(east, "gpucap-bake-gone", account=own, tags=managed("acme", "b-del"))
    forgotten = cloud.new_image(ash, "gpucap-bake-old", account=shared, tags=managed("oldco", "x"))
    keep = [
        cloud.new_image(east, "not-ours", account=own, tags={TAG_CUSTOMER: "acme"}),
        cloud.new_image(east, "globex", account=own, tags=managed("globex", "b-g")),
        cloud.new_image(east, "elsewhere", account="acme/other", tags=managed("acme", "b-e")),
    ]
    at = datetime.fromtimestamp(T0, UTC)
    with store.session() as s:
        for bid, img, state in (("b-ok", known, "ready"), ("b-del", gone, "deleted")):
            s.add(
                MachineImage(
                    id=bid,
                    customer="acme",
                    account="acme-aws",
                    cloud="aws",
                    region=east,
                    runtime_image="vllm/vllm-openai:v1",
                    instance_type="p5.48xlarge",
                    state=state,
                    image_name=img.name,
                    image_id=img.image_id,
                    created_at=at,
                    state_at=at,
                )
            )

    clock.t = T0 + GRACE_S - 1
    assert collect_orphan_images(ctx) == 0  # all younger than the grace
    clock.t = T0 + GRACE_S + 1
    assert collect_orphan_images(ctx) == 3
    left = set(cloud.images)
    assert {lost.image_id, gone.image_id, forgotten.image_id}.isdisjoint(left)
    assert {known.image_id, *(k.image_id for k in keep)} <= left
    msgs = events(store)
    assert len(msgs) == 3 and any("customer oldco" in m for m in msgs)
    assert any(lost.image_id in m and "build b-lost" in m for m in msgs)
    assert collect_orphan_images(ctx) == 0  # nothing left to find


@pytest.fixture
def ec2(moto: MotoEmulator) -> Any:
    moto.reset_state()
    return boto3.client("ec2", region_name="us-east-1", endpoint_url=moto.direct_url)


@pytest.fixture
def aws_loop(store: Store, moto: MotoEmulator, ec2: Any) -> Iterator[tuple[ControlLoop, Clock]]:
    ControlPlaneService(store).apply_policy(AWS_POLICY, source="a.yaml", applied_by="t")
    clock = Clock()
    loop = image_loop(store, AwsWithBaseImage(moto.endpoint_url, base_ami(ec2)), clock)
    loop.ctx.tuning = replace(
        loop.ctx.tuning, images=replace(TIMINGS, orphan_grace_s=GRACE_S), gc_every_s=0.0
    )
    yield loop, clock


def test_a_lost_builds_ami_is_deregistered_with_its_snapshots_on_moto(
    aws_loop: tuple[ControlLoop, Clock], store: Store, ec2: Any
) -> None:
    loop, clock = aws_loop
    run = ec2.run_instances(ImageId=base_ami(ec2), MinCount=1, MaxCount=1)
    src = run["Instances"][0]["InstanceId"]
    tags = [{"Key": k, "Value": v} for k, v in managed("acme", "bake-lost").items()]
    ami = ec2.create_image(
        InstanceId=src,
        Name="gpucap-bake-lost",
        TagSpecifications=[{"ResourceType": "image", "Tags": tags}],
    )["ImageId"]
    raw = ec2.describe_images(ImageIds=[ami])["Images"][0]
    snaps = [m["Ebs"]["SnapshotId"] for m in raw["BlockDeviceMappings"] if "Ebs" in m]
    loop.collect_garbage()
    assert ec2.describe_images(ImageIds=[ami])["Images"]  # younger than the grace
    clock.t += GRACE_S + 60
    loop.collect_garbage()
    assert ec2.describe_images(Filters=[{"Name": "image-id", "Values": [ami]}])["Images"] == []
    left = ec2.describe_snapshots(Filters=[{"Name": "snapshot-id", "Values": snaps}])
    assert left["Snapshots"] == []
    (msg,) = events(store)
    assert ami in msg and "build bake-lost" in msg

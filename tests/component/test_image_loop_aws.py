"""The image job against moto's EC2 (server mode) through the real boto3 client, on SQLite
and PostgreSQL: the builder is a real EC2 instance (moto runs no user data, so the test
reports "baked" with the builder's token, as its node.sh would), the AMI is made from it
with its EBS snapshots tagged, the builder is terminated, and after a rebuild the
superseded AMI is deregistered and its snapshots deleted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from controlplane.api import ControlPlaneService
from controlplane.loop import ControlLoop
from controlplane.resolvers import account_model
from controlplane.store.db import Store
from controlplane.store.models import Account as AccountRow
from providers.aws.provider import AwsProvider
from providers.base import TAG_INTENT, TAG_MANAGED, Provider
from tests.component.image_kit import TIMINGS, Clock, bake, builds, image_loop
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
models:
  - name: chat
    shapes:
      - shape: 8xH100
        max_concurrency: 64
    runtime:
      image: vllm/vllm-openai:v1
    baked_image: {}
"""


class AwsWithBaseImage:
    """The account's provider against moto, with the base AMI moto ships for the region
    (the daemon's resolver looks AWS's Deep Learning base AMI up by name instead)."""

    def __init__(self, endpoint: str, ami: str) -> None:
        self.endpoint, self.ami = endpoint, ami
        self._cache: dict[str, Provider] = {}

    def provider(self, customer: str, account: AccountRow) -> Provider:
        if account.name not in self._cache:
            self._cache[account.name] = AwsProvider.for_account(
                account_model(account),
                customer=customer,
                external_id="image-test-external-id",
                endpoint_url=self.endpoint,
                images={"us-east-1": self.ami},
            )
        return self._cache[account.name]


@pytest.fixture
def ec2(moto: MotoEmulator) -> Any:
    moto.reset_state()
    return boto3.client("ec2", region_name="us-east-1", endpoint_url=moto.direct_url)


@pytest.fixture
def world(
    store: Store, moto: MotoEmulator, ec2: Any
) -> Iterator[tuple[ControlLoop, Clock, ControlPlaneService]]:
    svc = ControlPlaneService(store)
    svc.apply_policy(POLICY, source="a.yaml", applied_by="t")
    clock = Clock()
    yield image_loop(store, AwsWithBaseImage(moto.endpoint_url, base_ami(ec2)), clock), clock, svc


def tags(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def test_a_build_makes_a_tagged_ami_and_a_rebuild_deregisters_the_old_with_snapshots(
    world: tuple[ControlLoop, Clock, ControlPlaneService], store: Store, ec2: Any
) -> None:
    loop, clock, svc = world
    first = bake(loop, svc, store)
    assert first.source_digest == "vllm@sha256:ab"
    raw = ec2.describe_images(ImageIds=[first.image_id])["Images"][0]
    assert raw["Name"] == first.image_name
    assert tags(raw)[TAG_MANAGED] == "true" and tags(raw)[TAG_INTENT] == first.id
    snaps = [m["Ebs"]["SnapshotId"] for m in raw["BlockDeviceMappings"] if "Ebs" in m]
    assert snaps
    builder = ec2.describe_instances(InstanceIds=[first.builder_instance_id])
    state = builder["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    clock.t += TIMINGS.max_age_s + 1  # stale: rebuilt, then the old one goes
    second = bake(loop, svc, store)
    assert second.image_version == 2 and second.image_id != first.image_id
    clock.t += 1  # (past the grace, 0 s here)
    loop.bake_images()
    assert {b.id: b.state for b in builds(store)} == {first.id: "deleted", second.id: "ready"}
    assert ec2.describe_images(ImageIds=[second.image_id])["Images"]
    gone = ec2.describe_images(Filters=[{"Name": "image-id", "Values": [first.image_id]}])
    assert gone["Images"] == []
    left = ec2.describe_snapshots(Filters=[{"Name": "snapshot-id", "Values": snaps}])
    assert left["Snapshots"] == []

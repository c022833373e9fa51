"""Contract harness for the AWS adapter: boto3 against moto in server mode, with capacity,
quota, throttling, 5xx and auth errors injected by the HTTP proxy in front of moto
(``tests/fakes/moto_server.py``). Ground truth is read from moto directly, not through the
proxy or the adapter."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from providers.aws import AwsProvider
from providers.aws.instances import LIVE_STATES
from providers.base import TAG_INTENT
from schema.policy import Account
from schema.types import Cloud, Owner
from tests.contract.harness import CONTRACT_RETRY, Fault
from tests.fakes.moto_server import HARNESS_FAULTS, MotoEmulator, moto, moto_server

__all__ = ["AwsHarness", "aws_harness", "moto", "moto_server"]

REGION = "us-east-1"
BUCKET = "gpucap-contract"


@dataclass
class AwsHarness:
    emulator: MotoEmulator
    provider: AwsProvider
    direct_ec2: Any
    direct_s3: Any
    # moto 5.2.5 has no placement groups: the proxy in front of it plays them
    # (tests/fakes/moto_server.py PlacementGroups), so placement is read through the proxy.
    placement_ec2: Any
    region: str = REGION
    zone: str = "us-east-1a"
    instance_type: str = "p5.48xlarge"
    retry_budget: int = CONTRACT_RETRY.max_attempts
    unknown_instance_id: str = "i-0badc0ffee0000000"
    has_placement_objects: bool = True

    def inject(self, fault: Fault, *, count: int = 1, zone: str | None = None) -> None:
        code, status = HARNESS_FAULTS[fault]
        self.emulator.inject(code, status, count=count, zone=zone)

    def inject_start(self, fault: Fault, *, count: int = 1) -> None:
        code, status = HARNESS_FAULTS[fault]
        self.emulator.inject(code, status, action="StartInstances", count=count)

    def create_requests(self) -> int:
        return self.emulator.faults.seen["RunInstances"]

    def instances_with_intent(self, intent_id: str) -> int:
        resp = self.direct_ec2.describe_instances(
            Filters=[
                {"Name": f"tag:{TAG_INTENT}", "Values": [intent_id]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            ]
        )
        return sum(len(r["Instances"]) for r in resp["Reservations"])

    def user_data_of(self, instance_id: str) -> str:
        attr = self.direct_ec2.describe_instance_attribute(
            InstanceId=instance_id, Attribute="userData"
        )
        value = attr.get("UserData", {}).get("Value")
        return base64.b64decode(value).decode() if value else ""

    def placement_of(self, instance_id: str) -> str | None:
        resp = self.placement_ec2.describe_instances(InstanceIds=[instance_id])
        inst = resp["Reservations"][0]["Instances"][0]
        return (inst.get("Placement") or {}).get("GroupName") or None

    def placement_objects(self) -> Mapping[str, Mapping[str, str]]:
        groups = self.placement_ec2.describe_placement_groups()["PlacementGroups"]
        return {g["GroupName"]: {t["Key"]: t["Value"] for t in g.get("Tags", [])} for g in groups}

    def drop_next_placement_create(self) -> bool:
        self.emulator.drop_next_response("CreatePlacementGroup")
        return True

    def crash_after_create(self) -> None:
        self.emulator.drop_next_response("RunInstances")

    def object_uri(self, key: str) -> str:
        return f"s3://{BUCKET}/{key}"

    def put_object(self, uri: str, data: bytes) -> None:
        bucket, key = uri.removeprefix("s3://").split("/", 1)
        self.direct_s3.put_object(Bucket=bucket, Key=key, Body=data)

    def get_object(self, uri: str) -> bytes | None:
        bucket, key = uri.removeprefix("s3://").split("/", 1)
        try:
            return bytes(self.direct_s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except self.direct_s3.exceptions.NoSuchKey:
            return None


def base_ami(direct_ec2: Any) -> str:
    """An AMI moto ships, standing in for the account's baked GPU image."""
    images = direct_ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": ["Deep Learning AMI Ubuntu*"]}]
    )["Images"]
    return str(images[0]["ImageId"])


@pytest.fixture
def aws_harness(moto: MotoEmulator) -> Iterator[AwsHarness]:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto.direct_url)
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto.direct_url)
    s3.create_bucket(Bucket=BUCKET)  # idempotent in us-east-1
    account = Account(name="contract-aws", cloud=Cloud.AWS, owner=Owner.SHARED, regions=[REGION])
    provider = AwsProvider.for_account(
        account,
        customer="contract-co",
        external_id=None,
        endpoint_url=moto.endpoint_url,
        images={REGION: base_ami(ec2)},
        retry=CONTRACT_RETRY,
    )
    placement_ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto.endpoint_url)
    yield AwsHarness(
        emulator=moto,
        provider=provider,
        direct_ec2=ec2,
        direct_s3=s3,
        placement_ec2=placement_ec2,
    )

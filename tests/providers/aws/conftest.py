"""Fixtures for the AWS adapter tests: moto server behind the fault proxy, ground-truth
clients straight to moto, and a builder for providers (shared or customer-owned)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from providers.aws import AwsProvider
from providers.base import NodeRequest, ownership_tags
from providers.credentials import ExternalIdGenerator
from providers.retry import NO_RETRY, RetryPolicy
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner
from tests.contract.harness_aws import base_ami
from tests.fakes.moto_server import MotoEmulator, moto, moto_server

__all__ = ["moto", "moto_server"]

REGION = "us-east-1"
ZONE = "us-east-1a"
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01, max_total_s=10)


@pytest.fixture
def direct_ec2(moto: MotoEmulator) -> Any:
    """EC2 in moto's default account (gpucap's shared one), bypassing the proxy."""
    return boto3.client("ec2", region_name=REGION, endpoint_url=moto.direct_url)


@pytest.fixture
def ami(direct_ec2: Any) -> str:
    return base_ami(direct_ec2)


@pytest.fixture
def external_ids() -> ExternalIdGenerator:
    return ExternalIdGenerator(secret=f"gpucap-test-hmac-{uuid.uuid4().hex}".encode())


ProviderFactory = Callable[..., AwsProvider]


@pytest.fixture
def make_provider(moto: MotoEmulator, ami: str) -> ProviderFactory:
    def make(
        *,
        name: str = "shared-aws",
        role_arn: str | None = None,
        customer: str = "acme",
        external_id: str | None = None,
        retry: RetryPolicy = NO_RETRY,
        prices: dict[str, float] | None = None,
        instance_profile: str | None = None,
    ) -> AwsProvider:
        account = Account(
            name=name,
            cloud=Cloud.AWS,
            owner=Owner.CUSTOMER if role_arn else Owner.SHARED,
            regions=[REGION, "us-west-2"],
            credentials=Credentials(role_arn=role_arn, instance_profile=instance_profile),
            prices=prices or {},
        )
        return AwsProvider.for_account(
            account,
            customer=customer,
            external_id=external_id,
            endpoint_url=moto.endpoint_url,
            images={REGION: ami, "us-west-2": ami},
            retry=retry,
        )

    return make


def node_request(zone: str | None = ZONE, pool: str = "p1", **kw: Any) -> NodeRequest:
    intent = f"n-{uuid.uuid4().hex[:16]}"
    return NodeRequest(
        intent_id=intent,
        instance_type=kw.pop("instance_type", "p5.48xlarge"),
        region=REGION,
        zone=zone,
        tags=ownership_tags(intent, kw.pop("customer", "acme"), pool, "llama-70b"),
        **kw,
    )


def live_with_intent(ec2: Any, intent_id: str) -> list[dict[str, Any]]:
    resp = ec2.describe_instances(
        Filters=[
            {"Name": "tag:gpucap-intent", "Values": [intent_id]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )
    return [i for r in resp["Reservations"] for i in r["Instances"]]


def assumed_ec2(moto: MotoEmulator, role_arn: str) -> Any:
    """Ground truth inside a customer account: moto acts in the role's account."""
    sts = boto3.client("sts", region_name=REGION, endpoint_url=moto.direct_url)
    c = sts.assume_role(RoleArn=role_arn, RoleSessionName="ground-truth")["Credentials"]
    return boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=moto.direct_url,
        aws_access_key_id=c["AccessKeyId"],
        aws_secret_access_key=c["SecretAccessKey"],
        aws_session_token=c["SessionToken"],
    )

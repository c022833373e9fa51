"""AWS instances against moto: what a create leaves at the cloud (tags, token, user data,
reservation target), find-or-create after a crash, describe/list/terminate edge cases."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import boto3
import pytest

from providers.aws.tags import client_token
from providers.base import TAG_INTENT, TAG_MANAGED, InstanceStatus
from providers.errors import ProviderError, TransientError
from providers.retry import NO_RETRY
from tests.fakes.moto_server import MotoEmulator
from tests.providers.aws.conftest import (
    FAST,
    REGION,
    ProviderFactory,
    live_with_intent,
    node_request,
)


def test_create_writes_tags_token_and_user_data_at_the_cloud(
    make_provider: ProviderFactory, direct_ec2: Any
) -> None:
    req = node_request(user_data="#!/bin/sh\necho gpucap\n")
    make_provider().create_node(req)
    [inst] = live_with_intent(direct_ec2, req.intent_id)
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags == {**req.tags, TAG_MANAGED: "true", TAG_INTENT: req.intent_id}
    assert inst["ClientToken"] == client_token(req.intent_id)
    assert inst["Placement"]["AvailabilityZone"] == "us-east-1a"
    assert inst["InstanceType"] == "p5.48xlarge"
    attr = direct_ec2.describe_instance_attribute(
        InstanceId=inst["InstanceId"], Attribute="userData"
    )
    assert base64.b64decode(attr["UserData"]["Value"]).decode() == req.user_data
    volumes = direct_ec2.describe_volumes(
        Filters=[{"Name": f"tag:{TAG_INTENT}", "Values": [req.intent_id]}]
    )["Volumes"]
    assert len(volumes) >= 1, "the root volume carries the ownership tags too"


def test_the_nodes_instance_profile_is_attached_when_the_account_names_one(
    moto: MotoEmulator, make_provider: ProviderFactory, direct_ec2: Any
) -> None:
    """What the node reads its weights with: the account's instance_profile, at launch (a
    profile that does not exist is the cloud's to refuse, as moto does); none when not named."""
    iam = boto3.client("iam", region_name="us-east-1", endpoint_url=moto.direct_url)
    name = f"gpucap-node-{uuid.uuid4().hex[:8]}"
    arn = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    with_identity, without = node_request(), node_request()
    make_provider(instance_profile=arn).create_node(with_identity)
    make_provider().create_node(without)
    [inst] = live_with_intent(direct_ec2, with_identity.intent_id)
    assert inst["IamInstanceProfile"]["Arn"] == arn
    [plain] = live_with_intent(direct_ec2, without.intent_id)
    assert "IamInstanceProfile" not in plain
    missing = arn.replace(name, name + "-missing")
    with pytest.raises(ProviderError):
        make_provider(instance_profile=missing).create_node(node_request())


def test_client_token_is_stable_and_fits_the_api() -> None:
    token = client_token("node-123")
    assert token == client_token("node-123")
    assert token != client_token("node-124")
    assert len(token) <= 64 and token.isascii()


def test_reservation_is_targeted(moto: MotoEmulator, make_provider: ProviderFactory) -> None:
    # moto accepts and ignores the target (clouds.md §E.1), so check what reached the wire.
    make_provider().create_node(node_request(reservation="cr-0123456789abcdef0"))
    form = moto.faults.last_form["RunInstances"]
    key = "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"
    assert form[key] == ["cr-0123456789abcdef0"]


def test_crash_then_restart_finds_the_instance_instead_of_making_another(
    moto: MotoEmulator, make_provider: ProviderFactory, direct_ec2: Any
) -> None:
    req = node_request()
    moto.drop_next_response("RunInstances")
    before_crash = make_provider(retry=NO_RETRY)
    try:
        before_crash.create_node(req)
        raise AssertionError("the dropped response must surface as a transient error")
    except TransientError as exc:
        assert exc.retryable
    assert len(live_with_intent(direct_ec2, req.intent_id)) == 1  # it did launch
    after_restart = make_provider(retry=NO_RETRY)  # a new process: new clients, no memory
    result = after_restart.create_node(req)
    assert result.created is False
    [inst] = live_with_intent(direct_ec2, req.intent_id)
    assert result.node.instance_id == inst["InstanceId"]


def test_crash_inside_one_call_is_absorbed_by_the_retry(
    moto: MotoEmulator, make_provider: ProviderFactory, direct_ec2: Any
) -> None:
    req = node_request()
    moto.drop_next_response("RunInstances")
    result = make_provider(retry=FAST).create_node(req)
    assert result.created is False
    assert len(live_with_intent(direct_ec2, req.intent_id)) == 1
    assert moto.faults.seen["RunInstances"] == 1  # the retry found it; no second launch


def test_terminated_instance_is_described_as_terminated_and_not_listed(
    make_provider: ProviderFactory,
) -> None:
    provider = make_provider()
    req = node_request(pool="term")
    node = provider.create_node(req).node
    provider.terminate_node(REGION, node.instance_id)
    seen = provider.describe_node(REGION, node.instance_id)
    assert seen is None or seen.status == InstanceStatus.TERMINATED
    assert provider.list_nodes(REGION, {"gpucap-pool": "term"}) == []


def test_malformed_instance_id_is_not_found(make_provider: ProviderFactory) -> None:
    provider = make_provider()
    assert provider.describe_node(REGION, "i-nope") is None
    provider.terminate_node(REGION, "i-nope")


def test_list_paginates_and_filters_by_every_tag(make_provider: ProviderFactory) -> None:
    provider = make_provider()
    made = [provider.create_node(node_request(pool="many")).node for _ in range(7)]
    other = provider.create_node(node_request(pool="many", customer="other-co")).node
    listed = provider.list_nodes(REGION, {"gpucap-pool": "many", "gpucap-customer": "acme"})
    assert {n.instance_id for n in listed} >= {n.instance_id for n in made}
    assert other.instance_id not in {n.instance_id for n in listed}

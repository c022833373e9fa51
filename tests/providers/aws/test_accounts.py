"""Customer-owned AWS accounts through STS AssumeRole with gpucap's ExternalId.

moto acts in the role's account with the assumed credentials (clouds.md §E.1), so two
customers' providers really are two accounts; the proxy plays each customer's role trust
policy (the ExternalId condition) that moto does not enforce."""

from __future__ import annotations

from typing import Any

import pytest

from providers.base import TAG_MANAGED
from providers.credentials import ExternalIdGenerator
from providers.errors import AuthFailed, Scope
from providers.registry import build_provider as registry_build
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner
from tests.fakes.moto_server import MotoEmulator
from tests.providers.aws.conftest import (
    REGION,
    ProviderFactory,
    assumed_ec2,
    live_with_intent,
    node_request,
)

ROLE_A = "arn:aws:iam::111111111111:role/gpucap-provisioner"
ROLE_B = "arn:aws:iam::222222222222:role/gpucap-provisioner"


def test_each_customer_account_sees_only_its_own_instances(
    moto: MotoEmulator, make_provider: ProviderFactory, external_ids: ExternalIdGenerator
) -> None:
    a = make_provider(
        name="acme-aws",
        role_arn=ROLE_A,
        customer="acme",
        external_id=external_ids.for_customer("acme"),
    )
    b = make_provider(
        name="globex-aws",
        role_arn=ROLE_B,
        customer="globex",
        external_id=external_ids.for_customer("globex"),
    )
    req_a = node_request(pool="iso", customer="acme")
    req_b = node_request(pool="iso", customer="globex")
    node_a = a.create_node(req_a).node
    node_b = b.create_node(req_b).node

    # Ground truth: each instance lives in its customer's account, not the other's.
    truth_a, truth_b = assumed_ec2(moto, ROLE_A), assumed_ec2(moto, ROLE_B)
    assert [i["InstanceId"] for i in live_with_intent(truth_a, req_a.intent_id)] == [
        node_a.instance_id
    ]
    assert live_with_intent(truth_a, req_b.intent_id) == []
    assert [i["InstanceId"] for i in live_with_intent(truth_b, req_b.intent_id)] == [
        node_b.instance_id
    ]

    managed = {TAG_MANAGED: "true", "gpucap-pool": "iso"}
    assert [n.instance_id for n in a.list_nodes(REGION, managed)] == [node_a.instance_id]
    assert [n.instance_id for n in b.list_nodes(REGION, managed)] == [node_b.instance_id]
    assert a.describe_node(REGION, node_b.instance_id) is None
    # Terminating the other customer's id from A is a no-op in A's account, not a kill.
    a.terminate_node(REGION, node_b.instance_id)
    assert len(live_with_intent(truth_b, req_b.intent_id)) == 1


def test_assume_role_sends_gpucaps_external_id_and_an_auditable_session_name(
    moto: MotoEmulator, make_provider: ProviderFactory, external_ids: ExternalIdGenerator
) -> None:
    eid = external_ids.for_customer("acme")
    moto.faults.trust[ROLE_A] = eid
    provider = make_provider(name="acme-aws", role_arn=ROLE_A, customer="acme", external_id=eid)
    provider.list_nodes(REGION, {"gpucap-pool": "none"})
    assert moto.faults.assume_role_calls == [
        {"RoleArn": ROLE_A, "RoleSessionName": "gpucap-acme-acme-aws", "ExternalId": eid}
    ]


def test_credentials_are_assumed_once_and_reused(
    moto: MotoEmulator, make_provider: ProviderFactory, external_ids: ExternalIdGenerator
) -> None:
    provider = make_provider(
        name="acme-aws", role_arn=ROLE_A, external_id=external_ids.for_customer("acme")
    )
    for _ in range(3):
        provider.list_nodes(REGION, {"gpucap-pool": "none"})
    provider.list_nodes("us-west-2", {"gpucap-pool": "none"})
    assert len(moto.faults.assume_role_calls) == 1  # refreshed only near expiry


def test_confused_deputy_another_customers_role_is_refused(
    moto: MotoEmulator, make_provider: ProviderFactory, external_ids: ExternalIdGenerator
) -> None:
    """Customer B registers customer A's role ARN. gpucap assumes it with *B's* ExternalId,
    which A's trust policy does not accept: B gets nothing in A's account."""
    moto.faults.trust[ROLE_A] = external_ids.for_customer("acme")
    intruder = make_provider(
        name="stolen",
        role_arn=ROLE_A,
        customer="globex",
        external_id=external_ids.for_customer("globex"),
    )
    req = node_request(customer="globex")
    with pytest.raises(AuthFailed) as info:
        intruder.create_node(req)
    assert info.value.scope == Scope.ACCOUNT
    assert info.value.code == "AccessDenied"
    assert live_with_intent(assumed_ec2(moto, ROLE_A), req.intent_id) == []


def test_customer_role_without_external_id_is_refused_before_any_call(
    moto: MotoEmulator, make_provider: ProviderFactory
) -> None:
    with pytest.raises(ValueError, match="ExternalId"):
        make_provider(name="acme-aws", role_arn=ROLE_A, external_id=None)
    assert moto.faults.assume_role_calls == []


def test_registry_builds_the_aws_adapter_for_a_customer_account(
    moto: MotoEmulator, direct_ec2: Any, external_ids: ExternalIdGenerator
) -> None:
    account = Account(
        name="acme-aws",
        cloud=Cloud.AWS,
        owner=Owner.CUSTOMER,
        regions=[REGION],
        credentials=Credentials(role_arn=ROLE_A),
    )
    eid = external_ids.for_customer("acme")
    provider = registry_build(
        account, customer="acme", external_id=eid, endpoint_url=moto.endpoint_url
    )
    assert provider.cloud == Cloud.AWS
    offerings = provider.list_offerings([REGION])
    assert {o.instance_type for o in offerings} >= {"p5.48xlarge", "p5en.48xlarge"}
    assert moto.faults.assume_role_calls[0]["ExternalId"] == eid


def test_assumed_credentials_are_refreshed_near_expiry(
    moto: MotoEmulator, external_ids: ExternalIdGenerator
) -> None:
    """botocore refreshes in the last 15 minutes of a credential's life; with the shortest
    STS session (900 s) every use falls in that window, so each call re-assumes the role."""
    from providers.aws.session import AwsSession

    sess = AwsSession(
        Credentials(role_arn=ROLE_A),
        customer="acme",
        account="acme-aws",
        external_id=external_ids.for_customer("acme"),
        home_region=REGION,
        endpoint_url=moto.endpoint_url,
        role_duration_s=900,
    )
    ec2 = sess.client("ec2", REGION)
    ec2.describe_instances()
    ec2.describe_instances()
    assert len(moto.faults.assume_role_calls) >= 2
    assert {c["ExternalId"] for c in moto.faults.assume_role_calls} == {
        external_ids.for_customer("acme")
    }


def test_missing_profile_is_an_auth_failure_for_the_account(moto: MotoEmulator) -> None:
    account = Account(
        name="shared-aws",
        cloud=Cloud.AWS,
        owner=Owner.SHARED,
        regions=[REGION],
        credentials=Credentials(profile="no-such-profile"),
    )
    provider = registry_build(
        account, customer="gpucap", external_id=None, endpoint_url=moto.endpoint_url
    )
    with pytest.raises(AuthFailed) as info:
        provider.list_nodes(REGION, {"gpucap-pool": "none"})
    assert info.value.scope == Scope.ACCOUNT
    assert info.value.code == "ProfileNotFound"

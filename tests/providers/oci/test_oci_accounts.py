"""Per-account isolation: each OCI account acts as its own tenancy (its config-file profile
signs as that tenancy's user), sees only what that tenancy may see, and a customer tenancy
is reachable only when its policies admit our principal (clouds.md §C)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from providers.base import TAG_POOL
from providers.errors import AuthFailed, Scope
from providers.oci.provider import OciProvider
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner
from tests.contract.harness_oci import REGION
from tests.providers.oci.conftest import FAST_RETRY, World


def test_two_profiles_see_only_their_own_tenancy(
    world: World, node_request: Callable[..., Any]
) -> None:
    a = world.provider(world.a, name="oci-a")
    b = world.provider(world.b, name="oci-b")
    req = node_request(None, pool="shared-pool-name")
    made = a.create_node(req).node

    assert [n.instance_id for n in a.list_nodes(REGION, {TAG_POOL: "shared-pool-name"})] == [
        made.instance_id
    ]
    assert b.list_nodes(REGION, {TAG_POOL: "shared-pool-name"}) == []
    assert b.describe_node(REGION, made.instance_id) is None
    b.terminate_node(REGION, made.instance_id)  # "not found" for b: success, and no effect
    assert [i["id"] for i in world.fake.live_instances()] == [made.instance_id]

    # b's own create of the same intent is b's instance, in b's compartment.
    other = b.create_node(req)
    assert other.created is True
    owners = sorted(i["compartmentId"] for i in world.fake.live_instances())
    assert owners == sorted([world.a.compartment, world.b.compartment])


def test_customer_compartment_needs_an_admit_policy(
    world: World, node_request: Callable[..., Any]
) -> None:
    """gpucap's identity (profile b) names the customer's compartment (a's). Without the
    customer's Admit statement that is NotAuthorizedOrNotFound -> AuthFailed for the account;
    with it, the instance lands in the customer's compartment."""
    customer_account = Account(
        name="acme-oci",
        cloud=Cloud.OCI,
        owner=Owner.CUSTOMER,
        regions=[REGION],
        credentials=Credentials(
            profile=world.b.profile, tenancy=world.a.tenancy, compartment_id=world.a.compartment
        ),
    )
    provider = world.provider(account=customer_account)
    with pytest.raises(AuthFailed) as info:
        provider.create_node(node_request(None))
    assert info.value.scope == Scope.ACCOUNT
    assert world.fake.live_instances() == []

    world.fake.grant(world.b.tenancy, world.a.compartment)
    node = provider.create_node(node_request(None)).node
    (inst,) = world.fake.live_instances()
    assert inst["id"] == node.instance_id
    assert inst["compartmentId"] == world.a.compartment
    # The AD names are the customer tenancy's (they carry a per-tenancy prefix).
    assert node.zone == world.fake.ad_name(world.a.tenancy, REGION, 1)


def test_principal_reference_reads_no_config_file(world: World, tmp_path: Any) -> None:
    """An instance-principal account is a reference only: building its provider reads no
    file and touches no network (the signer is built on first use)."""
    account = Account(
        name="oci-principal",
        cloud=Cloud.OCI,
        owner=Owner.CUSTOMER,
        regions=[REGION],
        credentials=Credentials(
            principal="instance", tenancy=world.a.tenancy, compartment_id=world.a.compartment
        ),
    )
    provider = OciProvider(
        account,
        endpoint_url=world.fake.endpoint_template,
        config_file=str(tmp_path / "does-not-exist"),
        retry_policy=FAST_RETRY,
    )
    assert provider.account == "oci-principal"
    assert world.fake.requests() == []

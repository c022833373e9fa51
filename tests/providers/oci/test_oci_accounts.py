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
from tests.fakes.oci_server import generate_key_pair, resource_principal_token
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


def test_resource_principal_reaches_an_admitting_customer_without_any_key_file(
    world: World, node_request: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpucap runs as an OCI resource in tenancy b (``principal: resource``): the SDK's
    resource principal signer signs with a session key under a token naming b. No config
    file exists. The customer (tenancy a) admits b; the node lands in a's compartment."""
    session_pem, session_public, _ = generate_key_pair()
    token = resource_principal_token(world.b.tenancy, world.b.compartment, session_public)
    monkeypatch.setenv("OCI_RESOURCE_PRINCIPAL_VERSION", "2.2")
    monkeypatch.setenv("OCI_RESOURCE_PRINCIPAL_RPST", token)
    monkeypatch.setenv("OCI_RESOURCE_PRINCIPAL_PRIVATE_PEM", session_pem)
    monkeypatch.setenv("OCI_RESOURCE_PRINCIPAL_REGION", REGION)
    account = Account(
        name="acme-oci",
        cloud=Cloud.OCI,
        owner=Owner.CUSTOMER,
        regions=[REGION],
        credentials=Credentials(
            principal="resource", tenancy=world.a.tenancy, compartment_id=world.a.compartment
        ),
    )
    provider = OciProvider(
        account,
        endpoint_url=world.fake.endpoint_template,
        config_file=str(world.tmp / "no-such-config"),
        retry=FAST_RETRY,
    )
    with pytest.raises(AuthFailed):
        provider.create_node(node_request(None))  # not admitted yet
    world.fake.grant(world.b.tenancy, world.a.compartment)
    node = provider.create_node(node_request(None)).node
    (inst,) = world.fake.live_instances()
    assert (inst["id"], inst["compartmentId"]) == (node.instance_id, world.a.compartment)
    signed = world.fake.requests("LaunchInstance")[-1]
    assert signed.tenancy == world.b.tenancy  # the principal's identity, not a's
    assert signed.headers["authorization"].count('keyId="ST$') == 1

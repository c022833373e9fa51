"""Customer-owned projects through service-account impersonation (clouds.md §C), against the
fake's IAM Credentials ``generateAccessToken`` and its per-project access control.

The fake plays both sides: gpucap's control-plane identity (a source token it knows), the
customer's service account that names that identity as a token creator, and a customer
project that only that service account may use."""

from __future__ import annotations

import uuid

import pytest
from google.oauth2.credentials import Credentials as StaticToken

from providers.base import TAG_CUSTOMER, TAG_MANAGED, NodeRequest, ownership_tags
from providers.errors import AuthFailed, InvalidRequest, Scope
from providers.gcp import build_provider
from providers.gcp.provider import GcpProvider
from providers.gcp.session import EMULATOR_SOURCE_TOKEN
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner
from tests.contract.harness_gcp import intent_of, make_provider
from tests.fakes.gcp_server import FakeGcp

REGION, ZONE, H100 = "us-central1", "us-central1-a", "a3-highgpu-8g"
CONTROL_PLANE = "gpucap-cp@gpucap-prod.iam.gserviceaccount.com"
SOURCE_TOKEN = "ya29.source-" + uuid.uuid4().hex  # gpucap's own (ADC) token in this test


def customer_project(fake: FakeGcp, name: str, *, creators: set[str] | None = None) -> str:
    """A customer project only its own provisioner SA may use; returns the SA email."""
    sa = f"gpucap-provisioner@{name}.iam.gserviceaccount.com"
    fake.add_service_account(sa, token_creators={CONTROL_PLANE} if creators is None else creators)
    fake.restrict_project(name, sa)
    return sa


def impersonating(fake: FakeGcp, project: str, sa: str) -> GcpProvider:
    fake.register_token(SOURCE_TOKEN, CONTROL_PLANE)
    return make_provider(
        fake, project, service_account=sa, source_credentials=StaticToken(token=SOURCE_TOKEN)
    )


def request(customer: str = "acme") -> NodeRequest:
    intent = f"n-{uuid.uuid4().hex[:12]}"
    return NodeRequest(
        intent_id=intent,
        instance_type=H100,
        region=REGION,
        zone=ZONE,
        tags=ownership_tags(intent, customer, "h100-pool", "llama-70b"),
    )


def bearer_principals(fake: FakeGcp, path_part: str) -> set[str]:
    out = set()
    for r in fake.requests_seen:
        if path_part in r.path:
            token = r.headers.get("authorization", "").removeprefix("Bearer ")
            out.add(fake.tokens.get(token, f"<unknown:{bool(token)}>"))
    return out


def test_impersonated_provider_works_in_the_customer_project(fake: FakeGcp) -> None:
    project = "acme-inference"
    sa = customer_project(fake, project)
    provider = impersonating(fake, project, sa)
    req = request()
    node = provider.create_node(req).node
    assert [intent_of(i) for i in fake.live_instances(project)] == [req.intent_id]
    assert [n.instance_id for n in provider.list_nodes(REGION, {TAG_MANAGED: "true"})] == [
        node.instance_id
    ]
    provider.terminate_node(REGION, node.instance_id)
    assert fake.live_instances(project) == []
    # Every compute call went out as the customer's SA; the source token only ever reached
    # generateAccessToken.
    assert bearer_principals(fake, "/compute/v1/") == {sa}
    assert bearer_principals(fake, ":generateAccessToken") == {CONTROL_PLANE}


def test_shared_credentials_cannot_touch_a_customer_project(fake: FakeGcp) -> None:
    project = "acme-inference"
    customer_project(fake, project)
    shared = make_provider(fake, project)  # anonymous: gpucap's own identity, no impersonation
    with pytest.raises(AuthFailed) as info:
        shared.create_node(request())
    assert info.value.scope == Scope.ACCOUNT
    assert fake.live_instances(project) == []


def test_impersonation_refused_when_we_are_not_a_token_creator(fake: FakeGcp) -> None:
    project = "acme-inference"
    sa = customer_project(fake, project, creators={"someone-else@x.iam.gserviceaccount.com"})
    provider = impersonating(fake, project, sa)
    with pytest.raises(AuthFailed) as info:
        provider.create_node(request())
    assert info.value.scope == Scope.ACCOUNT
    assert fake.live_instances(project) == []


def test_impersonating_an_unknown_service_account_fails_auth(fake: FakeGcp) -> None:
    project = "acme-inference"
    provider = impersonating(fake, project, f"ghost@{project}.iam.gserviceaccount.com")
    with pytest.raises(AuthFailed):
        provider.list_nodes(REGION, {TAG_MANAGED: "true"})


def test_customers_are_isolated_from_each_other(fake: FakeGcp) -> None:
    a = impersonating(fake, "acme-inference", customer_project(fake, "acme-inference"))
    b = impersonating(fake, "bolt-inference", customer_project(fake, "bolt-inference"))
    node_a = a.create_node(request("acme")).node
    node_b = b.create_node(request("bolt")).node
    assert [n.instance_id for n in a.list_nodes(REGION, {TAG_MANAGED: "true"})] == [
        node_a.instance_id
    ]
    assert [n.tags[TAG_CUSTOMER] for n in b.list_nodes(REGION, {TAG_MANAGED: "true"})] == ["bolt"]
    # b's credentials cannot see or delete a's VM, even given its id
    assert b.describe_node(REGION, node_a.instance_id) is None
    b.terminate_node(REGION, node_a.instance_id)
    assert len(fake.live_instances("acme-inference")) == 1
    assert node_b.instance_id != node_a.instance_id


def test_a_service_account_outside_the_project_is_refused(fake: FakeGcp) -> None:
    """The confused-deputy guard: project A's account may not name project B's SA."""
    customer_project(fake, "bolt-inference")
    with pytest.raises(InvalidRequest) as info:
        make_provider(
            fake,
            "acme-inference",
            service_account="gpucap-provisioner@bolt-inference.iam.gserviceaccount.com",
        )
    assert info.value.scope == Scope.ACCOUNT


def test_build_provider_impersonates_for_a_customer_owned_account(fake: FakeGcp) -> None:
    project = "acme-inference"
    sa = customer_project(fake, project)
    fake.register_token(EMULATOR_SOURCE_TOKEN, CONTROL_PLANE)
    account = Account(
        name="acme-gcp",
        cloud=Cloud.GCP,
        owner=Owner.CUSTOMER,
        regions=[REGION],
        credentials=Credentials(project=project, service_account=sa),
        prices={H100: 70.0},
    )
    provider = build_provider(
        account, customer="acme", external_id=None, endpoint_url=fake.endpoint
    )
    assert provider.create_node(request()).created is True
    offers = [o for o in provider.list_offerings([REGION]) if o.instance_type == H100]
    assert offers and all(o.price_usd_per_hour == 70.0 for o in offers)
    assert bearer_principals(fake, "/compute/v1/") == {sa}


def test_build_provider_refuses_a_customer_account_without_a_service_account() -> None:
    account = Account.model_construct(
        name="acme-gcp",
        cloud=Cloud.GCP,
        owner=Owner.CUSTOMER,
        regions=[REGION],
        credentials=Credentials(project="acme-inference"),
        committed=[],
        prices={},
    )
    with pytest.raises(ValueError, match="service_account"):
        build_provider(account, customer="acme", external_id=None)


def test_a_401_refreshes_the_impersonated_token_and_goes_on(fake: FakeGcp) -> None:
    """An expired/revoked access token (401) makes google-auth mint a new one and resend
    once; the create succeeds with one VM. Persistent 401s end in AuthFailed."""
    project = "acme-inference"
    provider = impersonating(fake, project, customer_project(fake, project))
    fake.inject("unauthenticated", count=1)
    assert provider.create_node(request()).created is True
    minted = [t for t, who in fake.tokens.items() if who.startswith("gpucap-provisioner@")]
    assert len(minted) == 2
    fake.inject("unauthenticated", count=10)
    with pytest.raises(AuthFailed):
        provider.create_node(request())
    assert len(fake.live_instances(project)) == 1

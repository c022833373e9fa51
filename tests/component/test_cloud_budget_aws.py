"""The (account, region) budget at the daemon's own seam against moto's EC2 (server mode):
``CloudResolver`` hands out real AWS adapters behind ``providers.metered``, so every job's
calls to one cloud account and region draw on one budget. gpucap's shared account is one
budget whichever customer's provider calls it; two customers' own accounts of one name are
two; another region is another. A call refused by the budget never reaches EC2 and is not
counted as a cloud call."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.resolvers import CloudResolver
from controlplane.store.models import Account as AccountRow
from providers.base import ownership_filter
from providers.credentials import ExternalIdGenerator
from providers.metered import CALLS
from providers.ratelimit import BucketSize, CallKind, RateLimited, RateLimiter
from schema.types import Cloud
from tests.fakes.moto_server import MotoEmulator, moto, moto_server

__all__ = ["moto", "moto_server"]

EAST, WEST = "us-east-1", "us-west-2"
BURST = 3


def _row(customer: str, name: str, owner: str, **credentials: Any) -> AccountRow:
    return AccountRow(
        customer=customer,
        name=name,
        cloud="aws",
        owner=owner,
        regions={"regions": [EAST, WEST]},
        credentials_ref=credentials,
    )


@pytest.fixture
def resolver(moto: MotoEmulator) -> CloudResolver:
    moto.reset_state()
    # A budget that never refills within the test: BURST reads per (account, region).
    limits = {Cloud.AWS: {CallKind.READ: BucketSize(BURST, 1e-6)}}
    return CloudResolver(
        ExternalIdGenerator(secret=b"budget-test-secret-0123456789abcdef"),
        {Cloud.AWS: moto.endpoint_url},
        limiter=RateLimiter(limits, max_wait_s=0.0),
    )


def test_a_shared_account_is_one_budget_for_every_customer(resolver: CloudResolver) -> None:
    acme = resolver.provider("acme", _row("acme", "gpucap-aws", "shared"))
    bravo = resolver.provider("bravo", _row("bravo", "gpucap-aws", "shared"))
    before = CALLS.total(account="gpucap-aws", region=EAST, verb="list")
    for _ in range(BURST):
        acme.list_nodes(EAST, ownership_filter())
    with pytest.raises(RateLimited):
        bravo.list_nodes(EAST, ownership_filter())
    assert CALLS.total(account="gpucap-aws", region=EAST, verb="list") == before + BURST
    bravo.list_nodes(WEST, ownership_filter())  # another region: its own budget


def test_two_customers_own_accounts_of_one_name_are_two_budgets(
    resolver: CloudResolver,
) -> None:
    role = "arn:aws:iam::111122223333:role/gpucap"
    acme = resolver.provider("acme", _row("acme", "prod", "customer", role_arn=role))
    bravo = resolver.provider("bravo", _row("bravo", "prod", "customer", role_arn=role))
    for _ in range(BURST):
        acme.list_nodes(EAST, ownership_filter("acme"))
    with pytest.raises(RateLimited):
        acme.describe_node(EAST, "i-0123456789abcdef0")
    assert bravo.list_nodes(EAST, ownership_filter("bravo")) == []
    assert CALLS.total(account="bravo/prod", region=EAST, verb="list") >= 1

"""Offerings: every catalog OCI GPU shape in every AD, priced from the catalog unless the
account overrides it, with availability as data (shape missing from the AD, no hosts, or
host availability unknown when the capacity report cannot be had)."""

from __future__ import annotations

from providers.base import Offering
from schema.catalog import INSTANCE_TYPES_BY_NAME
from schema.policy import Account
from schema.types import Owner
from tests.contract.harness_oci import REGION, oci_account
from tests.providers.oci.conftest import World


def _by(offers: list[Offering]) -> dict[tuple[str, str], Offering]:
    return {(o.instance_type, o.zone[-4:]): o for o in offers}


def test_every_shape_in_every_ad_with_catalog_or_account_prices(world: World) -> None:
    base = oci_account("oci-a", world.a)
    account = Account.model_validate(
        {**base.model_dump(), "owner": Owner.CUSTOMER, "prices": {"BM.GPU.H200.8": 61.5}}
    )
    offers = world.provider(account=account).list_offerings([REGION, "us-phoenix-1"])
    assert len(offers) == 2 * 3 * 2  # regions x ADs x catalog shapes
    got = _by([o for o in offers if o.region == REGION])
    h100 = got[("BM.GPU.H100.8", "AD-2")]
    assert h100.available and h100.reason == ""
    assert (
        h100.price_usd_per_hour == INSTANCE_TYPES_BY_NAME["BM.GPU.H100.8"].list_price_usd_per_hour
    )
    assert got[("BM.GPU.H200.8", "AD-1")].price_usd_per_hour == 61.5
    missing = got[("BM.GPU.H200.8", "AD-2")]  # the fake offers H200 in AD-1 only
    assert missing.available is False and "not offered" in missing.reason


def test_no_capacity_report_means_offered_with_unknown_hosts(world: World) -> None:
    world.fake.inject("internal", operation="CreateComputeCapacityReport", count=100)
    offers = world.provider().list_offerings([REGION])
    h100 = _by(offers)[("BM.GPU.H100.8", "AD-1")]
    assert h100.available is True
    assert "host availability unknown" in h100.reason
    assert _by(offers)[("BM.GPU.H200.8", "AD-3")].available is False  # still not offered

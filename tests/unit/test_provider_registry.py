"""providers.registry: the right adapter per account, SDKs imported only when used."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from providers.registry import ADAPTERS, ProviderUnavailable, build_provider
from providers.sim import SimCloud, SimProvider
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner


def _account(cloud: Cloud, **kw: Any) -> Account:
    regions = {Cloud.AWS: ["us-east-1"], Cloud.GCP: ["us-central1"], Cloud.OCI: ["us-ashburn-1"]}
    return Account.model_validate(
        {"name": "a1", "cloud": cloud, "owner": Owner.SHARED, "regions": regions[cloud], **kw}
    )


def test_sim_world_selects_the_simulated_provider_with_the_accounts_prices() -> None:
    world = SimCloud()
    acct = _account(Cloud.AWS, prices={"p5.48xlarge": 12.5})
    provider = build_provider(acct, customer="acme", external_id=None, sim=world)
    assert isinstance(provider, SimProvider)
    assert provider.world is world and provider.account == "a1"
    prices = {o.instance_type: o.price_usd_per_hour for o in provider.list_offerings(["us-east-1"])}
    assert prices["p5.48xlarge"] == 12.5


@pytest.mark.parametrize("cloud", list(Cloud))
def test_each_cloud_has_an_adapter_with_a_build_provider(cloud: Cloud) -> None:
    provider = build_provider(
        _account(cloud, credentials=_creds(cloud)),
        customer="acme",
        external_id=None,
        endpoint_url="http://127.0.0.1:9",  # never called: building makes no request
    )
    assert provider.cloud == cloud


def _creds(cloud: Cloud) -> Credentials:
    if cloud == Cloud.GCP:
        return Credentials(project="p1")
    if cloud == Cloud.OCI:
        return Credentials(
            tenancy="ocid1.tenancy.oc1..aaaa", compartment_id="ocid1.compartment.oc1..aaaa"
        )
    return Credentials()


def test_unknown_adapter_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ADAPTERS, Cloud.OCI, "providers.not_there")
    with pytest.raises(ProviderUnavailable, match="oci"):
        build_provider(_account(Cloud.OCI), customer="acme", external_id=None)


def test_only_the_used_clouds_sdk_is_imported() -> None:
    code = """
import sys
import providers.registry
from schema.policy import Account, Credentials
assert not {"boto3", "botocore", "oci", "google.cloud.compute_v1"} & set(sys.modules), "eager"
acct = Account(name="a1", cloud="aws", owner="shared", regions=["us-east-1"])
p = providers.registry.build_provider(acct, customer="c", external_id=None,
                                      endpoint_url="http://127.0.0.1:9")
p.session.client("ec2", "us-east-1")
assert "boto3" in sys.modules
assert "oci" not in sys.modules and "google.cloud.compute_v1" not in sys.modules, "leaked"
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

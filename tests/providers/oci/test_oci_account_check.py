"""``gpucap account check`` for OCI, through the real CLI and adapter against the wire fake,
with the example account files exactly as shipped (their OCIDs are registered in the fake,
and the OCI config file that holds the GPUCAP_SHARED profile is written at test time)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
from schema.account_file import load_account_file
from tests.fakes.oci_server import FakeOci, generate_key_pair

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "accounts"
SHARED = load_account_file(EXAMPLES / "oci-shared.yaml").spec
CUSTOMER = load_account_file(EXAMPLES / "oci-customer.yaml").spec
USER = "ocid1.user.oc1..aaaagpucapprovisioner"
PASS = "account-check-pass-phrase"


@dataclass
class Setup:
    fake: FakeOci
    tmp: Path

    def run(self, *args: str) -> Any:
        return runner.invoke(
            app, ["account", "check", *args, "--endpoint-url", self.fake.endpoint_template]
        )


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    fake = FakeOci(regions=("us-ashburn-1", "us-phoenix-1")).start()
    try:
        private_pem, public_pem, fingerprint = generate_key_pair(PASS)
        ours = SHARED.credentials.tenancy
        assert ours and SHARED.credentials.compartment_id
        fake.add_tenancy(
            ours,
            compartments=[SHARED.credentials.compartment_id],
            key_id=f"{ours}/{USER}/{fingerprint}",
            public_key_pem=public_pem,
        )
        assert CUSTOMER.credentials.tenancy and CUSTOMER.credentials.compartment_id
        fake.add_tenancy(
            CUSTOMER.credentials.tenancy, compartments=[CUSTOMER.credentials.compartment_id]
        )
        key = tmp_path / "gpucap.pem"
        key.write_text(private_pem)
        config = tmp_path / "config"
        config.write_text(
            f"[{SHARED.credentials.profile}]\nuser={USER}\nfingerprint={fingerprint}\n"
            f"tenancy={ours}\nregion=us-ashburn-1\nkey_file={key}\npass_phrase={PASS}\n"
        )
        monkeypatch.setenv("OCI_CONFIG_FILE", str(config))
        yield Setup(fake, tmp_path)
    finally:
        fake.stop()


def _findings(result: Any) -> dict[tuple[str, str], dict[str, Any]]:
    doc = json.loads(result.stdout)
    return {(f["check"], f["target"]): f for f in doc["findings"]}


def test_shared_example_passes_every_check(setup: Setup) -> None:
    result = setup.run(str(EXAMPLES / "oci-shared.yaml"), "--output", "json")
    assert result.exit_code == 0, result.stderr
    found = _findings(result)
    assert found[("credentials", "profile GPUCAP_SHARED")]["ok"]
    for region in ("us-ashburn-1", "us-phoenix-1"):
        assert found[("region", region)]["ok"]
        assert "BM.GPU.H100.8 in " in found[("offerings", region)]["detail"]
        assert "gpu-h100-count@" in found[("quota", region)]["detail"]
        assert found[("image", f"{region}: base GPU image")]["ok"]
    assert PASS not in result.stdout + result.stderr


def test_customer_example_needs_the_customers_admit_policy(setup: Setup) -> None:
    path = str(EXAMPLES / "oci-customer.yaml")
    refused = setup.run(path)
    assert refused.exit_code == 1
    assert "region us-ashburn-1: AuthFailed" in refused.stderr

    ours = SHARED.credentials.tenancy
    assert ours and CUSTOMER.credentials.compartment_id and CUSTOMER.credentials.tenancy
    setup.fake.grant(ours, CUSTOMER.credentials.compartment_id)  # manage instance-family
    setup.fake.grant(ours, CUSTOMER.credentials.tenancy)  # read resource-availability
    admitted = setup.run(path, "--output", "json")
    assert admitted.exit_code == 0, admitted.stderr
    # The customer's ADs (their per-tenancy prefix) and the customer's limits are what count.
    detail = _findings(admitted)[("region", "us-ashburn-1")]["detail"]
    assert setup.fake.ad_name(CUSTOMER.credentials.tenancy, "us-ashburn-1", 1) in detail


def test_no_gpu_limit_left_fails_the_quota_check(setup: Setup) -> None:
    ours = SHARED.credentials.tenancy
    assert ours
    for region in ("us-ashburn-1", "us-phoenix-1"):
        for ad in ("AD-1", "AD-2", "AD-3"):
            for limit in ("gpu-h100-count", "gpu-h200-count"):
                setup.fake.set_limit(ours, region, ad, limit, 4)  # half a node
    result = setup.run(str(EXAMPLES / "oci-shared.yaml"))
    assert result.exit_code == 1
    assert "quota us-ashburn-1: no AD has 8 GPUs free" in result.stderr


def test_no_host_capacity_anywhere_fails_the_offerings_check(setup: Setup) -> None:
    for ad in ("AD-1", "AD-2", "AD-3"):
        setup.fake.set_hosts("us-phoenix-1", ad, "BM.GPU.H100.8", 0)
    setup.fake.set_hosts("us-phoenix-1", "AD-1", "BM.GPU.H200.8", 0)
    result = setup.run(str(EXAMPLES / "oci-shared.yaml"))
    assert result.exit_code == 1
    assert "offerings us-phoenix-1: nothing available" in result.stderr
    assert "out_of_host_capacity" in result.stderr


def test_missing_profile_fails_on_credentials(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = setup.tmp / "empty-config"
    empty.write_text("[SOMEONE_ELSE]\nregion=us-ashburn-1\n")
    monkeypatch.setenv("OCI_CONFIG_FILE", str(empty))
    result = setup.run(str(EXAMPLES / "oci-shared.yaml"))
    assert result.exit_code == 1
    assert "credentials profile GPUCAP_SHARED: AuthFailed" in result.stderr


def test_baked_image_per_region_is_checked(setup: Setup) -> None:
    platform = next(i["id"] for i in setup.fake.images() if "IAD" in i["id"].upper())
    text = (EXAMPLES / "oci-shared.yaml").read_text()
    good = setup.tmp / "with-image.yaml"
    good.write_text(text + f"images:\n  us-ashburn-1: {platform}\n")
    result = setup.run(str(good), "--output", "json")
    assert result.exit_code == 0, result.stderr
    assert _findings(result)[("image", f"us-ashburn-1: {platform}")]["ok"]

    bad = setup.tmp / "with-missing-image.yaml"
    bad.write_text(text + "images:\n  us-ashburn-1: ocid1.image.oc1.iad.neverissued\n")
    result = setup.run(str(bad))
    assert result.exit_code == 1
    assert "image us-ashburn-1: ocid1.image.oc1.iad.neverissued: not found" in result.stderr


@pytest.mark.parametrize("name", ["oci-shared.yaml", "oci-customer.yaml"])
def test_example_account_files_are_valid_references(name: str) -> None:
    spec = load_account_file(EXAMPLES / name).spec
    assert spec.cloud.value == "oci"
    assert spec.credentials.compartment_id and (
        spec.credentials.profile or spec.credentials.principal
    )

"""``gpucap account check`` through each cloud's real adapter and emulator (AWS has its own,
fuller tests in tests/providers/aws/test_account_check.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
from tests.contract.harness_oci import OciWorld
from tests.fakes.gcp_server import FakeGcp
from tests.fakes.gcp_server import start as start_gcp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def gcp_fake() -> Iterator[FakeGcp]:
    fake = start_gcp()
    try:
        yield fake
    finally:
        fake.stop()


def test_gcp_shared_account_check_runs_through_the_gcp_adapter(gcp_fake: FakeGcp) -> None:
    endpoint = gcp_fake.endpoint if isinstance(gcp_fake.endpoint, str) else gcp_fake.endpoint()
    account = ROOT / "examples" / "accounts" / "gcp-shared.yaml"
    result = CliRunner().invoke(
        app, ["account", "check", str(account), "--endpoint-url", endpoint, "-o", "json"]
    )
    doc = json.loads(result.stdout)
    assert doc["cloud"] == "gcp" and doc["account"] == "gpucap-shared-gcp"
    by_check: dict[str, list[dict[str, object]]] = {}
    for f in doc["findings"]:
        by_check.setdefault(str(f["check"]), []).append(f)
    for check in ("credentials", "region", "offerings", "quota"):
        assert by_check[check] and all(f["ok"] for f in by_check[check]), check
    # A fresh fake holds no gpucap image family: the check says so and fails.
    [image] = by_check["image"]
    assert image["ok"] is False and "NotFound" in str(image["detail"])
    assert result.exit_code == 1
    assert "account check failed for gpucap-shared-gcp: image" in result.stderr


def test_oci_account_check_runs_through_the_oci_adapter(
    oci_world: OciWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ident = oci_world.ident
    monkeypatch.setenv("OCI_CONFIG_FILE", str(oci_world.config_file))
    account = tmp_path / "shared-oci.yaml"
    account.write_text(
        "name: shared-oci\ncloud: oci\nowner: shared\nregions: [us-ashburn-1]\n"
        f"credentials:\n  profile: {ident.profile}\n  tenancy: {ident.tenancy}\n"
        f"  compartment_id: {ident.compartment}\n"
    )
    result = CliRunner().invoke(
        app,
        [
            "account",
            "check",
            str(account),
            "--endpoint-url",
            oci_world.fake.endpoint_template,
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    [offers] = [f for f in doc["findings"] if f["check"] == "offerings"]
    assert "BM.GPU.H100.8" in offers["detail"]
    assert "BM.GPU.H200.8" in offers["detail"]


def test_oci_account_with_an_unknown_profile_fails_with_the_reason(
    oci_world: OciWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ident = oci_world.ident
    monkeypatch.setenv("OCI_CONFIG_FILE", str(oci_world.config_file))
    account = tmp_path / "shared-oci.yaml"
    account.write_text(
        "name: shared-oci\ncloud: oci\nowner: shared\nregions: [us-ashburn-1]\n"
        f"credentials:\n  profile: NO_SUCH_PROFILE\n  tenancy: {ident.tenancy}\n"
        f"  compartment_id: {ident.compartment}\n"
    )
    result = CliRunner().invoke(
        app,
        ["account", "check", str(account), "--endpoint-url", oci_world.fake.endpoint_template],
    )
    assert result.exit_code == 1
    assert "account check failed for shared-oci" in result.stderr

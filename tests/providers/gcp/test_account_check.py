"""``gpucap account check`` on the example GCP account files, against the wire fake, through
the real CLI (typer) and the real adapter: shared (anonymous against the emulator) and
customer-owned (service-account impersonation through the fake's IAM Credentials API)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from controlplane.cli.main import app
from providers.gcp.provider import BASE_IMAGE_FAMILY
from providers.gcp.session import EMULATOR_SOURCE_TOKEN
from tests.fakes.gcp_server import FakeGcp

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "accounts"
SHARED = EXAMPLES / "gcp-shared.yaml"
CUSTOMER = EXAMPLES / "gcp-customer.yaml"
CUSTOMER_PROJECT = "acme-inference"
CUSTOMER_SA = "gpucap-provisioner@acme-inference.iam.gserviceaccount.com"
CONTROL_PLANE = "gpucap-cp@gpucap-prod.iam.gserviceaccount.com"

runner = CliRunner()


def run(*args: str) -> Any:
    return runner.invoke(app, ["account", "check", *args])


def onboard_customer(fake: FakeGcp, *, grant: bool = True) -> None:
    """What the customer does: an SA in their project that our identity may impersonate."""
    fake.register_token(EMULATOR_SOURCE_TOKEN, CONTROL_PLANE)
    fake.add_service_account(CUSTOMER_SA, token_creators={CONTROL_PLANE} if grant else set())
    fake.restrict_project(CUSTOMER_PROJECT, CUSTOMER_SA)
    fake.add_image(CUSTOMER_PROJECT, "gpu-node-v7", family=BASE_IMAGE_FAMILY)


def test_shared_example_passes_with_json_findings(fake: FakeGcp) -> None:
    fake.add_image("gpucap-shared-capacity", "gpu-node-v7", family=BASE_IMAGE_FAMILY)
    result = run(str(SHARED), "--endpoint-url", fake.endpoint, "--output", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["ok"], doc["cloud"], doc["account"]) == (True, "gcp", "gpucap-shared-gcp")
    checks = {(f["check"], f["target"]) for f in doc["findings"]}
    for region in ("us-central1", "us-east4", "europe-west4"):
        for check in ("region", "offerings", "quota"):
            assert (check, region) in checks
    offers = {f["target"]: f["detail"] for f in doc["findings"] if f["check"] == "offerings"}
    assert "a3-ultragpu-8g" in offers["us-east4"]


def test_customer_example_passes_through_impersonation(fake: FakeGcp) -> None:
    onboard_customer(fake)
    result = run(str(CUSTOMER), "--endpoint-url", fake.endpoint)
    assert result.exit_code == 0, result.output
    assert "all checks passed" in result.stdout
    assert CUSTOMER_SA in result.stdout  # the reference is shown...
    minted = [t for t, who in fake.tokens.items() if who == CUSTOMER_SA]
    assert minted
    for token in minted:  # ...the token never is
        assert token not in result.output
    compute = [r for r in fake.requests_seen if r.path.startswith("/compute/v1/")]
    assert compute and all(
        fake.tokens.get(r.headers.get("authorization", "").removeprefix("Bearer ")) == CUSTOMER_SA
        for r in compute
    )


def test_customer_example_fails_when_the_customer_did_not_grant_us(fake: FakeGcp) -> None:
    onboard_customer(fake, grant=False)
    result = run(str(CUSTOMER), "--endpoint-url", fake.endpoint)
    assert result.exit_code != 0
    assert "credentials" in result.stderr and "AuthFailed" in result.stderr


def test_missing_base_image_and_no_quota_fail_with_reasons(fake: FakeGcp) -> None:
    for metric in ("NVIDIA_H100_GPUS", "NVIDIA_H100_MEGA_GPUS", "NVIDIA_H200_GPUS"):
        fake.set_quota("gpucap-shared-capacity", "europe-west4", metric, 0)
    result = run(str(SHARED), "--endpoint-url", fake.endpoint, "--output", "json")
    assert result.exit_code != 0
    failed = {
        (f["check"], f["target"]) for f in json.loads(result.stdout)["findings"] if not f["ok"]
    }
    assert ("quota", "europe-west4") in failed
    assert any(check == "image" for check, _ in failed)
    assert ("quota", "us-central1") not in failed
    assert "image" in result.stderr and "quota europe-west4" in result.stderr


def test_customer_example_json_output_is_pure_json(fake: FakeGcp) -> None:
    """Adapter log lines (impersonation, retries) go to stderr, never into the JSON."""
    onboard_customer(fake)
    result = runner.invoke(
        app, ["account", "check", str(CUSTOMER), "--endpoint-url", fake.endpoint, "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["account"]

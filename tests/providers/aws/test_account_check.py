"""``gpucap account check`` against moto, through the real CLI (typer) and the real adapter."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
from providers.credentials import EXTERNAL_ID_SECRET_ENV, ExternalIdGenerator
from tests.contract.harness_aws import base_ami
from tests.fakes.moto_server import MotoEmulator

runner = CliRunner()
SECRET = "account-check-test-secret-0123456789"


@pytest.fixture
def empty_moto(moto: MotoEmulator, monkeypatch: pytest.MonkeyPatch) -> MotoEmulator:
    # An empty emulator, so quota headroom does not depend on what other tests launched.
    moto.reset_state()
    monkeypatch.setenv(EXTERNAL_ID_SECRET_ENV, SECRET)
    return moto


def _amis(moto: MotoEmulator) -> dict[str, str]:
    return {
        region: base_ami(boto3.client("ec2", region_name=region, endpoint_url=moto.direct_url))
        for region in ("us-east-1", "us-west-2")
    }


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _shared(tmp_path: Path, images: dict[str, str]) -> Path:
    lines = "\n".join(f"  {r}: {i}" for r, i in images.items())
    return _write(
        tmp_path / "shared-aws.yaml",
        f"name: shared-aws\ncloud: aws\nowner: shared\nregions: [us-east-1, us-west-2]\n"
        f"images:\n{lines}\n",
    )


def _customer(tmp_path: Path, role: str, images: dict[str, str]) -> Path:
    lines = "".join(f"  {r}: {i}\n" for r, i in images.items())
    return _write(
        tmp_path / "acme-aws.yaml",
        f"name: acme-aws\ncustomer: acme\ncloud: aws\nowner: customer\nregions: [us-east-1]\n"
        f"credentials:\n  role_arn: {role}\n" + (f"images:\n{lines}" if images else ""),
    )


def _run(*args: str) -> Any:
    return runner.invoke(app, ["account", "check", *args])


def _role() -> str:
    return f"arn:aws:iam::{uuid.uuid4().int % 10**12:012d}:role/gpucap-provisioner"


def test_shared_account_passes_with_json_findings(empty_moto: MotoEmulator, tmp_path: Path) -> None:
    path = _shared(tmp_path, _amis(empty_moto))
    result = _run(str(path), "--endpoint-url", empty_moto.endpoint_url, "--output", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert doc["account"] == "shared-aws"
    checks = {(f["check"], f["target"].split()[0]) for f in doc["findings"]}
    for region in ("us-east-1", "us-west-2"):
        for check in ("region", "offerings", "quota", "image"):
            assert (check, region) in checks
    offers = next(
        f for f in doc["findings"] if f["check"] == "offerings" and f["target"] == "us-east-1"
    )
    assert "p5.48xlarge (H100)" in offers["detail"]
    assert "p5en.48xlarge (H200) in us-east-1a, us-east-1c" in offers["detail"]


def test_customer_account_by_name_assumes_the_role_with_gpucaps_external_id(
    empty_moto: MotoEmulator, tmp_path: Path
) -> None:
    role = _role()
    eid = ExternalIdGenerator(SECRET.encode()).for_customer("acme")
    empty_moto.faults.trust[role] = eid
    _customer(tmp_path, role, {"us-east-1": _amis(empty_moto)["us-east-1"]})
    result = _run(
        "acme-aws", "--accounts-dir", str(tmp_path), "--endpoint-url", empty_moto.endpoint_url
    )
    assert result.exit_code == 0, result.output
    assert f"external id (for the customer's trust policy): {eid}" in result.stdout
    assert "all checks passed" in result.stdout
    assert empty_moto.faults.assume_role_calls[0]["ExternalId"] == eid
    account_id = role.split(":")[4]
    assert f"({account_id})" in result.stdout  # acting in the customer's account


def test_wrong_external_id_fails_on_credentials_with_the_reason(
    empty_moto: MotoEmulator, tmp_path: Path
) -> None:
    role = _role()
    empty_moto.faults.trust[role] = "gpucap-what-the-customer-configured"
    path = _customer(tmp_path, role, {})
    result = _run(str(path), "--endpoint-url", empty_moto.endpoint_url)
    assert result.exit_code == 1
    assert "account check failed for acme-aws" in result.stderr
    assert "credentials" in result.stderr and "AccessDenied" in result.stderr


def test_quota_without_room_for_one_node_fails(empty_moto: MotoEmulator, tmp_path: Path) -> None:
    path = _shared(tmp_path, _amis(empty_moto))
    quota = {
        "Quota": {
            "QuotaCode": "L-417A185B",
            "QuotaName": "Running On-Demand P instances",
            "Value": 96.0,
        }
    }
    empty_moto.respond("GetServiceQuota", quota, count=2)
    result = _run(str(path), "--endpoint-url", empty_moto.endpoint_url, "--output", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    quota_findings = [f for f in doc["findings"] if f["check"] == "quota"]
    assert [f["ok"] for f in quota_findings] == [False, False]
    assert "96 of 96 vCPUs free (one 8-GPU node needs 192 vCPUs)" in quota_findings[0]["detail"]


def test_quota_with_room_passes_and_counts_running_p_instances(
    empty_moto: MotoEmulator, tmp_path: Path
) -> None:
    amis = _amis(empty_moto)
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=empty_moto.direct_url)
    ec2.run_instances(ImageId=amis["us-east-1"], InstanceType="p5.48xlarge", MinCount=1, MaxCount=1)
    quota = {
        "Quota": {
            "QuotaCode": "L-417A185B",
            "QuotaName": "Running On-Demand P instances",
            "Value": 384.0,
        }
    }
    empty_moto.respond("GetServiceQuota", quota, count=2)
    result = _run(
        str(_shared(tmp_path, amis)), "--endpoint-url", empty_moto.endpoint_url, "--output", "json"
    )
    assert result.exit_code == 0, result.output
    details = {
        f["target"]: f["detail"]
        for f in json.loads(result.stdout)["findings"]
        if f["check"] == "quota"
    }
    assert "192 of 384 vCPUs free" in details["us-east-1"]
    assert "384 of 384 vCPUs free" in details["us-west-2"]


def test_missing_image_fails(empty_moto: MotoEmulator, tmp_path: Path) -> None:
    images = _amis(empty_moto)
    images["us-west-2"] = "ami-0000000000000dead"
    result = _run(str(_shared(tmp_path, images)), "--endpoint-url", empty_moto.endpoint_url)
    assert result.exit_code == 1
    assert "image us-west-2 ami-0000000000000dead" in result.stderr
    assert "does not exist" in result.stderr


def test_customer_account_without_the_daemons_secret_is_refused(
    empty_moto: MotoEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(EXTERNAL_ID_SECRET_ENV)
    monkeypatch.setenv("GPUCAP_STATE_DIR", str(tmp_path / "state"))
    path = _customer(tmp_path, _role(), {})
    result = _run(str(path), "--endpoint-url", empty_moto.endpoint_url)
    assert result.exit_code == 1
    assert EXTERNAL_ID_SECRET_ENV in result.stderr
    assert empty_moto.faults.assume_role_calls == []
    assert not (tmp_path / "state").exists()


def test_secret_in_an_account_file_is_refused_with_file_line_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bad.yaml",
        "name: bad\ncloud: aws\nregions: [us-east-1]\ncredentials:\n"
        "  role_arn: arn:aws:iam::123456789012:role/x\n  secret_access_key: hunter2\n",
    )
    result = _run(str(path))
    assert result.exit_code == 1
    assert f"{path}:6:3: credentials.secret_access_key: secrets are not accepted" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout


def test_semantic_problems_name_file_line_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bad.yaml",
        "name: bad\ncloud: aws\nowner: customer\nregions: [us-east-1, mars-north-1]\n"
        "credentials:\n  role_arn: arn:aws:iam::123456789012:role/x\n"
        "images:\n  eu-west-1: ami-0123456789abcdef0\n",
    )
    result = _run(str(path))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert any(line.startswith(f"{path}:4:") and "regions[1]" in line for line in lines)
    assert any(line.startswith(f"{path}:8:") and "images.eu-west-1" in line for line in lines)
    assert any("customer: a customer-owned aws account must name" in line for line in lines)


def test_unknown_name_says_where_it_looked(tmp_path: Path) -> None:
    result = _run("nope", "--accounts-dir", str(tmp_path))
    assert result.exit_code == 1
    assert f"no account file nope.yaml in {tmp_path}" in result.stderr


@pytest.mark.parametrize("name", ["aws-shared.yaml", "aws-customer.yaml"])
def test_example_account_files_are_valid(name: str) -> None:
    from schema.account_file import load_account_file

    root = Path(__file__).resolve().parents[3]
    spec = load_account_file(root / "examples" / "accounts" / name).spec
    assert spec.cloud.value == "aws"

"""``gpucap account check`` through each cloud's real adapter and emulator (AWS has its own,
fuller tests in tests/providers/aws/test_account_check.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controlplane.cli.main import app
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

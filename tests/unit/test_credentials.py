"""providers.credentials: the per-customer AWS ExternalId gpucap generates."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from providers.credentials import (
    EXTERNAL_ID_SECRET_ENV,
    EXTERNAL_ID_SECRET_FILE,
    ExternalIdGenerator,
)
from schema.policy_file import PolicyError, parse_policy

KEY = b"0123456789abcdef-server-side-key"


def test_external_id_is_deterministic_per_customer_and_secret() -> None:
    gen = ExternalIdGenerator(KEY)
    assert gen.for_customer("acme") == ExternalIdGenerator(KEY).for_customer("acme")
    assert gen.for_customer("acme") != gen.for_customer("globex")
    other = ExternalIdGenerator(b"another-server-side-key-0000")
    assert other.for_customer("acme") != gen.for_customer("acme")


def test_external_id_fits_sts() -> None:
    eid = ExternalIdGenerator(KEY).for_customer("acme")
    # STS: 2-1224 characters of [\w+=,.@:/-]
    assert re.fullmatch(r"[\w+=,.@:/-]{2,1224}", eid)
    assert eid.startswith("gpucap-")


@pytest.mark.parametrize("bad", ["", "Acme", "acme corp", "-acme", "a" * 64])
def test_external_id_needs_a_customer_name(bad: str) -> None:
    with pytest.raises(ValueError, match="customer"):
        ExternalIdGenerator(KEY).for_customer(bad)


def test_short_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        ExternalIdGenerator(b"short")


def test_secret_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(EXTERNAL_ID_SECRET_ENV, KEY.decode())
    gen = ExternalIdGenerator.from_environment(tmp_path)
    assert gen.for_customer("acme") == ExternalIdGenerator(KEY).for_customer("acme")
    assert not (tmp_path / EXTERNAL_ID_SECRET_FILE).exists()


def test_secret_file_is_created_owner_only_and_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(EXTERNAL_ID_SECRET_ENV, raising=False)
    state = tmp_path / "state"
    first = ExternalIdGenerator.from_environment(state).for_customer("acme")
    key_file = state / EXTERNAL_ID_SECRET_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert ExternalIdGenerator.from_environment(state).for_customer("acme") == first


def test_a_policy_cannot_supply_an_external_id() -> None:
    text = """
customer: acme
accounts:
  - name: acme-aws
    cloud: aws
    regions: [us-east-1]
    credentials:
      role_arn: arn:aws:iam::123456789012:role/gpucap
      external_id: chosen-by-the-customer
"""
    with pytest.raises(PolicyError) as info:
        parse_policy(text)
    [problem] = info.value.problems
    assert problem.field == "accounts[0].credentials.external_id"
    assert problem.line == 9


def test_tools_other_than_the_daemon_never_invent_a_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(EXTERNAL_ID_SECRET_ENV, raising=False)
    with pytest.raises(ValueError, match=EXTERNAL_ID_SECRET_ENV):
        ExternalIdGenerator.from_environment(tmp_path, create=False)
    assert not (tmp_path / EXTERNAL_ID_SECRET_FILE).exists()
    made = ExternalIdGenerator.from_environment(tmp_path).for_customer("acme")
    assert ExternalIdGenerator.from_environment(tmp_path, create=False).for_customer("acme") == made

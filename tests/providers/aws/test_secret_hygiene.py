"""Nothing secret reaches the logs or the database.

The secrets in play: gpucap's own base credentials (environment), the assumed-role keys and
session tokens moto issued (recorded by the proxy from the STS responses), and the HMAC key
behind the ExternalIds. The test runs the real path, policy apply -> store -> resolver ->
AWS adapter (assume role, create, list, fail, terminate) with DEBUG logging everywhere,
then greps every captured log line and every row of every table for each secret value."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest
import structlog
from sqlalchemy import select

from controlplane.api import ControlPlaneService
from controlplane.resolvers import CloudResolver
from controlplane.store.db import Store
from controlplane.store.models import Account as AccountRow
from controlplane.store.models import Base
from controlplane.telemetry import configure_logging
from providers.credentials import ExternalIdGenerator
from providers.errors import CapacityUnavailable
from schema.types import Cloud
from tests.fakes.moto_server import BASE_SECRET_KEY, MotoEmulator
from tests.providers.aws.conftest import REGION, node_request

ROLE = "arn:aws:iam::333333333333:role/gpucap-provisioner"

POLICY = f"""
customer: hygiene-co
accounts:
  - name: hygiene-aws
    cloud: aws
    owner: customer
    regions: [{REGION}]
    credentials:
      role_arn: {ROLE}
"""


class _Captured:
    """What the daemon's logging wrote to stderr during the test (pytest's capture)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys
        self._seen = ""

    def getvalue(self) -> str:
        self._seen += self._capsys.readouterr().err
        return self._seen


@pytest.fixture
def debug_logs(capsys: pytest.CaptureFixture[str]) -> Iterator[_Captured]:
    """The daemon's logging setup at DEBUG, rendering structlog JSON to stderr."""
    root = logging.getLogger()
    level = root.level
    configure_logging(level="debug", json=True)
    root.setLevel(logging.DEBUG)
    try:
        yield _Captured(capsys)
    finally:
        root.setLevel(level)
        structlog.reset_defaults()


def _dump(store: Store) -> str:
    out = []
    with store.session() as s:
        for table in Base.metadata.sorted_tables:
            for row in s.execute(select(table)).all():
                out.append(repr(tuple(row)))
    return "\n".join(out)


def test_no_secret_in_logs_or_database(
    store: Store,
    moto: MotoEmulator,
    ami: str,
    debug_logs: _Captured,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    hmac_key = f"hygiene-hmac-{uuid.uuid4().hex}"
    external_ids = ExternalIdGenerator(secret=hmac_key.encode())
    service = ControlPlaneService(store, external_ids=external_ids)
    service.apply_policy(POLICY, source="hygiene.yaml", applied_by="test")
    with store.session() as s:
        row = s.scalars(select(AccountRow).where(AccountRow.name == "hygiene-aws")).one()
        assert row.external_id == external_ids.for_customer("hygiene-co")

    resolver = CloudResolver(external_ids=external_ids, endpoints={Cloud.AWS: moto.endpoint_url})
    provider = resolver.provider("hygiene-co", row)
    req = node_request(customer="hygiene-co", image=ami, user_data="#!/bin/sh\necho hi\n")
    node = provider.create_node(req).node
    provider.list_nodes(REGION, {"gpucap-intent": req.intent_id})
    moto.inject("InsufficientInstanceCapacity", 500)
    with pytest.raises(CapacityUnavailable):
        provider.create_node(node_request(customer="hygiene-co", image=ami))
    provider.terminate_node(REGION, node.instance_id)

    secrets: list[str] = [BASE_SECRET_KEY, hmac_key, *moto.faults.issued_secrets]
    assert len(moto.faults.issued_secrets) >= 2, "the role was assumed (key and token seen)"
    logs = "\n".join([debug_logs.getvalue(), caplog.text])
    assert "aws.assume_role" in logs, "gpucap's own structured logs were captured"
    assert "botocore" in logs, "the SDK's logs were captured"
    database = _dump(store)
    assert "hygiene-aws" in database, "the database dump has the account"
    for secret in secrets:
        assert secret not in logs, "a secret value appeared in the logs"
        assert secret not in database, "a secret value appeared in the database"


def test_external_id_secret_is_not_in_repr() -> None:
    gen = ExternalIdGenerator(secret=b"super-secret-hmac-key-0123456789")
    assert "super-secret" not in repr(gen)
    assert "super-secret" not in str(gen)

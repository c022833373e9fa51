"""Fixtures for the OCI adapter tests: a fresh wire fake per test, a tenancy with an API key
generated at test time, a config file profile for it, and a provider built through
``providers.registry`` exactly as the control plane builds one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from providers.oci.provider import OciProvider
from providers.retry import RetryPolicy
from schema.policy import Account
from schema.types import Owner
from tests.contract.harness_oci import (
    BUCKET,
    REGION,
    OciIdentity,
    new_identity,
    oci_account,
    write_config,
)
from tests.fakes.oci_server import FakeOci

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, max_total_s=10.0)
PASS_PHRASE = "pp-9c1e-never-log-me"


@dataclass
class World:
    fake: FakeOci
    tmp: Path
    a: OciIdentity
    b: OciIdentity
    config_file: Path

    def provider(
        self, ident: OciIdentity | None = None, *, name: str = "oci-a", **kw: Any
    ) -> OciProvider:
        account: Account = kw.pop("account", None) or oci_account(
            name, ident or self.a, owner=kw.pop("owner", Owner.SHARED)
        )
        return OciProvider(
            account,
            endpoint_url=self.fake.endpoint_template,
            config_file=str(self.config_file),
            retry=kw.pop("retry", FAST_RETRY),
            **kw,
        )


@pytest.fixture
def fake() -> Iterator[FakeOci]:
    f = FakeOci(regions=(REGION, "us-phoenix-1")).start()
    try:
        yield f
    finally:
        f.stop()


@pytest.fixture
def world(fake: FakeOci, tmp_path: Path) -> World:
    a = new_identity(fake, "tenanta", PASS_PHRASE)
    b = new_identity(fake, "tenantb", PASS_PHRASE + "-b")
    fake.create_bucket(a.tenancy, REGION, BUCKET, a.compartment)
    config = write_config(tmp_path, [a, b])
    return World(fake, tmp_path, a, b, config)


@pytest.fixture
def node_request() -> Callable[..., Any]:
    import uuid

    from providers.base import NodeRequest, ownership_tags

    def make(zone: str | None, intent: str | None = None, **kw: Any) -> NodeRequest:
        intent = intent or f"n-{uuid.uuid4().hex[:12]}"
        return NodeRequest(
            intent_id=intent,
            instance_type=kw.pop("instance_type", "BM.GPU.H100.8"),
            region=REGION,
            zone=zone,
            user_data=kw.pop("user_data", "#!/bin/sh\necho hi\n"),
            tags=ownership_tags(intent, "acme", kw.pop("pool", "pool-1"), "llama-70b"),
            **kw,
        )

    return make

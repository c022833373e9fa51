"""Fixtures for the GCP adapter tests: the wire fake (one per session, reset per test), a
fresh project per test, and a provider built through the real compute_v1 REST clients."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from providers.gcp.provider import GcpProvider
from tests.contract.harness_gcp import GcpHarness, gcp_fake, gcp_harness, make_provider
from tests.fakes.gcp_server import FakeGcp

__all__ = ["gcp_fake", "gcp_harness"]


@pytest.fixture
def fake(gcp_fake: FakeGcp) -> Iterator[FakeGcp]:
    gcp_fake.reset()
    yield gcp_fake
    gcp_fake.reset()


@pytest.fixture
def project() -> str:
    return f"gpucap-t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def provider(fake: FakeGcp, project: str) -> GcpProvider:
    return make_provider(fake, project)


@pytest.fixture
def harness(fake: FakeGcp, project: str, provider: GcpProvider) -> GcpHarness:
    return GcpHarness(fake=fake, provider=provider, project=project)

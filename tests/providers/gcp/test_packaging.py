"""The GCP adapter loads google-cloud-compute only when a GCP provider is built, so a
deployment that never uses GCP never imports it; and the registry builds it for gcp."""

from __future__ import annotations

import subprocess
import sys

from providers.gcp.provider import GcpProvider
from providers.registry import build_provider
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner


def test_importing_the_package_loads_no_google_sdk() -> None:
    code = (
        "import sys, providers.gcp, providers.gcp.errors, providers.gcp.tags;"
        "print(sorted(m for m in sys.modules if m.startswith('google.cloud')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_registry_builds_the_gcp_adapter() -> None:
    account = Account(
        name="shared-gcp",
        cloud=Cloud.GCP,
        owner=Owner.SHARED,
        regions=["us-central1"],
        credentials=Credentials(project="gpucap-shared"),
    )
    provider = build_provider(
        account, customer="acme", external_id=None, endpoint_url="http://127.0.0.1:9"
    )
    assert isinstance(provider, GcpProvider)
    assert (provider.cloud, provider.account, provider.session.project) == (
        Cloud.GCP,
        "shared-gcp",
        "gpucap-shared",
    )

"""Secret hygiene for GCP: no token (gpucap's source token, nor any access token the IAM
Credentials API minted for a customer's service account) ever shows up in our logs (structlog
and stdlib logging at DEBUG, the Google libraries' own loggers included), in a provider's or
session's repr, or in a typed error's message and details, on success and on failure paths."""

from __future__ import annotations

import logging
import uuid

import pytest
import structlog
from google.oauth2.credentials import Credentials as StaticToken

from providers.base import TAG_MANAGED, NodeRequest, ownership_tags
from providers.errors import ProviderError
from tests.contract.harness_gcp import make_provider
from tests.fakes.gcp_server import FakeGcp

REGION, ZONE, H100 = "us-central1", "us-central1-a", "a3-highgpu-8g"
CONTROL_PLANE = "gpucap-cp@gpucap-prod.iam.gserviceaccount.com"


def request() -> NodeRequest:
    intent = f"n-{uuid.uuid4().hex[:12]}"
    return NodeRequest(
        intent_id=intent,
        instance_type=H100,
        region=REGION,
        zone=ZONE,
        tags=ownership_tags(intent, "acme", "h100-pool", "llama-70b"),
    )


def test_no_token_in_logs_reprs_or_errors(
    fake: FakeGcp, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    source_token = "ya29.source-" + uuid.uuid4().hex
    project = "acme-inference"
    sa = f"gpucap-provisioner@{project}.iam.gserviceaccount.com"
    fake.register_token(source_token, CONTROL_PLANE)
    fake.add_service_account(sa, token_creators={CONTROL_PLANE})
    fake.restrict_project(project, sa)
    fake.put_object("acme-weights", "llama/model.safetensors", b"w" * 3000)
    caplog.set_level(logging.DEBUG)

    provider = make_provider(
        fake, project, service_account=sa, source_credentials=StaticToken(token=source_token)
    )
    errors: list[ProviderError] = []
    with structlog.testing.capture_logs() as events:
        node = provider.create_node(request()).node
        provider.list_nodes(REGION, {TAG_MANAGED: "true"})
        provider.describe_node(REGION, node.instance_id)
        provider.list_offerings([REGION])
        provider.copy_object(
            "gs://acme-weights/llama/model.safetensors", "gs://acme-staged/llama/model.safetensors"
        )
        for fault in ("stockout_details", "quota", "unauthenticated", "permission_denied"):
            # a 401 makes google-auth refresh the token and resend (twice): outlast that
            fake.inject(fault, count=3 if fault == "unauthenticated" else 1)
            try:
                provider.create_node(request())
            except ProviderError as exc:
                errors.append(exc)
        provider.terminate_node(REGION, node.instance_id)
        # and a refused impersonation (we are not a token creator for this one)
        other = "gpucap-provisioner@bolt-inference.iam.gserviceaccount.com"
        fake.add_service_account(other, token_creators=set())
        refused = make_provider(
            fake,
            "bolt-inference",
            service_account=other,
            source_credentials=StaticToken(token=source_token),
        )
        try:
            refused.list_nodes(REGION, {TAG_MANAGED: "true"})
        except ProviderError as exc:
            errors.append(exc)

    minted = [t for t, who in fake.tokens.items() if who == sa]
    assert minted, "the test never impersonated: it would prove nothing"
    assert len(errors) == 5
    haystack = "\n".join(
        [
            caplog.text,
            capsys.readouterr().out,
            repr(events),
            repr(provider),
            repr(provider.session),
            *(f"{e!s} {e.details!r} {e.message}" for e in errors),
        ]
    )
    for secret in [source_token, *minted]:
        assert secret not in haystack

"""The GCP account preflight (``providers.gcp.check``) against the wire fake: what passes,
and that each failure names the check that failed and why."""

from __future__ import annotations

from google.oauth2.credentials import Credentials as StaticToken

from providers.gcp.check import Finding, preflight
from providers.gcp.provider import BASE_IMAGE_FAMILY
from tests.contract.harness_gcp import make_provider
from tests.fakes.gcp_server import FakeGcp

REGIONS = ["us-central1", "us-east4"]


def by_check(findings: list[Finding]) -> dict[tuple[str, str], Finding]:
    return {(f.check, f.target): f for f in findings}


def test_a_ready_shared_project_passes_every_check(fake: FakeGcp, project: str) -> None:
    fake.add_image(project, "gpu-node-v1", family=BASE_IMAGE_FAMILY)
    findings = preflight(make_provider(fake, project), REGIONS)
    assert all(f.ok for f in findings), [f for f in findings if not f.ok]
    checks = by_check(findings)
    assert {"credentials", "project", "region", "offerings", "quota", "image"} == {
        c for c, _ in checks
    }
    assert "a3-highgpu-8g" in checks[("offerings", "us-central1")].detail
    assert "NVIDIA_H100_GPUS" in checks[("quota", "us-central1")].detail


def test_missing_image_unknown_region_and_no_quota_fail_by_name(
    fake: FakeGcp, project: str
) -> None:
    for metric in ("NVIDIA_H100_GPUS", "NVIDIA_H100_MEGA_GPUS", "NVIDIA_H200_GPUS"):
        fake.set_quota(project, "us-east4", metric, 0)
    findings = by_check(preflight(make_provider(fake, project), ["us-east4", "asia-south9"]))
    assert not findings[
        ("image", f"all regions: projects/{project}/global/images/family/{BASE_IMAGE_FAMILY}")
    ].ok
    assert not findings[("region", "asia-south9")].ok
    assert "NotFound" in findings[("region", "asia-south9")].detail
    assert not findings[("quota", "us-east4")].ok
    assert not findings[("offerings", "us-east4")].ok  # quota-less offerings are unavailable
    assert findings[("credentials", "anonymous (emulator)")].ok


def test_refused_impersonation_fails_at_credentials_and_stops(fake: FakeGcp) -> None:
    project = "acme-inference"
    sa = f"gpucap-provisioner@{project}.iam.gserviceaccount.com"
    fake.register_token("ya29.source", "gpucap-cp@gpucap-prod.iam.gserviceaccount.com")
    fake.add_service_account(sa, token_creators=set())
    provider = make_provider(
        fake, project, service_account=sa, source_credentials=StaticToken(token="ya29.source")
    )
    findings = preflight(provider, REGIONS)
    assert [(f.check, f.ok) for f in findings] == [("credentials", False)]
    assert "AuthFailed" in findings[0].detail
    assert "ya29" not in findings[0].detail


def test_images_named_per_region_are_each_checked(fake: FakeGcp, project: str) -> None:
    fake.add_image(project, "llama-baked-v3")
    findings = by_check(
        preflight(
            make_provider(fake, project),
            ["us-central1"],
            images={
                "us-central1": f"projects/{project}/global/images/llama-baked-v3",
                "us-east4": "missing-image",
            },
        )
    )
    assert findings[("image", f"us-central1: projects/{project}/global/images/llama-baked-v3")].ok
    assert not findings[("image", "us-east4: missing-image")].ok

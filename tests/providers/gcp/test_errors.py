"""One test per GCP error code of clouds.md §A.6, served on the wire by the fake and read
through the real compute_v1 REST client: the typed error, its scope, that no instance was
left behind, and how many requests went on the wire (no hidden SDK retries of a stockout)."""

from __future__ import annotations

import uuid

import pytest

from providers.base import NodeRequest, ownership_tags
from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InvalidRequest,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)
from providers.gcp.provider import GcpProvider
from tests.contract.harness import CONTRACT_RETRY
from tests.contract.harness_gcp import GcpHarness
from tests.fakes.gcp_server import FakeGcp

REGION, ZONE, H100 = "us-central1", "us-central1-a", "a3-highgpu-8g"


def request(instance_type: str = H100, zone: str | None = ZONE) -> NodeRequest:
    intent = f"n-{uuid.uuid4().hex[:12]}"
    return NodeRequest(
        intent_id=intent,
        instance_type=instance_type,
        region=REGION,
        zone=zone,
        tags=ownership_tags(intent, "acme", "h100-pool", "llama-70b"),
    )


def inserts(fake: FakeGcp) -> int:
    return sum(
        1 for r in fake.requests_seen if r.method == "POST" and r.path.endswith("/instances")
    )


def fail(provider: GcpProvider, harness: GcpHarness, req: NodeRequest) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        provider.create_node(req)
    assert harness.instances_with_intent(req.intent_id) == 0, "a failed create left a VM"
    return info.value


# --- capacity: inside the finished operation (async) ------------------------------------


def test_zone_resource_pool_exhausted_blocks_the_zone(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("stockout", zone=ZONE)
    err = fail(provider, harness, request())
    assert isinstance(err, CapacityUnavailable)
    assert (err.code, err.scope, err.region, err.zone) == (
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        Scope.ZONE,
        REGION,
        ZONE,
    )
    assert err.instance_type == H100
    assert err.retryable is False
    assert err.details["http_status"] == "503"
    assert inserts(fake) == 1, "a stockout must not be retried by the SDK or by us"


def test_zone_resource_pool_exhausted_with_details_carries_zones_available(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("stockout_details", zone=ZONE)
    err = fail(provider, harness, request())
    assert isinstance(err, CapacityUnavailable)
    assert err.code == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert err.scope == Scope.ZONE and err.zone == ZONE
    assert err.details["zones_available"] == "us-central1-b,us-central1-c"


@pytest.mark.parametrize(
    "code", ["insufficientCapacity", "RESOURCE_NOT_READY", "RESOURCE_OPERATION_RATE_EXCEEDED"]
)
def test_zone_blocking_operation_codes_are_capacity_for_the_zone(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness, code: str
) -> None:
    # These ops carry no httpErrorStatusCode: ExtendedOperation.result() would have returned
    # None (clouds.md §E.2 pitfall 3); the adapter reads ``error`` itself.
    fake.inject(f"op:{code}", zone=ZONE)
    err = fail(provider, harness, request())
    assert isinstance(err, CapacityUnavailable)
    assert (err.code, err.scope, err.zone) == (code, Scope.ZONE, ZONE)
    assert "http_status" not in err.details


def test_unsupported_operation_is_an_invalid_request_for_the_zone(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("op:UNSUPPORTED_OPERATION", zone=ZONE)
    err = fail(provider, harness, request())
    assert isinstance(err, InvalidRequest)
    assert (err.code, err.scope, err.zone) == ("UNSUPPORTED_OPERATION", Scope.ZONE, ZONE)


def test_unknown_operation_code_blocks_the_zone_without_claiming_a_stockout(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("op:SOMETHING_NEW", zone=ZONE)
    err = fail(provider, harness, request())
    assert type(err) is ProviderError
    assert (err.code, err.scope, err.retryable) == ("SOMETHING_NEW", Scope.ZONE, False)


# --- quota: sync 403 or inside the operation --------------------------------------------


def test_quota_exceeded_403_blocks_the_region_for_the_account(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("quota")
    err = fail(provider, harness, request())
    assert isinstance(err, QuotaExceeded)
    assert (err.code, err.scope, err.region) == ("quotaExceeded", Scope.ACCOUNT_REGION, REGION)
    assert err.details["metric"] == "NVIDIA_H100_GPUS"
    assert inserts(fake) == 1


def test_gpus_all_regions_quota_blocks_the_whole_account(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("quota_global")
    err = fail(provider, harness, request())
    assert isinstance(err, QuotaExceeded)
    assert err.scope == Scope.ACCOUNT
    assert err.details["metric"] == "GPUS_ALL_REGIONS"


def test_quota_exceeded_inside_the_operation(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("quota_op", zone=ZONE)
    err = fail(provider, harness, request(instance_type="a3-ultragpu-8g"))
    assert isinstance(err, QuotaExceeded)
    assert (err.code, err.scope, err.region) == ("QUOTA_EXCEEDED", Scope.ACCOUNT_REGION, REGION)
    assert err.details["metric"] == "NVIDIA_H200_GPUS"


def test_real_quota_limit_is_enforced_by_the_emulator(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness, project: str
) -> None:
    fake.set_quota(project, REGION, "NVIDIA_H100_GPUS", 8)
    assert provider.create_node(request()).created is True
    err = fail(provider, harness, request())
    assert isinstance(err, QuotaExceeded)
    assert err.scope == Scope.ACCOUNT_REGION and err.region == REGION
    assert "Limit: 8.0" in err.message


# --- throttling ---------------------------------------------------------------------------


def test_rate_limit_exceeded_403_is_throttled_after_bounded_retries(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("rate_limit", count=CONTRACT_RETRY.max_attempts)
    err = fail(provider, harness, request())
    assert isinstance(err, Throttled)
    assert err.code == "rateLimitExceeded" and err.retryable is True
    assert inserts(fake) == CONTRACT_RETRY.max_attempts


def test_too_many_requests_429_is_throttled_with_retry_after(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("too_many_requests", count=CONTRACT_RETRY.max_attempts)
    err = fail(provider, harness, request())
    assert isinstance(err, Throttled)
    assert err.retry_after_s == 1.0  # the fake's Retry-After header


def test_throttling_below_the_budget_is_absorbed(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    fake.inject("rate_limit", count=CONTRACT_RETRY.max_attempts - 1)
    req = request()
    assert provider.create_node(req).created is True
    assert harness.instances_with_intent(req.intent_id) == 1


# --- transient ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["server_error", "internal"])
def test_5xx_is_transient_and_retried_to_the_budget(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness, kind: str
) -> None:
    fake.inject(kind, count=CONTRACT_RETRY.max_attempts)
    err = fail(provider, harness, request())
    assert isinstance(err, TransientError) and err.retryable is True
    assert inserts(fake) == CONTRACT_RETRY.max_attempts


def test_5xx_on_reads_is_retried_too(fake: FakeGcp, provider: GcpProvider) -> None:
    req = request()
    node = provider.create_node(req).node
    fake.inject("server_error", method="instances.get", count=CONTRACT_RETRY.max_attempts - 1)
    seen = provider.describe_node(REGION, node.instance_id)
    assert seen is not None and seen.instance_id == node.instance_id


def instance_gets(fake: FakeGcp, name: str) -> int:
    return sum(
        1 for r in fake.requests_seen if r.method == "GET" and r.path.endswith(f"/instances/{name}")
    )


@pytest.mark.parametrize("faults", [CONTRACT_RETRY.max_attempts - 1, CONTRACT_RETRY.max_attempts])
def test_a_read_is_retried_in_one_layer_only(
    fake: FakeGcp, provider: GcpProvider, faults: int
) -> None:
    """One GET on the wire per attempt of gpucap's policy: api_core's own retry is off."""
    node = provider.create_node(request()).node
    name = node.instance_id.split("/")[1]
    before = instance_gets(fake, name)
    fake.inject("server_error", method="instances.get", count=faults)
    if faults < CONTRACT_RETRY.max_attempts:
        assert provider.describe_node(REGION, node.instance_id) is not None
        assert instance_gets(fake, name) - before == faults + 1
    else:
        with pytest.raises(TransientError):
            provider.describe_node(REGION, node.instance_id)
        assert instance_gets(fake, name) - before == CONTRACT_RETRY.max_attempts


# --- auth -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["unauthenticated", "permission_denied"])
def test_auth_errors_block_the_account(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness, kind: str
) -> None:
    fake.inject(kind)
    err = fail(provider, harness, request())
    assert isinstance(err, AuthFailed)
    assert err.scope == Scope.ACCOUNT
    assert inserts(fake) == 1, "auth failures are not retried"


# --- invalid ------------------------------------------------------------------------------


def test_machine_type_not_in_zone_is_invalid_for_that_zone(
    fake: FakeGcp, provider: GcpProvider, harness: GcpHarness
) -> None:
    # us-central1-c offers a3-megagpu-8g only (the fake's topology, like the real unevenness)
    err = fail(provider, harness, request(zone="us-central1-c"))
    assert isinstance(err, InvalidRequest)
    assert err.scope == Scope.ZONE and err.zone == "us-central1-c"


def test_malformed_instance_id_names_the_expected_format(provider: GcpProvider) -> None:
    with pytest.raises(InvalidRequest, match="ZONE/NAME/NUMERIC_ID"):
        provider.describe_node(REGION, "not-an-id")


def test_not_found_on_describe_and_terminate_is_not_an_error(provider: GcpProvider) -> None:
    assert provider.describe_node(REGION, f"{ZONE}/gpucap-nope/1") is None
    provider.terminate_node(REGION, f"{ZONE}/gpucap-nope/1")

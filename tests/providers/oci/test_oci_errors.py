"""Every OCI error code gpucap knows (clouds.md §A.6 and OCI's API error table), served on the
wire by the fake and read through the real SDK: the typed error, its scope, and whether it
was retried (counted as requests the emulator received)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

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
from providers.oci.errors import Target, Where, translate
from providers.oci.provider import OciProvider
from schema.policy import Account, Credentials
from schema.types import Cloud, Owner
from tests.contract.harness_oci import REGION, new_identity, oci_account, write_config
from tests.fakes.oci_server import generate_key_pair
from tests.providers.oci.conftest import FAST_RETRY, World

BUDGET = FAST_RETRY.max_attempts

# status, code, message, expected type, expected scope, retried by us?
# (409 InvalidatedRetryToken is in test_oci_idempotency.py: the adapter answers it by
# chaining the token, so it never surfaces from a create.)
CASES: list[tuple[int, str, str, type[ProviderError], Scope, bool]] = [
    (500, "InternalError", "Out of host capacity.", CapacityUnavailable, Scope.ZONE, False),
    (
        500,
        "InternalError",
        "Out of capacity for shape BM.GPU.H100.8 in availability domain AD-1",
        CapacityUnavailable,
        Scope.ZONE,
        False,
    ),
    (
        400,
        "LimitExceeded",
        "The following service limits were exceeded: gpu-h100-count",
        QuotaExceeded,
        Scope.ACCOUNT_REGION,
        False,
    ),
    (
        400,
        "QuotaExceeded",
        "Compartment quota exceeded",
        QuotaExceeded,
        Scope.ACCOUNT_REGION,
        False,
    ),
    (
        429,
        "TooManyRequests",
        "Too many requests for the user",
        Throttled,
        Scope.ACCOUNT_REGION,
        True,
    ),
    (404, "NotAuthorizedOrNotFound", "Authorization failed", AuthFailed, Scope.ACCOUNT, False),
    (401, "NotAuthenticated", "Bad signature", AuthFailed, Scope.ACCOUNT, False),
    (403, "NotAuthorized", "Not authorized", AuthFailed, Scope.ACCOUNT, False),
    (403, "NotAllowed", "Not allowed", AuthFailed, Scope.ACCOUNT, False),
    (400, "InvalidParameter", "Invalid shape configuration", InvalidRequest, Scope.REQUEST, False),
    (400, "MissingParameter", "shape is required", InvalidRequest, Scope.REQUEST, False),
    (
        404,
        "RelatedResourceNotAuthorizedOrNotFound",
        "Image not found",
        InvalidRequest,
        Scope.REQUEST,
        False,
    ),
    (409, "IncorrectState", "Busy", TransientError, Scope.REQUEST, True),
    (500, "InternalError", "Internal error.", TransientError, Scope.REQUEST, True),
    (500, "InternalServerError", "Internal server error.", TransientError, Scope.REQUEST, True),
    (503, "ServiceUnavailable", "Unavailable", TransientError, Scope.REQUEST, True),
    (502, "BadGateway", "unknown 5xx code", TransientError, Scope.REQUEST, True),
    (400, "SomethingNewIn2027", "unknown 4xx code", InvalidRequest, Scope.REQUEST, False),
]


@pytest.mark.parametrize(
    ("status", "code", "message", "kind", "scope", "retried"),
    CASES,
    ids=[f"{c[0]}-{c[1]}-{c[2][:12]}" for c in CASES],
)
def test_launch_error_maps_to_typed_error_with_scope(
    world: World,
    node_request: Callable[..., Any],
    status: int,
    code: str,
    message: str,
    kind: type[ProviderError],
    scope: Scope,
    retried: bool,
) -> None:
    provider = world.provider()
    zone = world.fake.ad_name(world.a.tenancy, REGION, 1)
    world.fake.inject(code, status=status, code=code, message=message, count=BUDGET)
    req = node_request(zone)
    with pytest.raises(ProviderError) as info:
        provider.create_node(req)
    err = info.value
    assert type(err) is kind, f"{status} {code} -> {type(err).__name__}, want {kind.__name__}"
    assert err.scope == scope
    assert err.code == code
    assert err.retryable is retried
    assert err.region == REGION
    if scope == Scope.ZONE:
        assert err.zone == zone
    assert err.details["opc_request_id"], "the opc-request-id is kept for support tickets"
    launches = len(world.fake.requests("LaunchInstance"))
    assert launches == (BUDGET if retried else 1)
    assert world.fake.live_instances() == []


def test_capacity_without_a_zone_blocks_the_region() -> None:
    import oci

    err = translate(
        oci.exceptions.ServiceError(500, "InternalError", {}, "Out of host capacity."),
        Where(region=REGION, zone=None, instance_type="BM.GPU.H100.8"),
    )
    assert isinstance(err, CapacityUnavailable)
    assert err.scope == Scope.REGION


def test_not_authorized_or_not_found_on_one_resource_is_not_found(
    world: World, node_request: Callable[..., Any]
) -> None:
    """The same 404 code reads as "gone" when one OCID is addressed."""
    provider = world.provider()
    node = provider.create_node(node_request(None)).node
    world.fake.inject("not_authorized_or_not_found", operation="GetInstance")
    assert provider.describe_node(REGION, node.instance_id) is None
    world.fake.inject("not_authorized_or_not_found", operation="TerminateInstance")
    provider.terminate_node(REGION, node.instance_id)  # success: nothing to terminate


def test_throttle_reply_carries_retry_after(world: World, node_request: Callable[..., Any]) -> None:
    provider = world.provider()
    world.fake.inject("throttle", count=BUDGET, retry_after=7)
    with pytest.raises(Throttled) as info:
        provider.create_node(node_request(world.fake.ad_name(world.a.tenancy, REGION, 1)))
    assert info.value.retry_after_s == 7.0


def test_real_stockout_from_exhausted_hosts(world: World, node_request: Callable[..., Any]) -> None:
    """Not injected: the AD has no free host, so the fake answers as OCI does."""
    provider = world.provider()
    zone = world.fake.ad_name(world.a.tenancy, REGION, 2)
    world.fake.set_hosts(REGION, zone, "BM.GPU.H100.8", 0)
    with pytest.raises(CapacityUnavailable) as info:
        provider.create_node(node_request(zone))
    assert (info.value.scope, info.value.zone) == (Scope.ZONE, zone)
    offers = [o for o in provider.list_offerings([REGION]) if o.zone == zone]
    h100 = next(o for o in offers if o.instance_type == "BM.GPU.H100.8")
    assert h100.available is False and "out_of_host_capacity" in h100.reason


def test_dropped_connection_on_a_read_is_retried(
    world: World, node_request: Callable[..., Any]
) -> None:
    provider = world.provider()
    node = provider.create_node(node_request(None)).node
    world.fake.drop_next_response("GetInstance")
    seen = provider.describe_node(REGION, node.instance_id)
    assert seen is not None and seen.instance_id == node.instance_id


@pytest.mark.parametrize("faults", [BUDGET - 1, BUDGET])
def test_a_throttled_read_is_retried_in_one_layer_only(
    world: World, node_request: Callable[..., Any], faults: int
) -> None:
    """One GetInstance on the wire per attempt of gpucap's policy: the SDK never retries."""
    provider = world.provider()
    node = provider.create_node(node_request(None)).node
    before = len(world.fake.requests("GetInstance"))
    world.fake.inject("throttle", operation="GetInstance", count=faults)
    if faults < BUDGET:
        assert provider.describe_node(REGION, node.instance_id) is not None
        assert len(world.fake.requests("GetInstance")) - before == faults + 1
    else:
        with pytest.raises(Throttled):
            provider.describe_node(REGION, node.instance_id)
        assert len(world.fake.requests("GetInstance")) - before == BUDGET


def test_unusable_credentials_are_auth_failed_for_the_account(world: World) -> None:
    missing = Account(
        name="oci-missing",
        cloud=Cloud.OCI,
        owner=Owner.SHARED,
        regions=[REGION],
        credentials=Credentials(profile="NO_SUCH_PROFILE", compartment_id=world.a.compartment),
    )
    with pytest.raises(AuthFailed) as info:
        world.provider(account=missing).list_offerings([REGION])
    assert info.value.scope == Scope.ACCOUNT

    # Signing with a key the tenancy never uploaded (the keyId names the uploaded one).
    stranger = new_identity(world.fake, "stranger", "x-pass")
    rogue = dataclasses.replace(
        stranger, private_pem=generate_key_pair("y-pass")[0], pass_phrase="y-pass"
    )
    other = world.tmp / "other"
    other.mkdir()
    provider = OciProvider(
        oci_account("oci-stranger", rogue),
        endpoint_url=world.fake.endpoint_template,
        config_file=str(write_config(other, [rogue])),
        retry=FAST_RETRY,
    )
    with pytest.raises(AuthFailed) as info2:
        provider.list_offerings([REGION])
    assert info2.value.code == "NotAuthenticated"
    assert info2.value.scope == Scope.ACCOUNT


def test_sdk_global_retry_setting_cannot_retry_a_stockout(world: World) -> None:
    """clouds.md §A.5: OCI_SDK_DEFAULT_RETRY_ENABLED=true makes every operation retry 5xx for
    up to 10 minutes. Every call passes its own strategy, so a stockout still costs exactly
    one request. Run in a subprocess: the SDK reads the variable when it is imported."""
    zone = world.fake.ad_name(world.a.tenancy, REGION, 1)
    world.fake.inject("capacity", count=5)
    script = textwrap.dedent(
        f"""
        import sys
        from providers.base import NodeRequest
        from providers.errors import CapacityUnavailable
        from providers.oci.provider import OciProvider
        from providers.retry import RetryPolicy
        from tests.contract.harness_oci import oci_account, OciIdentity
        ident = OciIdentity({world.a.tenancy!r}, {world.a.user!r}, {world.a.compartment!r},
                            {world.a.fingerprint!r}, "", "", {world.a.profile!r})
        p = OciProvider(oci_account("oci-a", ident), endpoint_url={world.fake.endpoint_template!r},
                        config_file={str(world.config_file)!r},
                        retry=RetryPolicy(max_attempts=3, base_delay_s=0.01))
        try:
            p.create_node(NodeRequest("n-env", "BM.GPU.H100.8", {REGION!r}, {zone!r}))
        except CapacityUnavailable:
            sys.exit(0)
        sys.exit(3)
        """
    )
    env = {**os.environ, "OCI_SDK_DEFAULT_RETRY_ENABLED": "true"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=os.getcwd(), capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert len(world.fake.requests("LaunchInstance")) == 1


def test_a_bug_is_not_disguised_as_a_cloud_error() -> None:
    assert translate(TypeError("boom"), Where(target=Target.RESOURCE)) is None


def test_latency_past_the_read_timeout_is_transient_then_recovers(
    world: World, node_request: Callable[..., Any]
) -> None:
    provider = world.provider()
    node = provider.create_node(node_request(None)).node
    impatient = world.provider(timeout_s=(2.0, 0.2))
    world.fake.latency_s = 0.5
    with pytest.raises(TransientError) as info:
        impatient.describe_node(REGION, node.instance_id)
    assert info.value.retryable is True
    world.fake.latency_s = 0.0
    seen = impatient.describe_node(REGION, node.instance_id)
    assert seen is not None and seen.instance_id == node.instance_id


def test_no_zone_requested_picks_an_ad_with_free_hosts(
    world: World, node_request: Callable[..., Any]
) -> None:
    provider = world.provider()
    world.fake.set_hosts(REGION, "AD-1", "BM.GPU.H100.8", 0)
    node = provider.create_node(node_request(None)).node
    assert node.zone == world.fake.ad_name(world.a.tenancy, REGION, 2)


def test_real_service_limit_from_the_fake_is_quota_exceeded(
    world: World, node_request: Callable[..., Any]
) -> None:
    """Not injected: the tenancy's GPU limit in the AD is one node; the second launch is the
    API's own 400 LimitExceeded."""
    provider = world.provider()
    zone = world.fake.ad_name(world.a.tenancy, REGION, 1)
    world.fake.set_limit(world.a.tenancy, REGION, zone, "gpu-h100-count", 8)
    provider.create_node(node_request(zone))
    with pytest.raises(QuotaExceeded) as info:
        provider.create_node(node_request(zone))
    assert (info.value.scope, info.value.region) == (Scope.ACCOUNT_REGION, REGION)
    assert len(world.fake.live_instances()) == 1

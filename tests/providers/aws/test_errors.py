"""Every AWS error code in clouds.md §A.6, served by the proxy with its real HTTP status and
EC2 XML body, parsed by the real botocore client, mapped by ``providers.aws.errors``: one
test per code, checking the typed error, its scope, and that nothing was launched."""

from __future__ import annotations

from typing import Any

import pytest

from providers.aws.errors import from_error_response
from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InvalidRequest,
    NotFound,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)
from tests.fakes.moto_server import MotoEmulator
from tests.providers.aws.conftest import (
    REGION,
    ZONE,
    ProviderFactory,
    live_with_intent,
    node_request,
)

# code, HTTP status, expected type, expected scope (request names an AZ)
TABLE: list[tuple[str, int, type[ProviderError], Scope]] = [
    ("InsufficientInstanceCapacity", 500, CapacityUnavailable, Scope.ZONE),
    ("InsufficientCapacity", 500, CapacityUnavailable, Scope.ZONE),
    ("InsufficientHostCapacity", 500, CapacityUnavailable, Scope.ZONE),
    ("InsufficientReservedInstanceCapacity", 500, CapacityUnavailable, Scope.ZONE),
    ("Unsupported", 400, InvalidRequest, Scope.ZONE),
    ("InstanceLimitExceeded", 400, QuotaExceeded, Scope.ACCOUNT_REGION),
    ("VcpuLimitExceeded", 400, QuotaExceeded, Scope.ACCOUNT_REGION),
    ("MaxSpotInstanceCountExceeded", 400, CapacityUnavailable, Scope.ZONE),
    ("SpotMaxPriceTooLow", 400, CapacityUnavailable, Scope.ZONE),
    ("UnfulfillableCapacity", 400, CapacityUnavailable, Scope.ZONE),
    ("ReservationCapacityExceeded", 400, CapacityUnavailable, Scope.ZONE),
    ("RequestLimitExceeded", 503, Throttled, Scope.REQUEST),
    ("EC2ThrottledException", 503, Throttled, Scope.REQUEST),
    ("IdempotentParameterMismatch", 400, InvalidRequest, Scope.REQUEST),
    ("AuthFailure", 401, AuthFailed, Scope.ACCOUNT),
    ("UnauthorizedOperation", 403, AuthFailed, Scope.ACCOUNT),
    ("InternalError", 500, TransientError, Scope.REQUEST),
    ("Unavailable", 503, TransientError, Scope.REQUEST),
]


@pytest.mark.parametrize(("code", "status", "kind", "scope"), TABLE, ids=[t[0] for t in TABLE])
def test_code_maps_to_type_and_scope(
    moto: MotoEmulator,
    make_provider: ProviderFactory,
    direct_ec2: Any,
    code: str,
    status: int,
    kind: type[ProviderError],
    scope: Scope,
) -> None:
    provider = make_provider()  # NO_RETRY: one create attempt, so one fault is enough
    moto.inject(code, status, message=f"{code} (injected)")
    req = node_request()
    with pytest.raises(ProviderError) as info:
        provider.create_node(req)
    err = info.value
    assert type(err) is kind
    assert err.code == code
    assert err.scope == scope
    assert err.region == REGION
    assert err.instance_type == "p5.48xlarge"
    assert err.retryable is (kind in (Throttled, TransientError))
    assert live_with_intent(direct_ec2, req.intent_id) == []
    # One request on the wire per create: the create client never retries by itself.
    assert moto.faults.seen["RunInstances"] == 1


def test_capacity_without_a_zone_blocks_the_region(
    moto: MotoEmulator, make_provider: ProviderFactory
) -> None:
    moto.inject("InsufficientInstanceCapacity", 500)
    with pytest.raises(CapacityUnavailable) as info:
        make_provider().create_node(node_request(zone=None))
    assert info.value.scope == Scope.REGION
    assert info.value.zone is None


def test_capacity_message_hints_zones_that_have_capacity(
    moto: MotoEmulator, make_provider: ProviderFactory
) -> None:
    # The real message, clouds.md §A.6.
    message = (
        "We currently do not have sufficient p5.48xlarge capacity in the Availability Zone "
        "you requested (us-east-1a). Our system will be working on provisioning additional "
        "capacity. You can currently get p5.48xlarge capacity by not specifying an "
        "Availability Zone in your request or choosing us-east-1b, us-east-1c."
    )
    moto.inject("InsufficientInstanceCapacity", 500, message=message, zone=ZONE)
    with pytest.raises(CapacityUnavailable) as info:
        make_provider().create_node(node_request())
    assert info.value.zone == ZONE
    assert info.value.details["zones_with_capacity"] == "us-east-1b,us-east-1c"


def test_zone_scoped_fault_leaves_other_zones_alone(
    moto: MotoEmulator, make_provider: ProviderFactory, direct_ec2: Any
) -> None:
    moto.inject("InsufficientInstanceCapacity", 500, zone=ZONE)
    req = node_request(zone="us-east-1b")
    result = make_provider().create_node(req)
    assert result.node.zone == "us-east-1b"
    assert len(live_with_intent(direct_ec2, req.intent_id)) == 1


def test_botocore_default_client_would_retry_a_stockout(moto: MotoEmulator, ami: str) -> None:
    """Why the clients have retries off (clouds.md §E.1): a default botocore client
    treats InsufficientInstanceCapacity as a retryable 5xx and hides it behind retries."""
    import boto3
    from botocore.config import Config

    ec2 = boto3.client(
        "ec2",
        region_name=REGION,
        endpoint_url=moto.endpoint_url,
        config=Config(retries={"mode": "standard"}),
    )
    moto.inject("InsufficientInstanceCapacity", 500, count=2)
    resp = ec2.run_instances(ImageId=ami, InstanceType="p5.48xlarge", MinCount=1, MaxCount=1)
    assert resp["Instances"], "the stockout was swallowed by botocore's retries"
    assert moto.faults.seen["RunInstances"] == 3


def test_throttled_reads_are_retried_by_our_policy_alone(
    moto: MotoEmulator, make_provider: ProviderFactory
) -> None:
    from tests.providers.aws.conftest import FAST

    provider = make_provider(retry=FAST)
    node = provider.create_node(node_request(pool="reads")).node
    before = moto.faults.seen["DescribeInstances"]
    moto.inject("RequestLimitExceeded", 503, action="DescribeInstances", count=2)
    listed = provider.list_nodes(REGION, {"gpucap-pool": "reads"})
    assert [n.instance_id for n in listed] == [node.instance_id]
    # Two throttled answers and the good one: botocore retried none of them itself.
    assert moto.faults.seen["DescribeInstances"] - before == 3


def test_throttled_create_retries_with_our_policy_then_succeeds(
    moto: MotoEmulator, make_provider: ProviderFactory, direct_ec2: Any
) -> None:
    from tests.providers.aws.conftest import FAST

    moto.inject("RequestLimitExceeded", 503, count=FAST.max_attempts - 1)
    req = node_request()
    assert make_provider(retry=FAST).create_node(req).created is True
    assert len(live_with_intent(direct_ec2, req.intent_id)) == 1


def test_stockout_is_not_retried_even_with_a_retry_policy(
    moto: MotoEmulator, make_provider: ProviderFactory
) -> None:
    from tests.providers.aws.conftest import FAST

    moto.inject("InsufficientInstanceCapacity", 500, count=1)
    with pytest.raises(CapacityUnavailable):
        make_provider(retry=FAST).create_node(node_request())
    assert moto.faults.seen["RunInstances"] == 1


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        ({"Error": {"Code": "InvalidInstanceID.NotFound"}}, NotFound),
        ({"Error": {"Code": "Weird"}, "ResponseMetadata": {"HTTPStatusCode": 502}}, TransientError),
        ({"Error": {"Code": "Weird"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, InvalidRequest),
        ({"Error": {"Code": "Weird"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, AuthFailed),
        ({}, TransientError),
        ("not a dict", TransientError),
    ],
)
def test_unknown_codes_fall_back_on_the_http_status(response: Any, kind: type) -> None:
    assert type(from_error_response(response, region=REGION)) is kind


def test_throttle_honours_a_retry_after_header() -> None:
    err = from_error_response(
        {
            "Error": {"Code": "Throttling"},
            "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {"retry-after": "2"}},
        }
    )
    assert isinstance(err, Throttled)
    assert err.retry_after_s == 2.0

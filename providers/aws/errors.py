"""The only place that knows AWS error codes: botocore exceptions -> typed provider errors.

The code table is clouds.md §A.6 (EC2 "Error codes for the Amazon EC2 API"; Karpenter's
unfulfillable-capacity set, aws/karpenter-provider-aws ``pkg/errors/errors.go``). Scope:

- a stockout is the (type, AZ) when the request named an AZ, else the region;
- an account limit (instances, vCPUs) blocks the account in the region, for every type;
- ``Unsupported`` means the type is not offered in that AZ: the request can never work
  there, so it is an invalid request *scoped to the zone* (placement blocks that offering);
- throttling is never a reason to block anything: back off;
- auth failures block the whole account;
- a placement group with instances still in it cannot be deleted yet (``InUse``).

Unknown 4xx codes are invalid requests (scope: this request only); unknown 5xx and
connection-level failures are transient.
"""

from __future__ import annotations

import re
from typing import Any

from providers.errors import (
    AuthFailed,
    CapacityUnavailable,
    InUse,
    InvalidRequest,
    NotFound,
    ProviderError,
    QuotaExceeded,
    Scope,
    Throttled,
    TransientError,
)

# clouds.md §A.6
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "ReservationCapacityExceeded",  # the targeted reservation is full
        "MaxSpotInstanceCountExceeded",
        "SpotMaxPriceTooLow",
        "UnfulfillableCapacity",
        "InsufficientFreeAddressesInSubnet",
    }
)
QUOTA_CODES = frozenset({"InstanceLimitExceeded", "VcpuLimitExceeded"})
THROTTLE_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "EC2ThrottledException",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "SlowDown",
    }
)
AUTH_CODES = frozenset(
    {
        "AuthFailure",
        "UnauthorizedOperation",
        "AccessDenied",
        "AccessDeniedException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "OptInRequired",
        "Blocked",
        "UnrecognizedClientException",
        "InvalidAccessKeyId",
    }
)
ZONE_INVALID_CODES = frozenset({"Unsupported"})
NOT_FOUND_CODES = frozenset(
    {
        "InvalidInstanceID.NotFound",
        "InvalidInstanceID.Malformed",
        "InvalidAMIID.NotFound",
        "InvalidAMIID.Unavailable",
        "InvalidAMIID.Malformed",
        "InvalidSnapshot.NotFound",
        "InvalidPlacementGroup.Unknown",
        "NoSuchKey",
        "NoSuchBucket",
        "NoSuchUpload",
        "NotFound",
        "404",
    }
)
# EC2 API "Error codes": the group still has instances (terminated ones do not count).
IN_USE_CODES = frozenset({"InvalidPlacementGroup.InUse"})
# The name is taken: for gpucap's names, the gang's group exists (find-or-create found it).
DUPLICATE_PLACEMENT_GROUP = "InvalidPlacementGroup.Duplicate"
TRANSIENT_CODES = frozenset(
    {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "RequestTimeout"}
)

# "... You can currently get p5.48xlarge capacity by ... choosing us-east-1b, us-east-1c."
_ZONES_IN_MESSAGE = re.compile(r"\b([a-z]{2}(?:-gov)?-[a-z]+-\d[a-z])\b")


def from_botocore(
    exc: BaseException,
    *,
    region: str | None = None,
    zone: str | None = None,
    instance_type: str | None = None,
) -> ProviderError:
    """Translate any exception raised by a boto3 call into a typed provider error."""
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        HTTPClientError,
        NoCredentialsError,
        NoRegionError,
        ParamValidationError,
        PartialCredentialsError,
        ProfileNotFound,
    )

    if isinstance(exc, ProviderError):
        return exc
    where: dict[str, Any] = {"region": region, "zone": zone, "instance_type": instance_type}
    if isinstance(exc, ClientError):
        return from_error_response(exc.response, **where)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError | ProfileNotFound):
        return AuthFailed(
            "no usable AWS credentials", code=type(exc).__name__, scope=Scope.ACCOUNT, **where
        )
    if isinstance(exc, ConnectionError | HTTPClientError):
        # Includes a connection dropped after the request was sent: the call may have taken
        # effect, which is why create is find-or-create.
        return TransientError(
            f"connection failure: {type(exc).__name__}",
            code=type(exc).__name__,
            retryable=True,
            **where,
        )
    if isinstance(exc, ParamValidationError | NoRegionError):
        return InvalidRequest(str(exc), code=type(exc).__name__, **where)
    return TransientError(
        f"unexpected {type(exc).__name__}", code=type(exc).__name__, retryable=True, **where
    )


def from_error_response(
    response: Any,
    *,
    region: str | None = None,
    zone: str | None = None,
    instance_type: str | None = None,
) -> ProviderError:
    """Map an AWS error response (``ClientError.response``) by code, then by HTTP status."""
    error = response.get("Error", {}) if isinstance(response, dict) else {}
    meta = response.get("ResponseMetadata", {}) if isinstance(response, dict) else {}
    code = str(error.get("Code", "") or "")
    message = str(error.get("Message", "") or code or "AWS error")
    status = int(meta.get("HTTPStatusCode", 0) or 0)
    where: dict[str, Any] = {"region": region, "zone": zone, "instance_type": instance_type}
    details = {"request_id": str(meta.get("RequestId", ""))} if meta.get("RequestId") else {}

    if code in CAPACITY_CODES:
        hint = sorted(set(_ZONES_IN_MESSAGE.findall(message)) - {zone})
        if hint:
            details["zones_with_capacity"] = ",".join(hint)
        return CapacityUnavailable(
            message,
            code=code,
            scope=Scope.ZONE if zone else Scope.REGION,
            details=details,
            **where,
        )
    if code in QUOTA_CODES:
        return QuotaExceeded(
            message, code=code, scope=Scope.ACCOUNT_REGION, details=details, **where
        )
    if code in THROTTLE_CODES:
        err = Throttled(message, code=code, retryable=True, details=details, **where)
        # EC2 sends no Retry-After; when an endpoint does, honour it (providers.retry).
        headers = meta.get("HTTPHeaders", {}) or {}
        err.retry_after_s = _retry_after(headers.get("retry-after"))
        return err
    if code in AUTH_CODES or (status in (401, 403) and code not in NOT_FOUND_CODES):
        return AuthFailed(message, code=code, scope=Scope.ACCOUNT, details=details, **where)
    if code in ZONE_INVALID_CODES:
        return InvalidRequest(
            message,
            code=code,
            scope=Scope.ZONE if zone else Scope.REGION,
            details=details,
            **where,
        )
    if code in IN_USE_CODES:
        return InUse(message, code=code, details=details, **where)
    if code in NOT_FOUND_CODES or status == 404:
        return NotFound(message, code=code, details=details, **where)
    if code in TRANSIENT_CODES or status >= 500 or status == 0:
        return TransientError(message, code=code, retryable=True, details=details, **where)
    return InvalidRequest(message, code=code, details=details, **where)


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, NotFound)


def is_duplicate_placement_group(err: ProviderError) -> bool:
    return isinstance(err, InvalidRequest) and err.code == DUPLICATE_PLACEMENT_GROUP


def _retry_after(value: object) -> float:
    try:
        return max(0.0, float(str(value)))
    except (TypeError, ValueError):
        return 0.0

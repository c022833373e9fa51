"""OCI error codes -> gpucap's typed provider errors. The only module that knows OCI codes.

The table is clouds.md §A.6 (OCI rows) plus the rest of OCI's documented API error codes.
One rule needs the message as well as the code: a host stockout arrives as
``500 InternalError "Out of host capacity."`` (clouds.md §A.6, §E.3), the same code as a real
server fault, so :func:`_is_out_of_capacity` is the single place that reads a message; every
caller branches on the resulting type.

``NotAuthorizedOrNotFound`` (404) means "missing or not permitted" and OCI will not say which
(clouds.md §A.6). On a call that names one resource by OCID (get, terminate, delete) it is
read as *not found*, which is what those contracts need; on a call against a compartment
(launch, list) the compartment itself is what is missing or forbidden, so it is an auth
failure for the account.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

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


class Target(StrEnum):
    """What an OCI call addresses; decides how an ambiguous 404 reads."""

    RESOURCE = "resource"  # one resource by OCID: get / terminate / delete
    COMPARTMENT = "compartment"  # a compartment: launch / list / create image / reports


@dataclass(frozen=True)
class Where:
    """Context the SDK error does not carry, for the typed error's scope."""

    region: str | None = None
    zone: str | None = None  # availability domain
    instance_type: str | None = None
    target: Target = Target.COMPARTMENT


# Host stockout: clouds.md §A.6 ("Out of host capacity."); some launch paths and failed work
# requests say "Out of capacity for shape ..." (oracle/karpenter-provider-oci PR #36).
_OUT_OF_CAPACITY = re.compile(r"out of (host )?capacity", re.IGNORECASE)
_SERVER_FAULT_CODES = frozenset({"InternalError", "InternalServerError"})

# code -> (error type, scope, retryable); status-only fallbacks are in translate().
_BY_CODE: dict[str, tuple[type[ProviderError], Scope, bool]] = {
    # clouds.md §A.6: service limit or compartment quota -> block the region for the tenancy.
    "LimitExceeded": (QuotaExceeded, Scope.ACCOUNT_REGION, False),
    "QuotaExceeded": (QuotaExceeded, Scope.ACCOUNT_REGION, False),
    # clouds.md §A.6: throttle -> back off, never block.
    "TooManyRequests": (Throttled, Scope.ACCOUNT_REGION, True),
    # Authentication and authorization: the whole account.
    "NotAuthenticated": (AuthFailed, Scope.ACCOUNT, False),
    "NotAuthorized": (AuthFailed, Scope.ACCOUNT, False),
    "NotAllowed": (AuthFailed, Scope.ACCOUNT, False),
    "SignUpRequired": (AuthFailed, Scope.ACCOUNT, False),
    # A referenced resource (image, subnet, reservation) is missing or hidden: the request
    # is wrong, not the account.
    "RelatedResourceNotAuthorizedOrNotFound": (InvalidRequest, Scope.REQUEST, False),
    "InvalidParameter": (InvalidRequest, Scope.REQUEST, False),
    "MissingParameter": (InvalidRequest, Scope.REQUEST, False),
    "CannotParseRequest": (InvalidRequest, Scope.REQUEST, False),
    # Same opc-retry-token, different body: a bug on our side, like AWS
    # IdempotentParameterMismatch (clouds.md §A.3).
    "InvalidatedRetryToken": (InvalidRequest, Scope.REQUEST, False),
    # Busy resource: the SDK's own default strategy retries these (clouds.md §A.5).
    "IncorrectState": (TransientError, Scope.REQUEST, True),
    "LockConflict": (TransientError, Scope.REQUEST, True),
    "ServiceUnavailable": (TransientError, Scope.REQUEST, True),
    "InternalError": (TransientError, Scope.REQUEST, True),
    "InternalServerError": (TransientError, Scope.REQUEST, True),
    # Object Storage.
    "BucketNotFound": (NotFound, Scope.REQUEST, False),
    "ObjectNotFound": (NotFound, Scope.REQUEST, False),
}


def _is_out_of_capacity(status: int, code: str, message: str) -> bool:
    """The one code+message rule: a 500 InternalError whose message is a stockout."""
    return bool(
        (status >= 500 or code in _SERVER_FAULT_CODES) and _OUT_OF_CAPACITY.search(message or "")
    )


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after") if headers is not None else None
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def translate(exc: BaseException, where: Where) -> ProviderError | None:
    """The typed error for an exception the oci SDK raised; ``None`` for anything that is not
    an SDK error (a bug of ours must surface as itself). Unknown service codes map to a safe
    default (HOUSE-STYLE anti-pattern C): 5xx -> transient, 429 -> throttled, other 4xx ->
    invalid request."""
    import oci  # the SDK is imported only inside this package, and only when used

    def make(
        kind: type[ProviderError],
        message: str,
        code: str,
        scope: Scope,
        retryable: bool = False,
        details: dict[str, str] | None = None,
    ) -> ProviderError:
        return kind(
            message,
            code,
            scope,
            region=where.region,
            zone=where.zone,
            instance_type=where.instance_type,
            retryable=retryable,
            details=details or {},
        )

    if isinstance(exc, oci.exceptions.ServiceError):
        status, code, message = int(exc.status or 0), str(exc.code or ""), str(exc.message or "")
        details = {"opc_request_id": str(exc.request_id or ""), "http_status": str(status)}
        if _is_out_of_capacity(status, code, message):
            scope = Scope.ZONE if where.zone else Scope.REGION
            return make(CapacityUnavailable, message, code, scope, False, details)
        if code == "NotAuthorizedOrNotFound" or (status == 404 and code not in _BY_CODE):
            if where.target == Target.RESOURCE:
                return make(NotFound, message, code, Scope.REQUEST, False, details)
            return make(AuthFailed, message, code, Scope.ACCOUNT, False, details)
        kind, scope, retryable = _BY_CODE.get(code, _by_status(status))
        err = make(kind, message, code, scope, retryable, details)
        if isinstance(err, Throttled):
            after = _retry_after(getattr(exc, "headers", None))
            if after is not None:
                err.retry_after_s = after
        return err
    if isinstance(exc, oci.exceptions.ConnectTimeout | oci.exceptions.RequestException):
        # Connection refused/reset/dropped or timed out: the request may or may not have been
        # acted on, which is why creates are find-or-create.
        return make(
            TransientError,
            f"request failed before a response: {type(exc).__name__}",
            "RequestException",
            Scope.REQUEST,
            True,
        )
    if isinstance(
        exc,
        oci.exceptions.InvalidConfig
        | oci.exceptions.ConfigFileNotFound
        | oci.exceptions.ProfileNotFound
        | oci.exceptions.InvalidPrivateKey
        | oci.exceptions.InvalidKeyFilePath,
    ):
        # Never echo the exception text: InvalidConfig can quote config values.
        return make(
            AuthFailed,
            f"OCI credentials unusable: {type(exc).__name__}",
            type(exc).__name__,
            Scope.ACCOUNT,
        )
    if isinstance(exc, ProviderError):
        return exc
    return None


def is_retry_token_conflict(err: ProviderError) -> bool:
    """The opc-retry-token already launched a *different* request (409)."""
    return isinstance(err, InvalidRequest) and err.code == "InvalidatedRetryToken"


def _by_status(status: int) -> tuple[type[ProviderError], Scope, bool]:
    if status == 429:
        return Throttled, Scope.ACCOUNT_REGION, True
    if status in (401, 403):
        return AuthFailed, Scope.ACCOUNT, False
    if status >= 500 or status == 409:
        return TransientError, Scope.REQUEST, True
    return InvalidRequest, Scope.REQUEST, False

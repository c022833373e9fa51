"""The only place that knows GCP error codes: Compute Engine operation errors, HTTP errors
from google-api-core, and google-auth / transport failures -> typed provider errors.

The code table is clouds.md §A.6 (and SkyPilot's GCP failover handler, §D.1):

GCP code / reason (where)                                    -> typed error (scope)
- ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS] (operation)    -> CapacityUnavailable (zone)
- insufficientCapacity, RESOURCE_NOT_READY,
  RESOURCE_OPERATION_RATE_EXCEEDED (operation; SkyPilot
  blocks the zone for each)                                  -> CapacityUnavailable (zone)
- UNSUPPORTED_OPERATION (operation)                          -> InvalidRequest (zone)
- QUOTA_EXCEEDED / quotaExceeded, regional metric (op, 403)  -> QuotaExceeded (account_region)
- ... naming GPUS_ALL_REGIONS                                -> QuotaExceeded (account)
- rateLimitExceeded, userRateLimitExceeded,
  RESOURCE_EXHAUSTED (403, 429)                              -> Throttled (retry_after)
- 401 authError; 403 forbidden, insufficientPermissions,
  accessNotConfigured; impersonation refused                 -> AuthFailed (account)
- 404 notFound                                               -> NotFound
- 400 resourceInUseByAnotherResource (e.g. a placement
  policy that instances still use)                           -> InUse
- "machine type ... does not exist in zone" (400)            -> InvalidRequest (zone)
- other 4xx                                                  -> InvalidRequest (request)
- 5xx, connection reset, timeout                             -> TransientError (retryable)

An unknown *operation* error code blocks the zone (SkyPilot's default, §D.1: "anything
unknown -> block the zone"), as a plain :class:`ProviderError`: it is neither retried nor
taken for a stockout. ``ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS`` carries the zones that do
have capacity (``errorInfo.metadatas.zonesAvailable``); it is passed on in ``details`` as a
hint for placement (SkyPilot #831 is what happens when the ``_WITH_DETAILS`` variant is
forgotten).

Nothing here formats a request, a header or a token into a message: messages are the API's
own text, which carries none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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

# clouds.md §A.6, GCP rows.
STOCKOUT_CODES = frozenset(
    {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}
)
ZONE_BLOCKING_CODES = frozenset(
    {"insufficientCapacity", "RESOURCE_NOT_READY", "RESOURCE_OPERATION_RATE_EXCEEDED"}
)
UNSUPPORTED_CODES = frozenset({"UNSUPPORTED_OPERATION"})
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded"})
GLOBAL_QUOTA_METRIC = "GPUS_ALL_REGIONS"  # SkyPilot _gcp_handler: block every GCP region
RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RESOURCE_EXHAUSTED"})
AUTH_REASONS = frozenset(
    {
        "authError",
        "forbidden",
        "insufficientPermissions",
        "accessNotConfigured",
        "IAM_PERMISSION_DENIED",
        "SERVICE_DISABLED",
    }
)
ALREADY_EXISTS = "alreadyExists"
# "The resource_policy resource '…' is already being used by '…'" (400; seen deleting an
# attached policy, hashicorp/terraform-provider-google#11260).
IN_USE_REASONS = frozenset({"resourceInUseByAnotherResource"})
TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})
DEFAULT_RETRY_AFTER_S = 1.0

_QUOTA_METRIC = re.compile(r"Quota '([A-Za-z0-9_]+)' exceeded")
_QUOTA_REGION = re.compile(r"in region ([a-z0-9-]+)")


class Where:
    """Where the failed call was aimed, so the typed error can name its scope."""

    __slots__ = ("instance_type", "region", "zone")

    def __init__(
        self, region: str | None = None, zone: str | None = None, instance_type: str | None = None
    ) -> None:
        self.region = region
        self.zone = zone
        self.instance_type = instance_type


# --- operation errors (asynchronous, inside a finished Operation) ------------------------


def operation_failed(op: Any) -> bool:
    """A finished operation failed when it has ``error.errors`` (clouds.md §E.2 pitfall 3:
    ``op.result()`` would not raise without ``httpErrorStatusCode``; we never rely on it)."""
    error = getattr(op, "error", None)
    return bool(error is not None and list(getattr(error, "errors", None) or []))


def raise_unless_succeeded(done: Any | None, op_name: str, what: str, where: Where) -> None:
    """After waiting for an operation: one still running past the wait is retryable (the
    next pass looks again), one that failed raises its typed error."""
    if done is None:
        raise TransientError(
            f"{what} operation {op_name} still running",
            code="operationTimeout",
            retryable=True,
            **_at(where),
        )
    if operation_failed(done):
        raise from_operation(done, where)


def from_operation(op: Any, where: Where) -> ProviderError:
    """The typed error for a finished, failed ``compute_v1.Operation``."""
    errors = list(op.error.errors)
    codes = [str(e.code) for e in errors]
    message = "; ".join(f"{e.code}: {e.message}" for e in errors) or "operation failed"
    details = {"operation": str(getattr(op, "name", ""))}
    status = int(getattr(op, "http_error_status_code", 0) or 0)
    if status:
        details["http_status"] = str(status)
    zones = _zones_available(errors)
    if zones:
        details["zones_available"] = ",".join(zones)
    code = codes[0] if codes else ""
    for c, e in zip(codes, errors, strict=True):
        if c in STOCKOUT_CODES or c in ZONE_BLOCKING_CODES:
            return _capacity(c, message, where, details)
        if c in QUOTA_CODES:
            return _quota(c, str(e.message), where, details, _op_quota_metric(e))
        if c in UNSUPPORTED_CODES:
            return InvalidRequest(message, code=c, scope=Scope.ZONE, **_at(where), details=details)
    return ProviderError(message, code=code, scope=Scope.ZONE, **_at(where), details=details)


def _zones_available(errors: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for e in errors:
        for d in getattr(e, "error_details", None) or []:
            info = getattr(d, "error_info", None)
            meta = dict(getattr(info, "metadatas", None) or {}) if info is not None else {}
            out.extend(z for z in meta.get("zonesAvailable", "").split(",") if z)
    return out


def _op_quota_metric(e: Any) -> str:
    for d in getattr(e, "error_details", None) or []:
        info = getattr(d, "quota_info", None)
        name = str(getattr(info, "metric_name", "") or "") if info is not None else ""
        if name:
            return name.rsplit("/", 1)[-1].upper()
    return ""


# --- synchronous errors (HTTP, auth, transport) -----------------------------------------


def from_exception(exc: BaseException, where: Where) -> ProviderError:
    """The typed error for anything a compute/storage/IAM call raised."""
    if isinstance(exc, ProviderError):
        return exc
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    if isinstance(exc, gexc.GoogleAPICallError):
        return from_http(
            int(exc.code or 0), str(exc.message), _reasons(exc), where, response=exc.response
        )
    if isinstance(exc, auth_exc.TransportError):
        return TransientError(f"auth transport failure: {_first_line(exc)}", retryable=True)
    if isinstance(exc, auth_exc.GoogleAuthError):
        # RefreshError (impersonation refused, expired source credentials),
        # DefaultCredentialsError (no ADC), anonymous credentials asked to refresh.
        return AuthFailed(
            f"credentials rejected: {_first_line(exc)}",
            code=type(exc).__name__,
            scope=Scope.ACCOUNT,
            region=where.region,
        )
    import requests

    if isinstance(exc, requests.RequestException):
        return TransientError(
            f"connection failure: {type(exc).__name__}", code=type(exc).__name__, retryable=True
        )
    if isinstance(exc, TimeoutError | ConnectionError):
        return TransientError(f"connection failure: {type(exc).__name__}", retryable=True)
    raise exc


def from_http(
    status: int,
    message: str,
    reasons: list[str],
    where: Where,
    *,
    response: Any = None,
) -> ProviderError:
    """Map an HTTP error (status, the ``errors[].reason`` list, message) to a typed error.
    Used for Compute through google-api-core and for the Storage JSON API directly."""
    reason = reasons[0] if reasons else ""
    if any(r in QUOTA_CODES for r in reasons):
        return _quota("quotaExceeded", message, where, {}, "")
    if status == 429 or any(r in RATE_LIMIT_REASONS for r in reasons):
        err = Throttled(message, code=reason or str(status), retryable=True, **_at(where))
        err.retry_after_s = _retry_after(response)
        return err
    if status == 401 or (
        status == 403 and (not reasons or any(r in AUTH_REASONS for r in reasons))
    ):
        return AuthFailed(
            message, code=reason or str(status), scope=Scope.ACCOUNT, region=where.region
        )
    if status == 404:
        return NotFound(message, code=reason or "notFound", **_at(where))
    if status in TRANSIENT_STATUSES or status >= 500:
        return TransientError(message, code=reason or str(status), retryable=True, **_at(where))
    if any(r in IN_USE_REASONS for r in reasons):
        return InUse(message, code=reason, **_at(where))
    if "does not exist in zone" in message:  # machine type not offered there: never will be
        return InvalidRequest(message, code=reason or str(status), scope=Scope.ZONE, **_at(where))
    return InvalidRequest(message, code=reason or str(status), **_at(where))


def is_already_exists(exc: BaseException) -> bool:
    """A 409 ``alreadyExists``: the name (our idempotency anchor) is taken in the zone."""
    from google.api_core import exceptions as gexc

    return isinstance(exc, gexc.Conflict) and (
        ALREADY_EXISTS in _reasons(exc) or "already exists" in str(exc.message)
    )


def is_not_found(exc: BaseException) -> bool:
    from google.api_core import exceptions as gexc

    return isinstance(exc, gexc.NotFound)


# --- helpers -----------------------------------------------------------------------------


def _capacity(code: str, message: str, where: Where, details: dict[str, str]) -> ProviderError:
    scope = Scope.ZONE if where.zone else Scope.REGION
    return CapacityUnavailable(message, code=code, scope=scope, **_at(where), details=details)


def _quota(
    code: str, message: str, where: Where, details: dict[str, str], metric: str
) -> ProviderError:
    m = _QUOTA_METRIC.search(message)
    metric = metric or (m[1] if m else "")
    details = {**details, "metric": metric} if metric else dict(details)
    if metric == GLOBAL_QUOTA_METRIC or GLOBAL_QUOTA_METRIC in message:
        # A project-wide GPU quota: no region of this account can take more GPUs.
        return QuotaExceeded(
            message,
            code=code,
            scope=Scope.ACCOUNT,
            region=where.region,
            instance_type=where.instance_type,
            details=details,
        )
    r = _QUOTA_REGION.search(message)
    return QuotaExceeded(
        message,
        code=code,
        scope=Scope.ACCOUNT_REGION,
        region=r[1] if r else where.region,
        instance_type=where.instance_type,
        details=details,
    )


def _at(where: Where) -> dict[str, Any]:
    return {"region": where.region, "zone": where.zone, "instance_type": where.instance_type}


def _reasons(exc: Any) -> list[str]:
    out: list[str] = []
    for e in getattr(exc, "errors", None) or []:
        if isinstance(e, dict) and e.get("reason"):
            out.append(str(e["reason"]))
    reason = getattr(exc, "reason", None)
    if reason:
        out.append(str(reason))
    return out


def _retry_after(response: Any) -> float:
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER_S
    except ValueError:
        return DEFAULT_RETRY_AFTER_S


def _first_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if exc.args else type(exc).__name__
    return text.splitlines()[0][:300]

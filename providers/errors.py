"""Typed provider errors. Each carries the *scope* it applies to, so placement can block
exactly the right offerings (a zone stockout must not block the region; expired credentials
block the whole account). Callers branch on these types, never on message strings; each
cloud's ``errors.py`` is the only place that knows vendor codes (HOUSE-STYLE principle 6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Scope(StrEnum):
    ZONE = "zone"  # (account, instance type, zone)
    REGION = "region"  # (account, instance type, region)
    ACCOUNT_REGION = "account_region"  # every instance type of the account in the region
    ACCOUNT = "account"  # the whole account
    REQUEST = "request"  # only this request (it was malformed)


@dataclass
class ProviderError(Exception):
    """Base of every error a provider raises. ``code`` is the vendor's own code, for logs."""

    message: str
    code: str = ""
    scope: Scope = Scope.REQUEST
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    retryable: bool = False
    details: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def kind(self) -> str:
        return type(self).__name__

    def __str__(self) -> str:
        where = "/".join(x for x in (self.region, self.zone, self.instance_type) if x)
        return f"{self.kind}({self.code or '-'}{' @ ' + where if where else ''}): {self.message}"


class CapacityUnavailable(ProviderError):
    """No hosts for this shape at the scope (zone or region). Fail fast; try elsewhere."""


class QuotaExceeded(ProviderError):
    """An account limit in a region. Blocks the account in that region until raised."""


class Throttled(ProviderError):
    """API rate limit. Back off (``retry_after_s``); never a reason to block an offering."""

    retry_after_s: float = 1.0


class AuthFailed(ProviderError):
    """Credentials missing, expired, or not permitted. Blocks the whole account."""


class InvalidRequest(ProviderError):
    """The request is wrong (unsupported shape in a zone, bad image, token reuse)."""


class TransientError(ProviderError):
    """5xx, timeouts, connection resets. Retried with bounded backoff inside the provider."""


class NotFound(ProviderError):
    """The resource does not exist (terminate treats this as success)."""


class InUse(ProviderError):
    """The resource still has members (a placement group with instances in it, some perhaps
    still shutting down). Not retried in place: they take minutes to go; ask again later."""

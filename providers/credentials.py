"""Credentials for customer-owned accounts: references only, and the per-customer ExternalId.

What the control plane stores about an account's credentials is a *reference* (role ARN,
service account, OCI profile or principal; ``schema.policy.Credentials``), never a key.

AWS ExternalId (clouds.md §C, "the confused deputy problem"): gpucap *generates* it, one per
customer, and shows it to the customer, who puts it in their role's trust policy. It is
never taken from customer input (a policy file cannot even carry one: ``Credentials`` forbids
unknown fields), so customer B cannot make gpucap assume customer A's role by registering
A's role ARN. The id is an HMAC of the customer name under a server-side secret, so it is
stable across restarts and machines that share the secret, unguessable without it, and
needs no storage; the store may keep a copy (``accounts.external_id``) for display.

The ExternalId is not a secret (AWS says so); the HMAC key is, and it is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

EXTERNAL_ID_SECRET_ENV = "GPUCAP_EXTERNAL_ID_SECRET"
EXTERNAL_ID_SECRET_FILE = "external-id.key"
_EXTERNAL_ID_DOMAIN = b"gpucap/aws-external-id/v1\x00"
_CUSTOMER = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class ExternalIdGenerator:
    """Derives each customer's ExternalId from a server-side secret (HMAC-SHA256)."""

    secret: bytes = field(repr=False)  # never in repr, logs or tracebacks

    def __post_init__(self) -> None:
        if len(self.secret) < 16:
            raise ValueError("the ExternalId secret must be at least 16 bytes")

    def for_customer(self, customer: str) -> str:
        """``gpucap-<40 hex>``: within STS's 2-1224 chars of ``[\\w+=,.@:/-]``."""
        if not _CUSTOMER.match(customer):
            raise ValueError(f"not a customer name: {customer!r}")
        mac = hmac.new(self.secret, _EXTERNAL_ID_DOMAIN + customer.encode(), hashlib.sha256)
        return f"gpucap-{mac.hexdigest()[:40]}"

    @classmethod
    def from_environment(cls, state_dir: Path, *, create: bool = True) -> ExternalIdGenerator:
        """The secret from ``$GPUCAP_EXTERNAL_ID_SECRET`` (production: from a secret manager),
        else from ``<state_dir>/external-id.key``, created owner-only on first use.

        ``create=False`` is for tools other than the daemon (``gpucap account check``): a
        key they made up would yield ExternalIds no customer's trust policy knows."""
        from_env = os.environ.get(EXTERNAL_ID_SECRET_ENV)
        if from_env:
            return cls(from_env.encode())
        path = state_dir / EXTERNAL_ID_SECRET_FILE
        if not create and not path.exists():
            raise ValueError(
                f"no ExternalId secret: set ${EXTERNAL_ID_SECRET_ENV} to the daemon's secret, "
                f"or run where the daemon's state directory is ({path} does not exist)"
            )
        return cls(load_or_create_key(path))


def load_or_create_key(path: Path) -> bytes:
    """A 32-byte secret kept in ``path`` (owner-only), made on first use."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    try:
        # O_EXCL: two processes racing on first use must agree on one key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key

"""A node's boot token: a random secret the daemon puts into one node's user data, so that
node (and only it) can report its boot phases. Stored as its sha256 only, with an expiry;
spent (expired) once the node reports the end of its boot (``ready`` or ``failed``)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

# A boot takes a cold start (coldstart.md §5: 10-15 minutes typical for 8xH100, up to ~30
# with large weights); the token outlives the daemon's provision timeout with margin.
TOKEN_TTL_S = 2 * 3600.0


def new_token() -> tuple[str, str]:
    """(secret, its sha256 hex): the secret goes to the node, the digest to the store."""
    secret = secrets.token_urlsafe(32)
    return secret, digest(secret)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored: str | None) -> bool:
    return stored is not None and hmac.compare_digest(digest(secret), stored)

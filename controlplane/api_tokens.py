"""API tokens in the store: create (the secret is returned once and kept only as its
sha256), list, revoke, and look up a presented token's role for the gRPC server.

A token reads ``gpct_<id>_<secret>``: the id finds the row, the secret is compared with the
stored hash in constant time. The secret is 32 random bytes, so a plain sha256 suffices
(no password-style stretching: there is nothing to guess).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from controlplane.authz import TOKEN_PREFIX, Role, parse_role, split_token
from controlplane.node_tokens import digest, matches
from controlplane.store.db import Store
from controlplane.store.models import ApiToken

# A revoked token may still pass for this long on a daemon that looked it up just before
# (expiry is checked on every call). One PK lookup per token per window, not per call.
CACHE_S = 5.0
MAX_DESCRIPTION = 255


@dataclass(frozen=True)
class TokenView:
    id: str
    role: str
    description: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def state(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


@dataclass(frozen=True)
class CreatedToken:
    view: TokenView
    token: str  # the whole credential: shown once, never stored


def _view(row: ApiToken) -> TokenView:
    return TokenView(
        row.id, row.role, row.description, row.created_at, row.expires_at, row.revoked_at
    )


def create(
    store: Store,
    role: Role,
    *,
    now: datetime,
    description: str = "",
    expires_at: datetime | None = None,
) -> CreatedToken:
    if len(description) > MAX_DESCRIPTION:
        raise ValueError(f"description: longer than {MAX_DESCRIPTION} characters")
    if "\x00" in description:  # (PostgreSQL cannot store one)
        raise ValueError("description: contains a NUL character")
    if expires_at is not None and expires_at <= now:
        raise ValueError("expires_at: must be in the future")
    token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    row = ApiToken(
        id=token_id,
        secret_sha256=digest(secret),
        role=str(role),
        description=description,
        created_at=now,
        expires_at=expires_at,
        revoked_at=None,
    )
    with store.session() as s:
        s.add(row)
        view = _view(row)
    return CreatedToken(view, f"{TOKEN_PREFIX}{token_id}_{secret}")


def list_tokens(store: Store) -> list[TokenView]:
    with store.session() as s:
        rows = s.scalars(select(ApiToken).order_by(ApiToken.created_at, ApiToken.id)).all()
        return [_view(r) for r in rows]


def revoke(store: Store, token_id: str, *, now: datetime) -> tuple[TokenView, bool]:
    """The token after revoking it, and whether this call revoked it (False: it already
    was). LookupError for an unknown id."""
    with store.session() as s:
        row = s.get(ApiToken, token_id)
        if row is None:
            raise LookupError(f"no token {token_id!r} (see gpucap token list)")
        changed = row.revoked_at is None
        if changed:
            row.revoked_at = now
        return _view(row), changed


@dataclass(frozen=True)
class _Entry:
    secret_sha256: str
    role: Role
    expires_at: datetime | None
    revoked: bool
    fetched: float


class TokenAuthenticator:
    """A presented token's role, or None (unknown, wrong secret, expired, revoked). Rows are
    cached for ``cache_s`` seconds (0: every call reads the store)."""

    def __init__(
        self,
        store: Store,
        *,
        cache_s: float = CACHE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._cache_s = cache_s
        self._monotonic = monotonic
        self._cache: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def role(self, token: str, now: datetime) -> Role | None:
        parts = split_token(token)
        if parts is None:
            return None
        entry = self._entry(parts.id)
        if entry is None or not matches(parts.secret, entry.secret_sha256):
            return None
        if entry.revoked or (entry.expires_at is not None and entry.expires_at <= now):
            return None
        return entry.role

    def _entry(self, token_id: str) -> _Entry | None:
        at = self._monotonic()
        with self._lock:
            cached = self._cache.get(token_id)
        if cached is not None and at - cached.fetched < self._cache_s:
            return cached
        with self._store.session() as s:
            row = s.get(ApiToken, token_id)
            if row is None:
                return None  # (not cached: a token created a moment later works at once)
            try:
                role = parse_role(row.role)
            except ValueError:
                return None  # (a row written by hand with a bad role grants nothing)
            entry = _Entry(row.secret_sha256, role, row.expires_at, row.revoked_at is not None, at)
        with self._lock:
            self._cache[token_id] = entry
        return entry

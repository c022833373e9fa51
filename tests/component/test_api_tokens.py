"""API tokens in the store (controlplane/api_tokens.py) on SQLite and PostgreSQL: what a
presented token maps to, and how long a daemon's cache keeps a revoked one (a clock the
test moves, no waiting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from controlplane import api_tokens
from controlplane.api_tokens import TokenAuthenticator
from controlplane.authz import ADMIN, Role
from controlplane.store.db import Store
from controlplane.store.models import ApiToken

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_token_maps_to_its_role_until_it_expires(store: Store) -> None:
    made = api_tokens.create(store, Role("acme"), now=NOW, expires_at=NOW + timedelta(hours=1))
    auth = TokenAuthenticator(store, cache_s=0)
    assert auth.role(made.token, NOW) == Role("acme")
    assert auth.role(made.token, NOW + timedelta(minutes=59)) == Role("acme")
    assert auth.role(made.token, NOW + timedelta(hours=1)) is None  # (expiry: every call)
    id_, secret = made.token.split("_", 2)[1:]
    for wrong in (f"gpct_{id_}_{secret[:-1]}x", f"gpct_{'0' * 16}_{secret}", secret, ""):
        assert auth.role(wrong, NOW) is None


def test_a_revoked_token_is_refused_once_its_cached_row_is_older_than_the_cache(
    store: Store,
) -> None:
    made = api_tokens.create(store, ADMIN, now=NOW)
    clock = [100.0]
    auth = TokenAuthenticator(store, cache_s=5.0, monotonic=lambda: clock[0])
    assert auth.role(made.token, NOW) == ADMIN
    view, changed = api_tokens.revoke(store, made.view.id, now=NOW)
    assert changed and view.state(NOW) == "revoked"
    clock[0] = 104.9
    assert auth.role(made.token, NOW) == ADMIN  # (the row read at 100 is still used)
    clock[0] = 105.0
    assert auth.role(made.token, NOW) is None
    assert api_tokens.revoke(store, made.view.id, now=NOW)[1] is False  # (already)


def test_only_the_secrets_hash_is_stored(store: Store) -> None:
    made = api_tokens.create(store, ADMIN, now=NOW, description="on-call")
    with store.session() as s:
        rows = s.scalars(select(ApiToken)).all()
    [row] = rows
    secret = made.token.split("_", 2)[2]
    assert secret not in (row.secret_sha256, row.id, row.description, row.role)
    assert len(row.secret_sha256) == 64

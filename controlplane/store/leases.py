"""Leases in SQL: reading a shard's lease with the database's own time, applying a
``lifecycle.lease`` decision as one compare-and-set, releasing, and the fence every acting
transaction passes before it commits.

Time is always the database's (``db_now()``): the decision reads it next to the row, the
compare-and-set stamps the new expiry with it and the fence compares against it, so two
daemons whose clocks disagree still agree on who holds a lease."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Float, and_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.functions import FunctionElement

from controlplane.lifecycle.lease import Decision, LeaseRow
from controlplane.store.models import Lease

# How long a fenced transaction may sit between its fence check and its COMMIT (a healthy
# daemon: microseconds) before PostgreSQL ends it; well inside a lease TTL, so a standby's
# takeover waits at most this much behind a frozen leader.
FENCE_COMMIT_WITHIN_S = 1.0


class Fenced(Exception):
    """An acting transaction whose lease is no longer this daemon's (lapsed, or taken over
    with a newer token): it was rolled back, nothing it wrote is kept."""


class db_now(FunctionElement[float]):  # noqa: N801 (an SQL function, named as one)
    """The database's current time in epoch seconds (a double), on either backend."""

    type = Float()
    inherit_cache = True


@compiles(db_now, "postgresql")
def _pg_now(_element: Any, _compiler: Any, **_kw: Any) -> str:
    # clock_timestamp(), not now(): now() is the transaction's start, and a renewal or a
    # fence check must compare against the moment it runs.
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"


@compiles(db_now, "sqlite")
def _sqlite_now(_element: Any, _compiler: Any, **_kw: Any) -> str:
    return "((julianday('now') - 2440587.5) * 86400.0)"


def observe(conn: Connection, shards: range) -> tuple[float, dict[int, LeaseRow]]:
    """The database's time and the lease rows of ``shards`` (missing shards are absent)."""
    now = conn.execute(select(db_now())).scalar_one()
    rows = conn.execute(
        select(Lease.shard, Lease.holder, Lease.token, Lease.expires_at).where(
            Lease.shard.in_(list(shards))
        )
    )
    return float(now), {r.shard: LeaseRow(r.shard, r.holder, r.token, r.expires_at) for r in rows}


def apply(conn: Connection, shard: int, seen: LeaseRow | None, d: Decision, ttl_s: float) -> bool:
    """Carry out ``d`` (not ``follow``) as one conditional statement; True when it took
    effect. It compares what the decision was made from, on the database's clock: a renewal
    only while the token is ours and unexpired, a takeover only while the token is the one
    seen and expired. Two daemons that both decided to take over run the same UPDATE; the
    first commits ``token + 1``, the second then matches no row."""
    if d.kind == "acquire":
        dialect = conn.dialect.name
        ins = pg_insert if dialect == "postgresql" else sqlite_insert
        stmt = (
            ins(Lease)
            .values(
                shard=shard,
                holder=d.holder,
                token=1,
                expires_at=db_now() + ttl_s,
                acquired_at=db_now(),
                renewed_at=db_now(),
            )
            .on_conflict_do_nothing(index_elements=["shard"])
            .returning(Lease.shard)  # (an INSERT's rowcount is not reliable across drivers)
        )
        return conn.execute(stmt).first() is not None
    assert seen is not None and d.kind in ("renew", "take_over")
    if d.kind == "renew":
        where = and_(
            Lease.shard == shard,
            Lease.token == seen.token,
            Lease.holder == d.holder,
            Lease.expires_at > db_now(),
        )
        values: dict[str, Any] = {"expires_at": db_now() + ttl_s, "renewed_at": db_now()}
    else:
        where = and_(Lease.shard == shard, Lease.token == seen.token, Lease.expires_at <= db_now())
        values = {
            "holder": d.holder,
            "token": d.token,
            "expires_at": db_now() + ttl_s,
            "acquired_at": db_now(),
            "renewed_at": db_now(),
        }
    return conn.execute(update(Lease).where(where).values(**values)).rowcount == 1


def release(conn: Connection, shard: int, holder: str, token: int) -> bool:
    """Let the lease lapse now (a clean stop), so a standby takes over at its next look
    instead of waiting out the TTL. Only our own term: a newer one is left alone."""
    stmt = (
        update(Lease)
        .where(Lease.shard == shard, Lease.holder == holder, Lease.token == token)
        .values(expires_at=db_now())
    )
    return conn.execute(stmt).rowcount == 1


def check_fence(s: Session, holder: str, claims: Mapping[int, int]) -> None:
    """Raise :class:`Fenced` unless every claimed shard's lease is still ``holder``'s, with
    the claimed token, unexpired on the database's clock. Runs inside the transaction it
    guards, as its last statement before COMMIT: on PostgreSQL the rows are locked FOR
    SHARE, so a takeover (an UPDATE of the row) waits until this transaction has committed
    and cannot slip in between the check and the commit; on SQLite the transaction that
    wrote already holds the database's single write lock, which a takeover needs too."""
    if not claims:
        raise Fenced("not the leader of any shard")
    if s.get_bind().dialect.name == "postgresql":
        # The row locks below are held until COMMIT: a daemon frozen before sending it (a
        # SIGSTOP, a VM pause; its connection stays open) would block every takeover for as
        # long as it is frozen. The server ends such a session, and its locks, after this.
        ms = int(FENCE_COMMIT_WITHIN_S * 1000)
        s.execute(text(f"SET LOCAL idle_in_transaction_session_timeout = {ms}"))
    rows = s.execute(
        select(Lease.shard, Lease.holder, Lease.token, Lease.expires_at > db_now())
        .where(Lease.shard.in_(list(claims)))
        .with_for_update(read=True)
    ).all()
    found = {r[0]: (r[1], r[2], bool(r[3])) for r in rows}
    for shard, token in claims.items():
        holder_now, token_now, live = found.get(shard, ("", 0, False))
        if holder_now != holder or token_now != token:
            raise Fenced(
                f"shard {shard}: lease token {token} superseded by {token_now} "
                f"(held by {holder_now or 'nobody'}); this transaction was rolled back"
            )
        if not live:
            raise Fenced(f"shard {shard}: lease token {token} expired; rolled back")

"""A lock for one transaction, held by every process on the database, for the few writes
that must never run concurrently (not the loop's rows, which use version columns)."""

from __future__ import annotations

import zlib

from sqlalchemy import false, text, update
from sqlalchemy.orm import Session

from controlplane.store.models import Customer


def exclusive(s: Session, name: str) -> None:
    """Hold lock ``name`` until ``s``'s transaction ends; blocks while another holds it.

    PostgreSQL: a transaction-scoped advisory lock (only holders of the same name wait).
    SQLite: its one write lock, taken by an UPDATE that matches no row; it must then be the
    transaction's first statement, so the reads after it see every earlier holder's commit.
    """
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": zlib.crc32(name.encode())})
    else:
        no_row = update(Customer).where(false()).values(name=Customer.name)
        s.execute(no_row.execution_options(synchronize_session=False))

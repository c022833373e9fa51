"""Endpoint revisions for WatchEndpoints: the revision last given to each model's ready
endpoints and their digest, so a watcher resuming after a restart, or on another daemon of
the same database, never sees the revision go backwards.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("endpoints_revision", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("endpoints_digest", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_column("endpoints_digest")
        batch.drop_column("endpoints_revision")

"""Leadership leases: one row per shard with its holder, expiry and fencing token, so that of
several daemons on one database exactly one acts for each shard.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-11 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("acquired_at", sa.Float(), nullable=False),
        sa.Column("renewed_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("shard", name=op.f("pk_leases")),
    )


def downgrade() -> None:
    op.drop_table("leases")

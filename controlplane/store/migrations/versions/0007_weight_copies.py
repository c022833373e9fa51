"""Weight pre-staging: ``weight_copies``, one row per model and site (an account's staging
bucket in a region) with its state, progress and the cloud's resume state.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 14:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlplane.store.types import UTCDateTime

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "weight_copies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("customer", sa.String(length=63), nullable=False),
        sa.Column("model", sa.String(length=63), nullable=False),
        sa.Column("account", sa.String(length=63), nullable=False),
        sa.Column("cloud", sa.String(length=8), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("source_uri", sa.Text(), nullable=False),
        sa.Column("dest_uri", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=255), nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=False),
        sa.Column("bytes_done", sa.BigInteger(), nullable=False),
        sa.Column("transfer", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("retry_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("ready_at", UTCDateTime(), nullable=True),
        sa.Column("verified_at", UTCDateTime(), nullable=True),
        sa.Column("last_used_at", UTCDateTime(), nullable=True),
        sa.Column("evicted_at", UTCDateTime(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_weight_copies")),
        sa.UniqueConstraint(
            "customer",
            "model",
            "account",
            "region",
            name=op.f("uq_weight_copies_customer_model_account_region"),
        ),
    )
    op.create_index(op.f("ix_weight_copies_customer"), "weight_copies", ["customer"])
    op.create_index(op.f("ix_weight_copies_state"), "weight_copies", ["state"])


def downgrade() -> None:
    op.drop_index(op.f("ix_weight_copies_state"), table_name="weight_copies")
    op.drop_index(op.f("ix_weight_copies_customer"), table_name="weight_copies")
    op.drop_table("weight_copies")

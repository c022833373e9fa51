"""Baked machine images: ``machine_images``, one row per build of a key (customer, account,
region, runtime image), written before its builder's create.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlplane.store.types import UTCDateTime

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "machine_images",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("customer", sa.String(length=63), nullable=False),
        sa.Column("account", sa.String(length=63), nullable=False),
        sa.Column("cloud", sa.String(length=8), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("runtime_image", sa.String(length=255), nullable=False),
        sa.Column("image_version", sa.Integer(), nullable=False),
        sa.Column("instance_type", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("builder_instance_id", sa.String(length=255), nullable=True),
        sa.Column("builder_terminated_at", UTCDateTime(), nullable=True),
        sa.Column("image_name", sa.String(length=63), nullable=False),
        sa.Column("image_id", sa.String(length=255), nullable=True),
        sa.Column("source_digest", sa.String(length=255), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("token_sha256", sa.String(length=64), nullable=True),
        sa.Column("token_expires_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("state_at", UTCDateTime(), nullable=False),
        sa.Column("baked_at", UTCDateTime(), nullable=True),
        sa.Column("ready_at", UTCDateTime(), nullable=True),
        sa.Column("deleted_at", UTCDateTime(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machine_images")),
    )
    op.create_index("ix_machine_images_key", "machine_images", ["customer", "account", "region"])
    op.create_index(op.f("ix_machine_images_state"), "machine_images", ["state"])
    op.create_index(op.f("ix_machine_images_token_sha256"), "machine_images", ["token_sha256"])


def downgrade() -> None:
    op.drop_index(op.f("ix_machine_images_token_sha256"), table_name="machine_images")
    op.drop_index(op.f("ix_machine_images_state"), table_name="machine_images")
    op.drop_index("ix_machine_images_key", table_name="machine_images")
    op.drop_table("machine_images")

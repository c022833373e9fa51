"""What a node's first create attempt launched it with (its baked image, the staged copy
of its weights), kept with the intent so every retry sends the same.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 15:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("launch_image", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("launch_weights_uri", sa.String(length=1024), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("launch_weights_uri")
        batch.drop_column("launch_image")

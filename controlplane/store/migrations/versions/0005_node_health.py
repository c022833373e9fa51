"""Health for the whole life of a node: each node's consecutive failed probes of its
engine, surge-first leaving for replicas (when a replica started retiring, and why), and
when a gang's placement object was released.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 09:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlplane.store.types import UTCDateTime

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(
            sa.Column("probe_failures", sa.Integer(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("replicas") as batch:
        batch.add_column(sa.Column("retiring_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("retire_reason", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("placement_released_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("replicas") as batch:
        batch.drop_column("placement_released_at")
        batch.drop_column("retire_reason")
        batch.drop_column("retiring_at")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("probe_failures")

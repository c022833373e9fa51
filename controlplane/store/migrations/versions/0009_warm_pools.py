"""Warm pools: a replica may be in its model's warm pool (``replicas.warm``) or resumed
from it (``replicas.resumed_at``); nodes stamp the warm states (stopping, stopped,
resuming) as every other state.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 10:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlplane.store.types import UTCDateTime

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NODE_STAMPS = ("stopping_at", "stopped_at", "resuming_at")


def upgrade() -> None:
    with op.batch_alter_table("replicas") as t:
        t.add_column(sa.Column("warm", sa.Boolean(), nullable=False, server_default=sa.false()))
        t.add_column(sa.Column("resumed_at", UTCDateTime(), nullable=True))
    with op.batch_alter_table("nodes") as t:
        for name in _NODE_STAMPS:
            t.add_column(sa.Column(name, UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as t:
        for name in reversed(_NODE_STAMPS):
            t.drop_column(name)
    with op.batch_alter_table("replicas") as t:
        t.drop_column("resumed_at")
        t.drop_column("warm")

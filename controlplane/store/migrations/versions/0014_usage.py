"""Usage metering: each node's price and capacity tier as of its launch, and the stops of
warm nodes that are over (a node row holds only its latest stop).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 21:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlplane.store.types import UTCDateTime

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("price_usd_per_hour", sa.Float(), nullable=True))
        batch.add_column(sa.Column("tier", sa.String(length=16), nullable=True))
    op.create_table(
        "node_stops",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("stopped_at", UTCDateTime(), nullable=False),
        sa.Column("resumed_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_node_stops_node_id_nodes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_stops")),
    )
    op.create_index(op.f("ix_node_stops_node_id"), "node_stops", ["node_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_node_stops_node_id"), table_name="node_stops")
    op.drop_table("node_stops")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("tier")
        batch.drop_column("price_usd_per_hour")

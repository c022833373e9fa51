"""Nodes that boot and serve: each node's private address (where routers and Prometheus
reach it), its single-use boot token (hashed, with its expiry) and the ``node_phases`` it
reported (one row per node and phase).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 07:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from controlplane.store.types import UTCDateTime

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("private_ip", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("token_sha256", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("token_expires_at", UTCDateTime(), nullable=True))
        batch.create_index(op.f("ix_nodes_token_sha256"), ["token_sha256"])
    op.create_table(
        "node_phases",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("node_id", sa.String(length=64), nullable=False),
        sa.Column("phase", sa.String(length=32), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("reported_at", UTCDateTime(), nullable=False),
        sa.Column("detail", sa.String(length=500), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_id"], ["nodes.id"], name=op.f("fk_node_phases_node_id_nodes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_node_phases")),
        sa.UniqueConstraint("node_id", "phase", name=op.f("uq_node_phases_node_id_phase")),
    )
    op.create_index(op.f("ix_node_phases_node_id"), "node_phases", ["node_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_node_phases_node_id"), table_name="node_phases")
    op.drop_table("node_phases")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_index(op.f("ix_nodes_token_sha256"))
        batch.drop_column("token_expires_at")
        batch.drop_column("token_sha256")
        batch.drop_column("private_ip")

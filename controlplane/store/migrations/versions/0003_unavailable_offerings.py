"""Availability as data: the ``unavailable_offerings`` cache and the zones a pool offers.

Offerings blocked by a create error or reported unavailable by the cloud are kept down to the
zone (``controlplane.availability``); ``pools.zones`` lists the zones that offer the pool's
instance type, as the cloud's ``list_offerings`` last answered (null: not yet known).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 20:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pools") as batch:
        batch.add_column(sa.Column("zones", sa.JSON(), nullable=True))
    op.create_table(
        "unavailable_offerings",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("customer", sa.String(length=63), nullable=False),
        sa.Column("account", sa.String(length=63), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=True),
        sa.Column("zone", sa.String(length=64), nullable=True),
        sa.Column("instance_type", sa.String(length=64), nullable=True),
        sa.Column("pool_id", sa.String(length=255), nullable=True),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(length=1024), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer"],
            ["customers.name"],
            name=op.f("fk_unavailable_offerings_customer_customers"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_unavailable_offerings")),
    )
    op.create_index(
        op.f("ix_unavailable_offerings_customer"), "unavailable_offerings", ["customer"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_unavailable_offerings_customer"), table_name="unavailable_offerings")
    op.drop_table("unavailable_offerings")
    with op.batch_alter_table("pools") as batch:
        batch.drop_column("zones")

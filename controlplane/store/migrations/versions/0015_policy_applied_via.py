"""How each policy version was applied: ``file`` (the daemon read a configured policy file,
at start or on SIGHUP) or ``api`` (ApplyPolicy: ``gpucap policy apply``). A reload re-applies
a file only when it changed since the daemon last applied it, so a version applied through
the API is not undone by the next restart (docs/policy.md, "Ownership").

Versions written before by the daemon's reload (``applied_by = 'daemon'``) count as ``file``.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 21:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.add_column(
            sa.Column("applied_via", sa.String(length=8), nullable=False, server_default="api")
        )
    op.execute("UPDATE policies SET applied_via = 'file' WHERE applied_by = 'daemon'")


def downgrade() -> None:
    with op.batch_alter_table("policies") as batch:
        batch.drop_column("applied_via")

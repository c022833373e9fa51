"""Stamp ``failed_at`` on nodes the provision timeout drained.

From this revision the reconciler stamps ``failed_at`` on a node it drains for not being
ready within the provision timeout, and the observed cold-start horizon knows a failed
launch by ``failed_at`` alone (before, by any error on a node never ready, which also took
in nodes a scale-down released while their create was being retried after throttling).
Rows drained by the timeout before this revision get their ``draining_at``. Data only: the
schema does not change.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 00:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# controlplane.lifecycle.node.PROVISION_TIMEOUT as of this revision (a migration keeps its own
# copy: it must do the same thing whatever the code says later).
PROVISION_TIMEOUT = "not ready within provision timeout"

TZ = sa.DateTime(timezone=True)
nodes = sa.table(
    "nodes",
    sa.column("state", sa.String),
    sa.column("error", sa.Text),
    sa.column("ready_at", TZ),
    sa.column("draining_at", TZ),
    sa.column("failed_at", TZ),
)


def upgrade() -> None:
    op.execute(
        nodes.update()
        .where(
            nodes.c.error == PROVISION_TIMEOUT,
            nodes.c.ready_at.is_(None),
            nodes.c.draining_at.is_not(None),
            nodes.c.failed_at.is_(None),
        )
        .values(failed_at=nodes.c.draining_at)
    )


def downgrade() -> None:
    # Revision 0001's code stamps failed_at only on nodes left failed.
    op.execute(
        nodes.update()
        .where(nodes.c.error == PROVISION_TIMEOUT, nodes.c.state != "failed")
        .values(failed_at=None)
    )

"""Writes of the lifecycle's pure transitions onto store rows, for every writer alike (the
loop's jobs and the API's on-call drain)."""

from __future__ import annotations

from datetime import datetime

from controlplane.lifecycle.drain import nodes_to_drain
from controlplane.store.models import Replica
from schema.types import NodeState


def drain_replica(replica: Replica, now: datetime) -> list[str]:
    """Drain ``replica`` and those of its nodes still serving or on their way (the one
    drain transition, ``lifecycle.drain``); returns the ids of the nodes that moved."""
    moving = set(nodes_to_drain((n.id, n.state) for n in replica.nodes))
    for n in replica.nodes:
        if n.id in moving:
            n.state, n.draining_at = NodeState.DRAINING.value, now
    replica.state = NodeState.DRAINING.value
    return sorted(moving)

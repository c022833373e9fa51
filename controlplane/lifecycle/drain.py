"""The one drain transition. A replica leaves by draining each of its nodes that is not
already leaving or gone; the reconciler then terminates each drained node's instance, and the
replica is terminated once all of its nodes are (``gang.replica_state``). Scale-downs,
replicas moved out of a pool the policy no longer allows, failed gangs and on-call drains all
go through :func:`nodes_to_drain`."""

from __future__ import annotations

from collections.abc import Iterable

from schema.types import NodeState

_LEAVING = (NodeState.DRAINING, NodeState.TERMINATING)


def nodes_to_drain(nodes: Iterable[tuple[str, NodeState | str]]) -> tuple[str, ...]:
    """The ids, in order, of the replica's nodes that move to ``draining`` now, given the
    (id, state) of each of its nodes; the replica itself becomes ``draining``."""
    return tuple(
        sorted(
            node_id
            for node_id, st in nodes
            if not NodeState(st).is_terminal and NodeState(st) not in _LEAVING
        )
    )

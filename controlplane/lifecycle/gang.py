"""A replica's state from its nodes': a gang is as far along as its slowest node, and one
failed node fails the whole gang."""

from __future__ import annotations

from collections.abc import Sequence

from schema.types import NodeState

_PROGRESS = (NodeState.PENDING, NodeState.PROVISIONING, NodeState.RUNNING, NodeState.READY)
_LEAVING = (NodeState.DRAINING, NodeState.TERMINATING)


def replica_state(nodes: Sequence[NodeState | str], current: NodeState | str) -> NodeState:
    """The replica's state, given its nodes' states and its own recorded one.

    ============================  ==============================================
    nodes (and the replica)       replica
    ============================  ==============================================
    no nodes                      unchanged
    any leaving, or replica is    terminated once every node is terminal,
    leaving                       else draining
    all terminated                terminated
    any failed, or some (not all) failed: the gang lost a member (the caller
    terminated                    drains the siblings)
    otherwise                     the least advanced of pending < provisioning <
                                  running < ready
    ============================  ==============================================
    """
    states = [NodeState(n) for n in nodes]
    cur = NodeState(current)
    if not states:
        return cur
    if cur in _LEAVING or any(s in _LEAVING for s in states):
        if all(s.is_terminal for s in states):
            return NodeState.TERMINATED
        return NodeState.DRAINING
    if all(s == NodeState.TERMINATED for s in states):
        return NodeState.TERMINATED
    if any(s.is_terminal for s in states):
        return NodeState.FAILED
    return min(states, key=lambda s: _PROGRESS.index(s) if s in _PROGRESS else 0)

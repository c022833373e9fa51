"""A replica's state from its nodes': a gang is as far along as its slowest node, and one
failed node fails the whole gang. Its leader (rank 0, the node that serves and that the
workers join) is the node with the least id, a rule every part of gpucap reads here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from schema.types import NodeState


def leader_of(node_ids: Iterable[str]) -> str:
    """The id of a replica's leader, given the ids of all its nodes."""
    return min(node_ids)


def rank_of(node_ids: Iterable[str], node_id: str) -> int:
    """A node's rank in its replica (0: the leader)."""
    return sorted(node_ids).index(node_id)


# (A resumed replica starts over from resuming; a warm one parks once ready.)
_PROGRESS = (
    NodeState.PENDING,
    NodeState.RESUMING,
    NodeState.PROVISIONING,
    NodeState.RUNNING,
    NodeState.READY,
)
_PARKED = (NodeState.STOPPING, NodeState.STOPPED)
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
    ready or parking, some        stopped once all are, else stopping (a warm
    stopping or stopped           replica parks)
    otherwise                     the least advanced of pending < resuming <
                                  provisioning < running < ready
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
    if any(s in _PARKED for s in states) and all(s in (*_PARKED, NodeState.READY) for s in states):
        stopped = all(s == NodeState.STOPPED for s in states)
        return NodeState.STOPPED if stopped else NodeState.STOPPING
    return min(states, key=lambda s: _PROGRESS.index(s) if s in _PROGRESS else 0)

"""A replica's state from its nodes', and the one drain transition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.lifecycle.drain import nodes_to_drain
from controlplane.lifecycle.gang import replica_state
from schema.types import NodeState as N


@pytest.mark.parametrize(
    ("nodes", "current", "want"),
    [
        ([], N.PENDING, N.PENDING),
        ([N.READY, N.READY], N.RUNNING, N.READY),
        ([N.READY, N.RUNNING], N.PENDING, N.RUNNING),  # as far as the slowest node
        ([N.READY, N.PENDING], N.PENDING, N.PENDING),
        ([N.READY, N.FAILED], N.RUNNING, N.FAILED),  # one failed node fails the gang
        ([N.READY, N.DRAINING], N.READY, N.DRAINING),
        ([N.TERMINATED, N.FAILED], N.DRAINING, N.TERMINATED),
        ([N.TERMINATED, N.TERMINATING], N.DRAINING, N.DRAINING),
        ([N.READY], N.DRAINING, N.DRAINING),  # the replica was drained first
        ([N.TERMINATED, N.TERMINATED], N.READY, N.TERMINATED),
        ([N.TERMINATED, N.PENDING], N.PENDING, N.FAILED),  # a member lost outside a drain
    ],
)
def test_replica_state(nodes: list[N], current: N, want: N) -> None:
    assert replica_state(nodes, current) == want


node_states = st.lists(st.sampled_from(list(N)), min_size=1, max_size=4)


@given(node_states, st.sampled_from(list(N)))
def test_a_gang_is_never_ready_unless_every_node_is(nodes: list[N], current: N) -> None:
    state = replica_state(nodes, current)
    if state == N.READY:
        assert all(n == N.READY for n in nodes)
    if state == N.TERMINATED:
        assert all(n.is_terminal for n in nodes)


@given(st.lists(st.sampled_from(list(N)), max_size=5))
def test_drain_moves_exactly_the_nodes_still_serving_or_on_their_way(states: list[N]) -> None:
    nodes = [(f"n{i}", s) for i, s in enumerate(states)]
    moved = nodes_to_drain(reversed(nodes))
    # pending, resuming, provisioning, running, ready, and a warm pool's stopping, stopped
    want = [i for i, s in nodes if s.is_live or s in (N.STOPPING, N.STOPPED)]
    assert list(moved) == sorted(want)
    # Leaving or gone nodes are left as they are; nodes drained once are not drained again.
    drained = [(i, N.DRAINING if i in moved else s) for i, s in nodes]
    assert nodes_to_drain(drained) == ()

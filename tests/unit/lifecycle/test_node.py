"""The node lifecycle step, table-driven, with explicit time, and its properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.lifecycle.node import (
    DISAPPEARED,
    PROVISION_TIMEOUT,
    Create,
    Move,
    NodeFacts,
    NotAttempted,
    Observed,
    Terminate,
    Timing,
    Wait,
    backoff_s,
    step_leaving,
    step_live,
    step_pending,
)
from providers.base import InstanceStatus as S
from schema.types import NodeState as N

T = Timing(backoff_base_s=2.0, backoff_max_s=120.0, provision_timeout_s=600.0)


def facts(state: N, attempts: int = 0, last: float | None = None, since: float = 0.0, blocked=None):
    return NodeFacts(state, attempts, last, since, blocked)


@pytest.mark.parametrize(
    ("node", "now", "want"),
    [
        (facts(N.PENDING), 0.0, Create()),
        (facts(N.PENDING, attempts=1, last=100.0), 101.0, Wait()),  # backoff 2 s
        (facts(N.PENDING, attempts=1, last=100.0), 102.0, Create()),
        (facts(N.PENDING, attempts=3, last=100.0), 107.9, Wait()),  # backoff 8 s
        (facts(N.PENDING, attempts=3, last=100.0), 108.0, Create()),
        (facts(N.PENDING, blocked=50.0), 10.0, NotAttempted("pool blocked")),
        (facts(N.PENDING, blocked=50.0), 50.0, Create()),  # the block has expired
    ],
)
def test_pending(node: NodeFacts, now: float, want: object) -> None:
    assert step_pending(node, now, T) == want


def test_backoff_is_capped() -> None:
    assert [backoff_s(a, T) for a in (0, 1, 2, 3)] == [2.0, 2.0, 4.0, 8.0]
    assert backoff_s(40, T) == 120.0


@pytest.mark.parametrize(
    ("state", "seen", "now", "want"),
    [
        (N.PROVISIONING, Observed("i", None), 1.0, Move(N.FAILED, error=DISAPPEARED)),
        (N.READY, Observed("i", S.TERMINATED), 1.0, Move(N.FAILED, error=DISAPPEARED)),
        (N.RUNNING, Observed("i", S.STOPPING), 1.0, Move(N.FAILED, error=DISAPPEARED)),
        (N.PROVISIONING, Observed("i", S.PENDING, "z1"), 1.0, Wait()),
        (N.PROVISIONING, Observed("i", S.RUNNING, "z1"), 1.0, Move(N.RUNNING, zone="z1")),
        (N.PROVISIONING, Observed("i", S.RUNNING, "z1", True), 1.0, Move(N.READY)),
        (N.RUNNING, Observed("i", S.RUNNING, "z1"), 1.0, Wait()),
        (N.RUNNING, Observed("i", S.RUNNING, "z1", True), 1.0, Move(N.READY)),
        (N.READY, Observed("i", S.RUNNING, "z1", True), 1e9, Wait()),
        (N.READY, Observed("i", S.RUNNING, "z1", False), 1e9, Wait()),  # (health: issue 24)
        (
            N.RUNNING,
            Observed("i", S.RUNNING, "z1"),
            601.0,
            Move(N.DRAINING, error=PROVISION_TIMEOUT, failed=True),
        ),
        (
            N.PROVISIONING,
            Observed("i", S.PENDING),
            601.0,
            Move(N.DRAINING, error=PROVISION_TIMEOUT, failed=True),
        ),
    ],
)
def test_live(state: N, seen: Observed, now: float, want: object) -> None:
    assert step_live(facts(state), seen, now, T) == want


@pytest.mark.parametrize(
    ("state", "found", "want"),
    [
        (N.DRAINING, [], Move(N.TERMINATED)),  # the create never reached the cloud
        (N.DRAINING, [Observed("i", S.RUNNING)], Move(N.TERMINATING, terminate=("i",))),
        (N.DRAINING, [Observed("i", None)], Move(N.TERMINATING)),
        (N.DRAINING, [Observed("i", S.STOPPING)], Move(N.TERMINATING, terminate=("i",))),
        (N.TERMINATING, [Observed("i", S.STOPPING)], Wait()),
        (N.TERMINATING, [Observed("i", S.RUNNING)], Terminate(("i",))),
        (N.TERMINATING, [Observed("i", S.TERMINATED)], Move(N.TERMINATED)),
        (N.TERMINATING, [], Move(N.TERMINATED)),
        (
            N.DRAINING,
            [Observed("a", S.RUNNING), Observed("b", S.TERMINATED)],
            Move(N.TERMINATING, terminate=("a",)),
        ),
    ],
)
def test_leaving(state: N, found: list[Observed], want: object) -> None:
    assert step_leaving(facts(state), found) == want


statuses = st.sampled_from([None, *S])
observed = st.builds(Observed, st.just("i"), statuses, st.just("z"), st.booleans())


@given(
    st.sampled_from([N.PROVISIONING, N.RUNNING, N.READY]),
    observed,
    st.floats(0, 1e6),
    st.floats(0, 1e6),
)
def test_a_live_node_never_moves_backwards_nor_skips_failure(state, seen, since, now) -> None:
    order = [N.PROVISIONING, N.RUNNING, N.READY]
    action = step_live(facts(state, since=since), seen, now, T)
    if isinstance(action, Move) and action.to in order:
        assert order.index(action.to) > order.index(state)
    if seen.status in (None, S.TERMINATED, S.STOPPING):
        assert action == Move(N.FAILED, error=DISAPPEARED)
    if state == N.READY:  # a ready node only ever fails
        assert isinstance(action, Wait) or action.to == N.FAILED


@given(st.sampled_from([N.DRAINING, N.TERMINATING]), st.lists(observed, max_size=4))
def test_a_leaving_node_terminates_every_live_instance_before_it_is_done(state, found) -> None:
    action = step_leaving(facts(state), found)
    alive = {o.instance_id for o in found if o.status not in (None, S.TERMINATED)}
    if isinstance(action, Move) and action.to == N.TERMINATED:
        assert not alive  # never forgotten while an instance may still bill
    if state == N.DRAINING:
        assert isinstance(action, Move) and set(action.terminate) == alive

"""A warm pool's node steps (``lifecycle.node.step_warm`` and the park in ``step_live``),
table-driven, and a warm or resumed replica's state from its nodes'."""

from __future__ import annotations

import pytest

from controlplane.lifecycle.gang import replica_state
from controlplane.lifecycle.health import Probe
from controlplane.lifecycle.node import (
    DISAPPEARED,
    Move,
    NodeFacts,
    Observed,
    Start,
    Stop,
    Timing,
    Wait,
    step_live,
    step_warm,
)
from providers.base import InstanceStatus as S
from schema.types import NodeState as N

T = Timing(backoff_base_s=2.0, backoff_max_s=120.0, provision_timeout_s=600.0)


def facts(state: N, **kw: bool) -> NodeFacts:
    return NodeFacts(state, 1, None, 0.0, **kw)


@pytest.mark.parametrize(
    ("state", "status", "want"),
    [
        (N.STOPPING, S.RUNNING, Stop(("i-1",))),  # the stop was lost: ask again
        (N.STOPPING, S.STOPPING, Wait()),
        (N.STOPPING, S.STOPPED, Move(N.STOPPED)),
        (N.STOPPED, S.STOPPED, Wait()),
        (N.STOPPED, None, Move(N.FAILED, error=DISAPPEARED)),
        (N.RESUMING, S.STOPPED, Start(("i-1",))),
        (N.RESUMING, S.STOPPING, Wait()),  # (a stopping instance cannot be started)
        (N.RESUMING, S.PENDING, Move(N.PROVISIONING)),  # the start went through before
        (N.RESUMING, S.TERMINATED, Move(N.FAILED, error=DISAPPEARED)),
    ],
)
def test_warm_steps(state: N, status: S | None, want: object) -> None:
    assert step_warm(facts(state), Observed("i-1", status)) == want


def test_a_ready_node_of_a_parked_replica_is_stopped_once_the_move_is_recorded() -> None:
    seen = Observed("i-1", S.RUNNING, probe=Probe(True))
    assert step_live(facts(N.READY, park=True), seen, 10.0, T) == Move(N.STOPPING, stop=("i-1",))
    assert step_live(facts(N.READY), seen, 10.0, T) == Wait()  # (ready mode, or serving)


@pytest.mark.parametrize(
    ("nodes", "current", "want"),
    [
        ([N.READY, N.STOPPING], N.READY, N.STOPPING),  # it parks
        ([N.STOPPED, N.STOPPING], N.READY, N.STOPPING),
        ([N.STOPPED, N.STOPPED], N.STOPPING, N.STOPPED),
        ([N.RESUMING, N.PROVISIONING], N.RESUMING, N.RESUMING),
        ([N.STOPPED, N.FAILED], N.STOPPED, N.FAILED),  # a member gone: the gang fails
        ([N.DRAINING, N.STOPPED], N.DRAINING, N.DRAINING),  # let go: it drains
    ],
)
def test_replica_state_of_warm_and_resumed_gangs(nodes: list[N], current: N, want: N) -> None:
    assert replica_state(nodes, current) == want


def test_a_resuming_node_is_capacity_the_model_is_getting_a_stopped_one_is_not() -> None:
    assert N.RESUMING.is_live and not N.STOPPED.is_live and not N.STOPPING.is_live

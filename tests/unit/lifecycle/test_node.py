"""The node lifecycle step, table-driven, with explicit time, and its properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controlplane.lifecycle.health import Probe
from controlplane.lifecycle.node import (
    DISAPPEARED,
    PROVISION_TIMEOUT,
    CountFailures,
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
from schema.policy import Health
from schema.types import NodeState as N

T = Timing(backoff_base_s=2.0, backoff_max_s=120.0, provision_timeout_s=600.0)


UP, DOWN = Probe(True), Probe(False)


def facts(
    state: N,
    attempts: int = 0,
    last: float | None = None,
    since: float = 0.0,
    blocked=None,
    **kw,
):
    return NodeFacts(state, attempts, last, since, blocked, **kw)


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
        (N.PROVISIONING, Observed("i", S.RUNNING, "z1", UP), 1.0, Move(N.READY)),
        (N.RUNNING, Observed("i", S.RUNNING, "z1"), 1.0, Wait()),
        (N.RUNNING, Observed("i", S.RUNNING, "z1", DOWN), 1.0, Wait()),
        (N.RUNNING, Observed("i", S.RUNNING, "z1", UP), 1.0, Move(N.READY)),
        (N.READY, Observed("i", S.RUNNING, "z1", UP), 1e9, Wait()),
        (N.READY, Observed("i", S.RUNNING, "z1"), 1e9, Wait()),  # not probed: nothing learnt
        (N.READY, Observed("i", S.RUNNING, "z1", DOWN), 1e9, CountFailures(1)),
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
probes = st.one_of(
    st.none(), st.builds(Probe, st.booleans(), st.one_of(st.none(), st.integers(0, 9)))
)
observed = st.builds(Observed, st.just("i"), statuses, st.just("z"), probes)


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
    if state == N.READY:  # a ready node only ever fails (or counts a failed probe)
        assert isinstance(action, Wait | CountFailures) or action.failed or action.to == N.FAILED


@given(st.sampled_from([N.DRAINING, N.TERMINATING]), st.lists(observed, max_size=4))
def test_a_leaving_node_terminates_every_live_instance_before_it_is_done(state, found) -> None:
    action = step_leaving(facts(state), found)
    alive = {o.instance_id for o in found if o.status not in (None, S.TERMINATED)}
    if isinstance(action, Move) and action.to == N.TERMINATED:
        assert not alive  # never forgotten while an instance may still bill
    if state == N.DRAINING:
        assert isinstance(action, Move) and set(action.terminate) == alive


def test_a_ready_engine_is_failed_after_the_thresholds_probes_in_a_row() -> None:
    rules = Health(failure_threshold=3)
    seen = Observed("i", S.RUNNING, "z1", DOWN)
    assert step_live(facts(N.READY, probe_failures=1), seen, 0.0, T, rules) == CountFailures(2)
    failed = step_live(facts(N.READY, probe_failures=2), seen, 0.0, T, rules)
    assert isinstance(failed, Move) and failed.to == N.DRAINING and failed.failed
    assert failed.error == "engine failed 3 health checks in a row"
    assert failed.probe_failures == 3
    # One answer in between starts the count again.
    up = Observed("i", S.RUNNING, "z1", UP)
    assert step_live(facts(N.READY, probe_failures=2), up, 0.0, T, rules) == CountFailures(0)
    # A stopped instance is a failed probe too.
    stopped = Observed("i", S.STOPPED, "z1")
    assert step_live(facts(N.READY), stopped, 0.0, T, rules) == CountFailures(1)


def test_a_reported_ready_node_is_ready_without_a_probe() -> None:
    seen = Observed("i", S.RUNNING, "z1")
    assert step_live(facts(N.RUNNING, reported_ready=True), seen, 1.0, T) == Move(N.READY)
    # ... but a report does not make a node whose instance is not running ready.
    pending = Observed("i", S.PENDING, "z1")
    assert step_live(facts(N.PROVISIONING, reported_ready=True), pending, 1.0, T) == Wait()


@pytest.mark.parametrize(
    ("probe", "waited", "kw", "done"),
    [
        (Probe(True, 3), 5.0, {"served": True}, False),  # it holds requests: wait
        (Probe(True, 0), 5.0, {"served": True}, True),  # none left
        (Probe(True, None), 5.0, {"served": True}, False),  # unknown: wait
        (None, 5.0, {"served": True}, False),  # not probed this pass: wait
        (Probe(False), 5.0, {"served": True}, True),  # nothing answers: nothing in flight
        (Probe(True, 3), 30.0, {"served": True}, True),  # the drain timeout
        (Probe(True, 3), 5.0, {}, True),  # it never served
        (Probe(True, 3), 5.0, {"served": True, "failed": True}, True),  # drained as failed
    ],
)
def test_a_drain_waits_for_in_flight_requests_up_to_its_timeout(probe, waited, kw, done) -> None:
    rules = Health(drain_timeout_s=30.0)
    node = facts(N.DRAINING, since=100.0, **kw)
    action = step_leaving(node, [Observed("i", S.RUNNING, probe=probe)], 100.0 + waited, rules)
    assert action == (Move(N.TERMINATING, terminate=("i",)) if done else Wait())


def test_a_drain_does_not_wait_on_an_instance_already_stopping() -> None:
    node = facts(N.DRAINING, since=100.0, served=True)
    found = [Observed("i", S.STOPPING)]
    assert step_leaving(node, found, 101.0) == Move(N.TERMINATING, terminate=("i",))

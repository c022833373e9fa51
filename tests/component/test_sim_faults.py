"""The simulated cloud's chaos faults (``providers/sim/faults.py``) on a shared state file, as
bench/chaos.py uses them: a slow answer leaves the create visible to every other process
while the caller waits (the window a kill lands in), and ``skip`` refuses a gang's second
create only."""

from __future__ import annotations

from pathlib import Path

import pytest

from providers.errors import CapacityUnavailable
from providers.retry import NO_RETRY
from providers.sim import SimProvider, SimTimings
from providers.sim.cloud import open_shared
from schema.types import Cloud
from tests.component.test_sim_state_file import request

TIMINGS = SimTimings(boot_s=0.0, serve_s=0.0, terminate_s=0.0, start_s=0.0)


def test_a_slow_answer_comes_after_the_create_committed_for_everyone(tmp_path: Path) -> None:
    path = tmp_path / "sim-state.db"
    other = open_shared(path, timings=TIMINGS)  # another process's view of the file
    seen_while_waiting: list[list[str]] = []
    waited: list[float] = []

    def sleep(seconds: float) -> None:  # what the caller's thread does meanwhile
        waited.append(seconds)
        seen_while_waiting.append([i.intent_id for i in other.instances.values()])

    world = open_shared(path, timings=TIMINGS, sleep=sleep)
    other.inject(Cloud.AWS, "acct", "latency", 1, delay_s=3.0)
    made = SimProvider(Cloud.AWS, "acct", world, retry=NO_RETRY).create_node(request("n-1"))
    assert made.created
    assert waited == [3.0]
    assert seen_while_waiting == [["n-1"]]  # committed (and the file unlocked) before
    # The fault is spent: the next create answers at once.
    SimProvider(Cloud.AWS, "acct", world, retry=NO_RETRY).create_node(request("n-2"))
    assert waited == [3.0]


def test_skip_lets_the_first_create_through_and_refuses_the_second(tmp_path: Path) -> None:
    world = open_shared(tmp_path / "sim-state.db", timings=TIMINGS)
    world.inject(Cloud.AWS, "acct", "capacity", 1, skip=1)
    p = SimProvider(Cloud.AWS, "acct", world, retry=NO_RETRY)
    assert p.create_node(request("leader")).created
    with pytest.raises(CapacityUnavailable):
        p.create_node(request("worker"))
    assert p.create_node(request("worker")).created  # (one refusal: then the stock is there)


def test_unknown_faults_and_bad_counts_are_refused(tmp_path: Path) -> None:
    world = open_shared(tmp_path / "sim-state.db", timings=TIMINGS)
    with pytest.raises(ValueError, match="unknown fault"):
        world.inject(Cloud.AWS, "acct", "meteor")
    with pytest.raises(ValueError, match="count"):
        world.inject(Cloud.AWS, "acct", "latency", 0, delay_s=1.0)

"""``gpucap simulate --full-loop``: the daemon's own control loop replayed on virtual time
against the simulated clouds (``run``), with a request-level data plane (``serving``), the
replay's inputs (``scenario``; ``clouds`` for a clouds file) and its results (``outcome``)."""

from __future__ import annotations

from controlplane.loop import Tuning
from controlplane.simulator.fullloop.outcome import FullLoopOutcome, outcome
from controlplane.simulator.fullloop.run import FullLoop
from controlplane.simulator.fullloop.scenario import (
    CloudSetup,
    Scenario,
    build_scenario,
    fleet_policy,
    policy_text,
)
from controlplane.simulator.setup import auto_warmup_s
from controlplane.simulator.traces import Trace
from schema.fleet import Fleet
from schema.policy_file import parse_policy


def fleet_scenario(
    fleet: Fleet, trace: Trace, warmup_s: float | None = None, clouds: CloudSetup | None = None
) -> Scenario:
    """A fleet file's scenario: the policy it stands for (``scenario.fleet_policy``)."""
    text = policy_text(fleet_policy(fleet, sorted(trace.models)))
    warm = auto_warmup_s(fleet, trace) if warmup_s is None else warmup_s
    return build_scenario(parse_policy(text, "<fleet>").policy, text, fleet, trace, warm, clouds)


def replay(
    scenario: Scenario, autoscaler: str = "ours", tuning: Tuning | None = None
) -> FullLoopOutcome:
    """One full-loop replay of ``scenario`` under ``autoscaler``."""
    loop = FullLoop(scenario, autoscaler, tuning or Tuning())
    return outcome(loop.run())


__all__ = ["CloudSetup", "FullLoop", "FullLoopOutcome", "Scenario", "fleet_scenario", "replay"]

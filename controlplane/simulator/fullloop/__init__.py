"""``gpucap simulate --full-loop``: the daemon's own control loop replayed on virtual time
against the simulated clouds (``run``), with a request-level data plane (``serving``), the
replay's inputs (``scenario``; ``clouds`` for a clouds file) and its results (``outcome``)."""

from __future__ import annotations

from controlplane.loop import Tuning
from controlplane.simulator.fullloop.clouds import clouds_accounts, clouds_setup
from controlplane.simulator.fullloop.outcome import FullLoopOutcome, outcome
from controlplane.simulator.fullloop.run import FullLoop
from controlplane.simulator.fullloop.scenario import (
    CloudSetup,
    Scenario,
    build_scenario,
    fleet_model,
    fleet_policy,
    policy_text,
)
from controlplane.simulator.setup import auto_warmup_s
from controlplane.simulator.traces import Trace
from schema.clouds_file import Clouds
from schema.fleet import Fleet
from schema.policy_file import LoadedPolicy, parse_policy


def fleet_scenario(
    fleet: Fleet, trace: Trace, warmup_s: float | None = None, clouds: Clouds | None = None
) -> Scenario:
    """A fleet file's scenario: the policy it stands for (``scenario.fleet_policy``), on the
    clouds file's accounts and clouds where one is given."""
    doc = fleet_policy(fleet, sorted(trace.models))
    if clouds is not None:
        doc["accounts"], doc["overflow"] = clouds_accounts(clouds)
    text = policy_text(doc)
    policy = parse_policy(text, "<fleet>").policy
    setup = clouds_setup(clouds, policy, own_accounts=True) if clouds is not None else None
    warm = auto_warmup_s(fleet, trace) if warmup_s is None else warmup_s
    return build_scenario(policy, text, fleet, trace, warm, setup)


def policy_scenario(
    loaded: LoadedPolicy,
    trace: Trace,
    fleet: Fleet | None = None,
    warmup_s: float | None = None,
    clouds: Clouds | None = None,
) -> Scenario:
    """A customer's policy file as the simulation's fleet: its models and pools, each model
    served as ``scenario.fleet_model`` says (the fleet's model of that name, if any)."""
    policy = loaded.policy
    served = Fleet(
        name=policy.customer,
        scrape_interval_s=fleet.scrape_interval_s if fleet is not None else 1.0,
        coldstart=fleet.coldstart if fleet is not None else Fleet.model_fields["coldstart"].default,
        models=[fleet_model(m, fleet) for m in policy.models],
    )
    setup = clouds_setup(clouds, policy, own_accounts=False) if clouds is not None else None
    warm = auto_warmup_s(served, trace) if warmup_s is None else warmup_s
    return build_scenario(policy, loaded.raw, served, trace, warm, setup)


def replay(
    scenario: Scenario,
    autoscaler: str = "ours",
    tuning: Tuning | None = None,
    knob: float | None = None,
) -> FullLoopOutcome:
    """One full-loop replay of ``scenario`` under ``autoscaler``; ``knob``: a fraction of one
    replica's capacity given to its knob, as the engine's sweep sets it (None: the policy's
    own target utilization)."""
    loop = FullLoop(scenario, autoscaler, tuning or Tuning(), knob=knob)
    done = outcome(loop.run())
    done.run.knob = knob
    return done


__all__ = [
    "CloudSetup",
    "FullLoop",
    "FullLoopOutcome",
    "Scenario",
    "fleet_scenario",
    "policy_scenario",
    "replay",
]

"""One model's autoscaling step around the decider: on-call's overrides first (a pinned
count wins, a paused model holds what runs), else the decider. Pure: the decide job builds
the input from its snapshot and applies the result."""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.types import Autoscaler, AutoscalerInput, Decision, State


@dataclass(frozen=True)
class Overrides:
    pinned: int | None = None  # on-call's replica count; bypasses the decider
    paused: bool = False  # the decider is frozen: hold the live count


@dataclass(frozen=True)
class Step:
    decision: Decision
    state: State  # the decider's state after the step (unchanged under an override)


def scale(autoscaler: Autoscaler, inp: AutoscalerInput, state: State, o: Overrides) -> Step:
    if o.pinned is not None:
        return Step(Decision(o.pinned, "pinned", "replicas pinned by on-call"), state)
    if o.paused:
        return Step(Decision(inp.replicas.live, "paused", "autoscaler paused by on-call"), state)
    decision, new_state = autoscaler.decide(inp, state)
    return Step(decision, dict(new_state))


def changed(decision: Decision, desired: int, reason: str) -> bool:
    """A decision is recorded when it differs from the last one in count or reason."""
    return decision.desired != desired or decision.reason != reason

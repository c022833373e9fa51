"""Replay a recorded autoscaling decision: rebuild the decider's exact input from the
decision row and run the decider again. Deciders are pure, so a replay that disagrees with
the record means the decider changed since (or a bug) — which is what on-call wants to know
when asking "why did it do that, and would it do it again?"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoscaler.codec import CodecError, decode
from autoscaler.types import Autoscaler, AutoscalerInput, Decision

# The record lacks what a replay needs (e.g. it predates recorded inputs).
ReplayError = CodecError


@dataclass(frozen=True)
class Replayed:
    recorded: Decision
    replayed: Decision

    @property
    def matches(self) -> bool:
        return (self.recorded.desired, self.recorded.reason) == (
            self.replayed.desired,
            self.replayed.reason,
        )


def autoscaler_input(inputs: dict[str, Any]) -> tuple[AutoscalerInput, dict[str, Any]]:
    """The input and prior state recorded in ``decisions.inputs`` (``autoscaler.codec``)."""
    return decode(inputs)


def replay(autoscaler: Autoscaler, recorded: Decision, inputs: dict[str, Any]) -> Replayed:
    inp, state = autoscaler_input(inputs)
    decision, _ = autoscaler.decide(inp, state)
    return Replayed(recorded, decision)

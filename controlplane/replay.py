"""Replay a recorded autoscaling decision: rebuild the decider's exact input from the
decision row and run the decider again. Deciders are pure, so a replay that disagrees with
the record means the decider changed since (or a bug) — which is what on-call wants to know
when asking "why did it do that, and would it do it again?"."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from autoscaler.types import (
    Autoscaler,
    AutoscalerInput,
    Decision,
    MetricsSample,
    MetricsWindow,
    NoData,
    ReplicaCounts,
    ScalingSpec,
)


class ReplayError(ValueError):
    """The record lacks what a replay needs (e.g. it predates recorded inputs)."""


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
    """The input and prior state recorded in ``decisions.inputs`` (see loop/jobs.py)."""
    try:
        metrics_raw = inputs["metrics"]
        metrics: MetricsWindow | NoData
        if "no_data" in metrics_raw:
            metrics = NoData(str(metrics_raw["no_data"]))
        else:
            metrics = MetricsWindow(tuple(MetricsSample(**s) for s in metrics_raw["samples"]))
        known = {f.name for f in fields(ScalingSpec)}
        spec = ScalingSpec(**{k: v for k, v in inputs["spec"].items() if k in known})
        inp = AutoscalerInput(
            model=str(inputs.get("model", "")),
            now=float(inputs["now"]),
            metrics=metrics,
            replicas=ReplicaCounts(**inputs["replicas"]),
            spec=spec,
            cold_start_s=float(inputs["cold_start_s"]),
        )
        return inp, dict(inputs.get("state") or {})
    except (KeyError, TypeError, ValueError) as exc:
        raise ReplayError(f"decision record cannot be replayed: {exc}") from exc


def replay(autoscaler: Autoscaler, recorded: Decision, inputs: dict[str, Any]) -> Replayed:
    inp, state = autoscaler_input(inputs)
    decision, _ = autoscaler.decide(inp, state)
    return Replayed(recorded, decision)

"""The one codec for a decision's recorded inputs: what the daemon stores with every
autoscaling decision (``decisions.inputs``) and what a replay rebuilds the input from."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from autoscaler.types import (
    AutoscalerInput,
    MetricsSample,
    MetricsWindow,
    NoData,
    ReplicaCounts,
    ScalingSpec,
    State,
)


class CodecError(ValueError):
    """A record that lacks what the input needs (e.g. it predates recorded inputs)."""


def encode(inp: AutoscalerInput, state: State, decider: dict[str, str]) -> dict[str, Any]:
    """The whole window, counts, spec, cold-start estimate, the decider's state before the
    decision, and which decider (name, code fingerprint) made it."""
    metrics: dict[str, Any]
    if isinstance(inp.metrics, NoData):
        metrics = {"no_data": inp.metrics.reason}
    else:
        metrics = {"samples": [asdict(x) for x in inp.metrics.samples]}
    return {
        "now": inp.now,
        "metrics": metrics,
        "replicas": asdict(inp.replicas),
        "spec": {k: v for k, v in asdict(inp.spec).items() if k != "extra"},
        "cold_start_s": inp.cold_start_s,
        "model": inp.model,
        "state": dict(state),
        "decider": dict(decider),
    }


def decode(inputs: dict[str, Any]) -> tuple[AutoscalerInput, dict[str, Any]]:
    """The input and prior state of :func:`encode`'s record. Spec fields the record does not
    know (older records) take their defaults; fields it has that the spec lost are ignored."""
    try:
        raw = inputs["metrics"]
        metrics: MetricsWindow | NoData
        if "no_data" in raw:
            metrics = NoData(str(raw["no_data"]))
        else:
            metrics = MetricsWindow(tuple(MetricsSample(**s) for s in raw["samples"]))
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
        raise CodecError(f"decision record cannot be replayed: {exc}") from exc

"""Replica-count deciders. Pure functions of their inputs: no clock reads, no I/O, no
imports outside ``schema`` and the standard library, so the daemon and the simulator run the
same code and every decision can be replayed from its recorded inputs.

The entry point is :func:`autoscaler.decide` (gpucap's own policy); peer baselines for the
simulator live in ``autoscaler.baselines`` and implement the same :class:`Autoscaler`
protocol."""

from autoscaler.types import (
    Autoscaler,
    AutoscalerInput,
    Decision,
    MetricsSample,
    MetricsWindow,
    NoData,
    ReplicaCounts,
    ScalingSpec,
    State,
)

__all__ = [
    "Autoscaler",
    "AutoscalerInput",
    "Decision",
    "MetricsSample",
    "MetricsWindow",
    "NoData",
    "ReplicaCounts",
    "ScalingSpec",
    "State",
]

from autoscaler.gpucap import GpucapAutoscaler, decide  # noqa: E402

__all__ += ["GpucapAutoscaler", "decide"]

"""Peer autoscalers re-implemented as simulator baselines, and the registry of every
autoscaler the simulator can run by name.

Each baseline is faithful to ``../shared/reference/autoscalers.md`` (defaults cited by
section in its module) and implements :class:`autoscaler.types.TimedAutoscaler`. The
simulator adds the clairvoyant "oracle" itself."""

from __future__ import annotations

from collections.abc import Callable

from autoscaler.baselines.hpa import HpaAutoscaler, HpaConfig
from autoscaler.baselines.knative import KnativeAutoscaler, KnativeConfig
from autoscaler.baselines.rayserve import RayServeAutoscaler, RayServeConfig
from autoscaler.baselines.skyserve import SkyServeAutoscaler, SkyServeConfig
from autoscaler.gpucap import GpucapAutoscaler
from autoscaler.types import TimedAutoscaler

REGISTRY: dict[str, Callable[[], TimedAutoscaler]] = {
    "ours": GpucapAutoscaler,
    "knative": KnativeAutoscaler,
    "skyserve": SkyServeAutoscaler,
    "rayserve": RayServeAutoscaler,
    "hpa": HpaAutoscaler,
}

__all__ = [
    "REGISTRY",
    "HpaAutoscaler",
    "HpaConfig",
    "KnativeAutoscaler",
    "KnativeConfig",
    "RayServeAutoscaler",
    "RayServeConfig",
    "SkyServeAutoscaler",
    "SkyServeConfig",
]

"""Peer autoscalers re-implemented as simulator baselines, and the registry of every
autoscaler the simulator can run by name.

Each baseline is faithful to ``../shared/reference/autoscalers.md`` (defaults cited by
section in its module) and implements :class:`autoscaler.types.TimedAutoscaler`. The
simulator adds the clairvoyant "oracle" itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from autoscaler.baselines.hpa import HpaAutoscaler, HpaConfig
from autoscaler.baselines.knative import KnativeAutoscaler, KnativeConfig
from autoscaler.baselines.rayserve import RayServeAutoscaler, RayServeConfig
from autoscaler.baselines.skyserve import SkyServeAutoscaler, SkyServeConfig
from autoscaler.gpucap import GpucapAutoscaler
from autoscaler.types import TimedAutoscaler

# Each peer in one tuned variant from its own documentation (issue 23: a peer counts at the
# better of its defaults and this, per scenario), under ``<peer>-tuned``.
TUNED: dict[str, Callable[[], TimedAutoscaler]] = {
    # knative.dev docs, serving/autoscaling/scale-bounds "Scale Down Delay": "to keep
    # containers around ... to avoid a cold start penalty", the example value "15m".
    "knative-tuned": lambda: KnativeAutoscaler(
        name="knative-tuned", config=KnativeConfig(scale_down_delay_s=900.0)
    ),
    # SkyPilot docs serving/autoscaling.rst "Scaling Delay" (defaults 300 s up, 1200 s
    # down): "If you want more aggressive scaling, set those values to a lower number":
    # 60 s up (three decisions) and 300 s down.
    "skyserve-tuned": lambda: SkyServeAutoscaler(
        name="skyserve-tuned",
        config=replace(SkyServeConfig(), upscale_delay_s=60.0, downscale_delay_s=300.0),
    ),
    # docs.ray.io serve/advanced-guides/advanced-autoscaling, upscale_delay_s: "if your
    # service is likely to experience bursts of traffic, you can lower upscale_delay_s so
    # that your application can react quickly": 0 s (act on the first push that shows it).
    "rayserve-tuned": lambda: RayServeAutoscaler(
        name="rayserve-tuned", config=RayServeConfig(upscale_delay_s=0.0)
    ),
    # kubernetes.io docs, horizontal-pod-autoscale "Example: change downscale stabilization
    # window": behavior.scaleDown.stabilizationWindowSeconds 60 (default policies otherwise).
    "hpa-tuned": lambda: HpaAutoscaler(
        name="hpa-tuned", config=HpaConfig(behavior=True, downscale_stabilization_s=60.0)
    ),
}

REGISTRY: dict[str, Callable[[], TimedAutoscaler]] = {
    "ours": GpucapAutoscaler,
    "knative": KnativeAutoscaler,
    "skyserve": SkyServeAutoscaler,
    "rayserve": RayServeAutoscaler,
    "hpa": HpaAutoscaler,
    **TUNED,
}


def variants(name: str) -> tuple[str, ...]:
    """The registry keys a sweep of ``name`` races: a peer's defaults and its tuned
    variant, anything else alone."""
    tuned = f"{name}-tuned"
    return (name, tuned) if tuned in TUNED else (name,)


__all__ = [
    "REGISTRY",
    "TUNED",
    "HpaAutoscaler",
    "HpaConfig",
    "KnativeAutoscaler",
    "KnativeConfig",
    "RayServeAutoscaler",
    "RayServeConfig",
    "SkyServeAutoscaler",
    "SkyServeConfig",
    "variants",
]

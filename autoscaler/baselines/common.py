"""Small helpers the peer baselines share: bounds, the concurrency target, holding scale."""

from __future__ import annotations

from typing import Any

from autoscaler.types import AutoscalerInput, Decision, ScalingSpec, State

# autoscalers.md §1.2: Knative's container-concurrency-target-percentage default (70 %), used
# to derive a concurrency target when a model's policy scales on tokens/s and the peer
# only knows request concurrency.
DEFAULT_UTILIZATION = 0.7


def clamp(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, n))


def concurrency_target(spec: ScalingSpec) -> float:
    """Target in-flight requests per replica for the peers that scale on concurrency.

    ``spec.target_per_replica`` when the policy's metric is concurrency; otherwise the
    ``target_concurrency`` extra, else 70 % of the slot count (the peers cannot scale on
    tokens/s)."""
    if spec.metric == "concurrency":
        return max(spec.target_per_replica, 0.01)  # autoscalers.md §1.2: max(0.01, ...)
    explicit = spec.extra.get("target_concurrency")
    if explicit:
        return float(explicit)
    return max(DEFAULT_UTILIZATION * spec.max_concurrency_per_replica, 0.01)


def hold(
    inp: AutoscalerInput, state: State, reason: str, detail: str
) -> tuple[Decision, dict[str, Any]]:
    """Keep the last desired count (or the live count on a first tick) within bounds."""
    st = dict(state)
    prev = st.get("desired")
    held = int(prev) if prev is not None else inp.replicas.live
    held = clamp(held, inp.spec.min_replicas, inp.spec.max_replicas)
    st["desired"] = held
    return Decision(held, reason, detail), st

"""The cold-start horizon a decision or a pool is given: observed times-to-ready once a
model has some, the phase model before."""

from __future__ import annotations

from coldstart import expected_ready_from
from controlplane.loop.context import LoopContext
from schema.policy import Model as ModelSpec


def modeled_s(ctx: LoopContext, spec: ModelSpec) -> float:
    """The phase model's time-to-ready of a new replica (a model without declared weights
    is costed as a 16 GB one, an 8B-class model in bf16)."""
    weights_gb = spec.weights.size_gb if spec.weights else 16.0
    return ctx.coldstart.expected_ready_s(weights_gb) * ctx.tuning.cold_start_scale


def expected_s(ctx: LoopContext, spec: ModelSpec, observed: list[tuple[str, float]]) -> float:
    """The model's next time-to-ready over all its pools."""
    return expected_ready_from([t for _, t in observed], modeled_s(ctx, spec))


def expected_in_pool_s(observed: list[tuple[str, float]], pool_id: str, model_s: float) -> float:
    """In one pool: that pool's own observations first, else the model's ``model_s``."""
    return expected_ready_from([t for q, t in observed if q == pool_id], model_s)

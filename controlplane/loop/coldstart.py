"""The cold-start horizon a decision or a pool is given: observed times-to-ready once a
model has some there; before, the phases other boots reported (``coldstart.learned``);
before any boot reported, the phase model."""

from __future__ import annotations

from coldstart import Learned, expected_ready_from
from controlplane.loop.context import LoopContext
from schema.policy import Model as ModelSpec

# A model without declared weights is costed as a 16 GB one (an 8B-class model in bf16).
DEFAULT_WEIGHTS_GB = 16.0


def _weights_gb(spec: ModelSpec) -> float:
    return spec.weights.size_gb if spec.weights else DEFAULT_WEIGHTS_GB


def modeled_s(ctx: LoopContext, spec: ModelSpec) -> float:
    """The phase model's time-to-ready of a new replica."""
    return ctx.coldstart.expected_ready_s(_weights_gb(spec)) * ctx.tuning.cold_start_scale


def expected_s(ctx: LoopContext, spec: ModelSpec, observed: list[tuple[str, float]]) -> float:
    """The model's next time-to-ready over all its pools."""
    return expected_ready_from([t for _, t in observed], modeled_s(ctx, spec))


def expected_in_pool_s(
    ctx: LoopContext,
    learned: Learned,
    model_id: int,
    spec: ModelSpec,
    observed: list[tuple[str, float]],
    pool_id: str,
    model_s: float,
) -> float:
    """In one pool: that pool's own observations of this model first; else the phases
    learned there (and this model's engine time) over the phase model's; else the model's
    ``model_s``."""
    scale = ctx.tuning.cold_start_scale
    modeled = {k: v * scale for k, v in ctx.coldstart.breakdown(_weights_gb(spec)).items()}
    learned_s = learned.ready_s(model_id, pool_id, _weights_gb(spec), modeled)
    fallback = model_s if learned_s is None else learned_s
    return expected_ready_from([t for q, t in observed if q == pool_id], fallback)

"""The cold-start horizon a decision or a pool is given: observed times-to-ready once a
model has some; in one pool, before the model launched there, the phases learned from the
boots reported there over the defaults of its cloud and node size (``coldstart.estimate``)."""

from __future__ import annotations

from coldstart import ColdStartModel, Learned, expected_ready_from
from coldstart.estimate import Estimate, PoolOf, estimate
from coldstart.model import Staging
from controlplane.loop.context import LoopContext
from schema.catalog import parse_gpu_shape
from schema.policy import Model as ModelSpec

# A model without declared weights is costed as a 16 GB one (an 8B-class model in bf16).
DEFAULT_WEIGHTS_GB = 16.0


def weights_gb(spec: ModelSpec) -> float:
    return spec.weights.size_gb if spec.weights else DEFAULT_WEIGHTS_GB


def modeled_s(ctx: LoopContext, spec: ModelSpec) -> float:
    """The phase model's time-to-ready of a new replica."""
    return ctx.coldstart.expected_ready_s(weights_gb(spec)) * ctx.tuning.cold_start_scale


def expected_s(ctx: LoopContext, spec: ModelSpec, observed: list[tuple[str, float]]) -> float:
    """The model's next time-to-ready over all its pools."""
    return expected_ready_from([t for _, t in observed], modeled_s(ctx, spec))


def warm_s(ctx: LoopContext, spec: ModelSpec) -> float:
    """The phase model's time-to-ready of a replica resumed from a warm node (coldstart.md
    §5: T_vm from a stopped warm-pool node, no bootstrap, the image on its disk)."""
    staged = Staging(warm_node=True)
    return ctx.coldstart.expected_ready_s(weights_gb(spec), staged) * ctx.tuning.cold_start_scale


def pool_estimate(
    coldstart: ColdStartModel,
    scale: float,
    learned: Learned,
    model_id: int,
    spec: ModelSpec,
    observed: list[tuple[str, float]],
    pool_id: str,
    cloud: str,
    gpu_shape: str,
    *,
    warm: bool = False,
    baked: bool = False,
) -> Estimate:
    """A new replica of the model in one pool, phase by phase (the loop and the API's
    ``explain`` share it); ``warm``: resumed from a warm node waiting there; ``baked``: a
    created node boots a ready baked image of its key (``Snapshot.baked_for``), which has
    the driver and container runtime set up and the engine's image pulled."""
    pool = PoolOf(pool_id, cloud, parse_gpu_shape(gpu_shape).gpus)
    here = [t for q, t in observed if q == pool_id]
    elsewhere = [t for q, t in observed if q != pool_id]
    return estimate(
        model_id,
        pool,
        weights_gb(spec),
        learned,
        here,
        elsewhere,
        staging=Staging(warm_node=warm, baked_image=baked, image_prepulled=baked),
        coldstart=coldstart,
        scale=scale,
    )

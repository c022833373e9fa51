"""What one node of a model's replica boots with, in a pool (its cloud and node shape): the
runtime resolved for the pool's shape option (``runtimes.resolve``), the weights origin,
and for a gang the node's rank (``bootstrap.NodeBoot``). Pure; ``bootstrap.render`` makes
its user data."""

from __future__ import annotations

from bootstrap import LEADER_PLACEHOLDER, NodeBoot
from bootstrap.render import WEIGHTS_DIR
from controlplane.placement import PoolView
from controlplane.placement.plan import option_for
from controlplane.store.models import Pool
from runtimes import Gang, resolve
from schema.catalog import parse_gpu_shape
from schema.policy import Model
from schema.types import Cloud


def node_boot(
    customer: str,
    model: Model,
    pool: PoolView | Pool,
    node_id: str,
    *,
    rank: int = 0,
    leader: str | None = None,
    report_url: str | None = None,
    token: str | None = None,
    staged_uri: str | None = None,
) -> NodeBoot:
    """``staged_uri``: a ready staged copy of the weights in the pool's site
    (``controlplane/loop/staging.py``); None: the node fetches from the origin. Raises
    ValueError where the pool holds no shape of the model or a rank is outside
    its gang."""
    option = option_for(model, pool.gpu_shape)
    if option is None:
        raise ValueError(f"pool {pool.id} ({pool.gpu_shape}) holds no shape of {model.name}")
    shape = parse_gpu_shape(option.shape)
    if not 0 <= rank < shape.nodes:
        raise ValueError(f"rank {rank}: {shape.name} has ranks 0-{shape.nodes - 1}")
    gang = Gang(shape.nodes, rank, LEADER_PLACEHOLDER) if shape.nodes > 1 else None
    weights = model.weights
    model_path = WEIGHTS_DIR if weights else model.name
    return NodeBoot(
        node_id=node_id,
        customer=customer,
        model=model.name,
        cloud=Cloud(pool.cloud),
        gpus=shape.gpus,
        launch=resolve(model.runtime, shape, model_path, gang, image=model.image),
        weights_uri=(staged_uri or weights.uri) if weights else None,
        report_url=report_url,
        token=token,
        leader=leader,
    )

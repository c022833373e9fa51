"""What one node of a model's replica boots with, in a pool (its cloud and node shape): the
runtime resolved for the pool's shape option (``runtimes.resolve``), where its weights come
from (:func:`weight_sources`), and for a gang the node's rank (``bootstrap.NodeBoot``).
Pure; ``bootstrap.render`` makes its user data."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bootstrap import LEADER_PLACEHOLDER, NodeBoot
from bootstrap.render import MAX_WEIGHT_SOURCES, WEIGHTS_DIR
from controlplane.placement import PoolView
from controlplane.placement.plan import option_for
from controlplane.store.models import Pool
from runtimes import Gang, resolve
from schema.catalog import parse_gpu_shape
from schema.policy import Model, Weights
from schema.types import Cloud


@dataclass(frozen=True)
class StagedCopy:
    """A ready staged copy of a model's weights (``weight_copies``): where it is."""

    cloud: str
    account: str
    region: str
    uri: str


def weight_sources(
    weights: Weights, cloud: Cloud, account: str, region: str, copies: Sequence[StagedCopy]
) -> tuple[str, ...]:
    """Where a node of ``weights`` in (``cloud``, ``account``, ``region``) fetches them
    from, in the order it tries them (``bootstrap/node.sh``: the next on a missing object,
    a refused read, a checksum mismatch): the staged copies of its cloud, its own account's
    before another's (its identity reads its own account's buckets; another's only where
    that bucket allows it), each nearest first (:func:`region_distance`); then the origin in
    its cloud; then the other clouds' origins (readable only where they allow it, the last
    resort). A copy in another cloud is left out: the same bytes as that cloud's origin.
    At most ``MAX_WEIGHT_SOURCES``, the origins kept first: they hold the weights whatever
    staging did."""
    own = [c for c in copies if c.cloud == cloud.value]
    own.sort(
        key=lambda c: (c.account != account, region_distance(region, c.region), c.region, c.account)
    )
    origins = [u for u in (weights.origin_for(cloud), weights.uri, *weights.mirrors) if u]
    origins = list(dict.fromkeys(origins))[:MAX_WEIGHT_SOURCES]
    staged = list(dict.fromkeys(c.uri for c in own))[: MAX_WEIGHT_SOURCES - len(origins)]
    return tuple(dict.fromkeys([*staged, *origins]))


# A region's part of the world, from the first word of its name on the three clouds (AWS
# us-east-1, GCP northamerica-northeast1, OCI uk-london-1): no cloud publishes distances.
_AREAS = {
    "us": "america-north",
    "ca": "america-north",
    "mx": "america-north",
    "northamerica": "america-north",
    "sa": "america-south",
    "southamerica": "america-south",
    "eu": "europe",
    "europe": "europe",
    "uk": "europe",
    "me": "middle-east",
    "il": "middle-east",
    "af": "africa",
    "africa": "africa",
    "ap": "asia-pacific",
    "asia": "asia-pacific",
    "australia": "asia-pacific",
}


def region_distance(a: str, b: str) -> int:
    """How far region ``b`` is from ``a``, coarsely: 0 the same region, 1 the same part of
    the world and the same direction in it (us-east-1 and us-east-2), 2 the same part of
    the world, 3 another. A name this does not know is in a part of the world of its own."""
    if a == b:
        return 0
    wa, wb = a.split("-"), b.split("-")
    if _AREAS.get(wa[0], wa[0]) != _AREAS.get(wb[0], wb[0]):
        return 3

    def direction(words: list[str]) -> str:
        return re.sub(r"\d+$", "", words[1]) if len(words) > 1 else ""

    return 1 if direction(wa) == direction(wb) else 2


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
    sources: Sequence[str] | None = None,
) -> NodeBoot:
    """``sources``: where the node fetches its weights, in order, as its first create
    attempt chose them (:func:`weight_sources`, frozen with the intent); None: a ready
    staged copy in the pool's site (``staged_uri``, ``controlplane/loop/staging.py``) if
    any, then the origins. Raises ValueError where the pool holds no shape of the model or
    a rank is outside its gang."""
    option = option_for(model, pool.gpu_shape)
    if option is None:
        raise ValueError(f"pool {pool.id} ({pool.gpu_shape}) holds no shape of {model.name}")
    shape = parse_gpu_shape(option.shape)
    if not 0 <= rank < shape.nodes:
        raise ValueError(f"rank {rank}: {shape.name} has ranks 0-{shape.nodes - 1}")
    gang = Gang(shape.nodes, rank, LEADER_PLACEHOLDER) if shape.nodes > 1 else None
    weights = model.weights
    model_path = WEIGHTS_DIR if weights else model.name
    cloud = Cloud(pool.cloud)
    if weights is None:
        uris: Sequence[str] = ()
    elif sources is not None:
        uris = sources
    else:
        here = (
            [StagedCopy(cloud.value, pool.account, pool.region, staged_uri)] if staged_uri else []
        )
        uris = weight_sources(weights, cloud, pool.account, pool.region, here)
    return NodeBoot(
        node_id=node_id,
        customer=customer,
        model=model.name,
        cloud=cloud,
        gpus=shape.gpus,
        launch=resolve(model.runtime, shape, model_path, gang, image=model.image),
        weights_uri=uris[0] if uris else None,
        weights_fallbacks=tuple(uris[1:]),
        report_url=report_url,
        token=token,
        leader=leader,
    )

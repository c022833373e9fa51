"""A model's warm pool, decided: how many warm replicas it keeps, in which pool, which of
them a launch resumes instead of creating, which are let go, and what they cost while they
wait. Pure: the place job (``controlplane/loop/warm.py``) reads the snapshot, calls these
and records what they return.

Sizing. A warm replica is worth keeping when the model may need it before a create could
deliver it: over one cold-start horizon of a *create* (``coldstart.estimate``), the
autoscaler's own forecast (``autoscaler.forecast``, its recorded load model: the level, the
trend extrapolated at most ``TREND_HORIZON_S``, less the rate's noise, as the decider looks
ahead) says how far the load may grow; the replicas that growth adds over what is desired
now are kept warm, and at least one while the model is not being deleted (the scale-up no
forecast sees: a burst, or the first replica after scale-to-zero), never more than the
policy's ``max_nodes`` in the pool. The warm pool lives in the pool where the model runs
most (placement's choice so far, where the next launch most likely goes); warm replicas
elsewhere are let go.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler import forecast
from autoscaler.gpucap import MAX_GROWTH, TREND_HORIZON_S
from schema.policy import WarmMode, WarmPool

HOURS_PER_MONTH = 730.0  # the clouds' own convention for monthly prices


@dataclass(frozen=True)
class WarmReplica:
    """One replica of the model's warm pool, as the decision needs it."""

    id: str
    pool_id: str
    gpu_shape: str
    nodes: int
    parked: bool  # every node waits (stopped, or ready in ``ready`` mode): resumable now
    since: float  # when it joined the warm pool


@dataclass(frozen=True)
class Decision:
    """Per launch (in order), the warm replica it resumes (None: create); then the pool and
    count of warm replicas to create, and the warm replicas to let go."""

    resume: tuple[str | None, ...]
    fill_pool: str | None
    fill: int
    release: tuple[str, ...]


def growth(autoscaler_state: Mapping[str, Any], horizon_s: float) -> float:
    """The forecast growth of the model's load over ``horizon_s`` (1.0: none, or no
    forecast yet), as the decider computes its look-ahead."""
    model = forecast.view(dict(autoscaler_state))
    base = model.level or 0.0
    if base <= 0:
        return 1.0
    rise = max(0.0, model.trend) * min(max(0.0, horizon_s), TREND_HORIZON_S) - model.spread
    return min(MAX_GROWTH, (base + max(0.0, rise)) / base)


def wanted(policy: WarmPool, desired: int, grow: float, nodes_per_replica: int) -> int:
    """Warm replicas to keep: the forecast's extra replicas over one horizon, at least one,
    within ``max_nodes``."""
    extra = math.ceil(desired * grow - 1e-9) - desired
    return min(max(1, extra), policy.max_nodes // max(1, nodes_per_replica))


def home_pool(live_pools: Sequence[str], allowed: Sequence[str]) -> str | None:
    """Where the warm pool lives: the allowed pool with most of the model's live replicas
    (``live_pools``: one entry per replica, newest last; a tie goes to the newest), else the
    first allowed pool (placement's order), else none."""
    best: str | None = None
    count = 0
    for pool in live_pools:
        if pool not in allowed:
            continue
        n = live_pools.count(pool)
        if n >= count:
            best, count = pool, n
    return best or (allowed[0] if allowed else None)


def decide(
    launches: Sequence[tuple[str, str]],
    warm: Sequence[WarmReplica],
    home: str | None,
    keep: int,
) -> Decision:
    """``launches``: (pool, shape) of each replica placement launches now; ``warm``: the
    model's warm replicas; ``home``: the warm pool's pool (None: no warm pool); ``keep``:
    warm replicas it holds (``wanted``). A launch resumes the oldest parked warm replica of
    its pool and shape; what is left over ``keep`` (or outside ``home``) goes, the ones
    still filling first, then the newest."""
    free = sorted((w for w in warm if w.parked), key=lambda w: (w.since, w.id))
    resume: list[str | None] = []
    for pool, shape in launches:
        pick = next((w for w in free if w.pool_id == pool and w.gpu_shape == shape), None)
        resume.append(pick.id if pick else None)
        if pick is not None:
            free.remove(pick)
    taken = {r for r in resume if r}
    left = [w for w in warm if w.id not in taken]
    release = [w for w in left if w.pool_id != home]
    mine = sorted(
        (w for w in left if w.pool_id == home), key=lambda w: (w.parked, -w.since), reverse=True
    )
    # ``mine`` is parked-oldest first; anything past ``keep`` is let go.
    release += mine[keep:] if home is not None else mine
    fill = max(0, keep - len(mine)) if home is not None else 0
    return Decision(tuple(resume), home if fill else None, fill, tuple(w.id for w in release))


def covers(waiting: int, desired_create: int, desired_resume: int) -> bool:
    """Whether ``waiting`` warm replicas let the autoscaler look ahead only a resume's
    time: the plan over a create's horizon launches ``desired_create - desired_resume``
    replicas early for growth a resume would also meet in time, as long as there is a
    warm replica for each of them."""
    return abs(desired_create - desired_resume) <= waiting


def usd_per_hour(
    policy: WarmPool,
    nodes: int,
    node_usd_per_hour: float,
    block_usd_per_gb_month: float,
    running: bool = False,
) -> float:
    """What ``nodes`` warm nodes cost while they wait: stopped, their boot volumes only
    (coldstart.md §4: a Stopped warm-pool instance pays EBS + EIP; the EIP is not modelled);
    ready, or still ``running`` on their way to a stop (booting to be parked, stopping), the
    running node's price."""
    if policy.mode == WarmMode.READY or running:
        return nodes * node_usd_per_hour
    return nodes * policy.disk_gb * block_usd_per_gb_month / HOURS_PER_MONTH

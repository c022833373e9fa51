"""A new replica's expected time-to-ready in one pool, phase by phase, with where each
figure comes from. First the model's own launches there (they carry what no phase shows: a
stockout that failed launches until one held); else, once any node has reported booting in
that pool or for that model, the sum of the phases, each learned from those boots
(``coldstart.learned``) or the phase model's default for the pool's cloud and node size
(``coldstart.defaults``) under what is staged there; else the model's launches in its
other pools; else the defaults alone. Pure: placement and ``gpucap explain`` read the same
figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coldstart.defaults import phases_for
from coldstart.learned import Learned
from coldstart.model import GIB, ColdStartModel, Staging, expected_ready_from

PHASES = ("capacity_vm", "bootstrap", "image", "fetch", "load_init")
LEARNED, DEFAULT = "learned", "default"
# Where an estimate comes from, in the order tried.
LAUNCHES, PHASE_SUM, ELSEWHERE, DEFAULTS = "launches", "phases", "launches elsewhere", "defaults"
NOTHING_STAGED = Staging()
TEXTBOOK = ColdStartModel()


@dataclass(frozen=True)
class PhaseEstimate:
    name: str  # one of PHASES
    seconds: float
    source: str  # LEARNED (from ``samples`` boots) or DEFAULT (coldstart.md)
    samples: int = 0


@dataclass(frozen=True)
class Estimate:
    seconds: float  # what is expected
    source: str  # LAUNCHES, PHASE_SUM, ELSEWHERE or DEFAULTS
    phases: tuple[PhaseEstimate, ...]
    launches: int = 0  # the model's launches the figure came from (LAUNCHES, ELSEWHERE)


@dataclass(frozen=True)
class PoolOf:
    """What the estimate needs to know of a pool."""

    id: str
    cloud: str
    gpus_per_node: int


def estimate(
    model: int,
    pool: PoolOf,
    weights_gb: float,
    learned: Learned,
    launches: Sequence[float] = (),
    elsewhere: Sequence[float] = (),
    *,
    staging: Staging = NOTHING_STAGED,
    coldstart: ColdStartModel = TEXTBOOK,
    scale: float = 1.0,
) -> Estimate:
    """``launches``, ``elsewhere``: the model's observed times-to-ready in this pool and in
    its other pools, oldest first. ``scale`` shrinks the defaults only (the demo's
    minutes-into-seconds); what was learned is already in the pool's own time."""
    base = ColdStartModel(phases_for(pool.cloud, pool.gpus_per_node, coldstart.phases))
    modeled = {k: v * scale for k, v in base.breakdown(weights_gb, staging).items()}
    defaults = {
        **{k: modeled[k] for k in PHASES[:4]},
        "load_init": modeled["load"] + modeled["init"],
    }
    found = dict(learned.by_pool.get(pool.id, {}))
    if staging.warm_node:
        # A resume has no capacity wait, no bootstrap and no image pull of a create: what
        # was learned of those, and the model's launches, are creates'; the defaults say it.
        for name in PHASES[:3]:
            found.pop(name, None)
        launches, elsewhere = (), ()
    elif staging.baked_image:
        # A baked image's boot has its driver and runtime set up and the engine's image
        # pulled: what was learned of those phases here is (mostly) base-image boots'.
        for name in ("bootstrap", "image"):
            found.pop(name, None)
    bandwidth = learned.fetch_gib_per_s.get(pool.id)
    engine = learned.engine_s.get(model)
    phases = []
    for name in PHASES:
        stat = found.get(name)
        if name == "fetch" and bandwidth is not None and not staging.weights_local:
            seconds = weights_gb * 1e9 / GIB / bandwidth.value
            phases.append(PhaseEstimate(name, seconds, LEARNED, bandwidth.samples))
        elif name == "load_init" and engine is not None:
            phases.append(PhaseEstimate(name, engine.value, LEARNED, engine.samples))
        elif stat is not None:
            phases.append(PhaseEstimate(name, stat.value, LEARNED, stat.samples))
        else:
            phases.append(PhaseEstimate(name, defaults[name], DEFAULT))
    total = sum(p.seconds for p in phases)
    here = [t for t in launches if t >= 0]
    there = [t for t in elsewhere if t >= 0]
    if here:
        return Estimate(expected_ready_from(here, total), LAUNCHES, tuple(phases), len(here))
    if any(p.source == LEARNED for p in phases):
        return Estimate(total, PHASE_SUM, tuple(phases))
    if there:
        return Estimate(expected_ready_from(there, total), ELSEWHERE, tuple(phases), len(there))
    return Estimate(total, DEFAULTS, tuple(phases))

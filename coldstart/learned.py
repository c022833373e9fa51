"""Cold-start phases learned from what booting nodes report (``bootstrap/node.sh``).

A node reports when it booted, when its driver answered, when its image was pulled, its
weights fetched, its engine started and ready. Between those instants lie the phases of
``coldstart.model``: the capacity wait and VM boot (create -> booted), the bootstrap
(booted -> driver_ok), the image pull (driver_ok -> image_pulled), the weight fetch
(image_pulled -> weights_fetched, a bandwidth once divided into the weights' size) and the
engine's load and init (weights_fetched -> ready). Learned per pool for what the pool
decides (its capacity, its network, its image cache) and per model for what the model
decides (load and init), each a high percentile of the most recent boots: a cold-start
horizon is there to cover the slow launches, and a percentile of the last few is robust to
one stuck boot without hiding a pool that has become slow. So a model's first replica in a
pool is expected from what other models' nodes took there, not from the textbook phases,
and the split says which phase a staging step would shorten. Pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from coldstart.model import GIB
from schema.types import NodePhase

# The newest boots each phase is learned from, and the percentile taken of them (linear
# between order statistics: with one boot, that boot; with 20, between the 18th and 19th).
KEPT = 20
QUANTILE = 0.9

# (phase, from, to): the instants each learned phase lies between; "created" is the
# daemon's create of the node, the rest its own reports.
CREATED = "created"
SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("capacity_vm", CREATED, NodePhase.BOOTED),
    ("bootstrap", NodePhase.BOOTED, NodePhase.DRIVER_OK),
    ("image", NodePhase.DRIVER_OK, NodePhase.IMAGE_PULLED),
    ("fetch", NodePhase.IMAGE_PULLED, NodePhase.WEIGHTS_FETCHED),
    ("engine", NodePhase.WEIGHTS_FETCHED, NodePhase.READY),
)
# Per pool: the phases a pool decides. Per model: the engine's load and init.
POOL_PHASES = ("capacity_vm", "bootstrap", "image")
# A fetch shorter than this says nothing about bandwidth (no weights, or already local).
MIN_FETCH_S = 1.0


@dataclass(frozen=True)
class Boot:
    """One node's boot that reached ready: where, which model, and the instants (epoch
    seconds) it passed, ``created`` included."""

    pool: str
    model: int
    weights_gb: float  # the model's declared weights (0: none declared)
    at: Mapping[str, float]


@dataclass(frozen=True)
class Stat:
    """A learned phase: its seconds (or GiB/s, for a fetch) and how many boots said so."""

    value: float
    samples: int


@dataclass(frozen=True)
class Learned:
    """Phase durations of recent boots; empty until a node has reported."""

    by_pool: Mapping[str, Mapping[str, Stat]] = field(default_factory=dict)
    fetch_gib_per_s: Mapping[str, Stat] = field(default_factory=dict)  # by pool
    engine_s: Mapping[int, Stat] = field(default_factory=dict)  # by model


def learn(boots: Iterable[Boot], kept: int = KEPT, quantile: float = QUANTILE) -> Learned:
    """The ``quantile`` of the ``kept`` most recent boots (ordered by when they were ready)
    per pool and per model; of a fetch bandwidth the ``1 - quantile`` (a slow fetch is a low
    bandwidth). A boot missing a report (lost, or a phase the node skipped) leaves only the
    phases around the gap out."""
    pool_seen: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    bandwidths: dict[str, list[float]] = defaultdict(list)
    engines: dict[int, list[float]] = defaultdict(list)
    for boot in sorted(boots, key=lambda b: b.at.get(NodePhase.READY, 0.0)):
        took = _durations(boot.at)
        for phase in POOL_PHASES:
            if phase in took:
                pool_seen[boot.pool][phase].append(took[phase])
        fetch = took.get("fetch")
        if fetch is not None and fetch >= MIN_FETCH_S and boot.weights_gb > 0:
            bandwidths[boot.pool].append(boot.weights_gb * 1e9 / GIB / fetch)
        if "engine" in took:
            engines[boot.model].append(took["engine"])
    return Learned(
        by_pool={
            pool: {p: _stat(v, kept, quantile) for p, v in phases.items()}
            for pool, phases in pool_seen.items()
        },
        fetch_gib_per_s={pool: _stat(v, kept, 1 - quantile) for pool, v in bandwidths.items()},
        engine_s={model: _stat(v, kept, quantile) for model, v in engines.items()},
    )


def _durations(at: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for phase, start, end in SEGMENTS:
        if start in at and end in at and at[end] >= at[start]:
            out[phase] = at[end] - at[start]
    return out


def _stat(values: list[float], kept: int, q: float) -> Stat:
    recent = sorted(values[-kept:])
    pos = q * (len(recent) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(recent) - 1)
    return Stat(recent[lo] + (recent[hi] - recent[lo]) * (pos - lo), len(recent))

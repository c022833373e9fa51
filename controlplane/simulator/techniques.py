"""Cold-start techniques in the trace simulator: staged weights, baked images, warm pools and
weights on local disk per pool, each launch's phases drawn from a documented distribution,
with what the techniques cost (issue 25 item 5).

A pool (here: one model's nodes, as the engine simulator has one pool per model) has a
:class:`Techniques` (its policy's cold-start settings) and a :class:`ModelProfile` (weight
bytes, node size, cloud, engine init). :func:`draw` gives one launch's phases
(``coldstart.md`` §0): every phase a lognormal around its §5 "typical" value, its spread from
the reference's ranges (:data:`SPREADS`, each with its row), so p99s come from the same
sources as the p50s. :class:`TechniquesCapacity` is a ``capacity.Capacity`` for the engine:
it keeps the pool's warm nodes as the daemon does (``capacity.WarmPools``: the engine sizes
the pool after each decision with the place job's ``lifecycle.warm.wanted``, within
``warm_nodes``; a launch resumes a stopped node in ``warm_vm``'s time; the pool is filled by
boots charged as idle GPU time, and what is over the size is let go), tells deciders what
the daemon's estimator would (``coldstart.model.expected_ready_from`` over the launches seen
so far, a create's and a resume's apart, else the phase medians) and counts the techniques'
storage: staged copies at object-storage
prices, the baked image and a weights volume as snapshots, stopped nodes' boot volumes at
block-storage prices, all pro-rated over the measured window.

What is assumed, not cited, is marked ``[assumed]``; vendor list prices (not in
``shared/reference/``) say so. Nothing here imports the warm-pool, staging or image jobs: it
models what they leave in place, not how.
"""

from __future__ import annotations

import heapq
import math
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from coldstart.defaults import phases_for
from coldstart.model import Phases, expected_ready_from
from controlplane.simulator.capacity import Grant
from schema.policy import STORAGE_USD_PER_GB_MONTH
from schema.types import Cloud

GB = 1e9
GIB = 1024**3
HOURS_PER_MONTH = 730.0  # the clouds' billing month (24 x 365 / 12)
Z90 = 1.2816  # the standard normal's 90th percentile
Z99 = 2.3263

# Block and snapshot storage, USD per GB-month: the vendors' list prices as published in
# 2026 (not in shared/reference/): EBS gp3 $0.08, EBS snapshot standard $0.05
# (aws.amazon.com/ebs/pricing); Persistent Disk balanced $0.10, snapshot $0.05
# (cloud.google.com/compute/disks-image-pricing); OCI Block Volume balanced $0.0425,
# backups at Object Storage $0.0255 (oracle.com/cloud/price-list). Object storage:
# schema.policy.STORAGE_USD_PER_GB_MONTH (S3 $0.023, GCS $0.020, OCI $0.0255).
BLOCK_USD_PER_GB_MONTH = {Cloud.AWS: 0.08, Cloud.GCP: 0.10, Cloud.OCI: 0.0425}
SNAPSHOT_USD_PER_GB_MONTH = {Cloud.AWS: 0.05, Cloud.GCP: 0.05, Cloud.OCI: 0.0255}
# A node's boot volume: the vLLM image, 28.6 GB local (coldstart.md §1.3, vllm #27154), plus
# the OS, driver and toolkit, [assumed] about 20 GB: 50 GB, also the baked image's snapshot.
BOOT_VOLUME_GB = 50.0

# Weight transfer rates, GB/s.
# Origin (a hub or another region): Hugging Face -> EFS hydration ~31 GiB/min
# (coldstart.md §1.4, modelplane #204).
ORIGIN_GB_S = 31 * GIB / 60 / GB
# Region-local object store: §5 "object-store effective rate per node", typical 0.75 x NIC
# line rate, at 100 Gbps (§3.2: 12.5 GB/s line rate).
STAGED_GB_S = 0.75 * 12.5
# Local disk (NVMe / a volume) -> HBM: §5 "NVMe/disk -> HBM effective", typical ~2 GB/s.
LOAD_GB_S = 2.0

# Tier bandwidths of the physical floor (coldstart.md §3.3, 100 % efficiency), GB/s.
FLOOR_OBJECT_100G_GB_S = 12.5  # §3.3 "Obj 100 Gbps" column
FLOOR_NVME_8X_GEN4_GB_S = 8 * 7.0  # §3.3 "8x NVMe Gen4" (§3.2: ~7 GB/s a drive)
FLOOR_NVME_1X_GEN4_GB_S = 7.0  # §3.3 "1x NVMe Gen4" (a one-GPU node)


def _sigma(median: float, other: float, z: float) -> float:
    """A lognormal's sigma with median ``median`` and ``other`` at the z-quantile."""
    return abs(math.log(other / median)) / z


@dataclass(frozen=True)
class Spread:
    """One phase's distribution: a lognormal, ``median`` seconds (or GB/s for a rate) and
    ``sigma`` of its natural log; ``basis`` is the reference's row."""

    median: float
    sigma: float
    basis: str

    def draw(self, rng: np.random.Generator | None) -> float:
        """One draw; ``rng`` None: the median."""
        if self.sigma == 0 or rng is None:
            return self.median
        return self.median * math.exp(self.sigma * float(rng.standard_normal()))

    def quantile(self, z: float) -> float:
        return self.median * math.exp(self.sigma * z)


_T = Phases()  # coldstart.model's §5 typical values
# Every phase's spread, where the reference gives a range: its P90 (or P10) read as that
# quantile of a lognormal around the typical value. The capacity medians differ by cloud and
# node size (coldstart.defaults) and keep this spread.
SPREADS: dict[str, Spread] = {
    "capacity_vm": Spread(
        _T.capacity_vm_s,
        _sigma(600, 1800, Z90),
        "§1.1/§5 Databricks 8xH100 ~10 min P50, ~30 min P90",
    ),
    "warm_vm": Spread(
        _T.warm_vm_s,
        _sigma(90, 30, Z90),
        "§5 T_vm from a stopped warm pool: typical 1-2 min, low 0.5 min (read as P10)",
    ),
    "bootstrap_base": Spread(
        _T.bootstrap_base_s,
        _sigma(300, 900, Z90),
        "§5 base image + drivers: typical 5 min, high 15 min (read as P90)",
    ),
    "bootstrap_baked": Spread(
        _T.bootstrap_baked_s,
        _sigma(60, 120, Z90),
        "§5 baked image: typical 1 min, high 2 min (read as P90)",
    ),
    "image_cold": Spread(
        _T.image_cold_s,
        _sigma(210, 480, Z90),
        "§5 20-30 GB vLLM image, cold: typical 2-5 min, high 8 min (read as P90)",
    ),
    "image_prepulled": Spread(
        _T.image_prepulled_s,
        _sigma(15, 20, Z90),
        "§5 pre-pulled or lazy: typical 10-20 s (20 s read as P90)",
    ),
    "origin_rate": Spread(
        ORIGIN_GB_S,
        _sigma(90, 600, Z99),
        "§1.4 HF -> EFS ~31 GiB/min; Baseten: 'typically 90 s' can become 10 min (read as P99)",
    ),
    "staged_rate": Spread(
        STAGED_GB_S,
        _sigma(STAGED_GB_S, 3.5 * GIB / GB, Z90),
        "§5 object store per node: typical 0.75 x 100 Gbps, low 3.5 GiB/s (read as P10)",
    ),
    # §5 gives the loader's range (0.3 GB/s for HF's default loader to 15-20 GB/s for
    # optimised ones), not a launch-to-launch spread of one loader: kept fixed.
    "load_rate": Spread(LOAD_GB_S, 0.0, "§5 NVMe/disk -> HBM: typical ~2 GB/s; no spread"),
}


@dataclass(frozen=True)
class ModelProfile:
    """What a pool's cold start depends on beyond its techniques."""

    name: str
    weights_gb: float
    gpus_per_node: int
    init: Spread  # T_init: imports, compile, CUDA graphs, warm-up
    cloud: Cloud = Cloud.AWS

    def capacity(self) -> Spread:
        base = SPREADS["capacity_vm"]
        median = phases_for(self.cloud, self.gpus_per_node).capacity_vm_s
        return Spread(median, base.sigma, base.basis + " (median per cloud and size)")


PROFILE_8B = ModelProfile(
    "8B (16 GB, 1xH100)",
    16.0,
    1,
    Spread(45.0, _sigma(45, 60, Z90), "§5 T_init vLLM <=14B caches warm: typical 45 s, high 60 s"),
)
PROFILE_70B = ModelProfile(
    "70B (140 GB, 8xH100)",
    140.0,
    8,
    Spread(210.0, _sigma(210, 600, Z90), "§5 T_init vLLM 70B TP=8 no caches: 3.5 min, >10 min"),
)
PROFILE_671B = ModelProfile(
    "671B-FP8 (685 GB, 8xH200)",
    685.0,
    8,
    Spread(180.0, _sigma(180, 600, Z90), "§5 T_init large MoE no caches: typical 3 min, 10 min"),
)
PROFILES = (PROFILE_8B, PROFILE_70B, PROFILE_671B)


def profile_for(name: str, gpus: int, gpu: str, weights_gb: float | None = None) -> ModelProfile:
    """A fleet model's profile: by its node, one GPU the 8B's, H200 nodes the 671B's, other
    multi-GPU nodes the 70B's (the sizes the example fleets' comments give), with the
    model's own ``weights.size_gb`` where its section has one."""
    base = PROFILE_8B if gpus == 1 else PROFILE_671B if gpu.upper() == "H200" else PROFILE_70B
    return ModelProfile(
        f"{name} ({base.name})",
        base.weights_gb if weights_gb is None else weights_gb,
        gpus,
        base.init,
        base.cloud,
    )


@dataclass(frozen=True)
class Techniques:
    """A pool's cold-start settings. ``staged_weights``: a copy in the region's object store
    (the staging job's); ``baked_image``: driver, toolkit and the engine's image layers baked
    (the image job's: bootstrap shrinks to a join and health check, the image is pre-pulled);
    ``warm_nodes``: stopped, pre-initialised nodes kept per pool; ``weights_local``: the
    weights on the node's own disk at boot (a weights volume created from a snapshot, and on
    a warm node its kept volume; instance-store NVMe does not survive a stop, §4)."""

    staged_weights: bool = False
    baked_image: bool = False
    warm_nodes: int = 0
    weights_local: bool = False

    def label(self) -> str:
        parts = [
            name
            for name, on in (
                ("staged", self.staged_weights),
                ("baked", self.baked_image),
                (f"warm={self.warm_nodes}", self.warm_nodes > 0),
                ("local", self.weights_local),
            )
            if on
        ]
        return "+".join(parts) or "naive"


def parse_techniques(text: str) -> Techniques:
    """``naive``, or a comma list of ``staged``, ``baked``, ``warm=N`` and ``local``
    (``gpucap simulate --techniques``); ValueError names what is wrong."""
    out = Techniques()
    for part in (p.strip() for p in text.split(",")):
        key, _, value = part.partition("=")
        if key == "naive" and not value:
            continue
        if key in ("staged", "baked", "local") and not value:
            field_name = {
                "staged": "staged_weights",
                "baked": "baked_image",
                "local": "weights_local",
            }
            out = replace(out, **{field_name[key]: True})
        elif key == "warm" and value.isdigit():
            out = replace(out, warm_nodes=int(value))
        else:
            raise ValueError(
                f"{part!r}: expected naive, or staged, baked, warm=N, local (comma-separated)"
            )
    return out


def draw(
    profile: ModelProfile, tech: Techniques, rng: np.random.Generator | None, warm: bool = False
) -> dict[str, float]:
    """One launch's phases in seconds (``rng`` None: every phase's median); ``warm``: resumed
    from a stopped warm node (pre-initialised: no capacity wait, bootstrap done, image on its
    volume; the weights fetched again unless its weights volume was kept)."""
    s = SPREADS
    out = {
        "capacity_vm": s["warm_vm"].draw(rng) if warm else profile.capacity().draw(rng),
        "bootstrap": 0.0
        if warm
        else (s["bootstrap_baked"] if tech.baked_image else s["bootstrap_base"]).draw(rng),
        "image": (s["image_prepulled"] if (warm or tech.baked_image) else s["image_cold"]).draw(
            rng
        ),
    }
    if tech.weights_local:
        out["fetch"] = 0.0
    else:
        rate = (s["staged_rate"] if tech.staged_weights else s["origin_rate"]).draw(rng)
        out["fetch"] = profile.weights_gb / rate
    out["load"] = profile.weights_gb / s["load_rate"].draw(rng)
    out["init"] = profile.init.draw(rng)
    return out


def median_phases(profile: ModelProfile, tech: Techniques, warm: bool = False) -> dict[str, float]:
    """The phases at every distribution's median (the estimator's prior)."""
    return draw(profile, tech, None, warm)


def ready_samples(
    profile: ModelProfile, tech: Techniques, n: int, seed: int = 0
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """``n`` launches' times-to-ready, seconds; a pool with warm nodes resumes one (the
    table's 'warm pool' is a launch that finds a stopped node; the traces show how often)."""
    rng = np.random.default_rng(seed)
    warm = tech.warm_nodes > 0
    return np.array([sum(draw(profile, tech, rng, warm).values()) for _ in range(n)])


@dataclass(frozen=True)
class Floor:
    """A tier's physical floor (coldstart.md §3.3): weight bytes over the tier's bandwidth at
    100 % efficiency, plus the engine's init (its median; §3.3 'per-tier floor')."""

    tier: str
    weights_s: float
    init_s: float
    row: str

    @property
    def seconds(self) -> float:
        return self.weights_s + self.init_s


def floor(profile: ModelProfile, tech: Techniques) -> Floor:
    """The floor of the tier ``tech`` puts the weights in: the node's disk with
    ``weights_local``, else the region's object store (staged or not: the origin has no
    floor of its own in the reference)."""
    init = profile.init.median
    if tech.weights_local:
        one = profile.gpus_per_node == 1
        bw = FLOOR_NVME_1X_GEN4_GB_S if one else FLOOR_NVME_8X_GEN4_GB_S
        tier = "1x NVMe Gen4" if one else "8x NVMe Gen4"
        return Floor(f"local NVMe ({tier})", profile.weights_gb / bw, init, f"§3.3 '{tier}'")
    return Floor(
        "region object store (100 Gbps)",
        profile.weights_gb / FLOOR_OBJECT_100G_GB_S,
        init,
        "§3.3 'Obj 100 Gbps'",
    )


def storage_usd_per_month(profile: ModelProfile, tech: Techniques) -> dict[str, float]:
    """What the pool's techniques keep stored, USD a month, by kind (stopped warm nodes are
    counted by :class:`TechniquesCapacity` over the time they are stopped)."""
    out: dict[str, float] = {}
    if tech.staged_weights:
        out["staged_weights"] = profile.weights_gb * STORAGE_USD_PER_GB_MONTH[profile.cloud]
    if tech.baked_image:
        out["image"] = BOOT_VOLUME_GB * SNAPSHOT_USD_PER_GB_MONTH[profile.cloud]
    if tech.weights_local:
        out["weights_snapshot"] = profile.weights_gb * SNAPSHOT_USD_PER_GB_MONTH[profile.cloud]
    return out


def stopped_node_gb(profile: ModelProfile, tech: Techniques) -> float:
    """A stopped warm node's volumes: its boot volume, and its weights volume if kept."""
    return BOOT_VOLUME_GB + (profile.weights_gb if tech.weights_local else 0.0)


@dataclass
class _Pool:
    profile: ModelProfile
    tech: Techniques
    rng: np.random.Generator
    stopped: int = 0  # warm nodes stopped now
    fills: list[tuple[float, float]] = field(default_factory=list)  # heap: (stopped at, asked at)
    pending: list[tuple[float, float, int, bool]] = field(default_factory=list)
    observed: dict[bool, list[float]] = field(default_factory=lambda: {True: [], False: []})
    stopped_since: float = 0.0  # when ``stopped`` last changed
    stopped_node_s: float = 0.0  # stopped node-seconds in the measured window
    idle_node_s: float = 0.0  # filling boots' node-seconds in the window
    warm_launches: int = 0  # launches in the measured window, by path
    cold_launches: int = 0


class TechniquesCapacity:
    """Unlimited stock; each launch's phases drawn by :func:`draw` (seeded per model by its
    name, in launch order, so the k-th launch takes the same time under every decider of a
    run), a warm node resumed while the pool has one stopped; the pool's size is the
    engine's to set (:meth:`keep_warm`, within ``Techniques.warm_nodes``). Costs are counted
    from ``measure_from_s`` (the engine's measured window)."""

    def __init__(
        self,
        pools: dict[str, tuple[ModelProfile, Techniques]],
        measure_from_s: float = 0.0,
    ) -> None:
        self._pools = {
            m: _Pool(prof, tech, np.random.default_rng(zlib.crc32(m.encode())))
            for m, (prof, tech) in pools.items()
        }
        self._t0 = measure_from_s
        self._next_id = 0
        self._cancelled: set[int] = set()
        self.in_use: dict[int, Grant] = {}
        self._owner: dict[int, str] = {}

    def _settle(self, pool: _Pool, now: float) -> None:
        """Advance the stopped-node integral to ``now``, fills that landed included."""
        while pool.fills and pool.fills[0][0] <= now:
            at, asked = heapq.heappop(pool.fills)
            self._stopped_to(pool, at)
            pool.idle_node_s += self._window(asked, at)
            pool.stopped += 1
        self._stopped_to(pool, now)

    def _stopped_to(self, pool: _Pool, t: float) -> None:
        lo = max(pool.stopped_since, self._t0)
        if t > lo:
            pool.stopped_node_s += pool.stopped * (t - lo)
        pool.stopped_since = max(pool.stopped_since, t)

    def _window(self, start: float, end: float) -> float:
        return max(0.0, end - max(start, self._t0))

    def acquire(self, model: str, now: float) -> Grant | None:
        pool = self._pools[model]
        self._settle(pool, now)
        warm = pool.stopped > 0
        phases = draw(pool.profile, pool.tech, pool.rng, warm)
        total = sum(phases.values())
        self._next_id += 1
        grant = Grant(self._next_id, now, now + phases["capacity_vm"], now + total)
        if warm:
            pool.stopped -= 1
            pool.warm_launches += now >= self._t0
        else:
            pool.cold_launches += now >= self._t0
        self.in_use[grant.grant_id] = grant
        self._owner[grant.grant_id] = model
        heapq.heappush(pool.pending, (grant.ready_at, total, grant.grant_id, warm))
        return grant

    def release(self, grant: Grant, now: float) -> None:
        model = self._owner.pop(grant.grant_id, None)
        if model is None:
            return  # released before (idempotent)
        self.in_use.pop(grant.grant_id, None)
        if now < grant.ready_at:
            self._cancelled.add(grant.grant_id)  # never became ready: never observed
        self._settle(self._pools[model], now)

    def warm_bound(self, model: str) -> int:
        return self._pools[model].tech.warm_nodes

    def keep_warm(self, model: str, now: float, keep: int) -> None:
        """As the place job does: short of ``keep``, boot warm nodes (to pre-initialised,
        then stopped: capacity, bootstrap, image, and the weights onto the kept volume when
        local; their node time is idle); over it, let go the ones still filling first
        (charged until now), then stopped ones."""
        pool = self._pools[model]
        self._settle(pool, now)
        short = keep - pool.stopped - len(pool.fills)
        for _ in range(max(0, short)):
            fill = draw(pool.profile, pool.tech, pool.rng)
            boot = fill["capacity_vm"] + fill["bootstrap"] + fill["image"]
            if pool.tech.weights_local:
                boot += pool.profile.weights_gb / SPREADS["staged_rate"].median
            heapq.heappush(pool.fills, (now + boot, now))
        over = -short
        while over > 0 and pool.fills:
            latest = max(pool.fills)
            pool.fills.remove(latest)
            heapq.heapify(pool.fills)
            pool.idle_node_s += self._window(latest[1], now)
            over -= 1
        if over > 0:
            pool.stopped -= min(over, pool.stopped)

    def warm_waiting(self, model: str, now: float) -> tuple[int, float]:
        """Stopped nodes a launch could resume now, and a resume's expected time-to-ready
        (the median of resumes seen ready, else the phase medians)."""
        pool = self._pools[model]
        self._observe(pool, now)
        prior = sum(median_phases(pool.profile, pool.tech, warm=True).values())
        return pool.stopped, expected_ready_from(pool.observed[True], prior)

    def _observe(self, pool: _Pool, now: float) -> None:
        self._settle(pool, now)
        while pool.pending and pool.pending[0][0] <= now:
            _, took, gid, warm = heapq.heappop(pool.pending)
            if gid not in self._cancelled:
                pool.observed[warm].append(took)

    def expected_cold_start_s(self, model: str, now: float | None = None) -> float:
        """The daemon's estimate for a create: the median of the last creates seen ready by
        ``now``, else the phase medians (coldstart.estimate's defaults under what is
        staged); a resume's is :meth:`warm_waiting`'s."""
        pool = self._pools[model]
        if now is not None:
            self._observe(pool, now)
        prior = sum(median_phases(pool.profile, pool.tech).values())
        return expected_ready_from(pool.observed[False], prior)

    def costs(self, end_s: float) -> dict[str, dict[str, float]]:
        """Per model, over the measured window up to ``end_s``: the techniques' storage in
        USD (staged copies, image and weights snapshots, stopped nodes' volumes), the idle
        node-hours of warm-pool replacement boots, and the launches by path."""
        hours = self._window(self._t0, end_s) / 3600
        out: dict[str, dict[str, float]] = {}
        for name, pool in self._pools.items():
            self._settle(pool, end_s)
            kept = storage_usd_per_month(pool.profile, pool.tech)
            stopped_usd = (
                pool.stopped_node_s
                / 3600
                / HOURS_PER_MONTH
                * stopped_node_gb(pool.profile, pool.tech)
                * BLOCK_USD_PER_GB_MONTH[pool.profile.cloud]
            )
            out[name] = {
                **{f"{k}_usd": v * hours / HOURS_PER_MONTH for k, v in kept.items()},
                "stopped_nodes_usd": stopped_usd,
                "idle_node_hours": pool.idle_node_s / 3600,
                "warm_launches": pool.warm_launches,
                "cold_launches": pool.cold_launches,
            }
        return out

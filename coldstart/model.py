"""The cold-start phase model (``../shared/reference/coldstart.md`` §0):

    T_ready = T_capacity+T_vm + T_bootstrap + T_image + T_fetch + T_load + T_init

Defaults are the "typical" column of coldstart.md §5 for an 8-GPU node; what is staged in a
pool removes or shrinks phases (baked image: bootstrap; pre-pulled image: image pull;
weights on local NVMe: fetch; warm node: capacity+VM and bootstrap).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

GIB = 1024**3


@dataclass(frozen=True)
class Phases:
    """Seconds per phase, plus bandwidths for the weight-size-dependent phases."""

    capacity_vm_s: float = 600.0  # §5: T_capacity+T_vm, 8xH100 on-demand, typical 10 min
    warm_vm_s: float = 90.0  # §5: from a stopped warm-pool node, 1-2 min
    bootstrap_base_s: float = 300.0  # §5: base image + drivers, typical 5 min
    bootstrap_baked_s: float = 60.0  # §5: baked image, typical 1 min
    image_cold_s: float = 210.0  # §5: 20-30 GB vLLM image, cold, 2-5 min
    image_prepulled_s: float = 15.0  # §5: lazy/streamed or pre-pulled, 10-20 s
    fetch_gib_per_s: float = 3.5  # §5: object store effective rate, low end (40G NIC)
    load_gb_per_s: float = 2.0  # §5: NVMe -> HBM, storage-bound typical (Run:ai on io2)
    init_s: float = 210.0  # §5: vLLM 70B TP=8 no caches, typical 3.5 min


@dataclass(frozen=True)
class Staging:
    """What a pool already has in place for a model."""

    baked_image: bool = False
    image_prepulled: bool = False
    weights_local: bool = False  # weights pre-staged on the node's NVMe / nearby cache
    warm_node: bool = False  # a stopped node is waiting in the warm pool


@dataclass(frozen=True)
class ColdStartModel:
    phases: Phases = Phases()

    def breakdown(self, weights_gb: float, staging: Staging = Staging()) -> dict[str, float]:
        p = self.phases
        return {
            "capacity_vm": p.warm_vm_s if staging.warm_node else p.capacity_vm_s,
            "bootstrap": 0.0
            if staging.warm_node
            else (p.bootstrap_baked_s if staging.baked_image else p.bootstrap_base_s),
            "image": p.image_prepulled_s
            if (staging.image_prepulled or staging.warm_node)
            else p.image_cold_s,
            "fetch": 0.0 if staging.weights_local else weights_gb * 1e9 / GIB / p.fetch_gib_per_s,
            "load": weights_gb / p.load_gb_per_s,
            "init": p.init_s,
        }

    def expected_ready_s(self, weights_gb: float, staging: Staging = Staging()) -> float:
        return sum(self.breakdown(weights_gb, staging).values())

    def scaled(self, factor: float) -> ColdStartModel:
        """Every phase ``factor`` times as long (the demo compresses minutes into seconds)."""
        p = self.phases
        return ColdStartModel(
            replace(
                p,
                capacity_vm_s=p.capacity_vm_s * factor,
                warm_vm_s=p.warm_vm_s * factor,
                bootstrap_base_s=p.bootstrap_base_s * factor,
                bootstrap_baked_s=p.bootstrap_baked_s * factor,
                image_cold_s=p.image_cold_s * factor,
                image_prepulled_s=p.image_prepulled_s * factor,
                fetch_gib_per_s=p.fetch_gib_per_s / factor,
                load_gb_per_s=p.load_gb_per_s / factor,
                init_s=p.init_s * factor,
            )
        )


# How many of a model's most recent observed times-to-ready set its expected cold start.
OBSERVED_KEPT = 5


def expected_ready_from(observed: Sequence[float], modeled: float) -> float:
    """The expected time-to-ready of a model's (or a pool's) next replica: the median of the
    most recent observed ones (up to ``OBSERVED_KEPT``, oldest first) -- they carry what the
    phase model cannot know: this cloud's real capacity wait, this image, these weights --
    else the phase model's ``modeled`` estimate. A median, so one slow launch does not move
    it."""
    recent = [x for x in observed[-OBSERVED_KEPT:] if x >= 0]
    return statistics.median(recent) if recent else modeled

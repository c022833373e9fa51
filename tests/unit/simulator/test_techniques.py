"""The simulator's cold-start techniques: phases per technique, tier floors, the warm pool's
stopped nodes and refills, the estimator, and what is counted as storage and idle cost."""

from __future__ import annotations

import math

import numpy as np
import pytest

from controlplane.simulator.techniques import (
    BLOCK_USD_PER_GB_MONTH,
    BOOT_VOLUME_GB,
    HOURS_PER_MONTH,
    PROFILE_8B,
    PROFILE_70B,
    SPREADS,
    Techniques,
    TechniquesCapacity,
    floor,
    median_phases,
    ready_samples,
    storage_usd_per_month,
)
from schema.types import Cloud

ALL = Techniques(staged_weights=True, baked_image=True, warm_nodes=1, weights_local=True)


def test_each_technique_removes_its_phases() -> None:
    naive = median_phases(PROFILE_70B, Techniques())
    assert naive["capacity_vm"] == 600 and naive["bootstrap"] == 300
    assert naive["image"] == 210 and naive["init"] == 210
    staged = median_phases(PROFILE_70B, Techniques(staged_weights=True))
    assert staged["fetch"] == pytest.approx(140 / 9.375)
    assert staged["fetch"] < naive["fetch"]
    baked = median_phases(PROFILE_70B, Techniques(baked_image=True))
    assert (baked["bootstrap"], baked["image"]) == (60, 15)
    warm = median_phases(PROFILE_70B, Techniques(warm_nodes=1), warm=True)
    assert (warm["capacity_vm"], warm["bootstrap"], warm["image"]) == (90, 0, 15)
    assert warm["fetch"] == naive["fetch"]  # a stopped node's NVMe is wiped (§4)
    local = median_phases(PROFILE_70B, Techniques(weights_local=True))
    assert local["fetch"] == 0 and local["load"] == 70
    assert sum(median_phases(PROFILE_70B, ALL, warm=True).values()) == 90 + 15 + 70 + 210


def test_samples_spread_around_the_medians() -> None:
    x = ready_samples(PROFILE_70B, Techniques(), 4000, seed=1)
    assert np.array_equal(x, ready_samples(PROFILE_70B, Techniques(), 4000, seed=1))
    assert np.percentile(x, 99) > 2 * np.percentile(x, 50)
    # The capacity phase alone: its P90 is the Databricks 30 min.
    cap = SPREADS["capacity_vm"]
    assert cap.quantile(1.2816) == pytest.approx(1800, rel=1e-3)


def test_floors_per_tier() -> None:
    f = floor(PROFILE_70B, ALL)
    assert f.weights_s == pytest.approx(140 / 56) and f.init_s == 210
    assert "8x NVMe Gen4" in f.row
    g = floor(PROFILE_8B, Techniques(staged_weights=True))
    assert g.seconds == pytest.approx(16 / 12.5 + 45)


def test_storage_per_month() -> None:
    kept = storage_usd_per_month(PROFILE_70B, ALL)
    assert kept["staged_weights"] == pytest.approx(140 * 0.023)
    assert kept["image"] == pytest.approx(BOOT_VOLUME_GB * 0.05)
    assert kept["weights_snapshot"] == pytest.approx(140 * 0.05)
    assert storage_usd_per_month(PROFILE_70B, Techniques()) == {}


def _filled(cap: TechniquesCapacity, keep: int, at: float = 0.0) -> float:
    """Size the pool to ``keep`` at ``at`` and return when its last fill has stopped."""
    cap.keep_warm("m", at, keep)
    landed = max(t for t, _ in cap._pools["m"].fills)
    cap.warm_waiting("m", landed)
    return landed


def test_warm_pool_is_filled_by_boots_charged_as_idle() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_70B, Techniques(warm_nodes=2))}, measure_from_s=0)
    assert cap.warm_waiting("m", 0.0)[0] == 0  # empty until the place job fills it
    landed = _filled(cap, 2)
    assert cap.warm_waiting("m", landed)[0] == 2
    costs = cap.costs(landed)["m"]
    assert costs["idle_node_hours"] > 0  # the two boots' node time
    cap.keep_warm("m", landed, 2)  # full: nothing more boots
    assert not cap._pools["m"].fills


def test_a_launch_resumes_a_stopped_node_and_the_estimates_stay_apart() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_70B, Techniques(warm_nodes=1))}, measure_from_s=0)
    create_prior = cap.expected_cold_start_s("m")
    landed = _filled(cap, 1)
    waiting, resume_s = cap.warm_waiting("m", landed)
    assert (waiting, resume_s < create_prior) == (1, True)
    # The create's estimate does not shorten because a node waits (decide's covers rule
    # chooses between the two).
    assert cap.expected_cold_start_s("m", landed) == create_prior
    first = cap.acquire("m", landed)
    second = cap.acquire("m", landed + 1)
    assert first is not None and second is not None
    assert cap.warm_waiting("m", landed + 1)[0] == 0  # used: nothing refills on its own
    costs = cap.costs(landed + 3600.0)["m"]
    assert (costs["warm_launches"], costs["cold_launches"]) == (1, 1)


def test_over_the_size_the_filling_go_first_then_the_stopped() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_70B, Techniques(warm_nodes=3))}, measure_from_s=0)
    landed = _filled(cap, 1)
    cap.keep_warm("m", landed, 3)  # two more boot
    assert len(cap._pools["m"].fills) == 2
    idle_before = cap._pools["m"].idle_node_s
    cap.keep_warm("m", landed + 60, 1)  # both filling ones go, charged their minute
    assert not cap._pools["m"].fills
    assert cap._pools["m"].idle_node_s == pytest.approx(idle_before + 2 * 60)
    assert cap.warm_waiting("m", landed + 60)[0] == 1
    cap.keep_warm("m", landed + 61, 0)
    assert cap.warm_waiting("m", landed + 61)[0] == 0


def test_a_released_replica_is_not_stopped_back() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_70B, Techniques(warm_nodes=1))})
    landed = _filled(cap, 1)
    g = cap.acquire("m", landed)
    assert g is not None
    cap.release(g, g.ready_at + 10)
    cap.release(g, g.ready_at + 20)  # idempotent
    assert cap.warm_waiting("m", g.ready_at + 20)[0] == 0  # as the daemon: it drains


def test_stopped_storage_counts_only_the_measured_window() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_8B, Techniques(warm_nodes=2))}, measure_from_s=0)
    landed = _filled(cap, 2)
    c0 = cap.costs(landed)["m"]["stopped_nodes_usd"]
    c = cap.costs(landed + 7200)["m"]
    per_hour = BOOT_VOLUME_GB * BLOCK_USD_PER_GB_MONTH[Cloud.AWS] / HOURS_PER_MONTH
    assert c["stopped_nodes_usd"] - c0 == pytest.approx(2 * 2 * per_hour)
    late = TechniquesCapacity({"m": (PROFILE_8B, Techniques(warm_nodes=2))}, measure_from_s=1e9)
    _filled(late, 2)
    assert late.costs(1e9)["m"]["stopped_nodes_usd"] == 0.0
    assert late.costs(1e9)["m"]["idle_node_hours"] == 0.0


def test_the_estimator_learns_from_launches_seen_ready() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_8B, Techniques())})
    prior = cap.expected_cold_start_s("m")
    assert prior == pytest.approx(sum(median_phases(PROFILE_8B, Techniques()).values()))
    g = cap.acquire("m", 0.0)
    assert g is not None
    assert cap.expected_cold_start_s("m", g.ready_at - 1) == prior  # not ready yet
    seen = cap.expected_cold_start_s("m", g.ready_at)
    assert math.isclose(seen, g.ready_at - g.requested_at)

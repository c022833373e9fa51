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


def test_warm_pool_resumes_refills_and_counts_costs() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_70B, Techniques(warm_nodes=1))}, measure_from_s=0)
    prior_warm = cap.expected_cold_start_s("m")
    first = cap.acquire("m", 0.0)
    assert first is not None
    # The pool's one node was used: the next launch is cold until the refill lands.
    assert cap.expected_cold_start_s("m", 0.0) > prior_warm
    second = cap.acquire("m", 1.0)
    assert second is not None
    assert second.ready_at - second.requested_at > first.ready_at - first.requested_at
    costs = cap.costs(3600.0)["m"]
    assert (costs["warm_launches"], costs["cold_launches"]) == (1, 1)
    assert costs["idle_node_hours"] > 0  # the refill's boot
    # Released while the pool is short of its one node: stopped back into it.
    cap2 = TechniquesCapacity({"m": (PROFILE_70B, Techniques(warm_nodes=1))})
    g = cap2.acquire("m", 0.0)
    assert g is not None
    cap2._pools["m"].refills.clear()  # the refill never lands (a stockout)
    cap2.release(g, g.ready_at + 10)
    cap2.release(g, g.ready_at + 20)  # idempotent
    assert cap2._pools["m"].stopped == 1
    c = cap2.costs(g.ready_at + 10 + 3600)["m"]
    assert c["stopped_nodes_usd"] == pytest.approx(
        BOOT_VOLUME_GB * BLOCK_USD_PER_GB_MONTH[Cloud.AWS] / HOURS_PER_MONTH, rel=1e-6
    )


def test_stopped_storage_counts_only_the_measured_window() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_8B, Techniques(warm_nodes=2))}, measure_from_s=100)
    c = cap.costs(100 + 7200)["m"]
    per_hour = BOOT_VOLUME_GB * BLOCK_USD_PER_GB_MONTH[Cloud.AWS] / HOURS_PER_MONTH
    assert c["stopped_nodes_usd"] == pytest.approx(2 * 2 * per_hour)


def test_the_estimator_learns_from_launches_seen_ready() -> None:
    cap = TechniquesCapacity({"m": (PROFILE_8B, Techniques())})
    prior = cap.expected_cold_start_s("m")
    assert prior == pytest.approx(sum(median_phases(PROFILE_8B, Techniques()).values()))
    g = cap.acquire("m", 0.0)
    assert g is not None
    assert cap.expected_cold_start_s("m", g.ready_at - 1) == prior  # not ready yet
    seen = cap.expected_cold_start_s("m", g.ready_at)
    assert math.isclose(seen, g.ready_at - g.requested_at)

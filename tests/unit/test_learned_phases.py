"""Cold-start phases learned from boot reports (``coldstart.learned``) and a pool's
estimate from them (``coldstart.estimate``): the split between reported instants, a high
percentile of the most recent boots per pool and per model, the fetch bandwidth from the
weights' size, and per phase where its figure comes from."""

from __future__ import annotations

import pytest

from coldstart import Boot, ColdStartModel, learn
from coldstart.defaults import GCP_8GPU_CAPACITY_S, SMALL_VM_CAPACITY_S, phases_for
from coldstart.estimate import (
    DEFAULTS,
    ELSEWHERE,
    LAUNCHES,
    PHASE_SUM,
    Estimate,
    PoolOf,
    estimate,
)
from coldstart.learned import CREATED
from coldstart.model import GIB, Staging
from schema.types import NodePhase as P

EAST, WEST = "acme/aws/us-east-1/p5", "acme/aws/us-west-2/p5"
AWS8 = PoolOf(EAST, "aws", 8)


def _boot(pool: str, model: int, t0: float, steps: list[float], weights_gb: float = 0.0) -> Boot:
    """Instants from ``t0``: created, then booted .. ready after each step."""
    names = [CREATED, P.BOOTED, P.DRIVER_OK, P.IMAGE_PULLED, P.WEIGHTS_FETCHED, P.ENGINE_STARTED]
    names.append(P.READY)
    at, t = {}, t0
    for name, step in zip(names, [0.0, *steps], strict=True):
        t += step
        at[str(name)] = t
    return Boot(pool, model, weights_gb, at)


def test_phases_lie_between_the_reported_instants() -> None:
    # created -> booted 120, -> driver 30, -> image 90, -> weights 40 (for 140 GB), ->
    # engine started 5, -> ready 100.
    learned = learn([_boot(EAST, 1, 1000.0, [120, 30, 90, 40, 5, 100], weights_gb=140.0)])
    assert {k: v.value for k, v in learned.by_pool[EAST].items()} == {
        "capacity_vm": 120,
        "bootstrap": 30,
        "image": 90,
    }
    assert learned.fetch_gib_per_s[EAST].value == pytest.approx(140e9 / GIB / 40)
    assert learned.engine_s[1].value == 105  # weights fetched -> ready: start, load and init


def test_a_high_percentile_of_the_most_recent_boots_per_pool_and_per_model() -> None:
    stuck_old = _boot(EAST, 1, 0.0, [5000, 30, 90, 1, 5, 100])
    recent = [_boot(EAST, 2, 10_000.0 + i, [100 + 10 * i, 30, 90, 1, 5, 60]) for i in range(11)]
    west = _boot(WEST, 1, 90_000.0, [300, 30, 90, 1, 5, 200])
    learned = learn([west, *recent, stuck_old], kept=11, quantile=0.9)
    # EAST's last eleven capacity waits are 100..200 s: the 90th percentile is 190 s; the
    # stuck boot fell out. WEST keeps its own.
    assert learned.by_pool[EAST]["capacity_vm"].value == pytest.approx(190)
    assert learned.by_pool[EAST]["capacity_vm"].samples == 11
    assert learned.by_pool[WEST]["capacity_vm"].value == 300
    # Engine time is the model's, whatever the pool: model 1 booted in both (105, 205).
    assert learned.engine_s[1].value == pytest.approx(105 + 0.9 * 100)
    assert learned.engine_s[2].value == 65
    # No weights declared: no bandwidth is made up from a one-second fetch.
    assert learned.fetch_gib_per_s == {}


def test_a_slow_fetch_is_a_low_bandwidth() -> None:
    boots = [
        _boot(EAST, 1, 100.0 * i, [60, 30, 90, f, 5, 60], 100.0) for i, f in enumerate([10, 20, 40])
    ]
    learned = learn(boots, quantile=0.9)
    # The 10th percentile of the bandwidths: near the slowest fetch's.
    slowest, middle = 100e9 / GIB / 40, 100e9 / GIB / 20
    assert learned.fetch_gib_per_s[EAST].value == pytest.approx(slowest + 0.2 * (middle - slowest))


def test_a_missing_report_leaves_only_the_phases_around_it_out() -> None:
    boot = _boot(EAST, 1, 0.0, [120, 30, 90, 40, 5, 100], weights_gb=140.0)
    at = {k: v for k, v in boot.at.items() if k != P.IMAGE_PULLED}
    learned = learn([Boot(EAST, 1, 140.0, at)])
    assert set(learned.by_pool[EAST]) == {"capacity_vm", "bootstrap"}
    assert learned.fetch_gib_per_s == {}
    assert learned.engine_s[1].value == 105


def _phases(est: Estimate) -> dict[str, tuple[float, str]]:
    return {p.name: (round(p.seconds, 6), p.source) for p in est.phases}


def test_the_estimate_takes_what_was_learned_and_the_defaults_for_the_rest() -> None:
    learned = learn([_boot(EAST, 1, 0.0, [120, 30, 90, 40, 5, 100], weights_gb=140.0)])
    modeled = ColdStartModel().breakdown(140.0)

    mine = estimate(1, AWS8, 140.0, learned)
    assert (mine.source, mine.seconds) == (PHASE_SUM, pytest.approx(120 + 30 + 90 + 40 + 105))
    assert {p.source for p in mine.phases} == {"learned"}
    # Half the weights fetch in half the time at the pool's bandwidth.
    assert estimate(1, AWS8, 70.0, learned).seconds == pytest.approx(120 + 30 + 90 + 20 + 105)
    # Another model in EAST: the pool's phases, the defaults' load and init.
    other = estimate(2, AWS8, 140.0, learned)
    assert _phases(other)["load_init"] == (round(modeled["load"] + modeled["init"], 6), "default")
    assert _phases(other)["capacity_vm"] == (120, "learned")
    # Model 1 in a GCP pool no node reported from: its engine time, GCP's defaults.
    gcp = estimate(1, PoolOf("acme/gcp/us-central1/a3", "gcp", 8), 140.0, learned)
    assert _phases(gcp)["capacity_vm"] == (GCP_8GPU_CAPACITY_S, "default")
    assert _phases(gcp)["load_init"] == (105, "learned")


def test_launches_come_first_then_learned_phases_then_launches_elsewhere() -> None:
    nothing = learn([])
    gcp = PoolOf("acme/gcp/us-central1/a3", "gcp", 8)
    # The model's own launches in the pool: their median (of the newest five).
    own = estimate(1, AWS8, 140.0, nothing, launches=[300.0, 100.0, 200.0], elsewhere=[9.0])
    assert (own.source, own.seconds, own.launches) == (LAUNCHES, 200.0, 3)
    # Nothing here: its launches in other pools, before the textbook.
    there = estimate(1, gcp, 140.0, nothing, elsewhere=[50.0, 70.0])
    assert (there.source, there.seconds, there.launches) == (ELSEWHERE, 60.0, 2)
    # Nothing at all: the defaults of the pool's cloud and size, scaled (the demo's).
    bare = estimate(1, gcp, 140.0, nothing, scale=0.01)
    modeled = ColdStartModel(phases_for("gcp", 8)).expected_ready_s(140.0)
    assert (bare.source, bare.seconds) == (DEFAULTS, pytest.approx(modeled * 0.01))
    # A boot reported in the pool outranks the launches elsewhere.
    learned = learn([_boot(gcp.id, 2, 0.0, [60, 30, 90, 40, 5, 100])])
    assert estimate(1, gcp, 140.0, learned, elsewhere=[50.0]).source == PHASE_SUM


def test_defaults_by_cloud_size_and_what_is_staged() -> None:
    assert phases_for("aws", 1).capacity_vm_s == SMALL_VM_CAPACITY_S
    assert phases_for("oci", 8).capacity_vm_s > phases_for("aws", 8).capacity_vm_s
    staged = estimate(1, AWS8, 140.0, learn([]), staging=Staging(weights_local=True))
    assert _phases(staged)["fetch"] == (0.0, "default")

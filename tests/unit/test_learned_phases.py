"""Cold-start phases learned from boot reports (``coldstart.learned``): the split between
reported instants, medians of the most recent boots per pool and per model, the fetch
bandwidth from the weights' size, and a pool's time-to-ready from what was learned there
with the phase model for the rest."""

from __future__ import annotations

import pytest

from coldstart import Boot, ColdStartModel, learn
from coldstart.learned import CREATED
from coldstart.model import GIB
from schema.types import NodePhase as P

EAST, WEST = "acme/aws/us-east-1/p5", "acme/aws/us-west-2/p5"


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
    assert learned.by_pool[EAST] == {"capacity_vm": 120, "bootstrap": 30, "image": 90}
    assert learned.fetch_gib_per_s[EAST] == pytest.approx(140e9 / GIB / 40)
    assert learned.engine_s == {1: 105}  # weights fetched -> ready: start, load and init


def test_medians_of_the_most_recent_boots_per_pool_and_per_model() -> None:
    slow_old = _boot(EAST, 1, 0.0, [900, 30, 90, 1, 5, 100])
    recent = [_boot(EAST, 2, 5000.0 + i, [100 + i, 30, 90, 1, 5, 60 + i]) for i in range(5)]
    west = _boot(WEST, 1, 9000.0, [300, 30, 90, 1, 5, 200])
    learned = learn([west, *recent, slow_old], kept=5)
    # The old 900 s capacity wait fell out of EAST's last five; WEST keeps its own.
    assert learned.by_pool[EAST]["capacity_vm"] == 102
    assert learned.by_pool[WEST]["capacity_vm"] == 300
    # Engine time is the model's, whatever the pool: model 1 booted in both.
    assert learned.engine_s == {1: (105 + 205) / 2, 2: 67}
    # No weights declared: no bandwidth is made up from a one-second fetch.
    assert learned.fetch_gib_per_s == {}


def test_a_missing_report_leaves_only_the_phases_around_it_out() -> None:
    boot = _boot(EAST, 1, 0.0, [120, 30, 90, 40, 5, 100], weights_gb=140.0)
    at = {k: v for k, v in boot.at.items() if k != P.IMAGE_PULLED}
    learned = learn([Boot(EAST, 1, 140.0, at)])
    assert learned.by_pool[EAST] == {"capacity_vm": 120, "bootstrap": 30}
    assert learned.fetch_gib_per_s == {}
    assert learned.engine_s == {1: 105}


def test_a_pools_time_to_ready_uses_what_was_learned_and_the_model_for_the_rest() -> None:
    model = ColdStartModel()
    modeled = model.breakdown(140.0)
    learned = learn([_boot(EAST, 1, 0.0, [120, 30, 90, 40, 5, 100], weights_gb=140.0)])

    # Model 1 in EAST: every phase learned; a model of half the weights fetches in half.
    assert learned.ready_s(1, EAST, 140.0, modeled) == pytest.approx(120 + 30 + 90 + 40 + 105)
    assert learned.ready_s(1, EAST, 70.0, modeled) == pytest.approx(120 + 30 + 90 + 20 + 105)
    # Another model in EAST: the pool's phases, the phase model's load and init.
    other = learned.ready_s(2, EAST, 140.0, modeled)
    assert other == pytest.approx(120 + 30 + 90 + 40 + modeled["load"] + modeled["init"])
    # Model 1 in a pool no node reported from: its engine time, the modeled rest.
    west = learned.ready_s(1, WEST, 140.0, modeled)
    rest = modeled["capacity_vm"] + modeled["bootstrap"] + modeled["image"] + modeled["fetch"]
    assert west == pytest.approx(rest + 105)
    # Nothing learned about this model or this pool: the caller keeps its own estimate.
    assert learned.ready_s(2, WEST, 140.0, modeled) is None
    assert learn([]).ready_s(1, EAST, 140.0, modeled) is None

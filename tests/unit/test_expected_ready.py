"""The expected cold start of a model's next replica: observed times-to-ready once there are
some, the phase model's estimate before."""

from __future__ import annotations

from coldstart import expected_ready_from
from coldstart.model import OBSERVED_KEPT


def test_the_phase_model_stands_until_a_replica_is_observed() -> None:
    assert expected_ready_from([], 1260.0) == 1260.0


def test_the_median_of_the_most_recent_observations() -> None:
    # One launch that waited on a stockout does not move the estimate; a median.
    assert expected_ready_from([700.0, 3600.0, 720.0], 1260.0) == 720.0
    # Only the newest OBSERVED_KEPT count: the pool got faster (a baked image arrived).
    old, new = [900.0] * 10, [300.0] * OBSERVED_KEPT
    assert expected_ready_from(old + new, 1260.0) == 300.0
    assert expected_ready_from([300.0, 320.0], 1260.0) == 310.0

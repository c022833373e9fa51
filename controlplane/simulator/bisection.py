"""The one knob search every sweep uses, the engine's (``runner.Simulation.sweep``) and the
full loop's (``fullloop.sweep``): the same probes for every autoscaler, so no one gets a
finer search than another."""

from __future__ import annotations

from collections.abc import Callable

# Runs a sweep makes per variant: both ends of the knob's range, then bisection; 6 halvings
# of the utilization range (0.05-1.0) leave 0.015, finer than the old 17-value grid's 0.05.
SWEEP_PROBES = 8


def bisect(
    passes: Callable[[float], bool], cheap: float, safe: float, probes: int = SWEEP_PROBES
) -> None:
    """Search the knob between its ``cheap`` end and its ``safe`` one for the cheapest value
    that ``passes`` (which runs the replay and keeps its outcome): the cheap end first,
    where passing ends the search; then the safe end, where failing does (nothing in the
    range passes, if attainment is monotone in the knob); then halving the interval between
    the cheapest passing and the cheapest failing value until ``probes`` runs. Attainment
    is only roughly monotone in the knob, so the caller takes the cheapest passing run of
    all it kept, not the last."""
    if passes(cheap) or not passes(safe):
        return
    passing, failing = safe, cheap
    for _ in range(probes - 2):
        mid = round((passing + failing) / 2, 6)
        if passes(mid):
            passing = mid
        else:
            failing = mid

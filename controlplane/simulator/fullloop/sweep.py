"""``gpucap simulate --full-loop --slo-target``: every autoscaler's knob searched as the
engine searches it (``bisection.bisect``, each peer in its defaults and its tuned variant,
the cheaper passing run counts), each probe one replay of the daemon's own loop.

What does not depend on the knob is built once and shared by every probe: the trace, its
arrivals and the scenario (the policy parsed, the clouds, the per-pool timings). Each probe
replays on a fresh in-memory store and simulated cloud. There is no clairvoyant oracle in
the loop (the engine's oracle and ``bench/bound.py`` are the references)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.baselines import REGISTRY, variants
from controlplane.loop import Tuning
from controlplane.simulator.bisection import SWEEP_PROBES, bisect
from controlplane.simulator.fullloop import replay
from controlplane.simulator.fullloop.outcome import FullLoopOutcome
from controlplane.simulator.fullloop.scenario import Scenario


@dataclass
class FullLoopSweep:
    autoscaler: str
    best: FullLoopOutcome | None  # least GPU-hours with attainment >= target; None if none
    tried: list[FullLoopOutcome]

    def closest(self) -> FullLoopOutcome | None:
        """Where nothing passes: the run nearest the target (the highest attainment)."""
        return max(self.tried, key=lambda o: o.run.summary().slo_attainment, default=None)


def sweep_size(name: str) -> int:
    return SWEEP_PROBES * len(variants(name))


def sweep(
    scenario: Scenario,
    name: str,
    target: float,
    tuning: Tuning | None = None,
    done: Callable[[FullLoopOutcome], None] | None = None,
) -> FullLoopSweep:
    """The cheapest full-loop run of ``name`` (any of its variants) reaching ``target``.
    ``done`` is called after each probe (progress)."""
    tried: list[FullLoopOutcome] = []
    for variant in variants(name):
        fractions = REGISTRY[variant]().knob.fractions

        def passes(value: float, variant: str = variant) -> bool:
            out = replay(scenario, variant, tuning, knob=value)
            tried.append(out)
            if done is not None:
                done(out)
            return out.run.summary().slo_attainment >= target

        # The cheap end is the highest target per replica.
        bisect(passes, max(fractions), min(fractions))
    ok = [o for o in tried if o.run.summary().slo_attainment >= target]
    best = min(ok, key=lambda o: o.run.summary().gpu_hours) if ok else None
    return FullLoopSweep(name, best, tried)

"""Run autoscalers side by side on one trace and fleet, at their default knob or swept for
the cheapest knob that reaches an SLO-attainment target.

The autoscalers come from ``autoscaler.baselines.REGISTRY`` (ours and the peers, each with
its own ``tick_s``, ``metric_lag_s``, ``window_s``, wake rule and knob) plus the simulator's
own clairvoyant ``oracle``. Every run gets a fresh capacity and the same model inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from autoscaler.baselines import REGISTRY, variants
from autoscaler.types import TimedAutoscaler
from controlplane.simulator.bisection import SWEEP_PROBES, bisect
from controlplane.simulator.capacity import Capacity, ColdStartCapacity
from controlplane.simulator.engine import Engine, ModelRun, RunOutcome
from controlplane.simulator.oracle import (
    HEADROOM_SWEEP,
    ORACLE_TICK_S,
    ModelPoint,
    OracleAutoscaler,
    Series,
    cheapest_mix,
    zero_wait_concurrency,
)
from controlplane.simulator.setup import auto_warmup_s, build_runs
from controlplane.simulator.techniques import Techniques, TechniquesCapacity, profile_for
from controlplane.simulator.traces import Trace
from schema.fleet import Fleet

ORACLE = "oracle"
ALL = ("ours", "knative", "skyserve", "rayserve", "hpa", ORACLE)


def autoscaler_names(text: str) -> list[str]:
    """``all`` or a comma-separated list; raises ValueError naming an unknown one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(ALL)
    if "all" in names:
        raise ValueError("all stands alone: it already names every autoscaler")
    known = set(REGISTRY) | {ORACLE}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(
            f"unknown autoscaler {', '.join(unknown) or '(none)'}: choose from "
            f"{', '.join(sorted(known))} or all"
        )
    return list(dict.fromkeys(names))


@dataclass
class SweepResult:
    autoscaler: str
    best: RunOutcome | None  # least GPU-hours with slo_attainment >= target; None if none
    tried: list[RunOutcome]


class Simulation:
    """One fleet + one trace, ready to replay under any autoscaler and knob."""

    def __init__(
        self,
        fleet: Fleet,
        trace: Trace,
        warmup_s: float | None = None,
        techniques: Techniques | None = None,
    ) -> None:
        """``techniques``: every model's pool has these cold-start techniques
        (``techniques.TechniquesCapacity`` in every decider's replay; the oracle, which plans
        on the fleet's phases, refuses them); their costs per replay in
        :meth:`technique_costs`."""
        self.fleet = fleet
        self.trace = trace
        self.warmup_s = auto_warmup_s(fleet, trace) if warmup_s is None else warmup_s
        self.end_s = self.warmup_s + trace.end_s  # on the engine's clock
        self.runs, capacity = build_runs(fleet, trace, warmup_s=self.warmup_s)
        self._phases = {r.name: fleet.coldstart_for(_spec(fleet, r.name)) for r in self.runs}
        self.cold_start_s = {name: capacity.expected_cold_start_s(name) for name in self._phases}
        self._concurrency: dict[str, Series] | None = None
        self.techniques = techniques
        self._technique_costs: dict[int, dict[str, dict[str, float]]] = {}

    def technique_costs(self, run: RunOutcome) -> dict[str, dict[str, float]] | None:
        """Per model, the techniques' storage and idle costs in ``run`` (None: no
        techniques)."""
        return self._technique_costs.get(id(run))

    def _techniques_capacity(self) -> TechniquesCapacity:
        assert self.techniques is not None
        pools = {}
        for r in self.runs:
            spec = _spec(self.fleet, r.name)
            shape = spec.gpu_shape
            size = spec.weights.size_gb if spec.weights is not None else None
            profile = profile_for(r.name, shape.gpus, shape.gpu, size)
            pools[r.name] = (profile, self.techniques)
        return TechniquesCapacity(pools, measure_from_s=self.warmup_s)

    @property
    def requests(self) -> int:
        return self.trace.requests

    def knob_values(self, name: str) -> tuple[float, ...]:
        if name == ORACLE:
            return HEADROOM_SWEEP
        return REGISTRY[name]().knob.fractions

    def sweep_size(self, name: str) -> int:
        """The most runs :meth:`sweep` makes for ``name``: ``SWEEP_PROBES`` for each of its
        variants (a peer's defaults and its tuned one), and for the oracle on several
        models one more for its cheapest per-model mix."""
        extra = 1 if name == ORACLE and len(self.runs) > 1 else 0
        return SWEEP_PROBES * len(self.variants(name)) + extra

    @staticmethod
    def variants(name: str) -> tuple[str, ...]:
        return (ORACLE,) if name == ORACLE else variants(name)

    def default_knob(self, name: str) -> float | None:
        if name == ORACLE:
            return 1.0
        utilizations = {_spec(self.fleet, r.name).target_utilization for r in self.runs}
        return utilizations.pop() if len(utilizations) == 1 else None

    def run(
        self,
        name: str,
        knob: float | Mapping[str, float] | None = None,
        progress: Callable[[float], None] | None = None,
    ) -> RunOutcome:
        """One replay. ``knob``: the oracle's headroom (one, or one per model), or for the
        others a fraction of one replica's capacity given to their knob (None: the fleet's
        target utilization)."""
        if name == ORACLE and self.techniques is not None:
            raise ValueError("oracle: it plans on the fleet's phases, not on techniques")
        if name != ORACLE:
            if isinstance(knob, Mapping):
                raise ValueError(f"{name}: one knob for every model (per model: oracle only)")
            return self.run_autoscaler(REGISTRY[name](), knob, progress)
        started = time.perf_counter()
        # A mapping is copied: the outcome keeps it as its knob.
        headroom: float | dict[str, float] = (
            dict(knob) if isinstance(knob, Mapping) else 1.0 if knob is None else float(knob)
        )
        runs = self.runs
        oracle = OracleAutoscaler.plan(
            runs, self.end_s, self.cold_start_s, headroom, self._zero_wait()
        )
        lead = dict(self.cold_start_s)
        engine = Engine(
            runs,
            self.end_s,
            oracle,
            # The clairvoyant reference: every launch takes the time it planned for.
            ColdStartCapacity(self._phases),
            tick_s=ORACLE_TICK_S,
            metric_lag_s=0.0,
            scrape_interval_s=self.fleet.scrape_interval_s,
            history_s=self.fleet.scrape_interval_s,
            wakes_on_arrival=True,
            wake_lead_s=lambda m: lead[m] + ORACLE_TICK_S,
            knob=headroom,
            name=name,
            measure_from_s=self.warmup_s,
            metered=False,  # it plans on the trace itself
        )
        return _timed(engine, progress, started)

    def run_autoscaler(
        self,
        auto: TimedAutoscaler,
        knob: float | None = None,
        progress: Callable[[float], None] | None = None,
        capacity: Capacity | None = None,
    ) -> RunOutcome:
        """One replay under ``auto`` (any configuration of a registered decider), at a
        fraction ``knob`` of one replica's capacity (None: the fleet's target utilization).
        The engine keeps as much metrics history as the decider's own window reads.
        ``capacity``: where nodes come from (None: the fleet's phases, drawn per launch; the
        cold-start techniques bench passes a ``techniques.TechniquesCapacity``)."""
        started = time.perf_counter()
        runs = self.runs
        if knob is not None:
            runs = [_with_knob(auto, r, knob) for r in runs]
        own = capacity is None and self.techniques is not None
        if own:
            capacity = self._techniques_capacity()
        scrape = self.fleet.scrape_interval_s
        engine = Engine(
            runs,
            self.end_s,
            auto,
            # The same draws for every decider: the k-th launch of a model takes the same time.
            ColdStartCapacity(self._phases, draws=True) if capacity is None else capacity,
            tick_s=auto.tick_s,
            metric_lag_s=auto.metric_lag_s,
            metric_push_s=auto.metric_push_s,
            metric_push_phase_s=auto.metric_push_phase_s,
            # Data-plane traits only some peers declare (SkyServe's load balancer).
            metric_push_random_phase=getattr(auto, "metric_push_random_phase", False),
            rejects_without_ready=getattr(auto, "rejects_without_ready", False),
            scrape_interval_s=scrape,
            history_s=auto.window_s + 2 * scrape,
            wakes_on_arrival=auto.wakes_on_arrival,
            knob=knob if knob is not None else self.default_knob(auto.name),
            name=auto.name,
            measure_from_s=self.warmup_s,
        )
        out = _timed(engine, progress, started)
        if own and isinstance(capacity, TechniquesCapacity):
            self._technique_costs[id(out)] = capacity.costs(self.end_s)
        return out

    def sweep(
        self,
        name: str,
        target: float,
        progress: Callable[[int, int, float], None] | None = None,
    ) -> SweepResult:
        """The cheapest run reaching ``target``, every autoscaler's knob searched the same
        way (:meth:`bisect`). A peer races in both its variants, its defaults and its
        documented tuning (``TUNED``): the cheaper passing run of the two counts (its
        outcome names the variant)."""
        n = self.sweep_size(name)
        tried: list[RunOutcome] = []
        for variant in self.variants(name):
            self.bisect(variant, target, tried, progress, n)
        if name == ORACLE and n > len(tried):
            mix = self._oracle_mix(tried, target)
            if mix is not None:
                step = None if progress is None else _step(progress, len(tried), n)
                tried.append(self.run(name, mix, step))
        ok = [o for o in tried if o.summary().slo_attainment >= target]
        best = min(ok, key=lambda o: o.summary().gpu_hours) if ok else None
        return SweepResult(name, best, tried)

    def bisect(
        self,
        name: str,
        target: float,
        tried: list[RunOutcome],
        progress: Callable[[int, int, float], None] | None = None,
        total: int = SWEEP_PROBES,
    ) -> None:
        """The cheapest passing knob by bisection over the knob's range
        (``bisection.bisect``: the oracle's cheap end is its least headroom, the others' their
        highest target per replica), appending each run to ``tried``."""
        values = self.knob_values(name)
        lo, hi = min(values), max(values)
        cheap, safe = (lo, hi) if name == ORACLE else (hi, lo)

        def passes(value: float) -> bool:
            step = None if progress is None else _step(progress, len(tried), total)
            out = self.run(name, value, step)
            tried.append(out)
            return out.summary().slo_attainment >= target

        bisect(passes, cheap, safe)

    def _zero_wait(self) -> dict[str, Series]:
        """Each model's zero-wait concurrency, computed once: every oracle run of a sweep
        plans on it (sorting every arrival and departure of a day-long trace takes
        seconds)."""
        if self._concurrency is None:
            self._concurrency = {
                r.name: zero_wait_concurrency(r.arrivals, r.service_s, self.end_s)
                for r in self.runs
            }
        return self._concurrency

    def _oracle_mix(self, tried: list[RunOutcome], target: float) -> dict[str, float] | None:
        """The oracle's cheapest per-model headrooms, from the uniform runs (each model's
        replay depends only on its own plan), where they beat every uniform headroom."""
        points = {
            r.name: [
                ModelPoint(float(o.knob), o.models[r.name].met_slo, o.models[r.name].gpu_hours)
                for o in tried
                if isinstance(o.knob, float)
            ]
            for r in self.runs
        }
        mix = cheapest_mix(points, tried[0].requests, target)
        if mix is None or len(set(mix.values())) == 1:
            return None  # a uniform headroom is already the cheapest
        return mix


def _timed(engine: Engine, progress: Callable[[float], None] | None, started: float) -> RunOutcome:
    outcome = engine.run(progress)
    outcome.wall_s = time.perf_counter() - started  # (setup included)
    return outcome


def _step(progress: Callable[[int, int, float], None], k: int, n: int) -> Callable[[float], None]:
    return lambda f: progress(k, n, f)


def _with_knob(auto: TimedAutoscaler, run: ModelRun, fraction: float) -> ModelRun:
    spec = auto.knob.apply(run.spec, fraction * run.spec.replica_capacity())
    return replace(run, spec=spec)


def _spec(fleet: Fleet, name: str):  # type: ignore[no-untyped-def]
    spec = fleet.model(name)
    assert spec is not None  # build_runs already refused unknown models
    return spec

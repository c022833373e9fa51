"""The full-loop replay: the daemon's own jobs (collect, decide, place, reconcile with its
gc, offerings) on a virtual clock, against the simulated provider, with an in-memory store,
at the daemon's cadence (``controlplane.loop.Tuning``), while the requests of a trace are
served by the replicas the store says are ready (``serving``).

Each job runs when it is due, as the daemon's interval jobs do, all starting at once; at
one instant they run in the order offerings, collect, decide, place, reconcile (the daemon
runs them on threads; a job reads whole snapshots, so the order only decides which tick
sees a write first). After place and reconcile the data plane takes the ready replicas
from the store. When no model has a node, a waiting request or a desire for a replica, the
clock jumps to the last tick of each job before the next request: the first collect after
it sees that request, and the hours asleep cost no ticks.

The decider is ``ctx.autoscaler``: ours or any ``autoscaler.baselines.REGISTRY`` peer, in the
same loop (only the decider differs)."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.pool import StaticPool

from autoscaler import GpucapAutoscaler
from autoscaler.baselines import REGISTRY
from autoscaler.types import Autoscaler, AutoscalerInput, Decision, State, TimedAutoscaler
from controlplane.loop import ControlLoop, LoopContext, Tuning
from controlplane.loop.snapshot import LIVE_VALUES, NON_TERMINAL
from controlplane.placement import capacity_units
from controlplane.placement.plan import UNIT_EPS
from controlplane.resolvers import SimHealth, SimResolver
from controlplane.service import ControlPlaneService
from controlplane.simulator.engine import TimelinePoint
from controlplane.simulator.fullloop.scenario import Scenario
from controlplane.simulator.fullloop.serving import DataPlane, ReplayMetrics
from controlplane.store.db import Store, make_engine
from controlplane.store.models import Base, Model, Replica
from controlplane.telemetry import Metrics
from providers.base import TAG_MODEL
from providers.retry import NO_RETRY
from providers.sim import SimCloud, SimTimings
from providers.sim.cloud import SimInstance
from schema.types import NodeState

# The virtual clock's origin, epoch seconds: a multiple of every job interval, so each job's
# ticks fall on the trace's whole seconds.
EPOCH0 = 1_800_000_000.0
# Instants closer than this are one instant (sums of float intervals).
_EPS = 1e-6


@dataclass
class VirtualClock:
    t: float = EPOCH0

    def __call__(self) -> float:
        return self.t


def decider(
    name: str, knob: float | None = None, profiled_s: Mapping[str, float] | None = None
) -> Autoscaler:
    """``ours`` (the daemon's own) or a peer baseline by its registry name. ``knob``: a
    fraction of one replica's capacity given to its knob (None: the policy's own target
    utilization). ``profiled_s``: each model's mean service time, as profiling it on the
    trace's requests gives, for a decider whose users configure it from that figure
    (SkyServe's requests/s per replica; the daemon's policy carries no such figure)."""
    if name not in REGISTRY:
        raise ValueError(f"unknown autoscaler {name!r}: choose from {', '.join(sorted(REGISTRY))}")
    auto = GpucapAutoscaler() if name == "ours" else REGISTRY[name]()
    # Only a decider configured from the profile is told it (the daemon's own is not).
    profile = dict(profiled_s or {}) if getattr(auto, "needs_profiled_service", False) else {}
    if knob is None and not profile:
        return auto
    return Configured(auto, knob, profile)


@dataclass(frozen=True)
class Configured:
    """A decider configured as the engine's sweep configures it: its knob set on the spec
    each decision gets (``Knob.apply``) and the model's profiled service time filled in,
    so the policy the loop reads stays the customer's."""

    inner: TimedAutoscaler
    fraction: float | None
    profiled_s: dict[str, float]

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        spec = inp.spec
        if spec.mean_service_s is None and inp.model in self.profiled_s:
            spec = replace(spec, mean_service_s=self.profiled_s[inp.model])
        if self.fraction is not None:
            spec = self.inner.knob.apply(spec, self.fraction * spec.replica_capacity())
        return self.inner.decide(replace(inp, spec=spec), state)


def memory_store() -> Store:
    """An in-memory SQLite store that every session shares (one connection: StaticPool)."""
    store = Store(make_engine("sqlite://", poolclass=StaticPool))
    Base.metadata.create_all(store.engine)
    return store


@dataclass
class Deficit:
    """A stretch where a model's ready capacity was below what it desired."""

    model: str
    start: float  # replay clock, seconds from the trace's opening
    end: float | None = None  # None: not covered again by the end


@dataclass
class Replayed:
    """What a replay leaves for the accounting (``outcome``)."""

    scenario: Scenario
    autoscaler: str
    store: Store
    plane: DataPlane
    timelines: dict[str, list[TimelinePoint]]
    deficits: list[Deficit]
    ticks: int
    wall_s: float


@dataclass
class _Job:
    name: str
    every_s: float
    run: Callable[[], object]
    k: int = 0  # ticks done since the origin

    def due(self, origin: float) -> float:
        return origin + self.k * self.every_s


@dataclass
class FullLoop:
    """One scenario under one decider. ``tuning``: the daemon's defaults unless given."""

    scenario: Scenario
    autoscaler: str = "ours"
    tuning: Tuning = field(default_factory=Tuning)
    store: Store | None = None  # default: a fresh in-memory one
    knob: float | None = None  # see ``decider``

    def __post_init__(self) -> None:
        sc = self.scenario
        self.clock = VirtualClock()
        self.store = self.store or memory_store()
        # Applied as the replay opens, as a customer's policy is before the daemon ticks.
        opened = datetime.fromtimestamp(EPOCH0, UTC)
        ControlPlaneService(self.store, clock=lambda: opened).apply_policy(
            sc.policy_text, source="simulate", applied_by="simulate"
        )
        self.world = sim_world(sc, self.clock)
        self.plane = DataPlane(sc.loads)
        self.ctx = LoopContext(
            store=self.store,
            # No in-call sleeps: the loop's own backoff (on the virtual clock) retries.
            providers=SimResolver(self.world, retry=NO_RETRY),
            metrics_source=ReplayMetrics(
                self.plane, sc.loads, sc.customer, self.tuning.collect_s, EPOCH0
            ),
            health=SimHealth(self.world),
            autoscaler=decider(self.autoscaler, self.knob, sc.profiled_service_s()),
            telemetry=Metrics(),
            tuning=self.tuning,
            clock=self.clock,
        )
        self.loop = ControlLoop(self.ctx)
        self._specs = {m.name: m for m in sc.policy.models}
        self._slots = {
            m.name: {o.shape: o.max_concurrency for o in m.shapes} for m in sc.policy.models
        }
        self.timelines: dict[str, list[TimelinePoint]] = defaultdict(list)
        self.deficits: list[Deficit] = []
        self._open: dict[str, Deficit] = {}
        self._asleep = False
        # The store's writes so far, and as of the last ``_sync``: none since, nothing to do.
        self._writes, self._synced_at = 0, -1
        self.store.on_write(self._wrote)

    def _wrote(self) -> None:
        self._writes += 1

    def jobs(self) -> list[_Job]:
        t, loop = self.tuning, self.loop
        return [
            _Job("offerings", t.offerings_every_s, loop.refresh_offerings),
            _Job("collect", t.collect_s, loop.collect_metrics),
            _Job("decide", t.decide_s, loop.decide),
            _Job("place", t.place_s, self._place),
            _Job("reconcile", t.reconcile_s, self._reconcile),
        ]

    def run(self) -> Replayed:
        started = time.perf_counter()
        sc = self.scenario
        jobs = self.jobs()
        changes = _capacity_changes(sc, self.world)
        open_warm(self.loop, sc, self.clock)
        ticks = 0
        while True:
            t = min(j.due(EPOCH0) for j in jobs)
            if t - EPOCH0 > sc.end_s + _EPS:
                break
            while changes and changes[0][0] <= t - EPOCH0 + _EPS:
                _, table, key, n = changes.pop(0)
                if n is None:
                    table.pop(key, None)
                else:
                    table[key] = n
            self.clock.t = t
            self.plane.advance(t - EPOCH0)
            for j in jobs:
                if j.due(EPOCH0) <= t + _EPS:
                    j.run()
                    j.k += 1
                    ticks += 1
            if self._asleep:
                self._jump(jobs, t)
        end = sc.end_s
        self.plane.advance(end, inclusive=True)
        self.clock.t = EPOCH0 + end
        assert self.store is not None
        return Replayed(
            sc,
            self.autoscaler,
            self.store,
            self.plane,
            dict(self.timelines),
            self.deficits,
            ticks,
            time.perf_counter() - started,
        )

    # --------------------------------------------------------------- the data plane

    def _place(self) -> None:
        self.loop.place()
        self._sync()

    def _reconcile(self) -> None:
        self.loop.reconcile()
        self._sync()
        if self.loop.ctx.now() % 3600 < self.tuning.reconcile_s:
            self.world.reap()  # (keeps the cloud's instance list to the last hour's)

    def _sync(self) -> None:
        """Hand the store's ready replicas to the data plane; note each model's timeline
        and capacity deficits; is every model asleep? (All of it follows from the store:
        unchanged since the last sync, it stands.)"""
        if self._writes == self._synced_at:
            return
        self._synced_at = self._writes
        now = self.clock.t - EPOCH0
        assert self.store is not None
        with self.store.session() as s:
            models = {i: (name, desired) for i, name, desired in s.execute(_MODELS)}
            rows = s.execute(_REPLICAS).all()
        ready: dict[str, dict[str, int]] = defaultdict(dict)
        units: dict[str, float] = defaultdict(float)
        live: dict[str, int] = defaultdict(int)
        busy = bool(rows)
        for rid, model_id, shape, state in rows:
            name = models.get(model_id, ("", 0))[0]
            if state == NodeState.READY.value and name in self._slots:
                ready[name][rid] = self._slots[name].get(shape, 1)
                units[name] += capacity_units(self._specs[name], shape)
            if state in LIVE_VALUES:
                live[name] += 1
        self.plane.sync(ready, now)
        t_rel = now - self.scenario.warmup_s
        for name, desired in models.values():
            line = self.timelines[name]
            point = TimelinePoint(t_rel, desired, len(ready[name]), live[name])
            if not line or (line[-1].desired, line[-1].ready, line[-1].live) != (
                desired,
                point.ready,
                point.live,
            ):
                line.append(point)
            short = units[name] + UNIT_EPS < desired
            if short and name not in self._open:
                self._open[name] = Deficit(name, t_rel)
                self.deficits.append(self._open[name])
            elif not short and name in self._open:
                self._open.pop(name).end = t_rel
            busy = busy or desired > 0 or self.plane.queued(name, now) > 0
        self._asleep = not busy

    def _jump(self, jobs: list[_Job], t: float) -> None:
        """Every model asleep: move each job to its last tick before the next request."""
        nxt = self.plane.next_arrival(t - EPOCH0)
        if nxt is None:
            return
        for j in jobs:
            k = math.floor((nxt - 1e-9) / j.every_s)  # the last tick before the request
            j.k = max(j.k, k)
        self._asleep = False


# The sync's statements, built once.
_MODELS = select(Model.id, Model.name, Model.desired_replicas).where(Model.deleted_at.is_(None))
_REPLICAS = select(Replica.id, Replica.model_id, Replica.gpu_shape, Replica.state).where(
    Replica.state.in_(NON_TERMINAL)
)


def open_warm(loop: ControlLoop, sc: Scenario, clock: VirtualClock) -> None:
    """Open as the engine does, each model with its warm replicas ready: they are placed
    and created one cold start (``Scenario.lead_s``) before the opening, so the first
    reconcile finds them serving and the cold starts observed are the pools' own."""
    leads: dict[float, list[str]] = defaultdict(list)
    for name, n in sc.initial.items():
        if n > 0:
            leads[sc.lead_s(name)].append(name)
    for lead in sorted(leads, reverse=True):
        clock.t = EPOCH0 - lead
        with loop.ctx.store.session() as s:
            for m in s.scalars(select(Model).where(Model.name.in_(leads[lead]))):
                m.desired_replicas = sc.initial[m.name]
        loop.place()
        loop.reconcile()
    clock.t = EPOCH0


def sim_world(sc: Scenario, clock: Callable[[], float]) -> SimCloud:
    """The simulated clouds of ``sc`` on ``clock``, each node on its pool's and model's
    timings."""
    cache: dict[tuple[str, str, str, str], SimTimings] = {}

    def timing_of(inst: SimInstance) -> SimTimings:
        key = (inst.tags.get(TAG_MODEL, ""), inst.cloud.value, inst.region, inst.instance_type)
        found = cache.get(key)
        if found is None:
            found = cache[key] = sc.timings(*key)
        return found

    return SimCloud(
        default_capacity=sc.clouds.default_capacity,
        capacity=dict(sc.clouds.capacity),
        quota=dict(sc.clouds.quota),
        clock=clock,
        timing_of=timing_of,
    )


_Change = tuple[float, dict[tuple[str, str, str], int], tuple[str, str, str], int | None]


def _capacity_changes(sc: Scenario, world: SimCloud) -> list[_Change]:
    """The stockouts as (replay time, the world's stock table, key, stock from then on;
    None: no limit of its own), in time order."""
    out: list[_Change] = []
    for w in sc.clouds.stockouts:
        if w.zone is None:
            table, key = world.capacity, (w.cloud.value, w.region, w.instance_type)
        else:
            table, key = world.zone_capacity, (w.cloud.value, w.zone, w.instance_type)
        out.append((sc.warmup_s + w.start_s, table, key, w.capacity))
        out.append((sc.warmup_s + w.end_s, table, key, table.get(key)))
    return sorted(out, key=lambda c: c[0])

"""The discrete-event, request-level replay: one autoscaler, one knob value, one trace.

Virtual time only; deterministic (arrivals are fixed by the trace reader's seed; the only
draws here, a drifting metrics-push phase, are seeded by the model's name). Rules every
autoscaler shares, only the decision logic differs:

- A model's requests are served first-come first-served by the concurrency slots of its ready
  replicas (one queue per model, as behind Knative's activator / a load balancer). A request
  waits while no slot is free, and is never dropped: with no replica at all it queues and
  wakes the model. Behind a data plane that ``rejects_without_ready`` (SkyServe's load
  balancer) one that finds no ready replica is answered with an error instead: a miss,
  counted ``unserved``, its wait the time until a replica was ready. A request meets its
  SLO when its wait before service starts is <= the model's ``slo_s``; one still waiting
  at the end of the trace is a miss and ``unserved``.
- Service time per request comes from the fleet's service-time model (``ModelRun``).
- New replicas come from a :class:`~controlplane.simulator.capacity.Capacity`: requested now,
  ``provisioning`` until their nodes run, ``starting`` until ready. GPU time is charged from
  the request to the release. Removing replicas cancels not-yet-ready ones first (newest
  first), then drains the ready ones with the least work left; a draining replica takes no
  new requests and is released when its last request ends.
- The autoscaler decides every ``tick_s`` from the scrape samples that end at or before
  ``now - metric_lag_s`` (scrape interval from the fleet), or, where metrics reach it in
  batches every ``metric_push_s``, at or before the last batch. A model with no replica, no
  request waiting and a decision of 0 sleeps: it costs no work until its next request
  (minus ``wake_lead_s``), which wakes it. An autoscaler that ``wakes_on_arrival`` then
  decides at once and also sees a fresh sample of the waiting request (Knative's activator
  poke, autoscalers.md §1.1); the others resume at their next own tick after it and see it
  through their metric lag.
- Every model starts warm with enough ready replicas for its first 10 minutes of load at its
  target utilization (same for every autoscaler; the replay does not open on a cold start),
  and a warm-up (``measure_from_s``: the trace's own traffic before the replayed window,
  or the trace's end, as if it had run before; see ``setup.with_warmup``) fills the system and the
  autoscalers' windows before anything is measured: requests, GPU time, cold starts and
  scale events before it are not counted.

Hot path: per request, one heap operation on the model's slot heap and one list append;
metrics are computed per scrape bin in numpy (``metrics.LoadMeter``).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autoscaler.types import (
    Autoscaler,
    AutoscalerInput,
    Decision,
    MetricsSample,
    MetricsWindow,
    NoData,
    ReplicaCounts,
    ScalingSpec,
    State,
)
from controlplane.lifecycle.warm import covers, growth, wanted
from controlplane.simulator.capacity import Capacity, Grant, WarmPools
from controlplane.simulator.fcfs import advance
from controlplane.simulator.metrics import LoadMeter
from schema.policy import WarmPool

# Event kinds, in the order they are handled at equal times: capacity changes first, so a
# decision at time t sees the replicas that became ready at t.
_RUNNING, _READY, _TICK, _WAKE = 0, 1, 2, 3
_PROVISIONING, _STARTING, _SERVING, _DRAINING, _GONE = 0, 1, 2, 3, 4
WARM_START_WINDOW_S = 600.0


@dataclass
class ModelRun:
    """One model's fixed inputs to a replay."""

    name: str
    arrivals: np.ndarray
    service_s: np.ndarray
    output_tokens: np.ndarray | None
    slots: int
    slo_s: float
    gpus_per_replica: int
    usd_per_replica_hour: float
    spec: ScalingSpec
    initial_replicas: int = 0
    measured_from: int = 0  # requests before this index are warm-up, not counted

    def __post_init__(self) -> None:
        if self.arrivals.shape != self.service_s.shape:
            raise ValueError(f"{self.name}: arrivals and service times differ in length")


@dataclass(frozen=True)
class TimelinePoint:
    t: float
    desired: int
    ready: int
    live: int


@dataclass
class ModelOutcome:
    model: str
    requests: int
    met_slo: int
    unserved: int
    waits: np.ndarray  # per request; unserved ones carry their wait until the end (censored)
    gpu_hours: float
    cost_usd: float
    cold_starts: int
    scale_events: int
    timeline: list[TimelinePoint]

    def as_dict(self) -> dict[str, Any]:
        """This model's row of ``--json`` (the run summary's keys, for this model)."""
        waits = self.waits
        return {
            "requests": self.requests,
            "slo_attainment": self.met_slo / self.requests if self.requests else 0.0,
            "gpu_hours": self.gpu_hours,
            "cost_usd": self.cost_usd,
            "p50_wait_s": float(np.percentile(waits, 50)) if waits.size else 0.0,
            "p99_wait_s": float(np.percentile(waits, 99)) if waits.size else 0.0,
            "cold_starts": self.cold_starts,
            "scale_events": self.scale_events,
            "unserved": self.unserved,
        }


# A run's knob: one value for every model, one per model (the oracle's cheapest mix), or
# None (each model at its fleet's default).
KnobValue = float | dict[str, float] | None


def knob_label(knob: KnobValue) -> str:
    if knob is None:
        return "-"
    if isinstance(knob, dict):
        return ", ".join(f"{m} {v:g}" for m, v in knob.items())
    return f"{knob:g}"


@dataclass(frozen=True)
class Summary:
    """One run's row: the keys of ``gpucap simulate --json``. Waits are over every request
    (an unserved one counts with its wait until the end)."""

    autoscaler: str
    knob: KnobValue
    slo_attainment: float
    gpu_hours: float
    cost_usd: float
    p50_wait_s: float
    p99_wait_s: float
    cold_starts: int
    scale_events: int
    unserved: int

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class RunOutcome:
    autoscaler: str
    knob: KnobValue
    end_s: float
    models: dict[str, ModelOutcome]
    wall_s: float = 0.0

    @property
    def requests(self) -> int:
        return sum(m.requests for m in self.models.values())

    def summary(self) -> Summary:
        n = self.requests
        ms = self.models.values()
        waits = np.concatenate([m.waits for m in ms])
        return Summary(
            autoscaler=self.autoscaler,
            knob=self.knob,
            slo_attainment=sum(m.met_slo for m in ms) / n if n else 0.0,
            gpu_hours=sum(m.gpu_hours for m in ms),
            cost_usd=sum(m.cost_usd for m in ms),
            p50_wait_s=float(np.percentile(waits, 50)) if n else 0.0,
            p99_wait_s=float(np.percentile(waits, 99)) if n else 0.0,
            cold_starts=sum(m.cold_starts for m in ms),
            scale_events=sum(m.scale_events for m in ms),
            unserved=sum(m.unserved for m in ms),
        )


@dataclass
class _Replica:
    rid: int
    grant: Grant
    state: int


@dataclass
class _Model:
    idx: int
    run: ModelRun
    arr: list[float]
    svc: list[float]
    svc_np: np.ndarray  # the meter's service times
    n: int
    meter: LoadMeter | None = None  # None: the autoscaler reads no metrics
    i: int = 0  # next request to start (FCFS)
    starts: list[float] = field(default_factory=list)
    slots: list[tuple[float, int]] = field(default_factory=list)
    replicas: dict[int, _Replica] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)  # not yet ready, in request order
    serving: list[int] = field(default_factory=list)
    n_provisioning: int = 0
    n_starting: int = 0
    draining_until: list[float] = field(default_factory=list)  # heap of release times
    rejected: list[int] = field(default_factory=list)  # answered 503: no ready replica
    syncs: list[float] | None = None  # when each batch lands, where its phase drifts
    state: State = field(default_factory=dict)
    replica_seconds: float = 0.0
    cold_starts: int = 0
    scale_events: int = 0
    timeline: list[TimelinePoint] = field(default_factory=list)

    @property
    def live(self) -> int:
        return len(self.serving) + self.n_starting + self.n_provisioning


class Engine:
    def __init__(
        self,
        models: list[ModelRun],
        end_s: float,
        autoscaler: Autoscaler,
        capacity: Capacity,
        *,
        tick_s: float,
        metric_lag_s: float,
        scrape_interval_s: float,
        metric_push_s: float = 0.0,
        metric_push_phase_s: float = 0.0,
        metric_push_random_phase: bool = False,
        rejects_without_ready: bool = False,
        history_s: float = 120.0,
        wakes_on_arrival: bool = True,
        wake_lead_s: float | Callable[[str], float] = 0.0,
        knob: KnobValue = None,
        name: str | None = None,
        measure_from_s: float = 0.0,
        metered: bool = True,
    ) -> None:
        """``metered=False``: the autoscaler reads no metrics (the oracle plans on the trace
        itself), so none are computed and every decision gets ``NoData``.
        ``metric_push_random_phase``: the pushing loop runs independently of the deciding
        one, each sleeping its period after its own work: the first batch lands at a random
        point of the first period and each next one a period +- a tenth after the last
        (seeded by the model's name, the same in every run), not at ``metric_push_phase_s``.
        The phase between the loops drifts, so the data a decision sees is 0 to one period
        old, a different age from decision to decision. ``rejects_without_ready``: the data
        plane answers a request that finds no ready replica at once with an error
        (SkyServe's load balancer, 503) instead of holding it until one is ready."""
        if tick_s <= 0:
            raise ValueError("tick_s must be > 0")
        self.autoscaler = autoscaler
        self.capacity = capacity
        self.tick_s = tick_s
        self.lag = max(0.0, metric_lag_s)
        self.push = max(0.0, metric_push_s)
        self.push_phase = metric_push_phase_s
        self.push_random = metric_push_random_phase and self.push > 0
        self.rejects = rejects_without_ready
        self.dt = scrape_interval_s
        self.end_s = end_s
        self.t0 = measure_from_s  # warm-up before this: not charged, not counted
        self.knob = knob
        self.name = name or autoscaler.name
        self._wake_lead = wake_lead_s
        self.wakes_on_arrival = wakes_on_arrival
        self._alive: list[bool] = []  # by replica id: its slots take new requests
        self._events: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self._models = [
            _Model(
                idx=k,
                run=m,
                arr=m.arrivals.tolist(),
                svc=m.service_s.tolist(),
                # (a copy where rejected requests get no service time)
                svc_np=m.service_s.copy() if rejects_without_ready else m.service_s,
                n=int(m.arrivals.size),
            )
            for k, m in enumerate(models)
        ]
        for ms in self._models:
            if metered:
                m = ms.run
                ms.meter = LoadMeter(m.arrivals, ms.svc_np, m.output_tokens, self.dt, history_s)
        if self.push_random:
            n = math.ceil(end_s / (0.9 * self.push)) + 2
            for ms in self._models:
                rng = np.random.default_rng(zlib.crc32(ms.run.name.encode()))
                gaps = self.push + rng.uniform(-0.1, 0.1, n) * self.push
                gaps[0] = rng.uniform(0.0, self.push)
                ms.syncs = np.cumsum(gaps).tolist()

    # ---------------------------------------------------------------- event plumbing

    def _push(self, t: float, kind: int, model: int, rid: int = -1) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, kind, self._seq, model, rid))

    def _lead(self, model: str) -> float:
        lead = self._wake_lead
        return lead(model) if callable(lead) else lead

    # --------------------------------------------------------------------- the run

    def run(self, progress: Callable[[float], None] | None = None) -> RunOutcome:
        for ms in self._models:
            for _ in range(ms.run.initial_replicas):
                self._add_replica(ms, 0.0, warm=True)
            self._record(ms, 0.0, ms.live)
            self._push(0.0, _TICK, ms.idx)
        events = self._events
        end = self.end_s
        handled = 0
        while events:
            t, kind, _, mi, rid = heapq.heappop(events)
            if t > end:
                break
            ms = self._models[mi]
            if kind in (_TICK, _WAKE):
                self._tick(ms, t)
            elif kind == _READY:
                self._on_ready(ms, rid, t)
            else:
                rep = ms.replicas.get(rid)
                if rep is not None and rep.state == _PROVISIONING:
                    rep.state = _STARTING
                    ms.n_provisioning -= 1
                    ms.n_starting += 1
            handled += 1
            if progress is not None and handled % 4096 == 0:
                progress(min(1.0, t / end) if end > 0 else 1.0)
        outcomes = {ms.run.name: self._finish(ms) for ms in self._models}
        if progress is not None:
            progress(1.0)
        return RunOutcome(self.name, self.knob, end - self.t0, outcomes)

    # ------------------------------------------------------------------ hot path

    def _advance(self, ms: _Model, until: float, inclusive: bool = False) -> None:
        """Start, first come first served, every request whose start is before ``until``."""
        if ms.slots and ms.i < ms.n:
            alive = self._alive
            ms.i = advance(
                ms.slots, ms.arr, ms.svc, ms.i, ms.starts, until, inclusive, alive.__getitem__
            )

    # ----------------------------------------------------------------- replicas

    def _add_replica(self, ms: _Model, now: float, warm: bool = False) -> bool:
        if warm:
            grant = Grant(-1, now, now, now)
        else:
            got = self.capacity.acquire(ms.run.name, now)
            if got is None:
                return False
            grant = got
            if now >= self.t0:
                ms.cold_starts += 1
        rid = len(self._alive)
        self._alive.append(False)
        rep = _Replica(rid, grant, _PROVISIONING)
        ms.replicas[rid] = rep
        if grant.ready_at <= now:
            self._make_ready(ms, rep, now)
            return True
        ms.pending.append(rid)
        if grant.running_at <= now:
            rep.state = _STARTING
            ms.n_starting += 1
        else:
            ms.n_provisioning += 1
            self._push(grant.running_at, _RUNNING, ms.idx, rid)
        self._push(grant.ready_at, _READY, ms.idx, rid)
        return True

    def _make_ready(self, ms: _Model, rep: _Replica, now: float) -> None:
        rep.state = _SERVING
        self._alive[rep.rid] = True
        ms.serving.append(rep.rid)
        for _ in range(ms.run.slots):
            heapq.heappush(ms.slots, (now, rep.rid))

    def _on_ready(self, ms: _Model, rid: int, now: float) -> None:
        rep = ms.replicas.get(rid)
        if rep is None or rep.state not in (_PROVISIONING, _STARTING):
            return  # cancelled while starting
        self._advance(ms, now)
        if self.rejects and not ms.serving:
            self._reject_waiting(ms, now)
        if rep.state == _PROVISIONING:
            ms.n_provisioning -= 1
        else:
            ms.n_starting -= 1
        ms.pending.remove(rid)
        self._make_ready(ms, rep, now)
        self._record(ms, now, None)

    def _reject_waiting(self, ms: _Model, now: float) -> None:
        """Every request that found no ready replica was answered with an error: it leaves
        the queue (a miss, its wait the time until a replica was ready again) and holds no
        slot. It still counts as an arrival (the load balancer recorded it first)."""
        arrived = bisect.bisect_left(ms.arr, now)
        for j in range(ms.i, arrived):
            ms.starts.append(now)
            ms.rejected.append(j)
            ms.svc[j] = 0.0
            ms.svc_np[j] = 0.0
        ms.i = max(ms.i, arrived)

    def _release(self, ms: _Model, rep: _Replica, at: float) -> None:
        rep.state = _GONE
        charged_from = max(rep.grant.requested_at, self.t0)
        ms.replica_seconds += max(0.0, min(at, self.end_s) - charged_from)
        if rep.grant.grant_id >= 0:
            self.capacity.release(rep.grant, at)
        del ms.replicas[rep.rid]

    def _remove(self, ms: _Model, count: int, now: float) -> None:
        while count and ms.pending:  # not yet serving: cancel the newest first
            rep = ms.replicas[ms.pending.pop()]
            if rep.state == _PROVISIONING:
                ms.n_provisioning -= 1
            else:
                ms.n_starting -= 1
            self._release(ms, rep, now)
            count -= 1
        if not count:
            return
        busy_until: dict[int, float] = {}
        for free, rid in ms.slots:
            if free > busy_until.get(rid, -math.inf):
                busy_until[rid] = free
        victims = sorted(ms.serving, key=lambda r: (busy_until.get(r, now), -r))[:count]
        gone = set(victims)
        ms.serving = [r for r in ms.serving if r not in gone]
        for rid in victims:
            self._alive[rid] = False
            rep = ms.replicas[rid]
            rep.state = _DRAINING
            release_at = max(now, busy_until.get(rid, now))
            heapq.heappush(ms.draining_until, release_at)
            self._release(ms, rep, release_at)  # charged until its last request ends

    # --------------------------------------------------------------------- ticks

    def _tick(self, ms: _Model, now: float) -> None:
        self._advance(ms, now)
        while ms.draining_until and ms.draining_until[0] <= now:
            heapq.heappop(ms.draining_until)
        run = ms.run
        arrived = bisect.bisect_right(ms.arr, now)
        queued = arrived - ms.i
        live = ms.live
        metrics: MetricsWindow | NoData = NoData("this autoscaler reads no metrics")
        meter = ms.meter
        if meter is not None:
            seen = self._seen(ms, now - self.lag)
            upto = math.floor(seen / self.dt + 1e-9)
            if upto > meter.next_bin:
                meter.update(ms.starts, upto)
            samples = meter.window()
            if live == 0 and queued > 0 and self.wakes_on_arrival:
                # The first request at an empty model is seen at once (activator poke).
                recent = arrived - bisect.bisect_right(ms.arr, now - self.dt)
                poke = MetricsSample(now, recent / self.dt, 0.0, float(queued), None)
                samples = (*samples, poke)
            metrics = MetricsWindow(samples) if samples else NoData("no scrape has completed yet")
        counts = ReplicaCounts(
            ready=len(ms.serving),
            starting=ms.n_starting,
            provisioning=ms.n_provisioning,
            draining=len(ms.draining_until),
        )
        inp = AutoscalerInput(
            model=run.name,
            now=now,
            metrics=metrics,
            replicas=counts,
            spec=run.spec,
            cold_start_s=self.capacity.expected_cold_start_s(run.name, now),
        )
        decision, state = self.autoscaler.decide(inp, ms.state)
        if isinstance(self.capacity, WarmPools):
            decision, state = self._warm_step(self.capacity, ms, inp, decision, state, now)
        ms.state = state
        desired = max(run.spec.min_replicas, min(run.spec.max_replicas, decision.desired, 1 << 20))
        desired = max(0, desired)
        if desired > live:
            for _ in range(desired - live):
                if not self._add_replica(ms, now):
                    break
            ms.scale_events += now >= self.t0
        elif desired < live:
            self._remove(ms, live - desired, now)
            ms.scale_events += now >= self.t0
        if isinstance(self.capacity, WarmPools):
            bound = self.capacity.warm_bound(run.name)
            if bound > 0:  # the place job's sizing (controlplane/loop/warm.py)
                grow = growth(ms.state, inp.cold_start_s)
                keep = wanted(WarmPool(max_nodes=bound), desired, grow, 1)
                self.capacity.keep_warm(run.name, now, keep)
        self._record(ms, now, desired)
        if ms.live == 0 and queued == 0 and desired == 0:
            if ms.i < ms.n:  # asleep until the next request (minus the lead)
                nxt = ms.arr[ms.i] - self._lead(run.name)
                if self.wakes_on_arrival:
                    # Already inside the lead (a decider that wants nothing there yet):
                    # the next tick, or the request itself if it comes first.
                    wake = nxt if nxt > now else min(now + self.tick_s, float(ms.arr[ms.i]))
                else:  # no poke: the next tick of its own schedule after the request
                    wake = now + self.tick_s * max(1, math.ceil((nxt - now) / self.tick_s))
                self._push(wake, _WAKE, ms.idx)
            return
        self._push(now + self.tick_s, _TICK, ms.idx)

    def _warm_step(
        self,
        cap: WarmPools,
        ms: _Model,
        inp: AutoscalerInput,
        decision: Decision,
        state: State,
        now: float,
    ) -> tuple[Decision, State]:
        """The decide job's choice (``controlplane/loop/decide.py``): the step over a
        resume's look-ahead while warm nodes wait and cover what the create's look-ahead
        would launch early, else the create's."""
        waiting, fast_s = cap.warm_waiting(inp.model, now)
        if not waiting or fast_s >= inp.cold_start_s:
            return decision, state
        fast = dataclasses.replace(inp, cold_start_s=fast_s)
        fast_decision, fast_state = self.autoscaler.decide(fast, ms.state)
        if covers(waiting, decision.desired, fast_decision.desired):
            return fast_decision, fast_state
        return decision, state

    def _seen(self, ms: _Model, seen: float) -> float:
        """The end of the data that has reached the decider by ``seen``: the last batch
        where metrics come in batches."""
        if self.push <= 0:
            return seen
        if ms.syncs is None:
            batches = math.floor((seen - self.push_phase) / self.push + 1e-9)
            return batches * self.push + self.push_phase
        k = bisect.bisect_right(ms.syncs, seen + 1e-9)
        return ms.syncs[k - 1] if k > 0 else -self.push

    def _record(self, ms: _Model, now: float, desired: int | None) -> None:
        last = ms.timeline[-1] if ms.timeline else None
        d = desired if desired is not None else (last.desired if last else ms.live)
        point = TimelinePoint(now - self.t0, d, len(ms.serving), ms.live)
        if last is None or (last.desired, last.ready, last.live) != (d, point.ready, point.live):
            ms.timeline.append(point)

    # ----------------------------------------------------------------- accounting

    def _finish(self, ms: _Model) -> ModelOutcome:
        end = self.end_s
        self._advance(ms, end, inclusive=True)
        for rep in list(ms.replicas.values()):
            self._release(ms, rep, end)
        run = ms.run
        started = np.asarray(ms.starts, dtype=np.float64)
        served = started.size
        waits = np.empty(ms.n)
        waits[:served] = started - run.arrivals[:served]
        waits[served:] = np.maximum(end - run.arrivals[served:], 0.0)
        first = min(run.measured_from, ms.n)
        ok = waits[:served] <= run.slo_s + 1e-9
        ok[ms.rejected] = False  # an error is a miss, however fast it came
        met = int(np.count_nonzero(ok[first:]))
        rejected = sum(1 for j in ms.rejected if j >= first)
        hours = ms.replica_seconds / 3600.0
        self._record(ms, end, None)
        return ModelOutcome(
            model=run.name,
            requests=ms.n - first,
            met_slo=met,
            unserved=ms.n - max(served, first) + rejected,
            waits=waits[first:],
            gpu_hours=hours * run.gpus_per_replica,
            cost_usd=hours * run.usd_per_replica_hour,
            cold_starts=ms.cold_starts,
            scale_events=ms.scale_events,
            timeline=ms.timeline,
        )

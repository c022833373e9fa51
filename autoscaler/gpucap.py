"""gpucap's own autoscaling policy: a pure function of (metrics window, replicas by state,
scaling spec, expected cold start, now, previous state) -> (desired replicas, reason, state).

The pipeline, one small step each (Ray Serve's shape, autoscalers.md §3.2):

1. ``NoData``, or no sample newer than one stable window, holds scale: missing is never 0.
2. Fold new samples into the load model (``forecast.py``): rate level and trend, the rate's
   spread, the per-request cost of the metric, a daily profile in 5-minute slots.
3. The load to cover is the *peak* offered load over the stable window, not its mean: the
   SLO is about the wait of each request, so bursts inside the window matter. Where requests
   did not queue, a sample's metric is the offered load; where they queued, or did within
   a few service times (the slots then hold requests that waited), it is estimated from
   arrivals (requests that arrived within one service time), and is at least what the
   busy slots hold while the queue grows over a service time. The queue itself is a
   backlog that drains once capacity arrives; counting it as concurrent demand is the
   Knative panic overshoot (autoscalers.md §6.1), so here it never does (step 6 asks only
   for what drains it within a cold start).
4. Look ahead by the cold start: that peak is scaled by the forecast growth of the arrival
   rate over [now, now + cold start + one tick] -- a damped trend, counted only where the
   projected rise stands out of the rate's noise, and daily seasonality once the history
   covers a day. Capacity requested now is ready then. The capacity covers the larger of
   that (at least ``MIN_MARGIN`` over the peak) and a burst reserve: the typical level (a
   6 h baseline of the rate, or the current level when lower) at the target utilization.
   A jump inside a cold start can only be served by spare already running; sizing that
   spare on the typical level rather than on the current load does not triple it during a
   surge.
5. Burst fast path: when the offered load over the short window exceeds what every
   *live* replica (ready + starting + provisioning) carries at target, scale at once.
6. Backlog: the queue, projected to when capacity asked for now would arrive (it grows by
   the load over the ready replicas' slots until the starting ones arrive, then over all
   live ones), must drain within one more cold start at full slots; extra replicas are
   asked for only where it would not. Starting replicas count from their arrival, so
   nothing is launched twice, and nothing is released while requests wait.
7. Scale-up is immediate (bounded by ``max_scale_up_rate``), unless the policy sets a
   ``scale_up_delay_s``: then only to the least need over that window (HPA's scale-up
   stabilization), so a spike shorter than it launches nothing. Scale-down is the sliding max of
   the needs over one cold start (or the policy's ``scale_down_delay_s`` if longer): the
   ski-rental break-even, since holding a replica through a dip is cheaper than releasing
   and re-buying it whenever the dip is shorter than its cold start. This time hysteresis
   also keeps a constant load from flapping; at most live / ``max_scale_down_rate`` go at once.
   Replicas still starting are held only by the needs of the last half of that window
   (``STARTING_HOLD``; at least one stable window): a burst's replicas that would arrive
   after it are cancelled before they cost a whole cold start and a dip hold.
8. Scale to zero after ``scale_to_zero_grace_s`` without any load, once the dip hold
   (a cold start of no need) has passed too: the later of the two, not their sum. Any
   queued request or arrival with no live replica wakes the model to one replica at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler import forecast
from autoscaler.types import (
    UTILIZATION_SWEEP,
    AutoscalerInput,
    Decision,
    Knob,
    MetricsSample,
    MetricsWindow,
    NoData,
    ScalingSpec,
    State,
)
from autoscaler.window import (
    concurrency,
    in_service,
    latest_t,
    mean_arrival_rate,
    mean_completion_rate,
    mean_in_flight,
    mean_metric,
    recent,
    scrape_interval,
)

QUEUE_FREE = forecast.QUEUE_FREE  # mean waiting requests below which a sample is unqueued
AFTER_QUEUE = forecast.AFTER_QUEUE_SERVICE_TIMES  # service times the slots hold the backlog
MIN_RATE = 1e-3  # requests/s below which a window cannot teach the per-request cost
IDLE_LOAD = 0.01  # below this (and with no arrival or queue) a model counts as idle
TREND_HORIZON_S = 300.0  # trends are extrapolated at most this far (10 buckets)
MAX_GROWTH = 4.0  # cap on the forecast growth applied to the observed peak
# Least spare over the current peak load (and its forecast growth) when the burst reserve
# is smaller: a quarter, chosen on the bench (docs/benchmarks.md) among 0.1-0.4, and never
# more than the knob's own spare (1 / utilization - 1): above 0.8 the knob still counts.
MIN_MARGIN = 0.25
# Capacity still booting is held through a dip by the needs of this fraction of the dip hold
# only (ready capacity: all of it). It has served nothing yet; asked for again when the need
# returns, it costs a cold start of GPU time like a ready replica, but less time without
# it, since its own boot was still ahead. Chosen among 0.25, 0.5 and 1 on the bench and on
# windows it does not use (README.md, "Tried"): 0.5 lost no attainment anywhere and cut
# GPU-hours where bursts launched capacity that would arrive after them (Azure code and
# conv together 7 %); 0.25 fell below 0.99 where a small model's spikes recur.
STARTING_HOLD = 0.5


@dataclass(frozen=True)
class GpucapAutoscaler:
    name: str = "ours"
    # Decision interval and metric staleness the daemon runs with: it scrapes replica
    # metrics and decides every 5 s (conservative next to Knative's 1 s scrape / 2 s tick).
    tick_s: float = 5.0
    metric_lag_s: float = 5.0
    metric_push_s: float = 0.0  # scraped, not pushed in batches
    metric_push_phase_s: float = 0.0
    window_s: float = 60.0  # needs the stable window of samples (ScalingSpec.stable_window_s)
    wakes_on_arrival: bool = True
    # Scale-down waits this many cold starts of lower need (1.0 = the ski-rental break-even).
    dip_hold_factor: float = 1.0
    season_min_rise: float = 0.2
    knob: Knob = Knob(
        name="target_per_replica",
        fractions=UTILIZATION_SWEEP,
        source="schema/policy.py ScalingTarget.utilization in (0, 1] x replica capacity",
    )

    def decide(self, inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
        spec, now, live = inp.spec, inp.now, inp.replicas.live
        st: dict[str, Any] = dict(state)
        prev = int(st.get("desired", live))

        if isinstance(inp.metrics, NoData):
            return self._hold(st, prev, live, inp, "hold_no_data", inp.metrics.reason)
        window: MetricsWindow = inp.metrics
        newest = latest_t(window, now)
        if newest is None or now - newest > spec.stable_window_s:
            return self._hold(
                st, prev, live, inp, "hold_no_data", "no metrics sample in the stable window"
            )
        stable = recent(window, now, spec.stable_window_s)
        step = scrape_interval(window)
        horizon = max(0.0, inp.cold_start_s) + self.tick_s
        forecast.fold(st, window.samples, spec.metric, step)
        model = forecast.view(st)
        burst = recent(window, now, spec.burst_window_s) or stable[-1:]

        rate_s = mean_arrival_rate(stable) or 0.0
        rate_b = mean_arrival_rate(burst) or 0.0
        observed = mean_metric(stable, spec.metric)
        queued = burst[-1].queue_depth
        busy = rate_s > 0 or (observed or 0.0) > IDLE_LOAD or queued > 0
        if busy:
            st["last_busy"] = now
        cost, unqueued = self._cost(
            model,
            stable,
            rate_s,
            observed,
            step,
            spec,
            st.get("hint"),
            st.get("origin_t"),
            st.get("queued_t"),
        )
        if unqueued:
            st["hint"] = cost  # for a window that queues all along, until a cost is learned
        target = max(spec.target_per_replica, 1e-9)

        # 3. The load to cover: the peak of the offered load over the stable window.
        offered = self._offered_load(stable, cost, spec.metric, step, st.get("queued_t"))
        peak = max(offered)

        # 4. Look ahead by the cold start (plus one tick until the next decision): scale the
        # observed peak by the forecast growth of the arrival rate over that horizon.
        base = max(rate_s, model.level or 0.0)
        # A damped trend: extrapolated at most TREND_HORIZON_S, and only the part of the
        # projected rise that stands out of the rate's own noise.
        rise = max(0.0, model.trend) * min(horizon, TREND_HORIZON_S) - model.spread
        ahead = base + max(0.0, rise)
        # Daily seasonality: only a predicted rise clear of the slot-to-slot noise counts.
        season = model.season_peak_ratio(now, horizon)
        if season is not None and season >= 1.0 + self.season_min_rise:
            ahead = max(ahead, base * season)
        growth = min(MAX_GROWTH, ahead / base) if base > 0 else 1.0
        # Burst reserve: capacity for the typical level (the slow baseline, or the current
        # level when lower) at the target utilization, i.e. the spare that absorbs a jump
        # while new replicas boot. A surge uses up that reserve instead of multiplying it
        # (a ratio over the current load would size the spare on the surge: 3x the load
        # and 3x the spare); in a lull it shrinks with the load. (Keeping it at the typical
        # level after a surge won the burst windows of the bench but cost 18 % more GPU-h
        # over the whole published deepseek-r1 day, where it lost to every peer.) Over the
        # current peak the cover keeps its forecast growth or MIN_MARGIN, whichever is
        # larger: a forecast rise is the spare for that rise, the margin is for one not
        # forecast, and stacking them overshoots after a level step. At a steady
        # level (or before the baseline is known) this is peak / target for any target
        # utilization: the margin is capped at the knob's spare (without the cap every
        # utilization above 1 / (1 + MIN_MARGIN) ran as 0.8; on two of four ordinary days,
        # where 0.85 still meets the SLO, that cost 6 %: README.md, "Tried").
        capacity = max(spec.replica_capacity(), target)
        typical = peak
        if model.baseline is not None and cost is not None and busy:
            # (An idle model keeps no reserve: zero stays zero.)
            typical = min(model.baseline, max(model.level or 0.0, rate_s)) * cost
        margin = min(MIN_MARGIN, capacity / target - 1.0)
        cover = max(peak * max(growth, 1.0 + margin), typical * capacity / target)
        need_f = self._replicas(cover, capacity)

        # 5. Burst fast path: the short window's offered load (Knative's panic signal, with
        # the waiting requests read as the arrivals they are, not as concurrent demand)
        # when it exceeds what every *live* replica, starting ones included, carries at
        # target. The forecast path's ratio of load to capacity, or the two would flap.
        # (With no load to take a ratio from, the knob's target per replica.)
        carry = capacity * peak / cover if peak > IDLE_LOAD else target
        recent_load = offered[len(offered) - len(burst) :] or offered[-1:]
        burst_load = sum(recent_load) / len(recent_load)
        need_b = self._replicas(burst_load, carry) if burst_load > live * carry else 0
        need = max(need_f, need_b)
        reason = "scale_up_burst" if need_b > need_f else "scale_up_forecast"

        # 6. Backlog: enough replicas that the backlog projected to the time capacity asked
        # for now arrives drains within one more horizon (see ``_backlog_need``).
        if live == inp.replicas.ready:
            st.pop("wave", None)  # nothing starting: no cold-start wave to project
        need_q = self._backlog_need(inp, st.get("wave"), peak, queued, cost, capacity, horizon)
        if need_q > need:
            need, reason = need_q, "scale_up_backlog"

        # 8. Wake at once on the first request; otherwise idle grace, then zero.
        waking = live == 0 and (queued > 0 or rate_b > 0 or any(s.queue_depth > 0 for s in burst))
        grace = False
        if waking:
            need, reason = max(need, 1), "wake"
        elif need == 0 and live > 0:
            grace = now - float(st.get("last_busy", now)) < spec.scale_to_zero_grace_s

        # 7. Rate limits, the scale-up delay and the dip hold (``_smooth``); and nothing is
        # released while requests wait. (Neither hold is a need in the dip window: once the
        # queue is gone, the replicas bought to drain it go as soon as the need that
        # launched them is a cold start old; and the last replica goes once the idle grace
        # and a cold start of no need have both passed, not one after the other.)
        desired, reason = self._smooth(st, inp, prev, need, reason)
        if queued >= QUEUE_FREE and desired < min(prev, live):
            desired, reason = min(prev, live), "hold_backlog"
        if grace and desired < 1:
            desired, reason = 1, "hold_idle_grace"
        if desired > live and live == inp.replicas.ready:
            st["wave"] = now  # a cold start begins: step 6 projects its arrival
        desired = max(spec.min_replicas, min(spec.max_replicas, desired))
        if desired == 0 and live > 0:
            reason = "scale_to_zero"
        st["desired"] = desired
        detail = (
            f"rate {rate_s:.2f}/s (burst {rate_b:.2f}/s), per-request cost "
            f"{cost if cost is None else round(cost, 3)}, peak load {peak:.1f} x forecast "
            f"growth {growth:.2f} over {horizon:.0f} s, reserve for typical load {typical:.1f} "
            f"-> need {need} at {target:g}/replica; "
            f"live {live} "
            f"(ready {inp.replicas.ready}), queue {queued:.0f}"
        )
        return Decision(desired, reason, detail), st

    # --- steps -----------------------------------------------------------------------

    @staticmethod
    def _cost(
        model: forecast.LoadModel,
        stable: tuple[MetricsSample, ...],
        rate: float,
        observed: float | None,
        step: float,
        spec: ScalingSpec,
        hint: float | None = None,
        origin: float | None = None,
        queued_at: float | None = None,
    ) -> tuple[float | None, bool]:
        """Metric units per (request/s), and whether it was read where requests did not
        queue: learned, else Little's law on the window, else the spec's profiled service
        time (concurrency only). Where requests queue over part of the window, Little's law
        is applied to the samples where they did not: a burst that just began leaves the
        minute before it. (Applied to the whole window, the queue's growth is set against
        arrivals averaged over the calm part too; with gauges and rates scraped at different
        instants, `make demo` read 4 s requests as 543 s there and asked for 157 replicas.)
        Those samples teach nothing within a few service times after a queue (``queued_at``
        is the newest before the window; the slots still hold requests that waited, which
        reads as costlier ones: the reading that counted them is kept as an upper bound),
        nor, for concurrency, while the slots are still filling after a cold origin
        (``origin``): that reading is only a lower bound, kept as one. Where no sample is
        left, the last unqueued reading (``hint``) stands, within those bounds; without one,
        Little's law is applied to the service stage alone -- what is being served over
        the completion rate (counted where the samples carry it, else arrivals minus the
        growth of the requests in the system) --
        since over the whole system it counts the wait as service, and a backlog growing
        during a cold start would read as ever costlier requests (and launch ever more).
        Not while the slots fill from a cold origin without a queue: that stage is not
        steady then (nothing completes for a whole service time), so the profile or the
        lower bound stands until the reading does."""
        if model.cost is not None and model.cost > 0:
            return model.cost, False
        floor, ceiling = 0.0, math.inf
        estimate: float | None = None
        if observed is not None and observed > 0 and rate >= MIN_RATE:
            queue = [s.queue_depth for s in stable]
            free = list(stable)  # a calm window: its samples' queues average out
            calm = sum(queue) / len(queue) < QUEUE_FREE
            if not calm:
                free = [s for s in stable if s.queue_depth < QUEUE_FREE]
            reading = _littles_law(free, spec.metric)
            if reading is not None:  # (like forecast's cost learner, after any queue)
                after = max(AFTER_QUEUE * reading, step)
                since = _since_queue(stable, queued_at)
                settled = [s for s, age in zip(stable, since, strict=True) if age >= after]
                if len(settled) < len(free) and not _filling(free, reading, origin, spec, step):
                    ceiling = reading  # slots holding requests that waited read costlier
                free, reading = settled, _littles_law(settled, spec.metric)
            filling = reading is not None and _filling(free, reading, origin, spec, step)
            if reading is not None and not filling:
                return reading, True
            floor = reading or 0.0  # (None, or a lower bound while the slots fill)
            if hint is not None and hint > 0:
                estimate = hint
            elif not (filling and calm):
                # (Not while calm slots fill from a cold origin: the law needs a steady
                # in-service count, and with like service times nothing completes for a
                # whole one. 50 s requests at 150/s read 316 s a minute in.)
                served = observed if spec.metric == "tokens_per_s" else mean_in_flight(stable)
                completions = _completion_rate(stable, rate, step)
                if completions >= MIN_RATE and served > 0:
                    estimate = served / completions
        if estimate is None and spec.metric == "concurrency" and spec.mean_service_s:
            estimate = spec.mean_service_s
        if estimate is None:
            return (floor or None), False
        return max(floor, min(ceiling, estimate)), False

    @staticmethod
    def _offered_load(
        samples: tuple[MetricsSample, ...],
        cost: float | None,
        metric: str,
        step: float,
        queued_at: float | None = None,
    ) -> list[float]:
        """Each sample's offered load, in metric units. Where requests did not queue, the
        sample's own metric. Where they queued, or did within a few service times (before the
        window too: ``queued_at``, the newest sample that queued, kept by ``forecast.fold``),
        the metric is capped by the capacity and counts backlog being served (slots full of
        requests that waited), so the offered load is estimated from arrivals: the requests
        that arrived within one service time (concurrency; a whole service time even at the
        window's start, where one second's arrivals alone are noise), or the rate times the
        per-request cost (tokens/s). The backlog itself is step 6's."""
        span = 1
        if metric == "concurrency" and cost is not None:
            span = max(1, min(len(samples), round(cost / step)))
        loads = []
        for i, (s, since) in enumerate(zip(samples, _since_queue(samples, queued_at), strict=True)):
            load = in_service(s, metric)
            if cost is not None and since < max(AFTER_QUEUE * cost, step):
                lo = max(0, i + 1 - span)
                recent_rates = [x.arrival_rate for x in samples[lo : lo + span]]
                estimate = sum(recent_rates) / len(recent_rates) * cost
                # While a queue grows over a service time (there at its start, longer at
                # its end), more arrives than the busy slots complete: the load is at least
                # what they held throughout (a floor against a cost read too low; over a
                # service time, since completions of requests that started together come
                # together). A queue that only began inside the span is not growth: it may
                # be a release meeting the last of a backlog's residue.
                back = samples[i - span : i + 1] if i >= span else ()
                if back and QUEUE_FREE <= back[0].queue_depth < s.queue_depth:
                    estimate = max(estimate, min(in_service(x, metric) for x in back))
                load = estimate
            loads.append(load)
        return loads

    @staticmethod
    def _backlog_need(
        inp: AutoscalerInput,
        wave: float | None,
        load: float,
        queued: float,
        cost: float | None,
        capacity: float,
        horizon: float,
    ) -> int:
        """Replicas that drain the backlog within one horizon of capacity asked for now
        arriving. Until then the backlog grows by the offered load over the ready replicas'
        full slots, and from when the starting replicas are ready (the cold-start wave
        they were launched in, plus the horizon) by the load over all live ones. Whatever
        is left must drain within one more horizon at full slots. Sized on the load alone,
        a surge's queue would drain on its 25 % spare over four cold starts; reading full
        slots as load instead ratchets up by that spare at every cold start. Counting the
        starting replicas at their arrival is what keeps this from launching twice: the
        backlog they will meet is the one they were sized for. ``wave``: when the starting
        replicas were asked for (None after a restart lost it)."""
        ready, live = inp.replicas.ready, inp.replicas.live
        if cost is None or horizon <= 0 or queued < QUEUE_FREE:
            return 0  # (no queue: the load fits; with tokens/s, capacity is only estimated)
        # Starting replicas arrive when their wave's cold start ends (without a recorded
        # wave, after a restart, they count as arriving now: never a second launch).
        arrive = 0.0 if wave is None else min(horizon, max(0.0, float(wave) + horizon - inp.now))
        backlog = queued * cost + (load - ready * capacity) * arrive
        backlog = max(0.0, backlog) + (load - live * capacity) * (horizon - arrive)
        if backlog <= 0:
            return 0
        return math.ceil((load + backlog / horizon) / capacity - 1e-9)

    @staticmethod
    def _replicas(load: float, target: float) -> int:
        return math.ceil(load / target - 1e-9) if load > 0 else 0

    def _smooth(
        self,
        st: dict[str, Any],
        inp: AutoscalerInput,
        prev: int,
        need: int,
        reason: str,
    ) -> tuple[int, str]:
        """Rate limits, the scale-up delay's min window and the dip-holding max window."""
        spec, now, live = inp.spec, inp.now, inp.replicas.live
        # Dip window: the max of the needs over the last cold start (at least the policy's
        # scale-down delay), a decreasing deque of [t, need]. A first decision (or one after
        # a restart lost the state) never releases at once.
        hold_s = max(self.dip_hold_factor * inp.cold_start_s, spec.scale_down_delay_s)
        dip = st.get("dip", [[now, live]])
        window = [e for e in dip if e[0] > now - hold_s and e[1] > need]
        window.append([now, need])
        st["dip"] = window
        held = max(e[1] for e in window)
        ready = inp.replicas.ready
        if held > ready:  # above the ready replicas, only the recent needs hold
            # (At least one stable window: the needs are peaks over it, and a backlog's
            # need ends when its queue drains. Cancelling on less answers a tick's noise;
            # in `make demo`, where capacity errors make a replica take longer than its
            # expected cold start, it kept the overflow cloud from ever getting ready.)
            recent_s = min(hold_s, max(STARTING_HOLD * hold_s, spec.stable_window_s))
            recent = max((e[1] for e in window if e[0] > now - recent_s), default=need)
            held = max(min(held, ready), recent)

        if spec.scale_up_delay_s > 0:
            need, reason = self._sustained(st, now, spec.scale_up_delay_s, prev, need, reason)
            if reason == "hold_scale_up_delay":
                return prev, reason
        if need > prev:
            cap = math.ceil(spec.max_scale_up_rate * max(live, 1))
            return min(need, max(cap, prev)), reason
        if held >= prev:
            return prev, ("hold_dip" if need < prev else "steady")
        floor = math.floor(live / spec.max_scale_down_rate) if spec.max_scale_down_rate > 0 else 0
        desired = max(held, min(prev, floor))
        return desired, ("cancel_starting" if desired >= ready else "scale_down")

    @staticmethod
    def _sustained(
        st: dict[str, Any], now: float, delay_s: float, prev: int, need: int, reason: str
    ) -> tuple[int, str]:
        """The policy's scale-up delay (HPA's scale-up stabilization, autoscalers.md §4.2):
        scale up only to the least need over the last ``delay_s``. Kept as an increasing
        deque of [t, need] (a newer, smaller need makes the older ones irrelevant). Until
        the needs cover the window (a first decision, or after a restart) its start counts
        as ``prev``: no evidence of more. A wake from zero still gets its one replica."""
        ups = [e for e in st.get("up", [[now, prev]]) if e[0] > now - delay_s]
        while ups and ups[-1][1] >= need:
            ups.pop()
        ups.append([now, need])
        st["up"] = ups
        least = max(1, ups[0][1]) if reason == "wake" else ups[0][1]
        if need > prev >= least:
            return prev, "hold_scale_up_delay"
        return min(need, max(least, prev)), reason

    @staticmethod
    def _hold(
        st: dict[str, Any], prev: int, live: int, inp: AutoscalerInput, reason: str, detail: str
    ) -> tuple[Decision, State]:
        held = max(inp.spec.min_replicas, min(inp.spec.max_replicas, prev))
        st["desired"] = held
        return Decision(held, reason, detail), st


def _littles_law(samples: list[MetricsSample], metric: str) -> float | None:
    """The mean metric over the mean arrival rate (Little's law), where both are known."""
    rate = mean_arrival_rate(samples) or 0.0
    load = mean_metric(samples, metric) or 0.0
    return load / rate if rate >= MIN_RATE and load > 0 else None


def _completion_rate(samples: tuple[MetricsSample, ...], rate: float, step: float) -> float:
    """Requests/s completing over the samples: counted where the samples carry it, else
    the arrivals minus the growth of the requests in the system (served + waiting)."""
    counted = mean_completion_rate(samples)
    if counted is not None:
        return counted
    span = max(step, samples[-1].t - samples[0].t)
    return rate - (concurrency(samples[-1]) - concurrency(samples[0])) / span


def _filling(
    samples: list[MetricsSample],
    reading: float,
    origin: float | None,
    spec: ScalingSpec,
    step: float,
) -> bool:
    """Whether a concurrency reading may still be the slots filling after a cold origin:
    while nothing has completed, each sample's in-flight is what arrived since the origin,
    so the reading is at least half the newest sample's age there (and only a lower bound
    of the cost). Slots that reached their cap while filling, or requests whose service
    times spread (some complete early), read less than that: the newest sample's own
    in-flight over its arrivals is then the closer lower bound, and counts too."""
    if spec.metric != "concurrency" or origin is None or not samples:
        return False
    newest = samples[-1]
    now_reading = newest.in_flight / newest.arrival_rate if newest.arrival_rate >= MIN_RATE else 0
    return newest.t - origin <= 2 * max(reading, now_reading) + step


def _since_queue(samples: Sequence[MetricsSample], queued_at: float | None) -> list[float]:
    """Seconds from the newest sample where requests waited (in ``samples``, or
    ``queued_at`` before them) to each sample: 0 where it waited itself, infinite where no
    queue is known. (``queued_at`` is the newest such sample; inside the window it is found
    again here.)"""
    last = -math.inf
    if queued_at is not None and samples and queued_at < samples[0].t:
        last = queued_at
    since = []
    for s in samples:
        if s.queue_depth >= QUEUE_FREE:
            last = s.t
        since.append(s.t - last)
    return since


def decide(inp: AutoscalerInput, state: State) -> tuple[Decision, State]:
    """gpucap's policy with the daemon's defaults (see :class:`GpucapAutoscaler`)."""
    return GpucapAutoscaler().decide(inp, state)

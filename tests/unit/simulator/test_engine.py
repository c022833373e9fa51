"""The engine's accounting on small cases checked by hand: waits, SLO attainment,
unserved requests, GPU-hours from request to release, cold-start phases, draining, and the
idle-model shortcut."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.types import MetricsWindow
from controlplane.simulator.capacity import ColdStartCapacity
from controlplane.simulator.engine import Engine
from tests.unit.simulator.helpers import PHASES_100, Scripted, busy_in_last_sample, engine, model


def test_fcfs_waits_slo_and_unserved() -> None:
    # One warm replica with one slot; 1.5 s requests at 0, 1, 2; trace ends at 2.5.
    # Starts: 0, 1.5, (3.0 is after the end): waits 0, 0.5; the third is unserved.
    run = model([0.0, 1.0, 2.0], 1.5, slo_s=0.4, initial=1, gpus=8, usd_per_hour=55.0)
    out = engine([run], Scripted(lambda inp: 1), end_s=2.5).run()
    m = out.models["m"]
    assert m.requests == 3
    assert m.met_slo == 1  # 0.5 s > 0.4 s SLO
    assert m.unserved == 1
    np.testing.assert_allclose(m.waits, [0.0, 0.5, 0.5])  # the unserved one: censored at end
    assert m.gpu_hours == pytest.approx(8 * 2.5 / 3600)
    assert m.cost_usd == pytest.approx(55.0 * 2.5 / 3600)
    assert m.cold_starts == 0
    s = out.summary()
    assert s.slo_attainment == pytest.approx(1 / 3)
    assert s.p50_wait_s == pytest.approx(0.5)
    assert s.unserved == 1


def test_slots_serve_concurrently() -> None:
    run = model([0.0, 0.0, 0.0], 2.0, slots=2, slo_s=1.0, initial=1)
    m = engine([run], Scripted(lambda inp: 1), end_s=10.0).run().models["m"]
    np.testing.assert_allclose(m.waits, [0.0, 0.0, 2.0])
    assert m.met_slo == 2 and m.unserved == 0


def test_cold_start_from_zero_phases_and_charging() -> None:
    # Empty model, one 5 s request at t=10 wakes it; cold start 100 s (node up after 40 s).
    auto = Scripted(busy_in_last_sample)
    out = engine([model([10.0], 5.0, slo_s=2.0)], auto, end_s=200.0).run()
    m = out.models["m"]
    np.testing.assert_allclose(m.waits, [100.0])  # ready at 110
    assert m.met_slo == 0 and m.unserved == 0
    assert m.cold_starts == 1
    # Requested at 10; the request ends at 115; the tick at 116 sees an idle last scrape and
    # releases the replica: charged 106 s.
    assert m.gpu_hours == pytest.approx(106 / 3600, abs=1e-6)
    by_time = {round(inp.now): inp.replicas for inp in auto.seen}
    assert by_time[10].live == 0  # the wake-up decision
    assert (by_time[30].provisioning, by_time[30].starting, by_time[30].ready) == (1, 0, 0)
    assert (by_time[60].provisioning, by_time[60].starting, by_time[60].ready) == (0, 1, 0)
    assert by_time[111].ready == 1
    wake = next(inp for inp in auto.seen if round(inp.now) == 10)
    assert wake.metrics.samples[-1].queue_depth == 1.0  # type: ignore[union-attr]


def test_without_wake_on_arrival_it_waits_for_its_own_tick_and_lag() -> None:
    auto = Scripted(busy_in_last_sample)
    out = engine(
        [model([10.5], 5.0, slo_s=2.0)], auto, end_s=300.0, tick_s=5.0, lag_s=3.0, wakes=False
    ).run()
    # Asleep until its tick at 15; the sample of [10, 11) is visible from t=14, so it
    # scales at 15: ready at 115, the request waits 104.5 s.
    np.testing.assert_allclose(out.models["m"].waits, [104.5])


@pytest.mark.parametrize(
    ("phase", "seen_at"),
    [
        # Batches at 0, 10, 20, ...: the sample of [10, 11) arrives with the batch at 20,
        # seen at the 20 s tick; ready at 120, the request waits 109.5 s.
        (0.0, 20),
        # Batches at 5, 15, ...: it arrives at 15 (and is seen there).
        (5.0, 15),
    ],
)
def test_metrics_pushed_in_batches_are_seen_from_the_next_batch(phase: float, seen_at: int) -> None:
    auto = Scripted(busy_in_last_sample)
    run = model([10.5], 5.0, slo_s=2.0)
    out = engine(
        [run], auto, end_s=300.0, tick_s=5.0, push_s=10.0, push_phase_s=phase, wakes=False
    ).run()
    np.testing.assert_allclose(out.models["m"].waits, [seen_at + 100 - 10.5])
    # Between batches the newest sample stays where the last batch ended.
    newest = {
        round(inp.now): inp.metrics.samples[-1].t  # type: ignore[union-attr]
        for inp in auto.seen
        if isinstance(inp.metrics, MetricsWindow)
    }
    assert newest[seen_at] == newest[seen_at + 5] != newest[seen_at + 10]


def test_drain_charges_until_the_last_request_ends() -> None:
    # Two warm one-slot replicas; requests of 50 s and 10 s at t=0; from t=5 it wants one.
    run = model([0.0, 0.0], [50.0, 10.0], initial=2)
    auto = Scripted(lambda inp: 2 if inp.now < 5 else 1)
    m = engine([run], auto, end_s=100.0).run().models["m"]
    # The replica busy until 10 drains and is released at 10; the other runs to the end.
    assert m.gpu_hours == pytest.approx((10 + 100) / 3600)
    draining = {round(inp.now): inp.replicas.draining for inp in auto.seen}
    assert draining[6] == 1 and draining[11] == 0
    assert m.scale_events == 1 and m.unserved == 0


def test_scale_down_cancels_not_yet_ready_replicas_first() -> None:
    run = model([0.0], 1.0, initial=1)
    auto = Scripted(lambda inp: 3 if inp.now < 5 else 1)
    m = engine([run], auto, end_s=100.0).run().models["m"]
    assert m.cold_starts == 2
    assert m.gpu_hours == pytest.approx((100 + 5 + 5) / 3600)


def test_never_scaled_means_every_request_unserved() -> None:
    run = model([1.0, 2.0, 3.0], 1.0)
    out = engine([run], Scripted(lambda inp: 0), end_s=10.0).run()
    m = out.models["m"]
    assert m.unserved == 3 and m.met_slo == 0 and m.gpu_hours == 0
    np.testing.assert_allclose(m.waits, [9.0, 8.0, 7.0])


def test_an_idle_model_costs_no_ticks_between_requests() -> None:
    # Two requests 11.5 days apart with a 0.1 s tick: ticking through would be 10 M calls.
    auto = Scripted(busy_in_last_sample)
    run = model([0.0, 1_000_000.0], 1.0, slo_s=200.0)
    m = engine([run], auto, end_s=1_000_200.0, tick_s=0.1).run().models["m"]
    assert len(auto.seen) < 20_000
    assert m.unserved == 0 and m.met_slo == 2 and m.cold_starts == 2


def test_a_decider_wanting_nothing_inside_the_wake_lead_is_asked_again_each_tick() -> None:
    # Woken 100 s ahead of a request (the oracle's cold-start lead), a decider that still
    # wants 0 sleeps until its next tick, not a hair further (that loop never ended).
    auto = Scripted(lambda inp: 1 if inp.now >= 1_030.0 else 0)
    run = model([1_050.0], 1.0, slo_s=200.0)
    m = engine([run], auto, end_s=1_400.0, tick_s=10.0, wake_lead_s=100.0).run().models["m"]
    times = [inp.now for inp in auto.seen]
    assert times[:1] == [0.0] and times[1] == pytest.approx(950.0)
    assert times[2:5] == pytest.approx([960.0, 970.0, 980.0])
    assert len(times) < 60
    # launched at 1,030 s, ready after the 100 s cold start: the request waits 80 s
    assert m.unserved == 0 and m.met_slo == 1
    np.testing.assert_allclose(m.waits, [80.0])


def test_models_are_independent_and_share_one_clock() -> None:
    a = model([0.0, 5.0], 1.0, initial=1, name="a")
    b = model([2.0], 1.0, initial=1, name="b", gpus=8)
    out = engine([a, b], Scripted(lambda inp: 1), end_s=10.0).run()
    assert out.models["a"].gpu_hours == pytest.approx(10 / 3600)
    assert out.models["b"].gpu_hours == pytest.approx(80 / 3600)
    assert out.requests == 3


def test_warm_up_is_not_measured() -> None:
    from controlplane.simulator.capacity import ColdStartCapacity
    from controlplane.simulator.engine import Engine
    from tests.unit.simulator.helpers import PHASES_100

    run = model([0.0, 1.0, 20.0, 21.0], 1.0, initial=1)
    run.measured_from = 2  # the first two requests are warm-up
    auto = Scripted(lambda inp: 1)
    eng = Engine(
        [run],
        30.0,
        auto,
        ColdStartCapacity({"m": PHASES_100}),
        tick_s=1.0,
        metric_lag_s=0.0,
        scrape_interval_s=1.0,
        measure_from_s=20.0,
    )
    out = eng.run()
    m = out.models["m"]
    assert m.requests == 2 and out.end_s == pytest.approx(10.0)
    assert m.gpu_hours == pytest.approx(10 / 3600)


class _WarmCapacity(ColdStartCapacity):
    """The fleet's phases, plus ``waiting`` warm nodes that a resume takes 10 s from; records
    the sizes the engine asks for."""

    def __init__(self, waiting: int, bound: int) -> None:
        super().__init__({"m": PHASES_100})
        self.waiting, self.bound = waiting, bound
        self.kept: list[int] = []

    def warm_waiting(self, model: str, now: float) -> tuple[int, float]:
        return self.waiting, 10.0

    def warm_bound(self, model: str) -> int:
        return self.bound

    def keep_warm(self, model: str, now: float, keep: int) -> None:
        self.kept.append(keep)


@pytest.mark.parametrize(("waiting", "desired"), [(1, 5), (4, 1)])
def test_a_resumes_look_ahead_only_while_the_warm_nodes_cover_the_difference(
    waiting: int, desired: int
) -> None:
    # Over a create's 100 s the scripted decider wants 5, over a resume's 10 s only 1: one
    # waiting node does not make the burst of four extra a resume away (the decide job's
    # lifecycle.warm.covers); four do.
    auto = Scripted(lambda inp: 1 if inp.cold_start_s < 50 else 5)
    cap = _WarmCapacity(waiting, bound=3)
    out = Engine(
        [model([0.5], 1.0)],
        3.0,
        auto,
        cap,
        tick_s=1.0,
        metric_lag_s=0.0,
        scrape_interval_s=1.0,
        history_s=10.0,
    ).run()
    assert max(p.desired for p in out.models["m"].timeline) == desired
    assert [inp.cold_start_s for inp in auto.seen[:2]] == [100.0, 10.0]  # create's, then resume's
    # Sized as the place job sizes it: no forecast in a scripted state, so one, within 3.
    assert cap.kept and set(cap.kept) == {1}

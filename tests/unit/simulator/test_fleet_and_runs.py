"""Fleet files (defaults, template clones, errors with lines) and whole replays through the
runner: service times from the fleet, determinism for a seed, every autoscaler by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from controlplane.simulator.engine import Summary
from controlplane.simulator.runner import ALL, SWEEP_PROBES, Simulation, autoscaler_names
from controlplane.simulator.setup import (
    MIN_SERVICE_S,
    SetupError,
    build_runs,
    scaling_spec,
    service_times,
    warmup_bound_s,
    with_warmup,
)
from controlplane.simulator.traces import ModelTrace, Trace, TraceOptions, TraceSpec, read_trace
from schema.fleet import FleetError, parse_fleet

FLEET = """
name: t
coldstart: {capacity_vm_s: 30, bootstrap_s: 10, image_pull_s: 5, weight_fetch_s: 5, load_init_s: 10}
models:
  - name: big
    shape: 8xH100
    slots: 4
    slo_s: 1.0
    service: {prefill_tokens_per_s: 1000, output_token_s: 0.01}
    coldstart: {load_init_s: 50}
template:
  shape: 1xH100
  slots: 2
  slo_s: 0.5
  service: {per_request_s: 2.0}
  usd_per_gpu_hour: 3.0
"""


def test_fleet_defaults_template_and_prices() -> None:
    fleet = parse_fleet(FLEET)
    big = fleet.model("big")
    assert big is not None
    assert big.usd_per_replica_hour == pytest.approx(55.04)  # cheapest 8xH100: p5.48xlarge
    assert fleet.coldstart_for(big).total_s == pytest.approx(100.0)
    clone = fleet.model("anything")
    assert clone is not None and clone.name == "anything" and clone.slots == 2
    assert clone.usd_per_replica_hour == pytest.approx(3.0)
    assert fleet.coldstart_for(clone).total_s == pytest.approx(60.0)


def test_default_phases_follow_coldstart_md() -> None:
    fleet = parse_fleet(
        "template: {shape: 1xH100, slots: 1, slo_s: 1, service: {per_request_s: 1}}"
    )
    p = fleet.coldstart
    assert (p.capacity_vm_s, p.bootstrap_s, p.load_init_s) == (600.0, 60.0, 210.0)


_MODEL = (
    "models:\n  - name: a\n    shape: {shape}\n    slots: 1\n    slo_s: 1\n    service: {service}\n"
)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            _MODEL.format(shape="8xA100", service="{per_request_s: 1}"),
            "<fleet>:3:5: models[0].shape: unknown GPU shape",
        ),
        (
            _MODEL.format(shape="1xH100", service="{output_token_s: 1}"),
            "go together",
        ),
        (
            "template: {shape: 1xH100, slots: 1, slo_s: 1, service: {per_request_s: 1}}\n"
            "bogus: 1\n",
            "<fleet>:2:1: bogus: unknown field",
        ),
        (
            _MODEL.format(shape="1xH100", service="{per_request_s: .inf}"),
            "models[0].service.per_request_s: Input should be a finite number",
        ),
        ("[1, 2]", "expected a mapping"),
        ("name: x\n", "at least one model or a template"),
        (
            _MODEL.format(shape="1xH100", service="{per_request_s: 1}")
            + "\n"
            + _MODEL.format(shape="1xH100", service="{per_request_s: 2}").replace("models:\n", ""),
            "<fleet>:8:5: models[1].name: duplicate model name",
        ),
    ],
)
def test_fleet_errors_name_line_and_field(text: str, fragment: str) -> None:
    with pytest.raises(FleetError) as err:
        parse_fleet(text)
    assert fragment in str(err.value)


def test_service_times_from_tokens_defaults_or_trace() -> None:
    fleet = parse_fleet(FLEET)
    big = fleet.model("big")
    assert big is not None
    tokens = ModelTrace(
        "big", np.array([0.0, 1.0]), np.array([1000.0, 0.0]), np.array([100.0, 50.0])
    )
    svc, out = service_times(big, tokens)
    np.testing.assert_allclose(svc, [1.0 + 1.0, 0.5])
    assert out is not None and out.tolist() == [100.0, 50.0]
    explicit = ModelTrace("big", np.array([0.0]), None, None, np.array([7.0]))
    assert service_times(big, explicit)[0].tolist() == [7.0]
    bare = ModelTrace("big", np.array([0.0]))
    with pytest.raises(SetupError, match="default_input_tokens"):
        service_times(big, bare)
    clone = fleet.model("x")
    assert clone is not None
    assert service_times(clone, bare)[0].tolist() == [2.0]
    # a request of no tokens, or of service_s 0, still holds a slot (for a millisecond)
    empty = ModelTrace("big", np.array([0.0, 1.0]), np.zeros(2), np.zeros(2), np.array([0.0, 3.0]))
    assert service_times(big, empty)[0].tolist() == [MIN_SERVICE_S, 3.0]
    assert service_times(big, ModelTrace("big", np.array([0.0]), np.zeros(1), np.zeros(1)))[
        0
    ].tolist() == [MIN_SERVICE_S]


def test_model_missing_from_fleet_without_template() -> None:
    fleet = parse_fleet(FLEET.split("template:")[0])
    trace = Trace({"other": ModelTrace("other", np.array([0.0]))}, 1.0, "t")
    with pytest.raises(SetupError, match="not in the fleet"):
        build_runs(fleet, trace)


def test_a_fleet_built_in_code_with_a_model_named_twice_is_refused() -> None:
    fleet = parse_fleet(FLEET)
    twice = fleet.model_copy(update={"models": [*fleet.models, fleet.models[0]]})
    trace = Trace({"big": ModelTrace("big", np.array([0.0]))}, 1.0, "t")
    with pytest.raises(SetupError, match=r"models\[\d+\]\.name: duplicate model name 'big'"):
        build_runs(twice, trace)


def _tiny_trace(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 1800, 600))
    lines = ["timestamp,model,input_tokens,output_tokens,service_s"]
    lines += [f"{x:.3f},big,{rng.integers(100, 2000)},{rng.integers(10, 200)}," for x in t]
    lines += [f"{x:.3f},small,,,{rng.uniform(0.5, 3):.3f}" for x in t[::3]]
    path = tmp_path / "tiny.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("arrivals", "end", "history", "warmup", "replayed", "sources", "first"),
    [
        # No history: the trace (21 s, 3 requests: 7 s apart on average) repeats before
        # itself, its end in the warm-up, as if it had run before.
        ([0.0, 5.0, 20.0], 21.0, 0.0, 10.0, [2.0, 10.0, 15.0, 30.0], [20, 0, 5, 20], 1),
        # History longer than the warm-up: its last 10 s are the warm-up, nothing copied.
        ([-12.0, -8.0, -3.0, 0.0, 5.0], 6.0, 12.0, 10.0, [2, 7, 10, 15], [-8, -3, 0, 5], 2),
        # 4 s of history: it ends the warm-up; before it, the end of the 10 s read (and a
        # mean gap, 2.5 s: the period is 12.5 s).
        ([-4.0, -1.0, 2.0, 5.0], 6.0, 4.0, 10.0, [2.5, 6, 9, 12, 15], [5, -4, -1, 2, 5], 3),
        # A trace shorter than the warm-up repeats as often as it takes, every 4 + 2 s.
        ([0.0, 3.0], 4.0, 0.0, 10.0, [1, 4, 7, 10, 13], [3, 0, 3, 0, 3], 3),
        # No warm-up: the history is dropped.
        ([-4.0, -1.0, 2.0, 5.0], 6.0, 4.0, 0.0, [2.0, 5.0], [2, 5], 0),
    ],
)
def test_the_warm_up_is_the_history_then_the_trace_s_end(
    arrivals: list[float],
    end: float,
    history: float,
    warmup: float,
    replayed: list[float],
    sources: list[float],
    first: int,
) -> None:
    # Each request's service time is its own arrival time: it shows which request went where.
    trace = ModelTrace("m", np.array(arrivals), service_s=np.array(arrivals))
    shifted, measured_from = with_warmup(trace, warmup, history, end)
    assert shifted.arrivals.tolist() == replayed
    assert shifted.service_s is not None and shifted.service_s.tolist() == sources
    assert measured_from == first
    assert (shifted.arrivals[first:] - warmup).tolist() == [t for t in arrivals if t >= 0]


def test_a_replay_measures_the_window_after_its_real_history(tmp_path: Path) -> None:
    path = tmp_path / "g.csv"
    path.write_text("timestamp,model,service_s\n" + "".join(f"{t},x,1\n" for t in range(0, 400, 2)))
    fleet = parse_fleet(FLEET)
    assert warmup_bound_s(fleet) == 60 + 50 - 10 + 300  # big: load_init_s 50 instead of 10
    options = TraceOptions(start_s=300, end_s=400, history_s=warmup_bound_s(fleet))
    trace = read_trace([TraceSpec.parse(str(path))], options)
    sim = Simulation(fleet, trace)  # x: a template clone, 60 s cold start
    assert sim.warmup_s == 360 and trace.history_s == 300
    (run,) = sim.runs
    # The window's last 60 s, then its 300 s of history; 50 requests measured.
    assert run.arrivals.size == 30 + 150 + 50 and run.measured_from == 180
    assert run.arrivals[run.measured_from] == 360.0
    assert sim.run("ours").requests == trace.requests == 50


def test_every_autoscaler_runs_and_reports(tmp_path: Path) -> None:
    sim = Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(_tiny_trace(tmp_path)))]))
    assert sim.requests == 800
    for name in ALL:
        s = sim.run(name).summary()
        assert s.autoscaler == name
        assert 0.0 <= s.slo_attainment <= 1.0
        assert s.gpu_hours > 0
    oracle = sim.run("oracle", 1.2).summary()
    assert oracle.slo_attainment == pytest.approx(1.0)


def test_same_seed_same_results(tmp_path: Path) -> None:
    folder = tmp_path / "data" / "reason" / "r1"
    folder.mkdir(parents=True)
    (folder / "chunk-0-trace.csv").write_text(
        "0,3.0,1.2,Gamma,0.7,0.48\n600,6.0,1.0,Weibull,1.0,0.17\n1200,1.0,1.0,Gamma,1.0,1.0\n"
    )
    fleet = parse_fleet(FLEET)

    def once(seed: int) -> list[Summary]:
        trace = read_trace([TraceSpec.parse(f"r1={folder}")], TraceOptions(seed=seed))
        sim = Simulation(fleet, trace)
        return [sim.run(n).summary() for n in ("ours", "knative", "oracle")]

    assert once(5) == once(5)
    assert once(5) != once(6)


def test_sweep_reports_the_cheapest_knob_reaching_the_target(tmp_path: Path) -> None:
    sim = Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(_tiny_trace(tmp_path)))]))
    result = sim.sweep("oracle", 0.99)
    # Two models, but one headroom is already the cheapest: no extra run for a mix.
    # Bisection (issue 23 b): at most SWEEP_PROBES runs, stopping where the answer is known.
    assert len(sim.runs) == 2 and sim.sweep_size("oracle") == SWEEP_PROBES + 1
    assert 1 <= len(result.tried) <= SWEEP_PROBES
    assert result.best is not None
    ok = [o for o in result.tried if o.summary().slo_attainment >= 0.99]
    assert result.best.summary().gpu_hours == min(o.summary().gpu_hours for o in ok)
    impossible = sim.sweep("hpa", 1.01)
    assert impossible.best is None


def test_oracle_sweep_spends_the_miss_budget_per_model(tmp_path: Path) -> None:
    # big: a steady 5 in service (one request every 0.5 s for 2.5 s) on 4-slot replicas,
    # so any headroom up to 0.8 leaves it one replica short for ten minutes. small: a
    # burst of 6 requests at once on 2-slot replicas; a headroom up to 2/3 serves it with
    # two replicas and two late requests. No single headroom gives both; the pooled
    # 0.99 target allows the two misses.
    lines = ["timestamp,model,input_tokens,output_tokens,service_s"]
    lines += [f"{0.5 * k},big,,,2.5" for k in range(1200)]
    lines += [f"{10.0 * k + 5},small,,,2" for k in range(60)]
    lines += ["300.25,small,,,2"] * 6
    path = tmp_path / "burst.csv"
    path.write_text("\n".join(lines) + "\n")
    sim = Simulation(parse_fleet(FLEET), read_trace([TraceSpec.parse(str(path))]))
    steps: list[tuple[int, int, float]] = []
    result = sim.sweep("oracle", 0.99, lambda k, n, f: steps.append((k, n, f)))
    uniform = {o.knob: o for o in result.tried if isinstance(o.knob, float)}
    # The progress counts the mix's replay too: it ends at the last of sweep_size runs.
    n = sim.sweep_size("oracle")
    assert n == SWEEP_PROBES + 1 == len(result.tried)
    assert {s[1] for s in steps} == {n} and {s[0] for s in steps} == set(range(n))
    assert steps[-1][0] == n - 1 and steps[-1][2] == pytest.approx(1.0)
    assert result.best is not None and isinstance(result.best.knob, dict)
    mix = result.best.knob
    assert mix["small"] <= 0.6 and mix["big"] > 0.8
    best = result.best.summary()
    assert best.slo_attainment >= 0.99
    ok = [o.summary().gpu_hours for o in uniform.values() if o.summary().slo_attainment >= 0.99]
    assert best.gpu_hours < min(ok)
    # Each model replays on its own plan: the mix's models match their uniform runs.
    for m, h in mix.items():
        assert result.best.models[m].gpu_hours == uniform[h].models[m].gpu_hours
        assert result.best.models[m].met_slo == uniform[h].models[m].met_slo


def test_autoscaler_names() -> None:
    assert autoscaler_names("all") == list(ALL)
    assert autoscaler_names("ours, oracle,ours") == ["ours", "oracle"]
    with pytest.raises(ValueError, match="unknown autoscaler magic"):
        autoscaler_names("ours,magic")
    with pytest.raises(ValueError, match="all stands alone"):
        autoscaler_names("all,ours")


def test_a_fleet_scaling_block_reaches_the_autoscaler() -> None:
    text = FLEET + "  scaling: {scale_up_delay_s: 120, max_scale_down_rate: 4}\n"
    fleet = parse_fleet(text)
    clone = fleet.model("anything")
    assert clone is not None
    spec = scaling_spec(clone)
    assert (spec.scale_up_delay_s, spec.max_scale_down_rate) == (120.0, 4.0)
    big = fleet.model("big")
    assert big is not None
    default = scaling_spec(big)  # unset: the autoscaler's own defaults
    assert (default.scale_up_delay_s, default.scale_down_delay_s) == (0.0, 120.0)
    assert (default.max_scale_up_rate, default.max_scale_down_rate) == (1000.0, 2.0)
    with pytest.raises(FleetError, match="max_scale_up_rate"):
        parse_fleet(FLEET + "  scaling: {max_scale_up_rate: 0.5}\n")

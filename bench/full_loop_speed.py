"""How fast the full-loop replay (``gpucap simulate --full-loop``) goes: requests replayed
per wall-minute, on a dense trace (Azure LLM 2023 ``code``, an hour of one model) and a
sparse one (30 models, each a few short bursts days apart, a week; synthesised, seeded).

    .venv/bin/python bench/full_loop_speed.py [--only dense|sparse] [--profile DIR]
    .venv/bin/python bench/full_loop_speed.py --cadence [--only-bursty]

``--cadence`` instead replays both Azure traces (code as llama-8b, conv as llama-70b, the
fleet of examples/fleet-llm.yaml) with the collect, decide and place jobs every 5, 10, 15
and 30 s (reconcile every 10 s, 5 s at the 5 s cadence): SLO attainment and GPU-hours per
interval, for the daemon's default (``controlplane.loop.Tuning``).

``--profile DIR`` writes a pyinstrument HTML profile of each run there (pyinstrument is
not a project dependency: ``pip install pyinstrument``). Prints one JSON object; the
numbers go into docs/full-loop.md by hand. Not part of ``make test``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from controlplane.loop import Tuning
from controlplane.simulator.fullloop import fleet_scenario, replay
from controlplane.simulator.fullloop.scenario import Scenario
from controlplane.simulator.traces import ModelTrace, Trace, TraceOptions, TraceSpec, read_trace
from controlplane.telemetry import configure_logging
from schema.fleet import load_fleet_file, parse_fleet

ROOT = Path(__file__).resolve().parent.parent
AZURE = ROOT.parent.parent / "shared" / "traces" / "azure-llm-2023"
if not AZURE.exists():
    AZURE = Path("/work/shared/traces/azure-llm-2023")

SPARSE_FLEET = """
name: sparse
template:
  shape: 1xH100
  slots: 32
  slo_s: 0.5
  service: {per_request_s: 1.0}
  scale_to_zero_grace_s: 600
coldstart:
  {capacity_vm_s: 120, bootstrap_s: 30, image_pull_s: 15, weight_fetch_s: 5, load_init_s: 45}
"""
DAY = 86400.0


def dense() -> Scenario:
    fleet = load_fleet_file(ROOT / "examples" / "fleet-llm.yaml")
    spec = TraceSpec.parse(f"llama-8b={AZURE / 'AzureLLMInferenceTrace_code.csv.gz'}")
    return fleet_scenario(fleet, read_trace([spec], TraceOptions()))


def sparse(models: int = 30, days: int = 7, seed: int = 11) -> Scenario:
    """Each model: 2 bursts of ~2 minutes at 5 requests/s, 3 to 4 days apart, at random
    times of the week (the loop sleeps whenever no model has a burst in hand)."""
    rng = np.random.default_rng(seed)
    traces = {}
    for k in range(models):
        name = f"m{k:02d}"
        first = rng.uniform(0, (days - 4) * DAY)
        parts = []
        for at in (first, first + rng.uniform(3 * DAY, 4 * DAY)):
            n = rng.poisson(5.0 * 120)
            parts.append(np.sort(at + rng.uniform(0, 120, n)))
        traces[name] = ModelTrace(name, np.concatenate(parts))
    trace = Trace(traces, end_s=days * DAY, label=f"sparse {models} models x {days} d")
    return fleet_scenario(parse_fleet(SPARSE_FLEET), trace)


def both_azure() -> Scenario:
    fleet = load_fleet_file(ROOT / "examples" / "fleet-llm.yaml")
    specs = [
        TraceSpec.parse(f"llama-8b={AZURE / 'AzureLLMInferenceTrace_code.csv.gz'}"),
        TraceSpec.parse(f"llama-70b={AZURE / 'AzureLLMInferenceTrace_conv.csv.gz'}"),
    ]
    return fleet_scenario(fleet, read_trace(specs, TraceOptions()))


BURSTY_FLEET = """
name: bursty
coldstart:
  {capacity_vm_s: 60, bootstrap_s: 10, image_pull_s: 5, weight_fetch_s: 5, load_init_s: 10}
models:
  - name: chat
    shape: 1xH100
    slots: 8
    slo_s: 1
    max_replicas: 50
    service: {per_request_s: 2.0}
"""


def bursty(seed: int = 5) -> Scenario:
    """An hour of 2 requests/s with a 4-minute burst to 16/s every 15 minutes, on nodes that
    serve 90 s after their request: where the decision interval matters most (a short cold
    start next to the interval, sudden steps)."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(4):
        t0 = k * 900.0
        for rate, lo, hi in ((2.0, 0, 300), (16.0, 300, 540), (2.0, 540, 900)):
            n = rng.poisson(rate * (hi - lo))
            parts.append(np.sort(t0 + rng.uniform(lo, hi, n)))
    trace = Trace({"chat": ModelTrace("chat", np.concatenate(parts))}, 3600.0, "bursty")
    return fleet_scenario(parse_fleet(BURSTY_FLEET), trace)


INTERVALS = (5.0, 10.0, 15.0, 30.0)


def cadence(intervals: tuple[float, ...] = INTERVALS) -> list[dict[str, Any]]:
    return [
        {"scenario": name, **row}
        for name, build in (("azure code+conv", both_azure), ("bursty", bursty))
        for row in cadence_of(build(), intervals)
    ]


def cadence_of(scenario: Scenario, intervals: tuple[float, ...]) -> list[dict[str, Any]]:
    rows = []
    for every in intervals:
        tuning = replace(
            Tuning(),
            collect_s=every,
            decide_s=every,
            place_s=every,
            reconcile_s=min(every, Tuning().reconcile_s),
        )
        started = time.perf_counter()
        out = replay(scenario, tuning=tuning).as_dict()
        rows.append(
            {
                "collect_decide_place_s": every,
                "reconcile_s": tuning.reconcile_s,
                "slo_attainment": round(out["slo_attainment"], 4),
                "gpu_hours": round(out["gpu_hours"], 2),
                "p99_wait_s": round(out["p99_wait_s"], 2),
                "scale_events": out["scale_events"],
                "per_model": {
                    m: (round(r["slo_attainment"], 4), round(r["gpu_hours"], 2))
                    for m, r in out["models"].items()
                },
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )
    return rows


def measure(name: str, scenario: Scenario, profile: Path | None) -> dict[str, Any]:
    requests = int(sum(m.arrivals.size for m in scenario.loads))
    profiler = None
    if profile is not None:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
    started = time.perf_counter()
    out = replay(scenario)
    wall = time.perf_counter() - started
    if profiler is not None:
        profiler.stop()
        assert profile is not None
        profile.mkdir(parents=True, exist_ok=True)
        (profile / f"full_loop_{name}.html").write_text(profiler.output_html())
    row = out.as_dict()
    return {
        "scenario": name,
        "trace": scenario.label,
        "requests_replayed": requests,  # the warm-up's too: the loop serves them all
        "virtual_hours": scenario.end_s / 3600.0,
        "job_ticks": out.ticks,
        "wall_s": round(wall, 2),
        "requests_per_wall_minute": round(requests / wall * 60.0),
        "ticks_per_wall_s": round(out.ticks / wall, 1),
        "slo_attainment": row["slo_attainment"],
        "gpu_hours": row["gpu_hours"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", choices=("dense", "sparse"))
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--cadence", action="store_true")
    ap.add_argument("--only-bursty", action="store_true", help="--cadence on the bursty trace")
    args = ap.parse_args()
    configure_logging("warning", json=True)
    if args.cadence:
        rows = (
            [{"scenario": "bursty", **r} for r in cadence_of(bursty(), INTERVALS)]
            if args.only_bursty
            else cadence()
        )
        print(json.dumps({"cadence": rows, "machine": machine()}, indent=2))
        return
    rows = []
    for name, build in (("dense", dense), ("sparse", sparse)):
        if args.only in (None, name):
            rows.append(measure(name, build(), args.profile))
    print(json.dumps({"machine": machine(), "runs": rows}, indent=2))


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


if __name__ == "__main__":
    main()

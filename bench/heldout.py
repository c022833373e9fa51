"""Held-out days for a change to an autoscaler: the least GPU-hours at SLO attainment >= 0.99
on whole ServeGen days that the bench (``simulate_bench.py``) does not use.

    .venv/bin/python bench/heldout.py [--autoscalers ours] [--knobs 0.4,0.5,...] [--jobs 2]
                                      [--only NAME ...] [--traces DIR]

The bench's ServeGen windows were picked around the traces' largest bursts (a stress test).
A change tuned on them must hold on ordinary days as well, or it only moves the bench: run
this at the commit before the change and after it, and compare. The days were chosen before
anything was measured on them -- m-large days 3, 6 and 11 at published rates (a few dozen
8xH100 replicas) and mm-image's one day at x10 -- and none overlaps a bench scenario's window (a
test checks). Each (day, autoscaler) replays its knob values exactly as ``gpucap simulate
--slo-target 0.99`` does (``--knobs`` narrows them: a full sweep of one day takes about ten
minutes here). Not part of ``make test``; prints Markdown, writes nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import simulate_bench as bench  # noqa: E402

from controlplane.simulator.engine import knob_label  # noqa: E402
from controlplane.simulator.runner import autoscaler_names  # noqa: E402

DAY = bench.DAY
_POOL = bench._rel(bench.SERVEGEN)


def _day(pool: str, day: int, rate_scale: float, note: str) -> bench.Scenario:
    return bench.Scenario(
        f"{pool}-day{day}",
        (f"{pool}={_POOL}",),
        note,
        start_s=day * DAY,
        end_s=(day + 1) * DAY,
        rate_scale=rate_scale,
    )


HELDOUT = (
    _day("m-large", 3, 1.0, "ServeGen m-large, day 3, published rates"),
    _day("m-large", 6, 1.0, "ServeGen m-large, day 6, published rates"),
    _day("m-large", 11, 1.0, "ServeGen m-large, day 11, published rates"),
    _day("mm-image", 0, 10.0, "ServeGen mm-image, its one day, rates x10"),
)


def run_day(sc: bench.Scenario, names: tuple[str, ...], knobs: tuple[float, ...] | None) -> str:
    """One day's Markdown rows: per autoscaler, the cheapest run at >= the target."""
    sim = bench.simulation(sc)
    rows = []
    for name in names:
        started = time.perf_counter()
        if knobs is None:
            tried = sim.sweep(name, bench.SLO_TARGET).tried
        else:
            # (The oracle's knob is its headroom, not a utilization: its default, once.)
            tried = [sim.run(name)] if name == "oracle" else [sim.run(name, k) for k in knobs]
        summaries = [o.summary() for o in tried]
        ok = [s for s in summaries if s.slo_attainment >= bench.SLO_TARGET]
        wall = time.perf_counter() - started
        if ok:
            best = min(ok, key=lambda s: s.gpu_hours)
            rows.append(
                f"| {sc.name} | {name} | {knob_label(best.knob)} | {best.slo_attainment:.4f} "
                f"| {best.gpu_hours:,.1f} | {best.cold_starts} | {len(tried)} | {wall:.0f} |"
            )
        else:
            closest = max(summaries, key=lambda s: s.slo_attainment)
            rows.append(
                f"| {sc.name} | {name} | null (closest {knob_label(closest.knob)}: "
                f"{closest.slo_attainment:.4f}) | - | - | - | {len(tried)} | {wall:.0f} |"
            )
        print(rows[-1], file=sys.stderr, flush=True)  # progress, while the others run
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--autoscalers", default="ours", help="comma-separated, or all")
    ap.add_argument("--knobs", default=None, help="comma-separated knob values (default: sweep)")
    ap.add_argument("--only", nargs="*", default=None, help="day names, e.g. m-large-day3")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--traces", default=str(bench.TRACES), help="the shared traces folder")
    args = ap.parse_args()
    bench._traces_dir = Path(args.traces)
    names = tuple(autoscaler_names(args.autoscalers))
    knobs = tuple(float(k) for k in args.knobs.split(",")) if args.knobs else None
    days = [s for s in HELDOUT if not args.only or s.name in args.only]
    if not days:
        raise SystemExit(f"--only matches no day (days: {', '.join(s.name for s in HELDOUT)})")
    jobs: list[tuple[Any, ...]] = [(sc, names, knobs) for sc in days]
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            out = pool.starmap(run_day, jobs)
    else:
        out = [run_day(*j) for j in jobs]
    print(f"SLO attainment >= {bench.SLO_TARGET}, seed {bench.SEED}; least GPU-hours per day.\n")
    print("| day | autoscaler | knob | SLO attainment | GPU-hours | cold starts | runs | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(out))


if __name__ == "__main__":
    main()

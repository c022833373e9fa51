"""``gpucap simulate --full-loop``: the daemon's own control loop on virtual time against
the simulated clouds (``controlplane.simulator.fullloop``), one decider after another.

``--json`` prints ``{"trace", "requests", "mode": "full-loop", "results": [...]}``; each
result has the keys of ``gpucap simulate --json`` (``knob`` null: the models' own targets;
with ``--slo-target``, the cheapest passing knob, searched as the engine searches it, and
for an autoscaler no knob brings there ``slo_attainment`` null and its ``closest`` run),
then ``models`` (the same keys per model), ``tiers`` (replica-hours, node-hours, GPU-hours
and cost per capacity tier: committed, on_demand, shared = overflow) and
``stockouts`` (per window of the clouds file, each model's time to have its desired
capacity ready again, ``recovery_s`` the longest; null: not by the end)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from controlplane.cli.simulate import missing_result
from controlplane.simulator.engine import knob_label
from controlplane.simulator.fullloop import fleet_scenario, policy_scenario, replay
from controlplane.simulator.fullloop.outcome import FullLoopOutcome
from controlplane.simulator.fullloop.scenario import Scenario
from controlplane.simulator.fullloop.sweep import sweep, sweep_size
from controlplane.simulator.traces import Trace
from controlplane.telemetry import configure_logging
from schema.clouds_file import load_clouds_file
from schema.fleet import Fleet
from schema.policy_file import load_policy_file


def scenario_for(
    trace: Trace,
    fleet: Fleet | None,
    policy: Path | None,
    clouds: Path | None,
    warmup_s: float | None,
) -> Scenario:
    """Raises PolicyError, CloudsError, SetupError (the caller reports them)."""
    world = load_clouds_file(clouds, with_policy=policy is not None) if clouds else None
    if policy is not None:
        return policy_scenario(load_policy_file(policy), trace, fleet, warmup_s, world)
    assert fleet is not None
    return fleet_scenario(fleet, trace, warmup_s, world)


def run_full_loop(
    scenario: Scenario,
    trace: Trace,
    names: list[str],
    json_out: bool,
    slo_target: float | None = None,
) -> None:
    # The loop logs every decision at info (the daemon's log); a replay keeps warnings.
    configure_logging("warning", json=True)
    if slo_target is None:
        outs: list[FullLoopOutcome | None] = [replay(scenario, name) for name in names]
        missed: dict[str, FullLoopOutcome] = {}
    else:
        outs, missed = _swept(scenario, names, slo_target, quiet=json_out)
    if json_out:
        payload: dict[str, Any] = {
            "trace": trace.label,
            "requests": trace.requests,
            "mode": "full-loop",
            "results": [
                o.as_dict() if o is not None else _missing(name, missed.get(name))
                for name, o in zip(names, outs, strict=True)
            ],
        }
        if slo_target is not None:
            payload["slo_target"] = slo_target
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    _print(trace, names, outs, missed, slo_target)


def _swept(
    scenario: Scenario, names: list[str], target: float, quiet: bool
) -> tuple[list[FullLoopOutcome | None], dict[str, FullLoopOutcome]]:
    """Each autoscaler's cheapest passing run (None: none passes; its closest run is then
    in the second value), with a progress bar on stderr unless ``quiet``."""
    total = sum(sweep_size(n) for n in names)
    best: list[FullLoopOutcome | None] = []
    missed: dict[str, FullLoopOutcome] = {}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet,
        transient=True,
    ) as bar:
        task = bar.add_task("full-loop sweep", total=total)
        for name in names:
            bar.update(task, description=f"full-loop sweep: {name}")
            result = sweep(scenario, name, target, done=lambda _o: bar.advance(task))
            best.append(result.best)
            closest = result.closest()
            if result.best is None and closest is not None:
                missed[name] = closest
    return best, missed


def _missing(name: str, closest: FullLoopOutcome | None) -> dict[str, Any]:
    """The JSON of an autoscaler no knob value brings to the target (as the engine's)."""
    out = missing_result(name)
    if closest is not None:
        out["closest"] = closest.as_dict()
    return out


def _print(
    trace: Trace,
    names: list[str],
    outs: list[FullLoopOutcome | None],
    missed: dict[str, FullLoopOutcome],
    slo_target: float | None,
) -> None:
    console = Console()
    swept = "" if slo_target is None else f", cheapest knob with SLO attainment >= {slo_target:g}"
    table = Table(
        title=f"{trace.label}: {trace.requests:,} requests, the daemon's loop (full loop){swept}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    columns = ("autoscaler", "knob", "model", "SLO attain.", "GPU-hours", "cost USD", "p99 wait s")
    for col in columns:
        table.add_column(col, justify="left" if col in ("autoscaler", "model") else "right")
    notes = []
    for name, o in zip(names, outs, strict=True):
        if o is None:
            table.add_row(name, "-", "(all)", f"< {slo_target:g}", "null", "-", "-")
            closest = missed.get(name)
            if closest is not None:
                s = closest.run.summary()
                notes.append(
                    f"{name}: no knob reaches {slo_target:g} (best {s.slo_attainment:.4f} at "
                    f"{knob_label(closest.run.knob)}, {s.gpu_hours:,.1f} GPU-h)"
                )
            continue
        row = o.as_dict()
        table.add_row(
            row["autoscaler"],
            knob_label(o.run.knob),
            "(all)",
            f"{row['slo_attainment']:.4f}",
            f"{row['gpu_hours']:,.1f}",
            f"{row['cost_usd']:,.0f}",
            f"{row['p99_wait_s']:.2f}",
        )
        for model, m in row["models"].items():
            table.add_row(
                "",
                "",
                model,
                f"{m['slo_attainment']:.4f}",
                f"{m['gpu_hours']:,.1f}",
                f"{m['cost_usd']:,.0f}",
                f"{m['p99_wait_s']:.2f}",
            )
    if notes:
        table.caption = "; ".join(notes)
    console.print(table)

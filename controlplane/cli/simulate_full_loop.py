"""``gpucap simulate --full-loop``: the daemon's own control loop on virtual time against
the simulated clouds (``controlplane.simulator.fullloop``), one decider after another.

``--json`` prints ``{"trace", "requests", "mode": "full-loop", "results": [...]}``; each
result has the keys of ``gpucap simulate --json`` (``knob`` is null: the models' own
targets), then ``models`` (the same keys per model), ``tiers`` (replica-hours, node-hours,
GPU-hours and cost per capacity tier: committed, on_demand, shared = overflow) and
``stockouts`` (per window of the clouds file, each model's time to have its desired
capacity ready again, ``recovery_s`` the longest; null: not by the end)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from controlplane.simulator.fullloop import fleet_scenario, policy_scenario, replay
from controlplane.simulator.fullloop.outcome import FullLoopOutcome
from controlplane.simulator.fullloop.scenario import Scenario
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


def run_full_loop(scenario: Scenario, trace: Trace, names: list[str], json_out: bool) -> None:
    # The loop logs every decision at info (the daemon's log); a replay keeps warnings.
    configure_logging("warning", json=True)
    outs = [replay(scenario, name) for name in names]
    if json_out:
        payload: dict[str, Any] = {
            "trace": trace.label,
            "requests": trace.requests,
            "mode": "full-loop",
            "results": [o.as_dict() for o in outs],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    _print(trace, outs)


def _print(trace: Trace, outs: list[FullLoopOutcome]) -> None:
    console = Console()
    table = Table(
        title=f"{trace.label}: {trace.requests:,} requests, the daemon's loop (full loop)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for col in ("autoscaler", "model", "SLO attain.", "GPU-hours", "cost USD", "p99 wait s"):
        table.add_column(col, justify="left" if col in ("autoscaler", "model") else "right")
    for o in outs:
        row = o.as_dict()
        table.add_row(
            row["autoscaler"],
            "(all)",
            f"{row['slo_attainment']:.4f}",
            f"{row['gpu_hours']:,.1f}",
            f"{row['cost_usd']:,.0f}",
            f"{row['p99_wait_s']:.2f}",
        )
        for name, m in row["models"].items():
            table.add_row(
                "",
                name,
                f"{m['slo_attainment']:.4f}",
                f"{m['gpu_hours']:,.1f}",
                f"{m['cost_usd']:,.0f}",
                f"{m['p99_wait_s']:.2f}",
            )
    console.print(table)
